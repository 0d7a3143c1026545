//! One turn: the user line goes in, claude's stdout lines become corral's events until its
//! `result`, a cancel, or the end of the process.

use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::stream::{ResultLine, TurnState};
use super::{ClaudeBackend, Line, Phase, launch};
use crate::backend::external::ToolAsk;
use crate::event::{ContentBlock, Payload, Usage, UserTextData};
use crate::policy::{Approval, Decision};
use crate::session::{Turn, TurnOutcome};

/// How long claude may take to end a turn after an interrupt before it is stopped.
const INTERRUPT_GRACE: Duration = Duration::from_secs(20);

/// claude died (or would not stop) during the turn: the report.
struct Died(String);

enum Next {
    Line(Line),
    Steer(String),
    Cancel,
    Stuck,
}

/// Messages sent while the turn runs: those not written yet, and how many written ones still
/// owe their `result`.
#[derive(Default)]
struct Steering {
    pending: std::collections::VecDeque<String>,
    awaiting: usize,
    /// Usage of the results already in.
    usage: Usage,
}

impl ClaudeBackend {
    pub(super) async fn turn(&mut self, prompt: &str, cancel: CancellationToken) -> TurnOutcome {
        // The executor wakes a sleeping (or crashed) claude before its turn, counting the
        // crashes; a caller that did not (`corral run`, where the person decides) still gets a
        // process.
        if self.reap_crashed().await {
            // Still a crash to count: the executor hears of it after this turn.
            self.crash_untold = true;
        }
        if let Err(e) = self.wake_up().await {
            return TurnOutcome::refused(format!("claude could not be started again: {e}"));
        }
        {
            let mut phase = self.shared.phase();
            if *phase != Phase::Idle {
                return TurnOutcome::refused(format!(
                    "claude cannot start a turn: it is {phase:?}"
                ));
            }
            *phase = Phase::Busy;
        }
        let turn = match Turn::begin(self.session(), prompt, &[]) {
            Ok(turn) => turn,
            Err(refused) => {
                self.set_idle();
                return refused;
            }
        };
        self.approver.begin_turn();
        match self.turn_body(prompt, &cancel).await {
            Ok(line) => {
                let outcome = turn.finish(line.end, line.usage, line.text).await;
                self.set_idle();
                outcome
            }
            // `report_crash` has said how claude died.
            // The session stays: the next message starts claude again.
            Err(Died(report)) => turn.died(report, Usage::default(), String::new()).await,
        }
    }

    fn set_idle(&self) {
        let mut phase = self.shared.phase();
        if *phase == Phase::Busy {
            *phase = Phase::Idle;
        }
    }

