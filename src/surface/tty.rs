//! Rendering a session for a person at a terminal (or a pipe): assistant text on stdout,
//! everything else — spinner, thoughts, tool lines, usage, errors — on stderr, so
//! `corral run … > answer.txt` captures just the answer. Every piece of model or tool text
//! goes through [`safe_text`] on its way out: the terminal shows escape sequences, never
//! obeys them.

use std::io::{self, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedReceiver;

use crate::event::{ContentBlock, Payload, PermissionData, SharedEvent, Status, ToolCallStatus};
use crate::session::Session;

use super::safe_text::{escape, escape_line};

const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

pub struct Style {
    /// stderr is a terminal: draw the spinner, use colour.
    pub interactive: bool,
}

impl Style {
    fn paint(&self, code: &str, text: &str) -> String {
        if self.interactive {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
}

struct View<'a> {
    style: &'a Style,
    out: io::Stdout,
    err: io::Stderr,
    waiting_since: Option<Instant>,
    spinner_drawn: bool,
    frame: usize,
    text_open: bool,
    thought_open: bool,
    steps: u32,
    turn_started: Option<Instant>,
}

impl View<'_> {
    fn clear_spinner(&mut self) {
        if self.spinner_drawn {
            let _ = write!(self.err, "\r\x1b[2K");
            self.spinner_drawn = false;
        }
    }

    fn tick(&mut self) {
        let Some(since) = self.waiting_since else {
            return;
        };
        if !self.style.interactive {
            return;
        }
        self.frame = (self.frame + 1) % SPINNER.len();
        let _ = write!(
            self.err,
            "\r\x1b[2K{} waiting for the model… {:.1}s",
            SPINNER[self.frame],
            since.elapsed().as_secs_f64()
        );
        let _ = self.err.flush();
        self.spinner_drawn = true;
    }

    fn first_output(&mut self) {
        self.waiting_since = None;
        self.clear_spinner();
    }

    fn end_text(&mut self) {
        if self.text_open {
            let _ = writeln!(self.out);
            let _ = self.out.flush();
            self.text_open = false;
        }
        if self.thought_open {
            let _ = writeln!(self.err);
            self.thought_open = false;
        }
    }

    fn show(&mut self, event: &SharedEvent) {
        let envelope = &event.envelope;
        match &envelope.payload {
            Payload::TurnStarted(_) => {
                self.turn_started = Some(Instant::now());
                self.waiting_since = Some(Instant::now());
                self.steps = 0;
            }
            Payload::AssistantText(data) if data.delta => {
                self.first_output();
                if self.thought_open {
                    let _ = writeln!(self.err);
                    self.thought_open = false;
                }
                if let ContentBlock::Text { text } = &data.content {
                    let _ = write!(self.out, "{}", escape(text));
                    let _ = self.out.flush();
                    self.text_open = true;
                }
            }
            Payload::Thought(data) if data.delta => {
                self.first_output();
                if let ContentBlock::Text { text } = &data.content {
                    let _ = write!(self.err, "{}", self.style.paint("2", &escape(text)));
                    let _ = self.err.flush();
                    self.thought_open = true;
                }
            }
            Payload::ToolUse(data) if data.call.status == ToolCallStatus::InProgress => {
                self.first_output();
                self.end_text();
                self.steps += 1;
                let input = data
                    .call
                    .raw_input
                    .as_ref()
                    .map(|v| escape_line(&crate::model::excerpt(&v.to_string(), 120)))
                    .unwrap_or_default();
                let _ = writeln!(
                    self.err,
                    "{} {} {input}",
                    self.style.paint("36", "⏺"),
                    escape_line(&data.call.title)
                );
            }
            Payload::ToolResult(data) => {
                let record = &data.result;
                let line = match (&record.output, &record.error) {
                    (Some(output), _) => self.style.paint(
                        "32",
                        &format!(
                            "  ✓ {} · {} ms · {} bytes",
                            escape_line(&record.tool),
                            record.duration_ms,
                            output.len()
                        ),
                    ),
                    (None, error) => self.style.paint(
                        "31",
                        &format!(
                            "  ✗ {} · {}",
                            escape_line(&record.tool),
                            escape_line(&crate::model::excerpt(
                                error.as_deref().unwrap_or_default(),
                                200
                            ))
                        ),
                    ),
                };
                let _ = writeln!(self.err, "{line}");
                self.waiting_since = Some(Instant::now());
            }
            Payload::Error(data) => {
                self.clear_spinner();
                self.end_text();
                let _ = writeln!(
                    self.err,
                    "{}",
                    self.style.paint("33", &escape(&data.message))
                );
            }
            Payload::Permission(PermissionData::Resolution(resolution)) => {
                let decision = escape_line(&resolution.decision);
                let note = resolution
                    .note
                    .as_deref()
                    .map(|n| format!(" ({})", escape_line(n)))
                    .unwrap_or_default();
                let _ = writeln!(
                    self.err,
                    "{}",
                    self.style.paint("2", &format!("  → {decision}{note}"))
                );
            }
            Payload::Instructions(data) => {
                let line = format!("project instructions: {}", escape_line(&data.listing()));
                let _ = writeln!(self.err, "{}", self.style.paint("2", &line));
            }
            Payload::Plan(plan) => {
                self.first_output();
                self.end_text();
                let _ = writeln!(self.err, "{}", self.style.paint("36", "plan"));
                if let Some(why) = &plan.explanation {
                    let _ = writeln!(self.err, "  {}", self.style.paint("2", &escape_line(why)));
                }
                for line in plan.checklist() {
                    let _ = writeln!(self.err, "  {}", escape_line(&line));
                }
            }
            Payload::Compaction(data) => {
                let _ = writeln!(
                    self.err,
                    "{}",
                    self.style.paint(
                        "2",
                        &format!(
                            "(context compacted: {} older messages summarized)",
                            data.messages_compacted
                        )
                    )
                );
            }
            Payload::Result(data) => {
                self.first_output();
                self.end_text();
                let elapsed = self
                    .turn_started
                    .map(|t| t.elapsed().as_secs_f64())
                    .unwrap_or_default();
                let usage = &data.usage;
                let summary = format!(
                    "{} · {} in · {} out tokens · {} tool calls · {elapsed:.1}s",
                    data.stop_reason.as_str(),
                    usage.input_tokens,
                    usage.output_tokens,
                    self.steps
                );
                let _ = writeln!(self.err, "{}", self.style.paint("2", &summary));
            }
            _ => {}
        }
        let _ = self.err.flush();
    }
}

/// Draws events until the session is dead and its channel is drained. With `prompter`, a
/// permission request is put to the person at the terminal.
pub async fn render_terminal(
    mut events: UnboundedReceiver<SharedEvent>,
    style: Style,
    prompter: Option<Arc<Session>>,
) {
    let mut view = View {
        style: &style,
        out: io::stdout(),
        err: io::stderr(),
        waiting_since: None,
        spinner_drawn: false,
        frame: 0,
        text_open: false,
        thought_open: false,
        steps: 0,
        turn_started: None,
    };
    let mut ticker = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Some(event) => {
                    view.show(&event);
                    if let (Some(session), Payload::Permission(PermissionData::Request(request))) =
                        (&prompter, &event.envelope.payload)
                    {
                        view.first_output();
                        view.end_text();
                        super::approve::ask_on_terminal(session.clone(), request).await;
                    }
                    if is_dead(&event) {
                        break;
                    }
                }
                None => break,
            },
            _ = ticker.tick() => view.tick(),
        }
    }
    view.clear_spinner();
}

/// `--json`: every envelope as one NDJSON line on stdout, nothing else there. Lines are
/// flushed once the stream pauses for a moment (or 64 KiB pile up), not per line: a fast
/// reply costs one write per burst instead of one per token, and a pause is seen at once.
pub async fn render_json(mut events: UnboundedReceiver<SharedEvent>) {
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
        if dead || out.buffer().len() >= BATCH {
            if out.flush().is_err() {
                return;
            }
            pending = false;
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

fn is_dead(event: &SharedEvent) -> bool {
    matches!(&event.envelope.payload, Payload::Status(s) if s.status == Status::Dead)
}
