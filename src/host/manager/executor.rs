//! The session's own task: the thin executor of the lifecycle reducer
//! ([`crate::host::lifecycle`]). It turns what happens (a client's message, the session's own
//! events, time passing, the turn ending) into reducer events and applies the effects the
//! reducer answers with to the real backend — start a turn on the coalesced messages, steer
//! one in, put an idle agent to sleep and wake it, interrupt a stalled turn — so no decision
//! about when a process runs is made here.
//!
//! The backend is borrowed by a running turn, so effects that need it (a turn, a wake, a
//! sleep) wait in `pending` until the turn is over; steering, refusals, interrupts and errors
//! go out at once.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Command, Handle, TurnMode, lock, log_notes};
use crate::backend::Backend;
use crate::config::Config;
use crate::event::{Payload, SharedEvent, StopReason, Timestamp};
use crate::host::lifecycle::{
    self, Boundary, Effect, Event, Lifecycle, Message, Refusal, Runtime, Steering, Timing,
};
use crate::host::open;
use crate::session::Session;

/// `[agents] idle_sleep_secs` unless configured.
const DEFAULT_IDLE_SLEEP_SECS: u64 = 900;
/// `[agents] stall_secs` unless configured: far beyond any tool call an agent waits on
/// silently (claude's Bash stops at 10 minutes), so only a hung turn reaches it.
const DEFAULT_STALL_SECS: u64 = 1800;
const DEFAULT_STALL_GRACE_SECS: u64 = 30;
/// A wake that fails is tried again this many times, waiting 1 s, 2 s, 4 s.
const MAX_RESTARTS: u32 = 3;
const BACKOFF_MS: u64 = 1000;

/// How a session's runtime lives, from its backend and the `[agents]` settings.
pub(super) fn runtime_of(backend: &dyn Backend, config: &Config) -> (Runtime, Timing) {
    let secs = |value: Option<u64>, default: u64| {
        let value = value.unwrap_or(default);
        (value > 0).then(|| value.saturating_mul(1000))
    };
    let agents = &config.agents;
    let runtime = Runtime {
        lifecycle: Lifecycle::Persistent,
        // The backends that steer hold a message until their own stream is at a safe
        // boundary (claude, codex), so the reducer hands it over at once.
        steering: if backend.steering().is_some() {
            Steering::Direct
        } else {
            Steering::None
        },
        defer_spawn: false,
        terminate_on_end: false,
    };
    let timing = Timing {
        idle_sleep: if backend.sleeps() {
            secs(agents.idle_sleep_secs, DEFAULT_IDLE_SLEEP_SECS)
        } else {
            None
        },
        stall: secs(agents.stall_secs, DEFAULT_STALL_SECS),
        grace: agents
            .stall_grace_secs
            .unwrap_or(DEFAULT_STALL_GRACE_SECS)
            .saturating_mul(1000),
        max_restarts: MAX_RESTARTS,
        backoff: BACKOFF_MS,
    };
    (runtime, timing)
}

/// What a message carries besides its text, kept until it is delivered.
struct Extra {
    images: Vec<crate::model::Image>,
    effort: Option<crate::model::Effort>,
    mode: TurnMode,
}

/// Where the running turn is, from its events: steering is safe only when nothing is
/// half-done.
#[derive(Default)]
struct Progress {
    block_open: bool,
    outstanding: std::collections::HashSet<String>,
}

impl Progress {
    fn see(&mut self, payload: &Payload) -> Boundary {
        match payload {
            Payload::AssistantText(t) | Payload::Thought(t) => self.block_open = t.delta,
            Payload::ToolInputDelta(_) => self.block_open = true,
            Payload::ToolUse(u) => {
                self.block_open = false;
                self.outstanding.insert(u.call.tool_call_id.clone());
            }
            Payload::ToolResult(r) => {
                self.outstanding.remove(&r.update.tool_call_id);
            }
            Payload::TurnStarted(_) => *self = Progress::default(),
            _ => {}
        }
        self.boundary()
    }

    fn boundary(&self) -> Boundary {
        Boundary {
            block_open: self.block_open,
            tool_outstanding: !self.outstanding.is_empty(),
            busy: false,
        }
    }
}

