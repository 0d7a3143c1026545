//! The reducer itself: one function per event, and the one place a turn is started.

use super::{Effect, Event, Lifecycle, Message, Process, Refusal, State, Steering, Turn};

/// `state` after `event` at `now` (milliseconds, monotonic), and what to do about it.
pub fn reduce(mut state: State, event: Event, now: u64) -> (State, Vec<Effect>) {
    state.now = state.now.max(now);
    let mut out = Vec::new();
    match event {
        Event::Opened => {
            let eager =
                state.runtime.lifecycle == Lifecycle::Persistent && !state.runtime.defer_spawn;
            if eager && !state.closed && state.process == Process::Absent {
                spawn(&mut state, &mut out);
            }
        }
        Event::Message(message) => received(&mut state, message, &mut out),
        Event::Spawned => spawned(&mut state, &mut out),
        Event::SpawnFailed(why) => {
            if state.process == Process::Spawning {
                state.process = Process::Absent;
                state.stop_asked = false;
                crashed(
                    &mut state,
                    &format!("the runtime did not start: {why}"),
                    &mut out,
                );
            }
        }
        Event::Progress(boundary) => {
            if let Turn::Running { interrupted, .. } = state.turn {
                state.turn = Turn::Running {
                    last_progress: state.now,
                    interrupted,
                };
                state.safe = boundary.safe();
                steer_if_safe(&mut state, &mut out);
            }
        }
        Event::TurnEnded => turn_ended(&mut state, &mut out),
        Event::Exited => exited(&mut state, &mut out),
        Event::Tick => tick(&mut state, &mut out),
        Event::Close => close(&mut state, &mut out),
    }
    start_if_ready(&mut state, &mut out);
    (state, out)
}

fn received(state: &mut State, message: Message, out: &mut Vec<Effect>) {
    let refuse = |why| Effect::Refuse {
        id: message.id,
        why,
    };
    if state.closed {
        out.push(refuse(Refusal::Closed));
        return;
    }
    if state.failed {
        out.push(refuse(Refusal::RuntimeFailed));
        return;
    }
    if state.busy() && !message.queue {
        // Seed 002: a client that did not opt in is told, never queued behind its back.
        out.push(refuse(Refusal::TurnInProgress));
        return;
    }
    state.queue.push_back(message);
    steer_if_safe(state, out);
}

/// Hands the queued messages to the running turn where the runtime's steering allows it now.
fn steer_if_safe(state: &mut State, out: &mut Vec<Effect>) {
    let now_ok = match state.runtime.steering {
        Steering::Direct => true,
        Steering::Gated => state.safe,
        Steering::None => false,
    };
    let running = state.busy() && state.process == Process::Up;
    if running && now_ok && !state.queue.is_empty() && !stalled(state) {
        out.push(Effect::Steer(state.queue.drain(..).collect()));
    }
}

/// A turn whose stall interrupt was sent takes nothing more: what waits goes to the next.
fn stalled(state: &State) -> bool {
    matches!(
        state.turn,
        Turn::Running {
            interrupted: Some(_),
            ..
        }
    )
}

fn spawn(state: &mut State, out: &mut Vec<Effect>) {
    state.process = Process::Spawning;
    state.stop_asked = false;
    out.push(Effect::Spawn {
        resume: state.has_run,
    });
}

fn spawned(state: &mut State, out: &mut Vec<Effect>) {
    if state.process != Process::Spawning {
        return;
    }
    state.process = Process::Up;
    state.asleep = false;
    state.idle_since = state.now;
    if state.closed {
        stop(state, out);
    }
}

fn turn_ended(state: &mut State, out: &mut Vec<Effect>) {
    if !state.busy() {
        return;
    }
    state.turn = Turn::Idle;
    state.safe = true;
    state.has_run = true;
    state.restarts = 0;
    state.idle_since = state.now;
    match state.runtime.lifecycle {
        // The process ends by itself with its turn.
        Lifecycle::PerTurn if state.process == Process::Up => {
            state.process = Process::Stopping;
            state.stop_asked = true;
        }
        Lifecycle::Persistent if state.runtime.terminate_on_end && state.process == Process::Up => {
            stop(state, out);
        }
        _ => {}
    }
}

