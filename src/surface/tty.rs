//! Rendering a session for a person at a terminal (or a pipe). Only the final answer of a
//! turn goes to stdout, so `corral run … > answer.txt` captures just that; everything else —
//! spinner, thoughts, text the model wrote before calling tools, tool lines and their output,
//! usage, errors — goes to stderr. On a terminal stdout streams the answer as it comes; into
//! a file or a pipe the turn's last text is written once the turn ends (only then is it known
//! to be the answer) and streams to stderr meanwhile. Every piece of model or tool text goes
//! through [`safe_text`](super::safe_text) on its way out: the terminal shows escape
//! sequences, never obeys them.

mod json;
mod tools;

use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::watch;

use crate::event::{ContentBlock, Payload, PermissionData, SharedEvent, Status, ToolCallStatus};
use crate::session::Session;

use super::safe_text::{escape, escape_line};

pub use json::render_json;
pub use tools::Detail;

const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

pub struct Style {
    /// stderr is a terminal: draw the spinner and the running tool's output in place.
    pub terminal: bool,
    /// Colour (a terminal, and no `NO_COLOR`).
    pub colour: bool,
    /// stdout is a terminal: the answer streams there as it comes.
    pub answer_streams: bool,
    /// How much of each tool's output is shown.
    pub detail: Detail,
}

impl Style {
    fn paint(&self, code: &str, text: &str) -> String {
        if self.colour {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
}

/// What the renderer tells the rest of `corral run`: how many turns' summary lines it has
/// drawn (the next prompt of a conversation comes after it), and the error messages it
/// showed (an error shown here is not printed again on the way out).
#[derive(Clone)]
pub struct Drawn {
    turns: watch::Sender<u64>,
    errors: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Default for Drawn {
    fn default() -> Self {
        Drawn {
            turns: watch::Sender::new(0),
            errors: Arc::default(),
        }
    }
}

impl Drawn {
    /// Waits until `turns` summary lines have been drawn, or the renderer has ended.
    pub async fn turns_drawn(&self, turns: u64) {
        let mut seen = self.turns.subscribe();
        let _ = seen.wait_for(|drawn| *drawn >= turns).await;
    }

    /// Summary lines drawn so far.
    pub fn count(&self) -> u64 {
        *self.turns.borrow()
    }

    /// Whether an error event with this message was shown.
    pub fn showed_error(&self, message: &str) -> bool {
        self.errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|shown| shown == message)
    }

    /// The renderer is done: nothing more will be drawn.
    fn ended(&self) {
        self.turns.send_modify(|n| *n = u64::MAX);
    }

    fn turn_drawn(&self) {
        self.turns.send_modify(|n| *n = n.saturating_add(1));
    }

    fn error_shown(&self, message: &str) {
        self.errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(message.to_string());
    }
}

/// Where the text the model is streaming goes now.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    Nothing,
    /// Answer text on stdout.
    Stdout,
    /// Text on stderr (thoughts, or text not yet known to be the answer).
    Stderr,
}

struct View<'a> {
    style: &'a Style,
    drawn: &'a Drawn,
    out: io::Stdout,
    err: io::Stderr,
    waiting_since: Option<Instant>,
    /// Lines of the spinner or live region now on screen (redrawn in place).
    region: usize,
    frame: usize,
    text: Open,
    thought_open: bool,
    /// The current step's text, escaped: the answer if no tool call follows.
    answer: String,
    steps: u32,
    turn_started: Option<Instant>,
    running: HashMap<String, tools::Running>,
    /// The call whose output the live region shows.
    live: Option<String>,
}