struct Exec {
    state: lifecycle::State,
    epoch: Instant,
    session: Arc<Session>,
    handle: Weak<Handle>,
    commands: mpsc::UnboundedReceiver<Command>,
    /// The session's own events, for progress and the end of each turn.
    events: mpsc::UnboundedReceiver<SharedEvent>,
    steer: Option<mpsc::UnboundedSender<String>>,
    /// Commands that need the backend between turns, in the order they came.
    deferred: VecDeque<Command>,
    /// Effects that need the backend, run once no turn holds it.
    pending: VecDeque<Effect>,
    extras: HashMap<u64, Extra>,
    next_id: u64,
    progress: Progress,
    /// The running turn's cancel.
    token: Option<CancellationToken>,
    /// The process was started when the session opened: the reducer's first spawn is done.
    opened_up: bool,
    /// A stalled turn did not end after its interrupt: it is dropped and the session ends.
    abandon: bool,
    closing: bool,
}

impl Exec {
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn feed(&mut self, event: Event) {
        let blank = lifecycle::State::new(self.state.runtime, self.state.timing);
        let state = std::mem::replace(&mut self.state, blank);
        let (state, effects) = lifecycle::reduce(state, event, self.now());
        self.state = state;
        for effect in effects {
            self.apply(effect);
        }
    }

    /// The effects that need no backend go out now; the others wait for it.
    fn apply(&mut self, effect: Effect) {
        match effect {
            Effect::Steer(messages) => {
                for message in messages {
                    self.extras.remove(&message.id);
                    if let Some(steer) = &self.steer {
                        let _ = steer.send(message.text);
                    }
                }
            }
            Effect::Refuse { id, why } => {
                self.extras.remove(&id);
                let (code, text) = match why {
                    Refusal::TurnInProgress => (
                        "TURN_IN_PROGRESS",
                        "a turn is already running: the message was not delivered",
                    ),
                    Refusal::Closed => (
                        "SESSION_CLOSED",
                        "the session closed before a waiting message was delivered",
                    ),
                    Refusal::RuntimeFailed => (
                        "RUNTIME_FAILED",
                        "the agent could not be started again: a waiting message was not \
                         delivered",
                    ),
                };
                self.session
                    .emit_error(text, serde_json::json!({ "code": code }));
                self.release_accepted();
            }
            Effect::Interrupt => {
                if let Some(token) = &self.token {
                    token.cancel();
                }
            }
            Effect::Error(message) => {
                tracing::warn!(session = self.session.id(), %message, "agent lifecycle");
                self.session
                    .emit_error(message, serde_json::json!({ "code": "AGENT_LIFECYCLE" }));
            }
            // Only a stalled turn is stopped while it runs; a sleep waits for the turn's end.
            Effect::Terminate if self.state.busy() && !self.closing => self.abandon = true,
            effect @ (Effect::Spawn { .. } | Effect::StartTurn(_) | Effect::Terminate) => {
                self.pending.push_back(effect);
            }
        }
    }

    /// Nothing waits any more: turns that were counted as coming are not.
    fn release_accepted(&self) {
        if !self.state.busy()
            && self.state.queue.is_empty()
            && let Some(handle) = self.handle.upgrade()
        {
            handle
                .sent_turn
                .fetch_min(self.session.turn(), Ordering::SeqCst);
        }
    }

    /// A message, new turn or queued. A client sends a new turn only once the last turn's
    /// `result` is out: if that event has not come through here yet, the turn is over all
    /// the same.
    fn message(&mut self, text: String, extra: Extra, queued: bool) {
        if self.state.busy() && self.session.finished_turn() >= self.session.turn() {
            self.feed(Event::TurnEnded);
        }
        self.next_id += 1;
        let id = self.next_id;
        self.extras.insert(id, extra);
        self.feed(Event::Message(Message {
            id,
            text,
            queue: queued,
        }));
    }

    fn see(&mut self, event: &SharedEvent) {
        let payload = &event.envelope.payload;
        if matches!(payload, Payload::Result(_)) {
            self.feed(Event::TurnEnded);
        } else if self.state.busy() {
            let boundary = self.progress.see(payload);
            self.feed(Event::Progress(boundary));
        }
    }

    /// Time passed. A turn waiting for a person's answer is not stalled: it counts as
    /// progress (the question has its own timeout).
    fn tick(&mut self) {
        if self.state.busy() && !self.session.pending_permissions().is_empty() {
            self.feed(Event::Progress(self.progress.boundary()));
        }
        self.feed(Event::Tick);
    }

    /// Until the reducer's next deadline (far away when it has none).
    fn deadline(&self) -> tokio::time::Instant {
        let far = Duration::from_secs(86_400);
        let wait = self.state.next_deadline().map_or(far, |at| {
            Duration::from_millis(at.saturating_sub(self.now())).min(far)
        });
        tokio::time::Instant::now() + wait
    }
}