    async fn turn_body(
        &mut self,
        prompt: &str,
        cancel: &CancellationToken,
    ) -> Result<ResultLine, Died> {
        // Lines left from an earlier turn (a late control response) mean nothing now.
        let stale: Vec<Line> = self.held.drain(..).collect();
        for line in stale
            .into_iter()
            .chain(std::iter::from_fn(|| self.lines.try_recv().ok()))
        {
            if matches!(line, Line::Eof) {
                return Err(Died(self.shared.report_crash().await));
            }
        }
        if let Err(e) = self.write_user(prompt).await {
            tracing::debug!(error = %e, "writing the prompt to claude");
            return Err(Died(self.shared.report_crash().await));
        }
        // Messages that came in just as the last turn ended belong to this one.
        let mut steering = Steering::default();
        while let Ok(text) = self.steer_rx.try_recv() {
            steering.pending.push_back(text);
        }
        let mut state = TurnState::new(self.cost_so_far);
        loop {
            if !steering.pending.is_empty()
                && state.at_safe_boundary()
                && state.interrupted.is_none()
                && let Err(e) = self.flush_steering(&mut steering).await
            {
                tracing::debug!(error = %e, "writing a steering message to claude");
                return Err(Died(self.shared.report_crash().await));
            }
            let next = match self.held.pop_front() {
                Some(line) => Next::Line(line),
                None => tokio::select! {
                    line = self.lines.recv() => Next::Line(line.unwrap_or(Line::Eof)),
                    Some(text) = self.steer_rx.recv() => Next::Steer(text),
                    () = cancel.cancelled(), if state.interrupted.is_none() => Next::Cancel,
                    () = sleep_until(state.interrupted) => Next::Stuck,
                },
            };
            let value = match next {
                Next::Steer(text) => {
                    if state.interrupted.is_some() {
                        self.session().emit_error(
                            "the turn is being cancelled; the message sent meanwhile is dropped",
                            json!({"text": text}),
                        );
                    } else {
                        steering.pending.push_back(text);
                    }
                    continue;
                }
                Next::Cancel => {
                    self.interrupt(&mut state).await;
                    continue;
                }
                Next::Stuck => {
                    self.shared
                        .process
                        .lock()
                        .await
                        .stop(self.stdin.take())
                        .await;
                    let report = self.shared.report_crash().await;
                    return Err(Died(format!(
                        "claude did not end the turn within {} s of the interrupt; stopped it. \
                         {report}",
                        INTERRUPT_GRACE.as_secs()
                    )));
                }
                Next::Line(Line::Eof) => return Err(Died(self.shared.report_crash().await)),
                Next::Line(Line::Malformed(text)) => {
                    let shown: String = text.chars().take(500).collect();
                    self.session().emit_error(
                        format!("claude wrote a line that is not a JSON object: {shown}"),
                        Value::Null,
                    );
                    continue;
                }
                Next::Line(Line::Json(value)) => value,
            };
            let session = self.session().clone();
            match value["type"].as_str().unwrap_or_default() {
                "system" if value["subtype"] == "init" => self.record_session_id(&value),
                "stream_event" => state.on_stream_event(&session, &value),
                "assistant" => state.on_assistant(&session, &value),
                "user" => state.on_user(&session, &value),
                "control_request" => self.on_control_request(&value, cancel, &mut state).await,
                "result" => {
                    self.record_session_id(&value);
                    let mut line = state.on_result(&session, &value);
                    self.cost_so_far = state.cost_total.unwrap_or(self.cost_so_far);
                    // A result is a safe boundary: what is still held goes now.
                    while let Ok(text) = self.steer_rx.try_recv() {
                        steering.pending.push_back(text);
                    }
                    let more = steering.awaiting > 0
                        || (!steering.pending.is_empty() && state.interrupted.is_none());
                    if !more {
                        line.usage.add(&steering.usage);
                        return Ok(line);
                    }
                    steering.awaiting = steering.awaiting.saturating_sub(1);
                    steering.usage.add(&line.usage);
                    let interrupted = state.interrupted;
                    state = TurnState::new(self.cost_so_far);
                    state.interrupted = interrupted;
                    if interrupted.is_some() {
                        // A message written before the cancel runs next: stop it too.
                        self.interrupt(&mut state).await;
                    }
                }
                // control_response to an interrupt, status, rate limits, hooks, and
                // whatever newer versions add.
                _ => {}
            }
        }
    }

    async fn write_user(&mut self, text: &str) -> std::io::Result<()> {
        let user = json!({
            "type": "user",
            "message": {"role": "user", "content": [{"type": "text", "text": text}]},
            "parent_tool_use_id": null,
            "session_id": self.external_id.clone().unwrap_or_default(),
        });
        self.write_line(&user).await
    }

    /// Writes the held messages; each shows in the session as the user's text and owes a
    /// `result`.
    async fn flush_steering(&mut self, steering: &mut Steering) -> std::io::Result<()> {
        while let Some(text) = steering.pending.pop_front() {
            self.write_user(&text).await?;
            self.session().emit(Payload::UserText(UserTextData {
                content: ContentBlock::text(text),
            }));
            steering.awaiting += 1;
        }
        Ok(())
    }

    async fn interrupt(&mut self, state: &mut TurnState) {
        state.interrupted = Some(tokio::time::Instant::now() + INTERRUPT_GRACE);
        if let Err(e) = self.control(json!({"subtype": "interrupt"})).await {
            // The process is going away: its end of stdout finishes the turn.
            tracing::debug!(error = %e, "sending claude an interrupt");
        }
    }

