//! Server-sent events over a byte stream, as the OpenAI-compatible servers send them.
//!
//! Written here rather than taken from a crate for three promises: a line (and an event's
//! data) is capped by `[limits] max_stream_line_bytes`; parsing is linear in the bytes received
//! however long a line is; invalid UTF-8 in one event is replaced (U+FFFD) and reported on
//! that event instead of ending the reply. Lines end with `\n`, `\r\n` or a lone `\r` (as the
//! SSE spec allows); `retry:` is ignored (corral never reconnects a reply). An event's own `id:`
//! is kept on it, for a client of a bus that resumes (`corral top` on `/api/v1/events`).

use super::ndjson::{LineSplitter, LineTooLong};

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// `event:` field; empty for the default `message`.
    pub name: String,
    pub data: String,
    /// Bytes that were not UTF-8 and were replaced.
    pub invalid_utf8: bool,
    /// The event's `id:` field, if it had one.
    pub id: Option<String>,
}

#[derive(Debug)]
pub struct SseParser {
    lines: LineSplitter,
    max_data: usize,
    name: String,
    data: String,
    id: Option<String>,
    has_data: bool,
    invalid_utf8: bool,
    /// The last byte pushed was a `\r`: a `\n` right after it ends no second line.
    after_cr: bool,
}

impl SseParser {
    pub fn new(max_line: usize) -> Self {
        SseParser {
            lines: LineSplitter::new(max_line),
            max_data: max_line,
            name: String::new(),
            data: String::new(),
            id: None,
            has_data: false,
            invalid_utf8: false,
            after_cr: false,
        }
    }

    pub fn push(&mut self, chunk: &[u8]) -> Result<(), LineTooLong> {
        let Some(&first) = chunk.first() else {
            return Ok(());
        };
        if memchr::memchr(b'\r', chunk).is_none() && !(self.after_cr && first == b'\n') {
            self.after_cr = false;
            return self.lines.push(chunk);
        }
        // Every line ending becomes one `\n` for the splitter, across chunk boundaries too.
        let mut unified = Vec::with_capacity(chunk.len());
        for &byte in chunk {
            match byte {
                b'\r' => {
                    unified.push(b'\n');
                    self.after_cr = true;
                }
                b'\n' if self.after_cr => self.after_cr = false,
                _ => {
                    unified.push(byte);
                    self.after_cr = false;
                }
            }
        }
        self.lines.push(&unified)
    }

    /// The next complete event, if the buffered bytes hold one.
    pub fn next_event(&mut self) -> Result<Option<SseEvent>, LineTooLong> {
        while let Some(line) = self.lines.next_line()? {
            if let Some(event) = self.line(&line)? {
                return Ok(Some(event));
            }
        }
        Ok(None)
    }

    /// At end of stream: an event whose blank line never came is still delivered (servers
    /// that close right after `data: [DONE]`).
    pub fn finish(&mut self) -> Result<Option<SseEvent>, LineTooLong> {
        if let Some(rest) = self.lines.finish()
            && let Some(event) = self.line(&rest)?
        {
            return Ok(Some(event));
        }
        Ok(self.dispatch())
    }

    fn line(&mut self, raw: &[u8]) -> Result<Option<SseEvent>, LineTooLong> {
        if raw.is_empty() {
            return Ok(self.dispatch());
        }
        if raw[0] == b':' {
            return Ok(None);
        }
        let (field, value) = match memchr::memchr(b':', raw) {
            Some(colon) => {
                let value = &raw[colon + 1..];
                (&raw[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (raw, &b""[..]),
        };
        match field {
            b"data" => {
                let text = self.decode(value);
                if self.data.len() + text.len() + 1 > self.max_data {
                    return Err(LineTooLong {
                        limit: self.max_data,
                    });
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&text);
                self.has_data = true;
            }
            b"event" => self.name = self.decode(value).into_owned(),
            b"id" => self.id = Some(self.decode(value).into_owned()),
            _ => {}
        }
        Ok(None)
    }

    fn decode<'b>(&mut self, bytes: &'b [u8]) -> std::borrow::Cow<'b, str> {
        let text = String::from_utf8_lossy(bytes);
        if matches!(text, std::borrow::Cow::Owned(_)) {
            self.invalid_utf8 = true;
        }
        text
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let name = std::mem::take(&mut self.name);
        let invalid_utf8 = std::mem::take(&mut self.invalid_utf8);
        let id = self.id.take();
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        Some(SseEvent {
            name,
            data: std::mem::take(&mut self.data),
            invalid_utf8,
            id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(parser: &mut SseParser, input: &[u8]) -> Vec<SseEvent> {
        parser.push(input).unwrap();
        let mut out = Vec::new();
        while let Some(e) = parser.next_event().unwrap() {
            out.push(e);
        }
        out
    }

    #[test]
    fn fields_comments_and_multiline_data() {
        let mut p = SseParser::new(1024);
        let events = all(
            &mut p,
            b": keepalive\r\n\r\nevent: error\r\ndata: a\r\ndata:b\r\nid: 7\r\n\r\ndata: {}\n\n",
        );
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].name, "error");
        assert_eq!(events[0].data, "a\nb");
        assert_eq!(events[1].name, "");
        assert_eq!(events[1].data, "{}");
        assert_eq!(events[0].id.as_deref(), Some("7"));
        assert_eq!(events[1].id, None);
        assert!(events.iter().all(|e| !e.invalid_utf8));
    }

    #[test]
    fn invalid_utf8_is_replaced_and_flagged_on_its_event_only() {
        let mut p = SseParser::new(1024);
        let events = all(&mut p, b"data: caf\xe9!\n\ndata: ok\n\n");
        assert_eq!(events[0].data, "caf\u{fffd}!");
        assert!(events[0].invalid_utf8);
        assert!(!events[1].invalid_utf8);
    }

    #[test]
    fn data_over_the_cap_fails_across_lines_too() {
        let mut p = SseParser::new(8);
        p.push(b"data: 1234\ndata: 5678\n").unwrap();
        assert_eq!(p.next_event(), Err(LineTooLong { limit: 8 }));
    }

    #[test]
    fn an_unterminated_last_event_is_delivered() {
        let mut p = SseParser::new(64);
        assert!(all(&mut p, b"data: [DONE]").is_empty());
        assert_eq!(p.finish().unwrap().unwrap().data, "[DONE]");
        assert_eq!(p.finish().unwrap(), None);
    }

    #[test]
    fn any_chunking_gives_the_same_events() {
        let input: &[u8] =
            b"data: {\"a\":1}\n\n: c\nevent: e\ndata: x\xffy\n\ndata: z\r\n\r\ndata: cr\r\rdata: w\r\n\n";
        let mut whole = SseParser::new(64);
        let expected = all(&mut whole, input);
        let mut rng = fastrand::Rng::with_seed(14);
        for _ in 0..200 {
            let mut p = SseParser::new(64);
            let mut got = Vec::new();
            let mut rest = input;
            while !rest.is_empty() {
                let n = rng.usize(1..=rest.len());
                got.extend(all(&mut p, &rest[..n]));
                rest = &rest[n..];
            }
            assert_eq!(got, expected);
        }
        let data: Vec<&str> = expected.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(data, ["{\"a\":1}", "x\u{fffd}y", "z", "cr", "w"]);
    }
}