/// The session's own task: messages go through the reducer, turns one at a time, until
/// the session closes.
pub(super) async fn run_session(
    mut opened: open::OpenedSession,
    commands: mpsc::UnboundedReceiver<Command>,
    handle: Weak<Handle>,
    (runtime, timing): (Runtime, Timing),
) {
    let session = opened.session.clone();
    let mut exec = Exec {
        state: lifecycle::State::new(runtime, timing),
        epoch: Instant::now(),
        events: session.tap(session.last_seq()),
        session,
        handle,
        commands,
        steer: opened.backend.steering(),
        deferred: VecDeque::new(),
        pending: VecDeque::new(),
        extras: HashMap::new(),
        next_id: 0,
        progress: Progress::default(),
        token: None,
        opened_up: false,
        abandon: false,
        closing: false,
    };
    exec.feed(Event::Opened);
    // Opening applied the session's effort; a turn that asks for another gets it for itself.
    let mut applied_effort = opened.effort;
    'session: loop {
        while let Some(effect) = exec.pending.pop_front() {
            match effect {
                Effect::Spawn { .. } if !exec.opened_up => {
                    exec.opened_up = true;
                    exec.feed(Event::Spawned);
                }
                Effect::Spawn { .. } => match opened.backend.wake().await {
                    Ok(()) => {
                        tracing::info!(session = exec.session.id(), "agent woken");
                        exec.feed(Event::Spawned);
                    }
                    Err(why) => exec.feed(Event::SpawnFailed(why)),
                },
                Effect::Terminate if exec.closing => break 'session,
                Effect::Terminate => {
                    match opened.backend.sleep().await {
                        Ok(()) => {
                            tracing::info!(session = exec.session.id(), "idle agent put to sleep");
                        }
                        Err(why) => tracing::warn!(%why, "the agent could not sleep"),
                    }
                    // Asleep or not, a wake comes before the next turn (a no-op when up).
                    exec.feed(Event::Exited);
                }
                Effect::StartTurn(messages) => {
                    run_turn(&mut exec, &mut opened, &mut applied_effort, messages).await;
                    if exec.abandon {
                        exec.session.emit_error(
                            "the stalled turn did not end after its interrupt: the session is \
                             ended and its agent stopped",
                            serde_json::json!({ "code": "AGENT_LIFECYCLE" }),
                        );
                        break 'session;
                    }
                }
                Effect::Steer(_) | Effect::Refuse { .. } | Effect::Interrupt | Effect::Error(_) => {
                }
            }
            if exec.state.failed {
                break 'session;
            }
        }
        if exec.closing || exec.state.failed {
            break;
        }
        if let Some(command) = exec.deferred.pop_front() {
            between_turns(&mut exec, &mut opened, &mut applied_effort, command).await;
            continue;
        }
        let halted = exec.session.halted().clone();
        let deadline = exec.deadline();
        tokio::select! {
            command = exec.commands.recv() => match command {
                Some(command) => between_turns(&mut exec, &mut opened, &mut applied_effort, command).await,
                None => break,
            },
            Some(event) = exec.events.recv() => exec.see(&event),
            // Between turns, an external agent's process died: one that can be started again
            // is, when the next message needs it (with backoff, within the restart limit);
            // another has closed the session. So does an event log failing.
            () = opened.backend.watch_idle() => {
                if opened.backend.take_crash().await {
                    exec.feed(Event::Exited);
                } else {
                    break;
                }
            }
            () = halted.cancelled() => break,
            () = tokio::time::sleep_until(deadline) => exec.tick(),
        }
    }
    let mut notes = Vec::new();
    opened.finish(&mut notes).await;
    log_notes(&notes);
}

/// A command while no turn runs.
async fn between_turns(
    exec: &mut Exec,
    opened: &mut open::OpenedSession,
    applied_effort: &mut Option<crate::model::Effort>,
    command: Command,
) {
    match command {
        Command::Turn {
            text,
            images,
            effort,
            mode,
            queued,
        } => exec.message(
            text,
            Extra {
                images,
                effort,
                mode,
            },
            queued,
        ),
        Command::SetModel { model, reply } => {
            let _ = reply.send(opened.backend.set_model(&model).await);
        }
        Command::SetPolicy { policy, reply } => {
            let _ = reply.send(opened.backend.set_policy(*policy).await);
        }
        Command::SetEffort { effort, reply } => {
            opened.effort = effort;
            let took = open::apply_effort(opened.backend.as_mut(), effort, &opened.session).await;
            if took {
                *applied_effort = effort;
            }
            let _ = reply.send(took);
        }
        Command::Compact { reply } => {
            // Esc (cancel) stops a compaction as it stops a turn.
            let token = exec.session.halted().child_token();
            set_cancel(&exec.handle, Some(token.clone()));
            let outcome = opened.backend.compact(token).await;
            set_cancel(&exec.handle, None);
            let _ = reply.send(outcome);
        }
        Command::Close => close(exec),
    }
}

