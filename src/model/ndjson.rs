//! Splitting a byte stream into lines, with partial lines carried across chunks.
//!
//! A line is capped (`[limits] max_stream_line_bytes`): a server that never sends a newline
//! would otherwise grow the buffer without bound. The scan for the newline resumes where the
//! last one stopped, so a long line arriving in many chunks costs linear time, not a rescan
//! of the whole partial line per chunk.

/// A line (or an SSE event's data) went past the configured cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineTooLong {
    pub limit: usize,
}

/// A response body as it arrives; what both wire formats split into lines.
pub type ByteStream = std::pin::Pin<
    Box<dyn futures_util::Stream<Item = Result<bytes::Bytes, reqwest::Error>> + Send>,
>;

#[derive(Debug)]
pub struct LineSplitter {
    buffer: Vec<u8>,
    /// Start of the unread part of `buffer`; compacted lazily to avoid shifting per line.
    start: usize,
    /// `buffer[start..scanned]` is known to hold no newline.
    scanned: usize,
    max_line: usize,
}

impl Default for LineSplitter {
    fn default() -> Self {
        LineSplitter::new(usize::MAX)
    }
}

impl LineSplitter {
    pub fn new(max_line: usize) -> Self {
        LineSplitter {
            buffer: Vec::new(),
            start: 0,
            scanned: 0,
            max_line,
        }
    }

    /// Buffers `chunk`. Fails once the unread line in progress is longer than the cap, before
    /// storing more of it.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), LineTooLong> {
        if self.start > 0 && self.start == self.buffer.len() {
            self.buffer.clear();
            self.start = 0;
            self.scanned = 0;
        }
        let pending = self.buffer.len() - self.start;
        // Only what lies after the last newline of `chunk` can extend an over-long line;
        // complete lines inside `chunk` are checked in `next_line`.
        let open_tail = match memchr::memrchr(b'\n', chunk) {
            Some(last) => chunk.len() - last - 1,
            None => pending.saturating_add(chunk.len()),
        };
        if open_tail > self.max_line {
            return Err(LineTooLong {
                limit: self.max_line,
            });
        }
        self.buffer.extend_from_slice(chunk);
        Ok(())
    }

    /// The next complete line (without its `\n`), if one is buffered.
    pub fn next_line(&mut self) -> Result<Option<Vec<u8>>, LineTooLong> {
        let from = self.scanned.max(self.start);
        let Some(found) = memchr::memchr(b'\n', &self.buffer[from..]) else {
            self.scanned = self.buffer.len();
            return Ok(None);
        };
        let end = from + found;
        if end - self.start > self.max_line {
            return Err(LineTooLong {
                limit: self.max_line,
            });
        }
        let line = self.buffer[self.start..end].to_vec();
        self.start = end + 1;
        self.scanned = self.start;
        if self.start > 64 * 1024 {
            self.buffer.drain(..self.start);
            self.start = 0;
            self.scanned = 0;
        }
        Ok(Some(line))
    }

    /// Whatever is left at end of stream (a last line without a newline).
    pub fn finish(&mut self) -> Option<Vec<u8>> {
        let rest = self.buffer.split_off(self.start);
        self.buffer.clear();
        self.start = 0;
        self.scanned = 0;
        (!rest.iter().all(u8::is_ascii_whitespace)).then_some(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_survive_chunk_boundaries() {
        let mut s = LineSplitter::default();
        s.push(b"{\"a\":").unwrap();
        assert_eq!(s.next_line().unwrap(), None);
        s.push(b"1}\n{\"b\"").unwrap();
        assert_eq!(s.next_line().unwrap().unwrap(), b"{\"a\":1}");
        assert_eq!(s.next_line().unwrap(), None);
        s.push(b":2}\n\n").unwrap();
        assert_eq!(s.next_line().unwrap().unwrap(), b"{\"b\":2}");
        assert_eq!(s.next_line().unwrap().unwrap(), b"");
        s.push(b"tail").unwrap();
        assert_eq!(s.finish().unwrap(), b"tail");
        assert_eq!(s.finish(), None);
    }

    #[test]
    fn a_line_over_the_cap_fails_whether_it_ends_or_not() {
        let mut s = LineSplitter::new(8);
        s.push(b"12345678\n1234").unwrap();
        assert_eq!(s.next_line().unwrap().unwrap(), b"12345678");
        assert_eq!(s.push(b"56789"), Err(LineTooLong { limit: 8 }));

        let mut s = LineSplitter::new(8);
        s.push(b"123456789\nok\n").unwrap();
        assert_eq!(s.next_line(), Err(LineTooLong { limit: 8 }));
    }

    #[test]
    fn a_long_line_in_many_chunks_is_scanned_once() {
        // Each push appends one byte; a rescan from the line's start would make this
        // quadratic, the resumed scan keeps `scanned` at the end.
        let mut s = LineSplitter::default();
        for _ in 0..100_000 {
            s.push(b"x").unwrap();
            assert_eq!(s.next_line().unwrap(), None);
            assert_eq!(s.scanned, s.buffer.len());
        }
        s.push(b"\n").unwrap();
        assert_eq!(s.next_line().unwrap().unwrap().len(), 100_000);
    }
}
