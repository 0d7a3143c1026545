//! Reading an event log while it grows, a complete line at a time: what `corral logs
//! --follow` polls. A line is handed out only once its newline is there, so a write caught
//! halfway is held back until the rest arrives, never shown torn. Takes no lock.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Seek, SeekFrom};
use std::path::Path;

pub struct LogTail {
    reader: BufReader<File>,
    /// Where the next unread byte is.
    offset: u64,
    /// The start of a line whose newline has not been written yet.
    partial: Vec<u8>,
}

impl LogTail {
    pub fn open(path: &Path) -> io::Result<LogTail> {
        Ok(LogTail {
            reader: BufReader::with_capacity(64 * 1024, File::open(path)?),
            offset: 0,
            partial: Vec::new(),
        })
    }

    /// The next complete line (without its newline), or `None` when the log holds no more
    /// for now.
    pub fn next_line(&mut self) -> io::Result<Option<Vec<u8>>> {
        let read = self.reader.read_until(b'\n', &mut self.partial)?;
        self.offset += read as u64;
        if self.partial.last() != Some(&b'\n') {
            if read == 0 {
                self.check_cut_back()?;
            }
            return Ok(None);
        }
        let mut line = std::mem::take(&mut self.partial);
        line.pop();
        Ok(Some(line))
    }

    /// A writer whose write failed cuts the file back to its last complete line (see `log`):
    /// what was held of that line is gone, and reading goes on from the new end.
    fn check_cut_back(&mut self) -> io::Result<()> {
        let len = self.reader.get_ref().metadata()?.len();
        if len < self.offset {
            self.partial.clear();
            self.offset = self.reader.seek(SeekFrom::Start(len))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn lines_come_out_whole_as_they_are_appended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.events.jsonl");
        let mut file = File::create(&path).unwrap();
        file.write_all(b"one\ntw").unwrap();
        let mut tail = LogTail::open(&path).unwrap();
        assert_eq!(tail.next_line().unwrap().as_deref(), Some(&b"one"[..]));
        assert_eq!(tail.next_line().unwrap(), None);
        file.write_all(b"o\n\nthree").unwrap();
        assert_eq!(tail.next_line().unwrap().as_deref(), Some(&b"two"[..]));
        assert_eq!(tail.next_line().unwrap().as_deref(), Some(&b""[..]));
        assert_eq!(tail.next_line().unwrap(), None);
        // The writer cut its torn line off, then went on.
        file.set_len(9).unwrap();
        assert_eq!(tail.next_line().unwrap(), None);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        file.write_all(b"four\n").unwrap();
        assert_eq!(tail.next_line().unwrap().as_deref(), Some(&b"four"[..]));
        assert_eq!(tail.next_line().unwrap(), None);
    }
}
