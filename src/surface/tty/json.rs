//! `--json`: the session's envelopes as NDJSON on stdout, nothing else there.

use std::io::{self, Write};
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;

use crate::event::SharedEvent;

use crate::event::Payload;

use super::{Drawn, is_dead};

/// `--json`: every envelope as one NDJSON line on stdout, nothing else there. Lines are
/// flushed once the stream pauses for a moment (or 64 KiB pile up), not per line: a fast
/// reply costs one write per burst instead of one per token, and a pause is seen at once.
pub async fn render_json(events: UnboundedReceiver<SharedEvent>, drawn: Drawn) {
    write_events(events, &drawn).await;
    // Whoever waits for a turn's end waits no longer.
    drawn.ended();
}

async fn write_events(mut events: UnboundedReceiver<SharedEvent>, drawn: &Drawn) {
    const PAUSE: Duration = Duration::from_millis(1);
    const BATCH: usize = 64 * 1024;
    let mut out = io::BufWriter::with_capacity(BATCH * 2, io::stdout());
    let mut pending = false;
    loop {
        let next = if pending {
            match tokio::time::timeout(PAUSE, events.recv()).await {
                Ok(next) => next,
                Err(_) => {
                    // The stream paused: show what arrived.
                    if out.flush().is_err() {
                        return;
                    }
                    pending = false;
                    continue;
                }
            }
        } else {
            events.recv().await
        };
        let Some(event) = next else { break };
        let dead = is_dead(&event);
        // A closed stdout (e.g. `| head`) ends output but never the session.
        if write_line(&mut out, &event).is_err() {
            return;
        }
        pending = true;
        let turn_ended = matches!(event.envelope.payload, Payload::Result(_));
        if dead || turn_ended || out.buffer().len() >= BATCH {
            if out.flush().is_err() {
                return;
            }
            pending = false;
        }
        if turn_ended {
            // Written and flushed: a conversation may read its next line.
            drawn.turn_drawn();
        }
        if dead {
            break;
        }
    }
    let _ = out.flush();
}

fn write_line(out: &mut impl Write, event: &SharedEvent) -> io::Result<()> {
    out.write_all(event.json.as_bytes())?;
    out.write_all(b"\n")
}
