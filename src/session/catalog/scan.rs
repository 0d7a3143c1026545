//! One pass over an event log that sums it up without parsing it.
//!
//! Listing many sessions must stay cheap when logs grow to hundreds of megabytes (long tool
//! output, big answers). A listing needs the event count and the sum of every turn's usage,
//! so reading only the head and the tail would not do; parsing every line would cost a JSON
//! parse per byte. So each line is read once, in a single streaming pass, but only its first
//! bytes are looked at: corral writes the fields before `data` (`seq`, `ts`, `agent`,
//! `turn`, `kind`) first, and they are plain (numbers, an id, a time), so the kind, time and
//! turn are read from the head as bytes. The rest of the line is skipped (`memchr` to the
//! newline) unless it is one of the few kinds the summary needs whole: `result` (usage),
//! `status`, and the first `user_text` (the title). A line whose head does not read that way
//! (another writer's field order, damage) is parsed whole, and counted as unreadable if it is
//! not an envelope. Memory stays bounded: no line is held beyond [`MAX_PARSED_LINE`].
//!
//! The file's size is taken once at the start, so a log being appended to is read as it was
//! then; a last line without its newline (torn by a crash, or still being written) is not
//! counted.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use memchr::memmem;

use crate::event::{ContentBlock, Envelope, Payload, Status, Timestamp, Usage};

/// How much of a line's start is looked at for its head fields.
const HEAD_BYTES: usize = 512;

/// The longest line parsed whole; a longer one of a kind the summary wants is skipped.
const MAX_PARSED_LINE: usize = 8 << 20;

#[derive(Debug, Default, Clone, PartialEq)]
pub struct LogSummary {
    pub events: u64,
    pub unreadable: u64,
    /// The text of the first `user_text` with text.
    pub first_prompt: Option<String>,
    pub first_ts: Option<Timestamp>,
    pub last_ts: Option<Timestamp>,
    pub turns: u32,
    pub usage: Usage,
    pub last_status: Option<Status>,
}

/// The fields before `data`, as read from a line's first bytes.
struct Head<'a> {
    kind: &'a [u8],
    ts: Option<Timestamp>,
    turn: Option<u32>,
}

/// Where reading a line stopped.
enum End {
    Newline,
    /// The file ended first: the line is torn or still being written.
    Eof,
    /// The limit was reached first.
    Cut,
}

impl LogSummary {
    pub fn read(path: &Path) -> io::Result<LogSummary> {
        let file = File::open(path)?;
        let size = file.metadata()?.len();
        let mut reader = BufReader::with_capacity(64 * 1024, file.take(size));
        let mut summary = LogSummary::default();
        let mut line = Vec::new();
        loop {
            line.clear();
            let mut end = read_some(&mut reader, &mut line, HEAD_BYTES)?;
            if matches!(end, End::Eof) {
                // Empty: the end. Not empty: a torn last line, not counted.
                break;
            }
            // Whether the summary needs the line whole, and the head's time and turn.
            let head = head(&line).map(|h| (summary.wants(h.kind), h.ts, h.turn));
            let whole = head.is_none_or(|(wants, ..)| wants);
            let mut too_long = false;
            if matches!(end, End::Cut) {
                end = if whole {
                    read_some(&mut reader, &mut line, MAX_PARSED_LINE)?
                } else {
                    skip_line(&mut reader)?
                };
                if matches!(end, End::Cut) {
                    too_long = true;
                    end = skip_line(&mut reader)?;
                }
            }
            if matches!(end, End::Eof) {
                break;
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match head {
                Some((false, ts, turn)) => summary.count(ts, turn),
                _ if too_long => summary.unreadable += 1,
                _ => match serde_json::from_slice::<Envelope>(&line) {
                    Ok(envelope) => summary.take(envelope),
                    Err(_) => summary.unreadable += 1,
                },
            }
        }
        Ok(summary)
    }

    fn wants(&self, kind: &[u8]) -> bool {
        match kind {
            b"result" | b"status" => true,
            b"user_text" => self.first_prompt.is_none(),
            _ => false,
        }
    }

    fn count(&mut self, ts: Option<Timestamp>, turn: Option<u32>) {
        self.events += 1;
        if let Some(ts) = ts {
            self.first_ts.get_or_insert(ts);
            self.last_ts = Some(ts);
        }
        self.turns = self.turns.max(turn.unwrap_or_default());
    }

    fn take(&mut self, envelope: Envelope) {
        self.count(Some(envelope.ts), Some(envelope.turn));
        match envelope.payload {
            Payload::Result(result) => self.usage.add(&result.usage),
            Payload::Status(status) => self.last_status = Some(status.status),
            Payload::UserText(user) if self.first_prompt.is_none() => {
                if let ContentBlock::Text { text } = user.content {
                    self.first_prompt = Some(text);
                }
            }
            _ => {}
        }
    }
}

/// The head of a line as corral writes it: `{"seq":…,"ts":"…","agent":"…","turn":…,
/// "kind":"…","data":…`. Only what stands before `"data":` counts, so a `kind` key inside the
/// data (a tool call's) is never taken for the envelope's; `None` when `kind` is not there.
fn head(line: &[u8]) -> Option<Head<'_>> {
    let fields = match memmem::find(line, b"\"data\":") {
        Some(end) => &line[..end],
        None => line,
    };
    let kind = string_field(fields, b"\"kind\":\"")?;
    let ts = string_field(fields, b"\"ts\":\"")
        .and_then(|ts| std::str::from_utf8(ts).ok())
        .and_then(|ts| Timestamp::parse(ts).ok());
    let turn = after(fields, b"\"turn\":").and_then(|rest| {
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
    });
    Some(Head { kind, ts, turn })
}

fn after<'a>(fields: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    memmem::find(fields, key).map(|at| &fields[at + key.len()..])
}

/// A string value without escapes (what the head's fields are), up to its closing quote.
fn string_field<'a>(fields: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let rest = after(fields, key)?;
    let len = memchr::memchr(b'"', rest)?;
    let value = &rest[..len];
    (!value.contains(&b'\\')).then_some(value)
}

/// Appends the line's bytes to `out` until its newline (consumed, not kept), the end of the
/// input, or `out` holding `limit` bytes.
fn read_some(reader: &mut impl BufRead, out: &mut Vec<u8>, limit: usize) -> io::Result<End> {
    loop {
        if out.len() >= limit {
            return Ok(End::Cut);
        }
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(End::Eof);
        }
        let room = (limit - out.len()).min(buf.len());
        if let Some(at) = memchr::memchr(b'\n', &buf[..room]) {
            out.extend_from_slice(&buf[..at]);
            reader.consume(at + 1);
            return Ok(End::Newline);
        }
        out.extend_from_slice(&buf[..room]);
        reader.consume(room);
    }
}

/// Skips to just past the line's newline.
fn skip_line(reader: &mut impl BufRead) -> io::Result<End> {
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(End::Eof);
        }
        if let Some(at) = memchr::memchr(b'\n', buf) {
            reader.consume(at + 1);
            return Ok(End::Newline);
        }
        let all = buf.len();
        reader.consume(all);
    }
}
