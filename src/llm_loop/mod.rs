//! corral's own LLM loop (the native backend's engine).
//!
//! A turn: the user's text joins the history; then, step by step, the model is streamed
//! (events go out as they arrive), its tool calls are validated and run, their results join
//! the history, until a reply without tool calls, the step limit, a cancel, or an error.
//! The turn's lifecycle (`turn_started` … `result`, back to `idle`) is the session's
//! [`Turn`]; the loop adds the gate's per-turn reset and reports a turn whose every tool call
//! the sandbox stopped as an error.

mod batch;
mod compaction;
mod delegation;
mod execute;
mod history;
mod prompt;
pub use crate::model::PromptMode;
pub(crate) mod recover;
pub(crate) mod repair;
mod step;

use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::event::{
    CompactionData, ContentBlock, Envelope, Payload, StopReason, TextData, ToolUseData, Usage,
    UsageData,
};
use crate::model::{ChatRequest, Message, ModelClient, TokenCounts, ToolChoiceMode, ToolSchema};
use crate::policy::{Approver, Policy};
use crate::session::{Session, Turn, TurnEnd, TurnOutcome};
use crate::tool::mcp::McpHub;
use crate::tool::{ToolRegistry, ToolSettings};
use batch::BatchEnd;
use step::{StepEnd, StepOutput};

#[derive(Debug, Clone, PartialEq)]
pub struct LoopConfig {
    pub max_steps: u32,
    /// Output token limit per model reply (sent explicitly: mlx defaults to 512).
    pub max_tokens: u32,
    pub temperature: Option<f32>,
    pub tool_choice: ToolChoiceMode,
    /// Share of the context window past which older turns are summarized.
    pub compaction_threshold: f64,
    /// Messages kept verbatim at the end of the history when compacting.
    pub keep_recent_messages: usize,
    /// Consecutive malformed tool calls (counted per call, across replies) that end a turn.
    pub max_malformed_calls: u32,
    /// Extra instructions appended to the system prompt.
    pub system: Option<String>,
    /// A lower output cap than the manifests', if configured.
    pub tool_output_cap: Option<usize>,
    /// Someone can answer permission requests (a terminal, `--approve-stdin`, a client).
    /// Without that, a call that needs approval is denied, visibly.
    pub attended: bool,
    /// A request nobody answers within this time is denied.
    pub approval_timeout: Option<std::time::Duration>,
    /// The full prompt, or the compact one for small windows.
    pub prompt: PromptMode,
    /// How hard the model reasons; `None`: the server's default.
    pub effort: Option<crate::model::Effort>,
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig {
            max_steps: 50,
            max_tokens: 8192,
            temperature: None,
            tool_choice: ToolChoiceMode::ServerDefault,
            compaction_threshold: 0.8,
            keep_recent_messages: 6,
            max_malformed_calls: 3,
            system: None,
            tool_output_cap: None,
            attended: false,
            approval_timeout: None,
            prompt: PromptMode::default(),
            effort: None,
        }
    }
}

pub struct LlmLoop {
    session: Arc<Session>,
    client: Arc<dyn ModelClient>,
    tools: ToolRegistry,
    /// The built-in tools alone: MCP servers' tools are added to these whenever they change.
    builtin_tools: ToolRegistry,
    mcp: Option<McpHub>,
    /// The hub's generation the current tools were taken at.
    mcp_generation: u64,
    schemas: Vec<ToolSchema>,
    approver: Approver,
    root: PathBuf,
    config: LoopConfig,
    tool_settings: Arc<ToolSettings>,
    base_system: String,
    summary: Option<String>,
    /// `[0]` is the system prompt.
    history: Vec<Message>,
    context_window: u64,
    last_prompt_tokens: Option<u64>,
    steps_taken: u64,
    last_compaction_step: Option<u64>,
    /// Tool calls of the current turn that ran, and how many the sandbox stopped.
    tally: Tally,
    /// The turn is in delegate mode (see [`delegation`]).
    delegating: bool,
}