fn close(exec: &mut Exec) {
    exec.closing = true;
    exec.feed(Event::Close);
    // The reducer stops a process that is up; one asleep or never started has nothing to
    // stop, and the session ends all the same.
    exec.pending.push_back(Effect::Terminate);
}

fn set_cancel(handle: &Weak<Handle>, token: Option<CancellationToken>) {
    if let Some(handle) = handle.upgrade() {
        *lock(&handle.cancel) = token;
    }
}

/// Runs one turn on `messages` (coalesced in order) while messages, events and ticks keep
/// reaching the reducer.
async fn run_turn(
    exec: &mut Exec,
    opened: &mut open::OpenedSession,
    applied_effort: &mut Option<crate::model::Effort>,
    messages: Vec<Message>,
) {
    let mut images = Vec::new();
    let mut first: Option<Extra> = None;
    for message in &messages {
        if let Some(mut extra) = exec.extras.remove(&message.id) {
            images.append(&mut extra.images);
            first.get_or_insert(extra);
        }
    }
    let (effort, mode) = first.map_or((None, TurnMode::Normal), |e| (e.effort, e.mode));
    let effort = effort.or(opened.effort);
    let text = messages
        .iter()
        .map(|m| m.text.as_str())
        .collect::<Vec<_>>()
        .join("\n\n");
    // Only what the agent took counts as applied: a failed change is tried (and noted)
    // again at the next turn that asks for it.
    if effort != *applied_effort
        && open::apply_effort(opened.backend.as_mut(), effort, &opened.session).await
    {
        *applied_effort = effort;
    }
    if let Err(note) = opened.backend.set_delegating(mode == TurnMode::Delegate) {
        opened
            .session
            .emit_error(note, serde_json::json!({"code": "DELEGATE_NOT_AVAILABLE"}));
    }
    let token = exec.session.halted().child_token();
    set_cancel(&exec.handle, Some(token.clone()));
    exec.token = Some(token.clone());
    if let Some(handle) = exec.handle.upgrade() {
        let mut stats = lock(&handle.stats);
        stats.last_mode = mode;
        stats.turn_started = Some(Instant::now());
    }
    // The turn borrows the backend until it is over (or dropped, abandoned).
    let outcome = {
        let turn = opened.backend.run_turn_with_images(&text, images, token);
        tokio::pin!(turn);
        loop {
            let deadline = exec.deadline();
            tokio::select! {
                biased;
                outcome = &mut turn => break Some(outcome),
                Some(event) = exec.events.recv() => exec.see(&event),
                command = exec.commands.recv() => match command {
                    // Queued messages reach the reducer now (to be steered in or wait); anything
                    // else waits for the turn to end, and so does everything after it.
                    Some(Command::Turn { text, images, effort, mode, queued })
                        if exec.deferred.is_empty() =>
                    {
                        exec.message(text, Extra { images, effort, mode }, queued);
                    }
                    Some(Command::Close) => close(exec),
                    Some(command) => exec.deferred.push_back(command),
                    None => exec.closing = true,
                },
                () = tokio::time::sleep_until(deadline) => exec.tick(),
            }
            if exec.abandon {
                break None;
            }
        }
    };
    exec.token = None;
    set_cancel(&exec.handle, None);
    // A process that died in the turn: the reducer counts the crash (and restarts or gives
    // up) before the turn's end, which would count as a turn that went well. One that died
    // just after a turn that ended well is counted after it.
    let crashed = outcome.is_some() && opened.backend.take_crash().await;
    let died_in_turn = crashed
        && outcome
            .as_ref()
            .is_some_and(|o| o.stop_reason == StopReason::Error);
    if died_in_turn {
        exec.feed(Event::Exited);
    }
    if let Some(outcome) = &outcome {
        if let Some(handle) = exec.handle.upgrade() {
            let mut stats = lock(&handle.stats);
            stats.usage.add(&outcome.usage);
            stats.last_activity = Timestamp::now();
            stats.turn_started = None;
        }
        if outcome.stop_reason == StopReason::Error {
            tracing::warn!(error = ?outcome.error, "turn ended with an error");
        }
    }
    exec.feed(Event::TurnEnded);
    if crashed && !died_in_turn {
        exec.feed(Event::Exited);
    }
}