fn exited(state: &mut State, out: &mut Vec<Effect>) {
    if state.process == Process::Absent {
        return;
    }
    let asked = state.stop_asked;
    state.process = Process::Absent;
    state.stop_asked = false;
    if state.busy() {
        state.turn = Turn::Idle;
        state.safe = true;
        out.push(Effect::Error(
            "the runtime's process ended in the middle of the turn".into(),
        ));
    }
    if !asked && !state.closed {
        crashed(state, "the runtime's process exited unasked", out);
    }
}

/// An unasked exit or a failed start: restart with backoff, or give up.
fn crashed(state: &mut State, what: &str, out: &mut Vec<Effect>) {
    state.restarts += 1;
    if state.restarts > state.timing.max_restarts {
        state.failed = true;
        out.push(Effect::Error(format!(
            "{what}; gave up after {} restarts",
            state.timing.max_restarts
        )));
        for message in state.queue.drain(..) {
            out.push(Effect::Refuse {
                id: message.id,
                why: Refusal::RuntimeFailed,
            });
        }
        return;
    }
    let shift = (state.restarts - 1).min(16);
    let wait = state.timing.backoff.saturating_mul(1 << shift);
    state.spawn_not_before = state.now.saturating_add(wait);
    out.push(Effect::Error(format!(
        "{what}; it is started again when needed (after {wait} ms)"
    )));
}

fn tick(state: &mut State, out: &mut Vec<Effect>) {
    let now = state.now;
    match state.turn {
        Turn::Running {
            last_progress,
            interrupted: None,
        } if state
            .timing
            .stall
            .is_some_and(|stall| now.saturating_sub(last_progress) >= stall) =>
        {
            out.push(Effect::Error(format!(
                "the turn made no progress for {} s: interrupting it",
                now.saturating_sub(last_progress) / 1000
            )));
            out.push(Effect::Interrupt);
            state.turn = Turn::Running {
                last_progress,
                interrupted: Some(now),
            };
        }
        Turn::Running {
            interrupted: Some(at),
            ..
        } if now.saturating_sub(at) >= state.timing.grace
            && matches!(state.process, Process::Up | Process::Spawning) =>
        {
            out.push(Effect::Error(
                "the interrupted turn did not end: stopping its process".into(),
            ));
            stop(state, out);
        }
        Turn::Idle
            if state.process == Process::Up
                && state.runtime.lifecycle == Lifecycle::Persistent
                && state.queue.is_empty()
                && state
                    .timing
                    .idle_sleep
                    .is_some_and(|idle| now.saturating_sub(state.idle_since) >= idle) =>
        {
            state.asleep = true;
            stop(state, out);
        }
        _ => {}
    }
}

fn close(state: &mut State, out: &mut Vec<Effect>) {
    if state.closed {
        return;
    }
    state.closed = true;
    for message in state.queue.drain(..) {
        out.push(Effect::Refuse {
            id: message.id,
            why: Refusal::Closed,
        });
    }
    if state.busy() {
        out.push(Effect::Interrupt);
    }
    if state.process == Process::Up {
        stop(state, out);
    }
}

fn stop(state: &mut State, out: &mut Vec<Effect>) {
    state.process = Process::Stopping;
    state.stop_asked = true;
    out.push(Effect::Terminate);
}

/// Starts a turn on everything queued once a process is up for it, spawning (or waking) one
/// when there is none.
fn start_if_ready(state: &mut State, out: &mut Vec<Effect>) {
    if state.closed || state.failed || state.busy() || state.queue.is_empty() {
        return;
    }
    match state.process {
        Process::Up => {
            out.push(Effect::StartTurn(state.queue.drain(..).collect()));
            state.turn = Turn::Running {
                last_progress: state.now,
                interrupted: None,
            };
            state.safe = true;
        }
        Process::Absent if state.now >= state.spawn_not_before => spawn(state, out),
        Process::Absent | Process::Spawning | Process::Stopping => {}
    }
}
