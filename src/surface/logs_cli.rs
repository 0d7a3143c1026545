//! `corral logs ID [--follow] [--json]`: a session's event log, read from its file (no lock,
//! no server): a readable line (or block) per envelope, or with `--json` the envelopes as the
//! file has them. With `--follow` it keeps printing what is appended, until the log ends with
//! the session closed (`status` `dead`), the reader of its output goes away (`| head`), or
//! Ctrl-C.
//!
//! Everything a log holds came from a model, a tool or a person, so text mode escapes every
//! piece of it, and `--json` writes `\uXXXX` for the characters a terminal would act on that
//! JSON may carry raw (C1 controls, bidi and other invisible characters): the same JSON, byte
//! for byte the file's line whenever there is none.

mod frames;
mod text;

use std::io::{self, Write};
use std::os::fd::AsFd;
use std::time::Duration;

use super::run::Exit;
use super::safe_text::{escape, escape_json, escape_line};
use crate::event::{Envelope, Payload, Status};
use crate::session::catalog::{self, ResolveError};
use crate::session::{LogTail, is_held, log_path};

/// How often a followed log is looked at for more.
const POLL: Duration = Duration::from_millis(150);

/// Output is written once this much has piled up (and whenever the log has no more for now).
const BATCH: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogsArgs {
    /// A session id or a prefix only it starts with.
    pub id: String,
    pub follow: bool,
    pub json: bool,
    /// Where every image of the log is written as a file (`--images`).
    pub images: Option<std::path::PathBuf>,
}

/// Prints the log on `out` (whose descriptor tells when its reader has gone), messages on
/// `err`. Returns the exit code: 2 for an id that names no one session.
pub fn logs_main(args: &LogsArgs, out: &mut (impl Write + AsFd), err: &mut impl Write) -> Exit {
    match print_log(args, out, err) {
        Ok(()) => Exit::Ok,
        Err(Failure::Quiet) => Exit::Ok,
        Err(Failure::Said(exit, message)) => {
            let _ = writeln!(err, "corral: {}", escape(&message));
            exit
        }
    }
}

enum Failure {
    /// The output's reader went away: nothing left to do, nothing to say.
    Quiet,
    Said(Exit, String),
}

impl Failure {
    fn written(e: io::Error) -> Failure {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Failure::Quiet
        } else {
            Failure::Said(Exit::Failure, format!("cannot write the log out: {e}"))
        }
    }
}