    /// Asks corral's gate while still watching claude: lines that arrive meanwhile are held
    /// for the turn loop, and if claude dies the question is withdrawn (`None`) instead of
    /// leaving a person to answer a process that is gone.
    async fn ask_gate(&mut self, ask: &ToolAsk, cancel: &CancellationToken) -> Option<Approval> {
        let approver = self.approver.clone();
        let decide = ask.decide(&approver, cancel);
        tokio::pin!(decide);
        loop {
            tokio::select! {
                answer = &mut decide => return Some(answer),
                line = self.lines.recv() => {
                    let line = line.unwrap_or(Line::Eof);
                    let gone = matches!(line, Line::Eof);
                    self.held.push_back(line);
                    if gone {
                        break;
                    }
                }
            }
        }
        let session = self.session().clone();
        session.resolve_all_permissions(Decision::Deny, "the agent process ended before an answer");
        None
    }

    async fn on_control_request(
        &mut self,
        value: &Value,
        cancel: &CancellationToken,
        state: &mut TurnState,
    ) {
        let id = value["request_id"].as_str().unwrap_or_default().to_string();
        let request = &value["request"];
        let subtype = request["subtype"].as_str().unwrap_or_default();
        let response = if subtype == "can_use_tool" {
            let answer = if state.interrupted.is_some() {
                Approval::Deny {
                    message: "the turn was cancelled".into(),
                }
            } else {
                match self.ask_gate(&tool_ask(request, &id), cancel).await {
                    Some(answer) => answer,
                    // claude is gone; its end of stdout, held, finishes the turn.
                    None => return,
                }
            };
            let input = request.get("input").cloned().unwrap_or_else(|| json!({}));
            let behavior = match &answer {
                Approval::Allow { .. } => json!({"behavior": "allow", "updatedInput": input}),
                Approval::Deny { message } => json!({"behavior": "deny", "message": message}),
                Approval::Cancel => json!({"behavior": "deny",
                    "message": "the user cancelled the turn", "interrupt": true}),
            };
            json!({"subtype": "success", "request_id": id, "response": behavior})
        } else {
            json!({"subtype": "error", "request_id": id,
                "error": format!("corral does not handle {subtype:?} requests")})
        };
        let line = json!({"type": "control_response", "response": response});
        if let Err(e) = self.write_line(&line).await {
            tracing::debug!(error = %e, "answering claude's control request");
        }
        if response["response"]["interrupt"] == true && state.interrupted.is_none() {
            self.interrupt(state).await;
        }
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// A `can_use_tool` request in corral's terms.
pub(super) fn tool_ask(request: &Value, request_id: &str) -> ToolAsk {
    let name = request["tool_name"].as_str().unwrap_or("unknown");
    let input = request.get("input").cloned().unwrap_or_else(|| json!({}));
    let mapped = launch::map_tool(name, &input);
    ToolAsk {
        tool_call_id: request["tool_use_id"]
            .as_str()
            .unwrap_or(request_id)
            .to_string(),
        agent_tool: name.to_string(),
        corral_tool: mapped.corral_tool,
        args: mapped.args,
        title: mapped.title,
        kind: mapped.kind,
        paths: call_paths(name, &input),
        raw_input: input,
    }
}

/// claude's file tools: what each touches besides `args.path` (which the approver checks
/// anyway). Other tools (Bash, MCP tools on remote things) name no local paths corral can
/// read reliably; Bash's commands are the shell gate's to judge.
fn call_paths(name: &str, input: &Value) -> Vec<String> {
    use crate::backend::external::confine::{glob_base, paths_in};
    const FILE_TOOLS: &[&str] = &[
        "Read",
        "Write",
        "Edit",
        "MultiEdit",
        "NotebookEdit",
        "NotebookRead",
        "Glob",
        "Grep",
        "LS",
    ];
    if !FILE_TOOLS.contains(&name) {
        return Vec::new();
    }
    let mut paths = paths_in(input);
    // `Glob {pattern: "/etc/**"}` or `"../**"` searches wherever its pattern starts.
    if name == "Glob"
        && let Some(base) = input["pattern"].as_str().and_then(glob_base)
    {
        let from = input["path"].as_str().filter(|p| !p.is_empty());
        paths.push(match from {
            Some(dir) if !base.starts_with('/') => format!("{dir}/{base}"),
            _ => base,
        });
    }
    paths
}