#[derive(Default)]
struct Tally {
    executed: u32,
    blocked: u32,
    last_block: Option<String>,
}

impl LlmLoop {
    /// `root` must be canonical. `context_window` comes from the model's `prepare`.
    pub fn new(
        session: Arc<Session>,
        client: Arc<dyn ModelClient>,
        tools: ToolRegistry,
        policy: Policy,
        root: PathBuf,
        config: LoopConfig,
        context_window: u64,
    ) -> LlmLoop {
        let approver = Approver::new(
            policy,
            tools.clone(),
            root.clone(),
            config.attended,
            config.approval_timeout,
            session.clone(),
        );
        let mut llm_loop = LlmLoop {
            history: vec![Message::system(String::new())],
            session,
            client,
            builtin_tools: tools.clone(),
            tools,
            mcp: None,
            mcp_generation: 0,
            schemas: Vec::new(),
            approver,
            root,
            config,
            tool_settings: Arc::new(ToolSettings::default()),
            base_system: String::new(),
            summary: None,
            context_window,
            last_prompt_tokens: None,
            steps_taken: 0,
            last_compaction_step: None,
            tally: Tally::default(),
            delegating: false,
        };
        llm_loop.rebuild_prompt();
        llm_loop
    }

    /// The system prompt and the tool definitions for the preset's offer and the model's
    /// window (compact or full).
    fn rebuild_prompt(&mut self) {
        let compact = self.config.prompt.is_compact(self.context_window);
        let names: Vec<&str> = self.tools.names().filter(|n| self.offers(n)).collect();
        self.base_system =
            prompt::system_prompt(&self.root, &names, self.config.system.as_deref(), compact);
        self.schemas = self
            .tools
            .names()
            .filter_map(|name| self.tools.get(name))
            .map(|tool| prompt::tool_schema(&tool.manifest, compact))
            .collect();
        self.refresh_system();
    }

    /// Restores the conversation recorded in an event log (see `Session::resume`).
    /// A last turn the log left without a result is closed here, visibly: its closing
    /// envelopes (interrupted tool results, a note, a `result`) are emitted and so appended
    /// to the log (see `history`).
    pub fn restore(&mut self, envelopes: &[Envelope]) {
        let tools = &self.tools;
        let tool_name = |title: &str| {
            tools
                .names()
                .find(|name| tools.get(name).is_some_and(|t| t.manifest.title == title))
                .map(str::to_string)
        };
        let rebuilt = history::rebuild(envelopes, &tool_name);
        if !rebuilt.repair.is_empty() {
            tracing::warn!(
                turn = self.session.turn(),
                "the last turn was cut off without a result; closing it as interrupted"
            );
        }
        for payload in rebuilt.repair {
            self.session.emit(payload);
        }
        self.summary = rebuilt.summary;
        self.history.truncate(1);
        self.history.extend(rebuilt.messages);
        self.refresh_system();
    }

    /// Applies another preset from the next call on; earlier grants of the session go with
    /// the old one. The sandbox set up when the session opened stays as it is.
    pub fn set_policy(&mut self, policy: Policy) {
        self.approver.set_policy(policy);
        self.rebuild_prompt();
    }

    /// The effort the next requests carry; a note when the model cannot take it (the
    /// requests then carry none).
    pub fn set_effort(&mut self, effort: Option<crate::model::Effort>) -> Result<(), String> {
        let note = effort.and_then(|e| self.client.effort_note(e));
        self.config.effort = if note.is_some() { None } else { effort };
        note.map_or(Ok(()), Err)
    }

    /// Talks to another model from the next request on; the conversation stays.
    pub fn switch_model(&mut self, client: Arc<dyn ModelClient>, context_window: u64) {
        self.client = client;
        self.context_window = context_window;
        self.last_prompt_tokens = None;
        self.rebuild_prompt();
    }

