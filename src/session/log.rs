//! The JSONL event log: every envelope except liveness-only chunks, appended off the hot path
//! by a writer thread. Reading skips a torn last line (a crash mid-write), never fails on it.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

use crate::event::{Envelope, SharedEvent};

pub fn log_path(dir: &Path, agent: &str) -> PathBuf {
    dir.join(format!("{agent}.events.jsonl"))
}

/// Appends envelopes on its own thread; the session only sends an `Arc` down a channel.
pub struct LogWriter {
    sender: Option<mpsc::Sender<SharedEvent>>,
    thread: Option<JoinHandle<io::Result<()>>>,
    path: PathBuf,
}

impl LogWriter {
    pub fn open(path: PathBuf) -> io::Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        let (sender, receiver) = mpsc::channel::<SharedEvent>();
        let thread_path = path.clone();
        let thread = std::thread::Builder::new()
            .name("corral-event-log".into())
            .spawn(move || write_loop(file, receiver, &thread_path))?;
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
            && sender.send(event).is_err()
        {
            tracing::error!(path = %self.path.display(), "event log writer has stopped");
        }
    }

    /// Flushes everything sent so far and stops the writer.
    pub fn close(&mut self) -> io::Result<()> {
        self.sender.take();
        match self.thread.take() {
            Some(thread) => thread
                .join()
                .map_err(|_| io::Error::other("event log writer panicked"))?,
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

fn write_loop(file: File, receiver: mpsc::Receiver<SharedEvent>, path: &Path) -> io::Result<()> {
    let mut out = BufWriter::new(file);
    while let Ok(event) = receiver.recv() {
        write_one(&mut out, &event)?;
        // Batch whatever queued meanwhile, then flush so a crash loses at most a line.
        while let Ok(more) = receiver.try_recv() {
            write_one(&mut out, &more)?;
        }
        if let Err(e) = out.flush() {
            tracing::error!(path = %path.display(), error = %e, "writing the event log");
            return Err(e);
        }
    }
    out.flush()
}

fn write_one(out: &mut impl Write, event: &SharedEvent) -> io::Result<()> {
    out.write_all(event.json.as_bytes())?;
    out.write_all(b"\n")
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
