//! Output capture of one process: bytes decoded as UTF-8 without splitting a character
//! across chunks, secrets redacted without missing one split across chunks, streamed to the
//! sink up to a limit, and kept head+tail in bounded memory. Redaction comes before both the
//! stream and the capture, so neither ever holds a secret the runtime knows.

use std::collections::VecDeque;

use super::OutputSink;
use crate::event::OutputStream;
use crate::sandbox::env::{RedactStream, Redactor};

/// Per call, streamed chunks stop after this much so a flood doesn't flood the event stream.
pub(super) const STREAM_LIMIT: usize = 1 << 20;
pub(super) const STREAM_STOPPED: &str =
    "\n[… output continues; streaming stopped, the result keeps head and tail]\n";
/// Room kept for the omission marker so the joined output stays within `max_output_bytes`.
const MARKER_RESERVE: usize = 48;
/// How far a cut may move to land on a line break instead of mid-line.
const LINE_SNAP: usize = 200;

/// Decodes, captures and streams the output of both pipes.
pub(super) struct Collector<'a> {
    sink: &'a OutputSink,
    pub(super) capture: Capture,
    /// Per stream (stdout, stderr): the bytes of a character split across reads.
    carry: [Vec<u8>; 2],
    /// Per stream: the end of the text so far while it may be the start of a secret.
    redact: [RedactStream; 2],
    streamed: usize,
    stream_stopped: bool,
}

impl<'a> Collector<'a> {
    pub(super) fn new(sink: &'a OutputSink, max_output_bytes: usize, redactor: &Redactor) -> Self {
        Collector {
            sink,
            capture: Capture::new(max_output_bytes),
            carry: [Vec::new(), Vec::new()],
            redact: [redactor.stream(), redactor.stream()],
            streamed: 0,
            stream_stopped: false,
        }
    }

    pub(super) fn push(&mut self, stream: OutputStream, bytes: &[u8]) {
        let text = decode(&mut self.carry[index(stream)], bytes);
        let text = self.redact[index(stream)].push(&text);
        self.accept(stream, &text);
    }

    /// At the end, an incomplete character left over is shown as U+FFFD, and what was held
    /// back as a possible secret's start is let go.
    pub(super) fn flush(&mut self, stream: OutputStream) {
        let rest = std::mem::take(&mut self.carry[index(stream)]);
        let redact = &mut self.redact[index(stream)];
        let mut text = redact.push(&String::from_utf8_lossy(&rest));
        text.push_str(&redact.finish());
        self.accept(stream, &text);
    }

    fn accept(&mut self, stream: OutputStream, text: &str) {
        if text.is_empty() {
            return;
        }
        self.capture.push(text);
        if self.streamed < STREAM_LIMIT {
            self.streamed += text.len();
            self.sink.emit(stream, text);
        } else if !self.stream_stopped {
            self.stream_stopped = true;
            self.sink.emit(stream, STREAM_STOPPED);
        }
    }
}

fn index(stream: OutputStream) -> usize {
    match stream {
        OutputStream::Stdout => 0,
        OutputStream::Stderr => 1,
    }
}