    /// The session's MCP servers: their tools join from the next step on.
    pub fn set_mcp(&mut self, hub: McpHub) {
        self.mcp = Some(hub);
        self.mcp_generation = u64::MAX;
    }

    /// Stops the session's MCP servers.
    pub async fn shutdown_tools(&mut self) {
        if let Some(hub) = self.mcp.take() {
            hub.shutdown().await;
        }
    }

    /// Between steps: a server came up, went down or changed its tools; the model, the gate
    /// and the prompt see the tools as they are now.
    async fn sync_mcp_tools(&mut self) {
        let Some(hub) = self.mcp.clone() else {
            return;
        };
        hub.refresh().await;
        let generation = hub.generation();
        if generation == self.mcp_generation {
            return;
        }
        self.mcp_generation = generation;
        let (offered, withdrawn) = hub.tools();
        self.tools = self.builtin_tools.with_extra(offered, withdrawn);
        self.approver.set_tools(self.tools.clone());
        self.rebuild_prompt();
    }

    /// Replaces the settings tool calls run with (timeouts, environment, desktop options).
    /// Permission requests go through `desk` (the parent's, for a delegated sub-session).
    pub fn ask_through(&mut self, desk: Arc<dyn crate::policy::PermissionDesk>) {
        self.approver.set_desk(desk);
    }

