//! When a session's runtime process is spawned, fed, woken, put to sleep and stopped, decided
//! by a pure reducer: `(state, event) → (state, effects)`, no I/O, no clock of its own (time
//! comes in with the events). The manager's executor applies the effects to the real session
//! (spawn, start a turn, steer, interrupt, terminate, tell clients) and feeds what happens back
//! in as events, so every decision is in one place and tested without processes.
//!
//! What it guarantees (checked over random event sequences in `tests`):
//! - one process per session: a spawn is asked for only when none is up or coming up;
//! - every message a client sends is delivered exactly once — in a new turn, steered into the
//!   running one — or refused exactly once with the reason, in the order it was sent;
//! - a message sent while a turn runs is refused (`TURN_IN_PROGRESS`) unless the client
//!   opted in to queueing; then it is steered in at a safe boundary (gated steering), at once
//!   (direct steering), or coalesced into the next turn (no steering);
//! - an idle persistent runtime is put to sleep after `idle_sleep` and woken (resumed by its
//!   own session id) by the next message, the session staying idle to clients;
//! - a turn with no progress for `stall` gets an error and an interrupt, then its process is
//!   terminated after `grace`; a runtime that exits unasked is restarted with backoff, at most
//!   `max_restarts` times in a row.

mod reduce;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;

pub use reduce::reduce;

/// How a runtime lives, as data: what differs between claude's one long process and gemini's
/// process per turn is here, not in code paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Runtime {
    pub lifecycle: Lifecycle,
    pub steering: Steering,
    /// The process is started by the first message, not when the session opens.
    pub defer_spawn: bool,
    /// The process is stopped when each turn ends (a persistent protocol used turn by turn).
    pub terminate_on_end: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    /// One process for many turns (claude, codex, ACP agents, kimi, pi).
    Persistent,
    /// A process per turn that exits when the turn ends; the conversation goes on through the
    /// runtime's own session id (gemini -p, copilot, qwen, cursor, opencode run).
    PerTurn,
}

/// How messages that arrive while a turn runs can reach it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steering {
    /// Only at a safe boundary: no streamed block open, no tool call outstanding, not
    /// compacting or reviewing.
    Gated,
    /// Whenever: the runtime itself queues what it is sent mid-turn.
    Direct,
    /// Never: they wait for the next turn.
    None,
}

/// The clock-driven limits, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// An idle persistent process is stopped after this long (`None`: never).
    pub idle_sleep: Option<u64>,
    /// A turn with no progress event for this long has stalled (`None`: never).
    pub stall: Option<u64>,
    /// After a stalled turn's interrupt, how long before its process is terminated.
    pub grace: u64,
    /// Unasked exits in a row before the session gives up on its runtime.
    pub max_restarts: u32,
    /// The first restart waits this long; each further one twice as long as the last.
    pub backoff: u64,
}

/// A client's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Increasing in the order the session received them.
    pub id: u64,
    pub text: String,
    /// The client accepts that the message waits for (or is steered into) the running turn
    /// (MCP `agent_send`, REST/WebSocket `queue: true`).
    pub queue: bool,
}

/// Where a running turn is, as its latest progress event says: steering is safe only when
/// nothing is half-done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Boundary {
    pub block_open: bool,
    pub tool_outstanding: bool,
    /// Compacting, or a review of the turn, is under way.
    pub busy: bool,
}

impl Boundary {
    pub fn safe(self) -> bool {
        !self.block_open && !self.tool_outstanding && !self.busy
    }
}

/// What happens to a session, fed in by the executor; `now` is milliseconds on a monotonic
/// clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Opened,
    Message(Message),
    /// The process asked for is up and has taken its handshake.
    Spawned,
    SpawnFailed(String),
    /// Anything the running turn produced (text, a tool call, a tool result …).
    Progress(Boundary),
    /// The running turn ended (its `result`).
    TurnEnded,
    /// The process is gone, asked to or not.
    Exited,
    /// Time passed.
    Tick,
    Close,
}

/// What the executor is to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Start the runtime's process; `resume`: continue the runtime's own session (it has run
    /// a turn before).
    Spawn {
        resume: bool,
    },
    /// Run a turn on these messages, coalesced in order.
    StartTurn(Vec<Message>),
    /// Hand these messages to the running turn.
    Steer(Vec<Message>),
    Refuse {
        id: u64,
        why: Refusal,
    },
    Interrupt,
    /// Stop the process (sleep, stall, end of turn, close).
    Terminate,
    /// An `error` event for clients.
    Error(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    TurnInProgress,
    Closed,
    /// The runtime could not be started (or restarted) any more.
    RuntimeFailed,
}

/// The process, as far as the reducer knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Process {
    Absent,
    Spawning,
    Up,
    /// Asked to stop; `Exited` comes next.
    Stopping,
}

/// The running turn, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    Idle,
    Running {
        last_progress: u64,
        /// When the stall's interrupt was sent.
        interrupted: Option<u64>,
    },
}

/// A session's state. Built with [`State::new`]; changed only by [`reduce`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    pub runtime: Runtime,
    pub timing: Timing,
    pub process: Process,
    pub turn: Turn,
    /// Messages accepted and not yet delivered, in order.
    pub queue: VecDeque<Message>,
    /// Whether the running turn is at a safe boundary.
    pub safe: bool,
    /// The runtime has run a turn, so a new process resumes its session.
    pub has_run: bool,
    /// The process was stopped for being idle; the next message wakes it.
    pub asleep: bool,
    /// Unasked exits since the last turn that ended well.
    pub restarts: u32,
    /// No spawn before this time (backoff after a crash).
    pub spawn_not_before: u64,
    pub idle_since: u64,
    /// A stop was asked for (so the exit that follows is not a crash).
    pub stop_asked: bool,
    pub closed: bool,
    /// The runtime failed for good: messages are refused.
    pub failed: bool,
    pub now: u64,
}

impl State {
    pub fn new(runtime: Runtime, timing: Timing) -> State {
        State {
            runtime,
            timing,
            process: Process::Absent,
            turn: Turn::Idle,
            queue: VecDeque::new(),
            safe: true,
            has_run: false,
            asleep: false,
            restarts: 0,
            spawn_not_before: 0,
            idle_since: 0,
            stop_asked: false,
            closed: false,
            failed: false,
            now: 0,
        }
    }

    /// What clients are shown: a sleeping runtime is idle to them.
    pub fn busy(&self) -> bool {
        matches!(self.turn, Turn::Running { .. })
    }

    /// When a [`Event::Tick`] can next change something (a stall, the grace after its
    /// interrupt, an idle process's sleep, a backed-off spawn); `None`: no tick is needed
    /// until another event comes. The executor sleeps until then instead of polling.
    pub fn next_deadline(&self) -> Option<u64> {
        match self.turn {
            Turn::Running {
                last_progress,
                interrupted: None,
            } => self.timing.stall.map(|s| last_progress.saturating_add(s)),
            Turn::Running {
                interrupted: Some(at),
                ..
            } => matches!(self.process, Process::Up | Process::Spawning)
                .then(|| at.saturating_add(self.timing.grace)),
            Turn::Idle => match self.process {
                Process::Up
                    if self.runtime.lifecycle == Lifecycle::Persistent && self.queue.is_empty() =>
                {
                    self.timing
                        .idle_sleep
                        .map(|idle| self.idle_since.saturating_add(idle))
                }
                Process::Absent if !self.queue.is_empty() => Some(self.spawn_not_before),
                _ => None,
            },
        }
    }
}
