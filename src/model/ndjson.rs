//! Splitting a byte stream into lines, with partial lines carried across chunks.

#[derive(Debug, Default)]
pub struct LineSplitter {
    buffer: Vec<u8>,
    /// Start of the unread part of `buffer`; compacted lazily to avoid shifting per line.
    start: usize,
}

impl LineSplitter {
    pub fn push(&mut self, chunk: &[u8]) {
        if self.start > 0 && self.start == self.buffer.len() {
            self.buffer.clear();
            self.start = 0;
        }
        self.buffer.extend_from_slice(chunk);
    }

    /// The next complete line (without its `\n`), if one is buffered.
    pub fn next_line(&mut self) -> Option<Vec<u8>> {
        let rest = &self.buffer[self.start..];
        let end = memchr::memchr(b'\n', rest)?;
        let line = rest[..end].to_vec();
        self.start += end + 1;
        if self.start > 64 * 1024 {
            self.buffer.drain(..self.start);
            self.start = 0;
        }
        Some(line)
    }

    /// Whatever is left at end of stream (a last line without a newline).
    pub fn finish(&mut self) -> Option<Vec<u8>> {
        let rest = self.buffer.split_off(self.start);
        self.buffer.clear();
        self.start = 0;
        (!rest.iter().all(u8::is_ascii_whitespace)).then_some(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_survive_chunk_boundaries() {
        let mut s = LineSplitter::default();
        s.push(b"{\"a\":");
        assert_eq!(s.next_line(), None);
        s.push(b"1}\n{\"b\"");
        assert_eq!(s.next_line().unwrap(), b"{\"a\":1}");
        assert_eq!(s.next_line(), None);
        s.push(b":2}\n\n");
        assert_eq!(s.next_line().unwrap(), b"{\"b\":2}");
        assert_eq!(s.next_line().unwrap(), b"");
        s.push(b"tail");
        assert_eq!(s.finish().unwrap(), b"tail");
        assert_eq!(s.finish(), None);
    }
}