fn print_log(
    args: &LogsArgs,
    out: &mut (impl Write + AsFd),
    err: &mut impl Write,
) -> Result<(), Failure> {
    let dir =
        crate::host::open::agents_dir().map_err(|e| Failure::Said(e.exit(), e.to_string()))?;
    let id = catalog::resolve(&dir, &args.id).map_err(|e| {
        let exit = match e {
            ResolveError::Unknown { .. } | ResolveError::Ambiguous { .. } => Exit::Usage,
            ResolveError::Io { .. } => Exit::Failure,
        };
        Failure::Said(exit, e.to_string())
    })?;
    let path = log_path(&dir, &id);
    let unreadable = |e: io::Error| {
        Failure::Said(
            Exit::Failure,
            format!("cannot read the event log {}: {e}", path.display()),
        )
    };
    let mut tail = LogTail::open(&path).map_err(unreadable)?;
    if let Some(images) = &args.images {
        make_image_dir(images)?;
    }
    let mut view = text::View::default();
    let mut batch = Vec::with_capacity(BATCH);
    let mut number = 0u64;
    let mut closed = false;
    let mut waiting_noted = false;
    loop {
        while let Some(line) = tail.next_line().map_err(unreadable)? {
            number += 1;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let envelope = match serde_json::from_slice::<Envelope>(&line) {
                Ok(envelope) => envelope,
                Err(e) => {
                    let _ = writeln!(
                        err,
                        "corral: line {number} of the log is not an event ({}); skipped",
                        escape_line(&e.to_string())
                    );
                    continue;
                }
            };
            closed = matches!(&envelope.payload, Payload::Status(s) if s.status == Status::Dead);
            if args.json {
                // An envelope that parsed is UTF-8.
                let json = String::from_utf8_lossy(&line);
                batch.extend_from_slice(escape_json(&json).as_bytes());
                batch.push(b'\n');
            } else {
                view.render(&envelope, &mut batch);
            }
            if let Some(images) = &args.images {
                let mut skipped = Vec::new();
                for file in frames::write_images(images, &envelope, &mut skipped) {
                    // Beside the text, the files; with --json, stdout stays JSON.
                    let line = format!("{:31}image → {}", "", file.display());
                    match args.json {
                        true => {
                            let _ = writeln!(err, "corral: {}", escape_line(line.trim_start()));
                        }
                        false => {
                            batch.extend_from_slice(escape_line(&line).as_bytes());
                            batch.push(b'\n');
                        }
                    }
                }
                for why in skipped {
                    let _ = writeln!(err, "corral: {}", escape_line(&why));
                }
            }
            if batch.len() >= BATCH {
                write_out(out, &mut batch)?;
            }
        }
        write_out(out, &mut batch)?;
        if !args.follow || closed {
            return Ok(());
        }
        if !waiting_noted && !is_held(&dir, &id) {
            waiting_noted = true;
            let _ = writeln!(
                err,
                "corral: no process runs session {} now; waiting for it to go on (Ctrl-C to stop)",
                escape_line(&id)
            );
        }
        if reader_gone(out, POLL) {
            return Err(Failure::Quiet);
        }
    }
}

/// The directory `--images` names, made (0700: screenshots show what was on the screen) when
/// it is not there.
fn make_image_dir(dir: &std::path::Path) -> Result<(), Failure> {
    use std::os::unix::fs::DirBuilderExt as _;
    let made = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir);
    match made {
        Ok(()) if dir.is_dir() => Ok(()),
        Ok(()) => Err(Failure::Said(
            Exit::Usage,
            format!("--images {}: not a directory", dir.display()),
        )),
        Err(e) => Err(Failure::Said(
            Exit::Failure,
            format!("cannot make the image directory {}: {e}", dir.display()),
        )),
    }
}

fn write_out(out: &mut impl Write, batch: &mut Vec<u8>) -> Result<(), Failure> {
    if batch.is_empty() {
        return Ok(());
    }
    out.write_all(batch)
        .and_then(|()| out.flush())
        .map_err(Failure::written)?;
    batch.clear();
    Ok(())
}

/// Waits up to `wait` for the far end of `out` to go away (the reader of a pipe exiting, as
/// `head` does, or a terminal hanging up), so a follow with nothing to print does not outlive
/// its reader. True when it has gone. A pipe whose reader has gone reports POLLERR; a regular
/// file or a live terminal reports nothing and the wait runs out.
fn reader_gone(out: &impl AsFd, wait: Duration) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let mut fds = [PollFd::new(out, PollFlags::empty())];
    let timeout = Timespec {
        tv_sec: 0,
        tv_nsec: i64::from(wait.subsec_nanos()),
    };
    match poll(&mut fds, Some(&timeout)) {
        Ok(0) => false,
        Ok(_) => fds[0]
            .revents()
            .intersects(PollFlags::ERR | PollFlags::HUP | PollFlags::NVAL),
        // Interrupted by a signal (or poll cannot look): wait anyway, look again next round.
        Err(_) => {
            std::thread::sleep(wait);
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_whose_reader_left_is_noticed_while_waiting() {
        let (reader, writer) = std::io::pipe().unwrap();
        assert!(!reader_gone(&writer, Duration::from_millis(10)));
        drop(reader);
        assert!(reader_gone(&writer, Duration::from_millis(10)));
    }
}