/// Decodes `carry + bytes` lossily, keeping an incomplete character at the end in `carry`
/// for the next read, so no character is split (and mangled) between two chunks.
fn decode(carry: &mut Vec<u8>, bytes: &[u8]) -> String {
    let mut data = std::mem::take(carry);
    data.extend_from_slice(bytes);
    let keep = incomplete_tail(&data);
    *carry = data.split_off(data.len() - keep);
    match String::from_utf8(data) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// Length of a UTF-8 sequence started but not finished at the end of `data` (0 to 3).
fn incomplete_tail(data: &[u8]) -> usize {
    for back in 1..=data.len().min(3) {
        let byte = data[data.len() - back];
        if byte & 0xC0 == 0x80 {
            continue; // a continuation byte: the lead is further back
        }
        let needed = match byte {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1, // ASCII, or invalid: lossy decoding replaces it now
        };
        return if needed > back { back } else { 0 };
    }
    0
}

/// The combined output in bounded memory: the first ~60% kept as it came, then a rolling
/// window of the last ~40%; what falls between is counted.
pub(super) struct Capture {
    head: String,
    head_cap: usize,
    /// Once output went past the head, the head is closed so order is kept.
    head_closed: bool,
    tail: VecDeque<u8>,
    tail_cap: usize,
    omitted: u64,
}

impl Capture {
    fn new(max_bytes: usize) -> Self {
        let budget = max_bytes.saturating_sub(MARKER_RESERVE);
        let head_cap = budget * 3 / 5;
        Capture {
            head: String::new(),
            head_cap,
            head_closed: false,
            tail: VecDeque::new(),
            tail_cap: budget - head_cap,
            omitted: 0,
        }
    }

    fn push(&mut self, mut text: &str) {
        if !self.head_closed {
            let take = floor_boundary(text, self.head_cap - self.head.len());
            self.head.push_str(&text[..take]);
            text = &text[take..];
            if text.is_empty() {
                return;
            }
            self.head_closed = true;
        }
        self.tail.extend(text.as_bytes());
        let excess = self.tail.len().saturating_sub(self.tail_cap);
        self.tail.drain(..excess);
        self.omitted += excess as u64;
    }

    /// The output, with `[… N bytes omitted …]` on its own line where bytes were dropped.
    pub(super) fn finish(self) -> (String, u64) {
        let Capture {
            mut head,
            tail,
            mut omitted,
            ..
        } = self;
        let tail = Vec::from(tail);
        if omitted == 0 {
            // Nothing dropped: the tail continues the head on a character boundary.
            head.push_str(&String::from_utf8_lossy(&tail));
            return (head, 0);
        }
        // The rolling window may begin inside a character.
        let start = tail.iter().take_while(|b| **b & 0xC0 == 0x80).count();
        omitted += start as u64;
        let tail = String::from_utf8_lossy(&tail[start..]);
        let mut tail = tail.as_ref();
        // Whole lines read better: snap both cuts to a nearby line break.
        if let Some(nl) = head.rfind('\n')
            && head.len() - (nl + 1) <= LINE_SNAP
        {
            omitted += (head.len() - (nl + 1)) as u64;
            head.truncate(nl + 1);
        }
        if let Some(nl) = tail.find('\n')
            && nl < LINE_SNAP
            && nl + 1 < tail.len()
        {
            omitted += (nl + 1) as u64;
            tail = &tail[nl + 1..];
        }
        let sep = if head.is_empty() || head.ends_with('\n') {
            ""
        } else {
            "\n"
        };
        (
            format!("{head}{sep}[… {omitted} bytes omitted …]\n{tail}"),
            omitted,
        )
    }
}

fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_split_across_reads_is_decoded_whole() {
        let mut carry = Vec::new();
        assert_eq!(decode(&mut carry, b"a\xf0\x9f"), "a");
        assert_eq!(decode(&mut carry, b"\xa6"), "");
        assert_eq!(decode(&mut carry, b"\x80\xffz"), "🦀\u{fffd}z");
        assert!(carry.is_empty());
    }

    #[test]
    fn a_secret_written_in_two_reads_is_neither_streamed_nor_kept() {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let shown = seen.clone();
        let sink = OutputSink::new(move |_, text| shown.lock().unwrap().push_str(text));
        let redactor = Redactor::from_env([("MY_TOKEN".into(), "tok-1234567890".into())], []);
        let mut collector = Collector::new(&sink, 10_000, &redactor);
        collector.push(OutputStream::Stdout, b"key tok-123");
        assert_eq!(*seen.lock().unwrap(), "key ");
        collector.push(OutputStream::Stderr, b"warn tok-");
        collector.push(OutputStream::Stdout, b"4567890\nend tok-12");
        collector.flush(OutputStream::Stdout);
        collector.flush(OutputStream::Stderr);
        let (output, _) = collector.capture.finish();
        for text in [seen.lock().unwrap().clone(), output] {
            assert_eq!(text, "key warn [REDACTED:MY_TOKEN]\nend tok-12tok-");
        }
    }

    #[test]
    fn a_short_output_is_kept_whole_and_a_long_one_cut_on_lines() {
        let mut small = Capture::new(1000);
        small.push("héllo\n");
        assert_eq!(small.finish(), ("héllo\n".to_owned(), 0));
        let mut big = Capture::new(1000);
        (0..1000).for_each(|i| big.push(&format!("line {i:04}\n")));
        let (out, omitted) = big.finish();
        assert!(out.starts_with("line 0000\n") && out.ends_with("line 0999\n"));
        assert!(out.len() <= 1000 && out.lines().all(|l| l.len() == 9 || l.starts_with("[…")));
        let marker = format!("[… {omitted} bytes omitted …]\n");
        assert_eq!(out.replace(&marker, "").len() as u64 + omitted, 10_000);
    }
}
