//! The JSONL event log: every envelope except liveness-only chunks, appended off the hot path
//! by a writer thread. Reading skips a torn last line (a crash mid-write), never fails on it.
//!
//! Writing never leaves a torn line for the next write to glue onto: the writer keeps the
//! offset of the last complete line and, when a write fails (a full disk, `EFBIG` past the
//! file size limit, an I/O error), cuts the file back to it before doing anything else. A
//! torn line left by a crash is terminated when the log is opened again. The first failure
//! is reported once through [`LogWriter::open`]'s `on_failure` and the writer then drops
//! whatever it is sent: a session whose log cannot be written must stop (see `Session`).

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

use crate::event::{Envelope, SharedEvent};

pub fn log_path(dir: &Path, agent: &str) -> PathBuf {
    dir.join(format!("{agent}.events.jsonl"))
}

/// A batch is written once it holds this much, even if more is queued.
const BATCH_BYTES: usize = 1 << 20;

/// What the batch buffer starts with and shrinks back to.
const BATCH_CAPACITY: usize = 64 * 1024;

/// Why a log stopped taking envelopes. Everything from the failed batch on is not in it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot write the event log {}: {reason}{}", path.display(), repair_note(.repaired))]
pub struct LogFailure {
    pub path: PathBuf,
    /// The I/O error, as the OS words it.
    pub reason: String,
    /// The file ends at this offset, after its last complete line.
    pub kept_bytes: u64,
    /// `Err`: cutting the partial line off failed too (the next open terminates it).
    pub repaired: Result<(), String>,
}

fn repair_note(repaired: &Result<(), String>) -> String {
    match repaired {
        Ok(()) => String::new(),
        Err(e) => format!(" (and the partial line could not be cut off: {e})"),
    }
}

pub type OnFailure = Box<dyn FnOnce(&LogFailure) + Send>;

enum Message {
    Event(SharedEvent),
    /// Answered once everything sent before it is written (or the log has failed).
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// Appends envelopes on its own thread; the session only sends an `Arc` down a channel.
pub struct LogWriter {
    sender: Option<mpsc::Sender<Message>>,
    thread: Option<JoinHandle<()>>,
    path: PathBuf,
}

impl LogWriter {
    /// Opens (or creates) the log for appending. `on_failure` is called, on the writer's
    /// thread, at the first write that fails, after the file has been cut back.
    pub fn open(path: PathBuf, on_failure: OnFailure) -> io::Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)?;
        let end = terminate_torn_line(&mut file)?;
        let (sender, receiver) = mpsc::channel::<Message>();
        let thread_path = path.clone();
        let thread = std::thread::Builder::new()
            .name("corral-event-log".into())
            .spawn(move || write_loop(file, end, receiver, thread_path, on_failure))?;
        Ok(LogWriter {
            sender: Some(sender),
            thread: Some(thread),
            path,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn append(&self, event: SharedEvent) {
        if let Some(sender) = &self.sender
            && sender.send(Message::Event(event)).is_err()
        {
            tracing::error!(path = %self.path.display(), "event log writer has stopped");
        }
    }

    /// Resolves once everything appended so far is written, or the log has failed.
    pub fn flush(&self) -> tokio::sync::oneshot::Receiver<()> {
        let (reply, done) = tokio::sync::oneshot::channel();
        if let Some(sender) = &self.sender {
            // A stopped writer drops the reply, which resolves the receiver too.
            let _ = sender.send(Message::Flush(reply));
        }
        done
    }

    /// Writes everything sent so far and stops the writer.
    pub fn close(&mut self) -> io::Result<()> {
        self.sender.take();
        match self.thread.take() {
            Some(thread) => thread
                .join()
                .map_err(|_| io::Error::other("event log writer panicked")),
            None => Ok(()),
        }
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::error!(path = %self.path.display(), error = %e, "closing the event log");
        }
    }
}

/// A log whose last line was torn by a crash gets that line terminated, so the next
/// envelope starts a line of its own. Returns where the file ends.
fn terminate_torn_line(file: &mut File) -> io::Result<u64> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(0);
    }
    let mut last = [0u8];
    file.read_exact_at(&mut last, len - 1)?;
    if last[0] == b'\n' {
        return Ok(len);
    }
    file.write_all(b"\n")?;
    Ok(len + 1)
}

fn write_loop(
    mut file: File,
    mut end: u64,
    receiver: mpsc::Receiver<Message>,
    path: PathBuf,
    on_failure: OnFailure,
) {
    let mut batch = Vec::with_capacity(BATCH_CAPACITY);
    let mut flushes = Vec::new();
    while let Ok(first) = receiver.recv() {
        let mut next = Some(first);
        let mut failed = None;
        // Batch whatever queued meanwhile, then write so a crash loses at most a batch.
        while let Some(message) = next.take() {
            match message {
                Message::Event(event) => {
                    batch.extend_from_slice(event.json.as_bytes());
                    batch.push(b'\n');
                }
                Message::Flush(reply) => flushes.push(reply),
            }
            if batch.len() >= BATCH_BYTES
                && let Err(e) = write_batch(&mut file, &mut end, &mut batch)
            {
                failed = Some(e);
                break;
            }
            next = receiver.try_recv().ok();
        }
        if failed.is_none()
            && let Err(e) = write_batch(&mut file, &mut end, &mut batch)
        {
            failed = Some(e);
        }
        if let Some(error) = failed {
            let failure = cut_back(&file, end, &path, &error);
            tracing::error!(error = %failure, "the event log failed; the session stops");
            on_failure(&failure);
            flushes.clear();
            drain(receiver);
            return;
        }
        for reply in flushes.drain(..) {
            let _ = reply.send(());
        }
    }
}

fn write_batch(file: &mut File, end: &mut u64, batch: &mut Vec<u8>) -> io::Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    file.write_all(batch)?;
    *end += batch.len() as u64;
    batch.clear();
    // One huge envelope (a 100 MB answer) must not leave its size behind for the session's
    // life: the conversation already holds that text once.
    if batch.capacity() > 2 * BATCH_BYTES {
        batch.shrink_to(BATCH_CAPACITY);
    }
    Ok(())
}

/// Cuts a failed write back to the last complete line.
fn cut_back(file: &File, end: u64, path: &Path, error: &io::Error) -> LogFailure {
    LogFailure {
        path: path.to_path_buf(),
        reason: error.to_string(),
        kept_bytes: end,
        repaired: file.set_len(end).map_err(|e| e.to_string()),
    }
}

/// After a failure nothing more is written; flushes are answered (by dropping them) so
/// nobody waits on a log that is gone.
fn drain(receiver: mpsc::Receiver<Message>) {
    for message in receiver {
        drop(message);
    }
}

/// Every readable envelope of a log, in order. Unparseable lines (a torn last line after a
/// crash, or damage) are skipped with a warning.
pub fn read_log(path: &Path) -> io::Result<Vec<Envelope>> {
    let reader = BufReader::new(File::open(path)?);
    let mut envelopes = Vec::new();
    for (number, line) in reader.split(b'\n').enumerate() {
        let line = line?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Envelope>(&line) {
            Ok(envelope) => envelopes.push(envelope),
            Err(e) => tracing::warn!(
                path = %path.display(),
                line = number + 1,
                error = %e,
                "skipping an unreadable event log line"
            ),
        }
    }
    Ok(envelopes)
}