impl View<'_> {
    fn width() -> usize {
        crossterm::terminal::size().map_or(80, |(w, _)| usize::from(w.max(20)))
    }

    fn clear_region(&mut self) {
        if self.region > 0 {
            let up = self.region - 1;
            if up > 0 {
                let _ = write!(self.err, "\r\x1b[{up}A\x1b[0J");
            } else {
                let _ = write!(self.err, "\r\x1b[0J");
            }
            self.region = 0;
        }
    }

    fn draw_region(&mut self, lines: &[String]) {
        self.clear_region();
        let painted: Vec<String> = lines.iter().map(|l| self.style.paint("2", l)).collect();
        let _ = write!(self.err, "{}", painted.join("\n"));
        let _ = self.err.flush();
        self.region = lines.len();
    }

    fn tick(&mut self) {
        if !self.style.terminal {
            // Nothing is redrawn: a line now and then says a long call still runs.
            if let Some(running) = self.live.as_ref().and_then(|id| self.running.get_mut(id))
                && let Some(line) = running.still_running()
            {
                let _ = writeln!(self.err, "{}", self.style.paint("2", &line));
            }
            return;
        }
        self.frame = (self.frame + 1) % SPINNER.len();
        let spinner = SPINNER[self.frame];
        if let Some(running) = self.live.as_ref().and_then(|id| self.running.get(id))
            && running.is_live()
        {
            let lines = running.region(spinner, Self::width());
            self.draw_region(&lines);
        } else if let Some(since) = self.waiting_since {
            let line = format!(
                "{spinner} waiting for the model… {:.1}s",
                since.elapsed().as_secs_f64()
            );
            self.clear_region();
            let _ = write!(self.err, "{line}");
            let _ = self.err.flush();
            self.region = 1;
        }
    }

    fn first_output(&mut self) {
        self.waiting_since = None;
        self.clear_region();
    }

    fn end_text(&mut self) {
        match self.text {
            Open::Stdout => {
                let _ = writeln!(self.out);
                let _ = self.out.flush();
            }
            Open::Stderr => {
                let _ = writeln!(self.err);
            }
            Open::Nothing => {}
        }
        self.text = Open::Nothing;
        if self.thought_open {
            let _ = writeln!(self.err);
            self.thought_open = false;
        }
    }

    /// The turn ended: the last step's text was its answer. Written to stdout when it was
    /// not streamed there.
    fn write_answer(&mut self) {
        let answer = std::mem::take(&mut self.answer);
        if self.style.answer_streams || answer.is_empty() {
            return;
        }
        let _ = write!(self.out, "{answer}");
        if !answer.ends_with('\n') {
            let _ = writeln!(self.out);
        }
        let _ = self.out.flush();
    }

    fn show(&mut self, event: &SharedEvent) {
        let envelope = &event.envelope;
        // A line of corral's own goes below, never into, the region being redrawn.
        if matches!(
            envelope.payload,
            Payload::Permission(_) | Payload::Instructions(_) | Payload::Compaction(_)
        ) {
            self.clear_region();
        }
        match &envelope.payload {
            Payload::TurnStarted(_) => {
                self.turn_started = Some(Instant::now());
                self.waiting_since = Some(Instant::now());
                self.steps = 0;
                self.answer.clear();
            }
            Payload::AssistantText(data) if data.delta => {
                self.first_output();
                if self.thought_open {
                    let _ = writeln!(self.err);
                    self.thought_open = false;
                }
                if let ContentBlock::Text { text } = &data.content {
                    let text = escape(text);
                    if self.style.answer_streams {
                        let _ = write!(self.out, "{text}");
                        let _ = self.out.flush();
                        self.text = Open::Stdout;
                    } else {
                        self.answer.push_str(&text);
                        let _ = write!(self.err, "{text}");
                        self.text = Open::Stderr;
                    }
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
                // Text before a tool call is not the answer.
                self.answer.clear();
                self.steps += 1;
                let input = data
                    .call
                    .raw_input
                    .as_ref()
                    .map(|v| super::tool_args::one_line(v, 120))
                    .filter(|input| !input.is_empty())
                    .map(|input| self.style.paint("2", &format!(" · {input}")))
                    .unwrap_or_default();
                let _ = writeln!(
                    self.err,
                    "{} {}{input}",
                    self.style.paint("36", "⏺"),
                    escape_line(&data.call.title),
                );
                let id = &data.call.tool_call_id;
                let tool = if data.tool.is_empty() {
                    &data.call.title
                } else {
                    &data.tool
                };
                self.running
                    .insert(id.clone(), tools::Running::new(id, tool));
                self.live = Some(id.clone());
            }
            Payload::ToolOutput(data) => {
                let printing = !self.style.terminal;
                let Some(running) = self.running.get_mut(&data.tool_call_id) else {
                    return;
                };
                let lines = running.take(&data.text, printing, self.style.detail);
                self.live = Some(running.id.clone());
                for line in lines {
                    let _ = writeln!(
                        self.err,
                        "{}",
                        self.style.paint("2", &format!("  │ {line}"))
                    );
                }
            }
            Payload::ToolResult(data) => {
                self.clear_region();
                let record = &data.result;
                let running = self.running.remove(&record.tool_call_id);
                if self.live.as_deref() == Some(record.tool_call_id.as_str()) {
                    self.live = None;
                }
                let width = if self.style.terminal {
                    Self::width()
                } else {
                    usize::MAX
                };
                let shown = tools::result(record, running.as_ref(), self.style.detail, width);
                let colour = if shown.ok { "32" } else { "31" };
                let _ = writeln!(self.err, "{}", self.style.paint(colour, &shown.line));
                for line in &shown.preview {
                    let _ = writeln!(self.err, "{}", self.style.paint("2", line));
                }
                self.waiting_since = Some(Instant::now());
            }
            Payload::Error(data) => {
                self.clear_region();
                self.end_text();
                self.drawn.error_shown(&data.message);
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
                // The time a call waited for a person is not its running time.
                for running in self.running.values_mut() {
                    running.started = Instant::now();
                }
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
                self.write_answer();
                self.running.clear();
                self.live = None;
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
                let _ = self.err.flush();
                self.drawn.turn_drawn();
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
    drawn: Drawn,
) {
    let mut view = View {
        style: &style,
        drawn: &drawn,
        out: io::stdout(),
        err: io::stderr(),
        waiting_since: None,
        region: 0,
        frame: 0,
        text: Open::Nothing,
        thought_open: false,
        answer: String::new(),
        steps: 0,
        turn_started: None,
        running: HashMap::new(),
        live: None,
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
                        super::approve::ask_on_terminal(session.clone(), request, style.colour).await;
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
    view.clear_region();
    view.end_text();
    // A session that ended mid-turn (a signal) still leaves its last text.
    view.write_answer();
    // Whoever waits for a summary line waits no longer.
    drawn.ended();
}

pub(super) fn is_dead(event: &SharedEvent) -> bool {
    matches!(&event.envelope.payload, Payload::Status(s) if s.status == Status::Dead)
}