    pub fn set_tool_settings(&mut self, settings: ToolSettings) {
        self.tool_settings = Arc::new(settings);
        // Whether delegation is offered depends on them.
        self.rebuild_prompt();
    }

    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }

    pub fn history(&self) -> &[Message] {
        &self.history
    }

    fn refresh_system(&mut self) {
        let system = match &self.summary {
            Some(summary) => prompt::with_summary(&self.base_system, summary),
            None => self.base_system.clone(),
        };
        self.history[0] = Message::system(system);
    }

    /// Runs one turn to its end. Emits `turn_started … result` and leaves the session idle.
    pub async fn run_turn(&mut self, prompt: &str, cancel: CancellationToken) -> TurnOutcome {
        self.run_turn_with_images(prompt, Vec::new(), cancel).await
    }

    /// A turn whose prompt carries images too (an editor's pasted screenshot).
    pub async fn run_turn_with_images(
        &mut self,
        prompt: &str,
        images: Vec<crate::model::Image>,
        cancel: CancellationToken,
    ) -> TurnOutcome {
        let turn = match Turn::begin(&self.session, prompt, &images) {
            Ok(turn) => turn,
            Err(refused) => return refused,
        };
        self.approver.begin_turn();
        self.tally = Tally::default();
        let mut usage = Usage::default();
        let mut text = String::new();
        let mut end = self
            .turn_body(prompt, images, &cancel, &mut usage, &mut text)
            .await;
        if matches!(
            end,
            TurnEnd::Stop(StopReason::EndTurn | StopReason::MaxSteps)
        ) && let Some(message) = self.all_blocked()
        {
            end = TurnEnd::Error(message);
        }
        turn.finish(end, usage, text).await
    }

    async fn turn_body(
        &mut self,
        prompt: &str,
        images: Vec<crate::model::Image>,
        cancel: &CancellationToken,
        usage: &mut Usage,
        final_text: &mut String,
    ) -> TurnEnd {
        let needed = self.history[0].estimated_tokens() + Message::user(prompt).estimated_tokens();
        if needed > self.context_window {
            return TurnEnd::Error(format!(
                "the prompt is about {needed} tokens with the system prompt, more than the \
                 model's context window of {} tokens; shorten it or raise the window \
                 (num_ctx / context_window in the config)",
                self.context_window
            ));
        }
        let mut message = Message::user(prompt);
        message.images = images;
        self.history.push(message);
        let mut malformed_streak = 0;
        for step in 0..self.config.max_steps {
            if cancel.is_cancelled() {
                return TurnEnd::Stop(StopReason::Cancelled);
            }
            tokio::select! {
                biased;
                _ = cancel.cancelled() => return TurnEnd::Stop(StopReason::Cancelled),
                _ = self.sync_mcp_tools() => {}
            }
            self.maybe_compact(cancel, usage).await;
            let output = self.stream_step(step, cancel).await;
            self.steps_taken += 1;
            if let Some(counts) = output.usage {
                self.account(counts, usage);
            }
            let calls = self.resolve_calls(&output);
            match &output.end {
                StepEnd::Finished => {}
                StepEnd::Cancelled => {
                    self.keep_partial(&output);
                    return TurnEnd::Stop(StopReason::Cancelled);
                }
                StepEnd::Failed(e) => {
                    let message = e.to_string();
                    self.keep_partial(&output);
                    return TurnEnd::Error(message);
                }
            }
            let Some((text, raw_calls)) = calls else {
                let mut message = Message::assistant(output.text.clone());
                message.thinking = non_empty(&output.thinking);
                self.history.push(message);
                *final_text = output.text;
                return TurnEnd::Stop(StopReason::EndTurn);
            };
            *final_text = text.clone();
            let ran = self.run_calls(text, &output, raw_calls, cancel, &mut malformed_streak);
            if let BatchEnd::Cancelled = ran.await {
                return TurnEnd::Stop(StopReason::Cancelled);
            }
            if malformed_streak >= self.config.max_malformed_calls {
                return TurnEnd::Error(format!(
                    "the model made {malformed_streak} malformed tool calls in a row; ending \
                     the turn (try a larger model, or a lower temperature)"
                ));
            }
        }
        TurnEnd::Stop(StopReason::MaxSteps)
    }

    async fn stream_step(&self, step: u32, cancel: &CancellationToken) -> StepOutput {
        // Disabled tools and a forbid_all are taken off the offer, not just refused.
        let forced = self.forced_delegation(step);
        let offered: Vec<ToolSchema> = self
            .schemas
            .iter()
            .filter(|s| self.offers(&s.name) && (!forced || s.name == "delegate"))
            .cloned()
            .collect();
        let request = ChatRequest {
            messages: &self.history,
            tools: &offered,
            tool_choice: if offered.is_empty() {
                None
            } else if forced {
                Some(crate::model::ToolChoice::Required)
            } else {
                self.config.tool_choice.for_step(step)
            },
            max_tokens: self.config.max_tokens,
            temperature: self.config.temperature,
            effort: self.config.effort,
        };
        step::stream_step(
            &self.session,
            self.client.as_ref(),
            &self.tools,
            &request,
            cancel,
        )
        .await
    }

    fn account(&mut self, counts: TokenCounts, usage: &mut Usage) {
        usage.add(&Usage {
            input_tokens: counts.prompt,
            output_tokens: counts.completion,
            cache_read_tokens: counts.cached,
            ..Usage::default()
        });
        if counts.prompt > 0 {
            self.last_prompt_tokens = Some(counts.prompt + counts.completion);
        }
        self.session.emit(Payload::Usage(UsageData {
            usage: *usage,
            context_tokens: self.last_prompt_tokens,
            context_window: Some(self.context_window),
        }));
    }

    /// The calls of a step: native ones, else calls written in the text in one of the shapes
    /// `recover` knows. Also emits the authoritative text block, with recovered calls cut out.
    fn resolve_calls(&self, output: &StepOutput) -> Option<(String, Vec<step::RawCall>)> {
        let mut text = output.text.clone();
        let mut calls = output.calls.clone();
        if calls.is_empty()
            && matches!(output.end, StepEnd::Finished)
            && let Some(recovered) = recover::recover(&output.text, &self.tools)
        {
            text = recovered.text;
            calls = recovered
                .calls
                .into_iter()
                .map(|c| {
                    let raw = step::RawCall {
                        id: step::new_call_id(),
                        name: self.tools.canonical_name(&c.name),
                        arguments_text: String::new(),
                        arguments_value: Some(c.arguments),
                        recovered_from: Some(recovered.family),
                    };
                    let announce = step::announce(&self.tools, &raw);
                    self.session.emit(Payload::ToolUse(
                        ToolUseData::new(&raw.name, announce).recovered_from(raw.recovered_from),
                    ));
                    raw
                })
                .collect();
        }
        if output.open_text {
            self.session.emit(Payload::AssistantText(TextData {
                delta: false,
                content: ContentBlock::text(text.clone()),
            }));
        }
        (!calls.is_empty()).then_some((text, calls))
    }

    /// What streamed before a failure or cancel stays in the history: nothing is lost.
    fn keep_partial(&mut self, output: &StepOutput) {
        if !output.text.is_empty() {
            let mut message = Message::assistant(output.text.clone());
            message.thinking = non_empty(&output.thinking);
            self.history.push(message);
        }
    }

    async fn maybe_compact(&mut self, cancel: &CancellationToken, usage: &mut Usage) {
        let used = self
            .last_prompt_tokens
            .unwrap_or_else(|| compaction::estimate_tokens(&self.history));
        let threshold = (self.context_window as f64 * self.config.compaction_threshold) as u64;
        if used <= threshold {
            return;
        }
        if self.last_compaction_step == Some(self.steps_taken) {
            tracing::warn!(
                used,
                threshold,
                "compaction did not help; not compacting twice in a row"
            );
            return;
        }
        // A failure is said on the session; the turn goes on without it.
        let _ = self.compact(used, cancel, usage).await;
    }

    /// Compacts now, between turns, whatever the context holds (a person's `/compact`).
    /// `Ok(false)`: there is too little history to summarize.
    pub async fn compact_now(&mut self, cancel: &CancellationToken) -> Result<bool, String> {
        let used = self
            .last_prompt_tokens
            .unwrap_or_else(|| compaction::estimate_tokens(&self.history));
        let mut usage = Usage::default();
        let compacted = self.compact(used, cancel, &mut usage).await?;
        if usage != Usage::default() {
            self.session.emit(Payload::Usage(crate::event::UsageData {
                usage,
                context_tokens: None,
                context_window: Some(self.context_window),
            }));
        }
        Ok(compacted)
    }

    /// Summarizes all but the recent messages into the system prompt. Whether it did;
    /// `Err` says why the summary failed (the history is left as it was).
    async fn compact(
        &mut self,
        used: u64,
        cancel: &CancellationToken,
        usage: &mut Usage,
    ) -> Result<bool, String> {
        let Some(split) = compaction::split_point(&self.history, self.config.keep_recent_messages)
        else {
            return Ok(false);
        };
        let older = &self.history[1..split];
        let transcript = compaction::transcript(self.summary.as_deref(), older);
        self.last_compaction_step = Some(self.steps_taken);
        let summary_tokens = (self.config.max_tokens).min(2048);
        match compaction::summarize(self.client.as_ref(), transcript, summary_tokens, cancel).await
        {
            Ok((summary, counts)) => {
                if let Some(counts) = counts {
                    usage.add(&Usage {
                        input_tokens: counts.prompt,
                        output_tokens: counts.completion,
                        cache_read_tokens: counts.cached,
                        ..Usage::default()
                    });
                }
                let compacted = split - 1;
                self.history.drain(1..split);
                self.summary = Some(summary.clone());
                self.refresh_system();
                self.last_prompt_tokens = None;
                let tokens_after = self.history.iter().map(Message::estimated_tokens).sum();
                self.session.emit(Payload::Compaction(CompactionData {
                    summary,
                    messages_compacted: compacted,
                    tokens_before: used,
                    context_window: self.context_window,
                    tokens_after,
                }));
                Ok(true)
            }
            Err(e) => {
                let message = format!("context compaction failed, continuing without it: {e}");
                self.session
                    .emit_error(message.clone(), serde_json::Value::Null);
                Err(message)
            }
        }
    }
}

fn non_empty(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_string())
}
