use std::collections::HashMap;

use super::*;

const PERSISTENT: Runtime = Runtime {
    lifecycle: Lifecycle::Persistent,
    steering: Steering::Gated,
    defer_spawn: false,
    terminate_on_end: false,
};

const TIMING: Timing = Timing {
    idle_sleep: Some(60_000),
    stall: Some(30_000),
    grace: 5_000,
    max_restarts: 3,
    backoff: 1_000,
};

fn message(id: u64, queue: bool) -> Event {
    Event::Message(Message {
        id,
        text: format!("m{id}"),
        queue,
    })
}

/// Feeds events at the given times, returning the last state and every effect in order.
fn run(runtime: Runtime, events: &[(u64, Event)]) -> (State, Vec<Effect>) {
    let mut state = State::new(runtime, TIMING);
    let mut all = Vec::new();
    for (at, event) in events {
        let (next, effects) = reduce(state, event.clone(), *at);
        state = next;
        all.extend(effects);
    }
    (state, all)
}

fn ids(messages: &[Message]) -> Vec<u64> {
    messages.iter().map(|m| m.id).collect()
}

#[test]
fn a_persistent_runtime_spawns_on_open_and_runs_the_first_message() {
    let (state, effects) = run(
        PERSISTENT,
        &[
            (0, Event::Opened),
            (5, message(1, false)),
            (9, Event::Spawned),
        ],
    );
    assert_eq!(effects[0], Effect::Spawn { resume: false });
    assert!(matches!(&effects[1], Effect::StartTurn(m) if ids(m) == [1]));
    assert!(state.busy());
}

#[test]
fn without_opting_in_a_second_message_is_refused_while_the_turn_runs() {
    let (_, effects) = run(
        PERSISTENT,
        &[
            (0, Event::Opened),
            (1, Event::Spawned),
            (2, message(1, false)),
            (3, message(2, false)),
        ],
    );
    assert_eq!(
        effects.last(),
        Some(&Effect::Refuse {
            id: 2,
            why: Refusal::TurnInProgress
        })
    );
}

#[test]
fn gated_steering_waits_for_a_safe_boundary() {
    let open_block = Boundary {
        block_open: true,
        ..Boundary::default()
    };
    let (_, effects) = run(
        PERSISTENT,
        &[
            (0, Event::Opened),
            (1, Event::Spawned),
            (2, message(1, false)),
            (3, Event::Progress(open_block)),
            (4, message(2, true)),
            (5, message(3, true)),
            (6, Event::Progress(Boundary::default())),
        ],
    );
    let steered: Vec<_> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Steer(m) => Some(ids(m)),
            _ => None,
        })
        .collect();
    assert_eq!(steered, [vec![2, 3]], "{effects:?}");
}

#[test]
fn without_steering_queued_messages_are_coalesced_into_the_next_turn() {
    let runtime = Runtime {
        steering: Steering::None,
        ..PERSISTENT
    };
    let (_, effects) = run(
        runtime,
        &[
            (0, Event::Opened),
            (1, Event::Spawned),
            (2, message(1, false)),
            (3, message(2, true)),
            (4, message(3, true)),
            (5, Event::TurnEnded),
        ],
    );
    assert!(
        matches!(effects.last(), Some(Effect::StartTurn(m)) if ids(m) == [2, 3]),
        "{effects:?}"
    );
}

#[test]
fn an_idle_runtime_sleeps_and_the_next_message_wakes_it_resumed() {
    let (state, effects) = run(
        PERSISTENT,
        &[
            (0, Event::Opened),
            (1, Event::Spawned),
            (2, message(1, false)),
            (3, Event::TurnEnded),
            (60_003, Event::Tick),
            (60_010, Event::Exited),
            (70_000, message(2, false)),
        ],
    );
    assert!(effects.contains(&Effect::Terminate));
    assert!(
        !effects.iter().any(|e| matches!(e, Effect::Error(_))),
        "sleeping is no error: {effects:?}"
    );
    assert_eq!(effects.last(), Some(&Effect::Spawn { resume: true }));
    assert!(
        !state.busy(),
        "a waking session is idle until its turn starts"
    );
}

#[test]
fn a_stalled_turn_is_interrupted_then_its_process_stopped() {
    let (_, effects) = run(
        PERSISTENT,
        &[
            (0, Event::Opened),
            (1, Event::Spawned),
            (2, message(1, false)),
            (20_000, Event::Progress(Boundary::default())),
            (49_999, Event::Tick),
            (50_000, Event::Tick),
            (54_000, Event::Tick),
            (55_000, Event::Tick),
        ],
    );
    let kinds: Vec<&str> = effects
        .iter()
        .map(|e| match e {
            Effect::Spawn { .. } => "spawn",
            Effect::StartTurn(_) => "start",
            Effect::Error(_) => "error",
            Effect::Interrupt => "interrupt",
            Effect::Terminate => "terminate",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        ["spawn", "start", "error", "interrupt", "error", "terminate"]
    );
}

#[test]
fn crashes_restart_with_growing_backoff_then_give_up() {
    let mut events = vec![(0, Event::Opened), (1, Event::Spawned), (2, Event::Exited)];
    let (state, effects) = run(PERSISTENT, &events);
    assert_eq!(state.spawn_not_before, 1_002);
    assert!(matches!(effects.last(), Some(Effect::Error(_))));
    // A message before the backoff waits for it; a tick after it spawns.
    events.extend([(500, message(1, false)), (1_002, Event::Tick)]);
    let (_, effects) = run(PERSISTENT, &events);
    assert_eq!(effects.last(), Some(&Effect::Spawn { resume: false }));
    // Three more failed starts: the runtime is given up and the message refused.
    events.extend([
        (1_003, Event::SpawnFailed("x".into())),
        (3_003, Event::Tick),
        (3_004, Event::SpawnFailed("x".into())),
        (7_004, Event::Tick),
        (7_005, Event::SpawnFailed("x".into())),
    ]);
    let (state, effects) = run(PERSISTENT, &events);
    assert!(state.failed);
    assert_eq!(
        effects.last(),
        Some(&Effect::Refuse {
            id: 1,
            why: Refusal::RuntimeFailed
        })
    );
}

#[test]
fn a_per_turn_runtime_spawns_for_each_turn_and_resumes_after_the_first() {
    let runtime = Runtime {
        lifecycle: Lifecycle::PerTurn,
        steering: Steering::None,
        defer_spawn: true,
        terminate_on_end: false,
    };
    let (_, effects) = run(
        runtime,
        &[
            (0, Event::Opened),
            (1, message(1, false)),
            (2, Event::Spawned),
            (3, Event::TurnEnded),
            (4, message(2, false)),
            (5, Event::Exited),
            (6, Event::Spawned),
        ],
    );
    let spawns: Vec<_> = effects
        .iter()
        .filter(|e| matches!(e, Effect::Spawn { .. }))
        .collect();
    assert_eq!(
        spawns,
        [
            &Effect::Spawn { resume: false },
            &Effect::Spawn { resume: true }
        ]
    );
    assert!(
        !effects.iter().any(|e| matches!(e, Effect::Error(_))),
        "a per-turn exit is no crash: {effects:?}"
    );
    assert!(matches!(effects.last(), Some(Effect::StartTurn(m)) if ids(m) == [2]));
}

#[test]
fn close_refuses_what_waits_and_stops_the_process() {
    let runtime = Runtime {
        steering: Steering::None,
        ..PERSISTENT
    };
    let (state, effects) = run(
        runtime,
        &[
            (0, Event::Opened),
            (1, Event::Spawned),
            (2, message(1, false)),
            (3, message(2, true)),
            (4, Event::Close),
            (5, message(3, true)),
        ],
    );
    assert!(effects.contains(&Effect::Refuse {
        id: 2,
        why: Refusal::Closed
    }));
    assert!(effects.contains(&Effect::Interrupt));
    assert!(effects.contains(&Effect::Terminate));
    assert_eq!(
        effects.last(),
        Some(&Effect::Refuse {
            id: 3,
            why: Refusal::Closed
        })
    );
    assert!(state.closed);
}

/// A small deterministic generator (xorshift), so a failing sequence is found again by its
/// seed.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The processes and turns as the outside world sees them, answering the effects the way a
/// real runtime would, at random moments.
#[derive(Default)]
struct World {
    spawn_pending: bool,
    alive: bool,
    stopping: bool,
    turn_running: bool,
    turn_ending: bool,
}

impl World {
    fn apply(&mut self, effect: &Effect, seed: u64) {
        match effect {
            Effect::Spawn { .. } => {
                assert!(
                    !self.alive && !self.spawn_pending,
                    "seed {seed}: a second process was asked for"
                );
                self.spawn_pending = true;
            }
            Effect::StartTurn(_) => {
                assert!(
                    self.alive && !self.stopping,
                    "seed {seed}: a turn with no process"
                );
                assert!(!self.turn_running, "seed {seed}: two turns at once");
                self.turn_running = true;
            }
            Effect::Steer(_) => {
                assert!(self.turn_running, "seed {seed}: steered with no turn");
            }
            Effect::Terminate => self.stopping = true,
            Effect::Interrupt => {
                if self.turn_running {
                    self.turn_ending = true;
                }
            }
            Effect::Refuse { .. } | Effect::Error(_) => {}
        }
    }

    /// An event that can happen now.
    fn event(&mut self, random: &mut Random, next_id: &mut u64, per_turn: bool) -> Event {
        loop {
            match random.below(10) {
                0..=2 => {
                    *next_id += 1;
                    return message(*next_id, random.below(2) == 0);
                }
                3 if self.spawn_pending => {
                    self.spawn_pending = false;
                    if random.below(5) == 0 {
                        return Event::SpawnFailed("refused".into());
                    }
                    self.alive = true;
                    return Event::Spawned;
                }
                4 if self.turn_running => {
                    return Event::Progress(Boundary {
                        block_open: random.below(2) == 0,
                        tool_outstanding: random.below(3) == 0,
                        busy: random.below(5) == 0,
                    });
                }
                5 if self.turn_running && (random.below(3) == 0 || self.turn_ending) => {
                    self.turn_running = false;
                    self.turn_ending = false;
                    if per_turn {
                        self.stopping = true;
                    }
                    return Event::TurnEnded;
                }
                6 if self.alive && (self.stopping || random.below(8) == 0) => {
                    self.alive = false;
                    self.stopping = false;
                    self.turn_running = false;
                    self.turn_ending = false;
                    return Event::Exited;
                }
                7 | 8 => return Event::Tick,
                9 if random.below(30) == 0 => return Event::Close,
                _ => {}
            }
        }
    }
}

#[test]
fn over_random_sequences_one_process_and_every_message_answered_exactly_once_in_order() {
    let runtimes = [
        PERSISTENT,
        Runtime {
            steering: Steering::Direct,
            ..PERSISTENT
        },
        Runtime {
            steering: Steering::None,
            defer_spawn: true,
            terminate_on_end: true,
            ..PERSISTENT
        },
        Runtime {
            lifecycle: Lifecycle::PerTurn,
            steering: Steering::None,
            defer_spawn: true,
            terminate_on_end: false,
        },
    ];
    for seed in 1..=2_000u64 {
        let runtime = runtimes[(seed % 4) as usize];
        let per_turn = runtime.lifecycle == Lifecycle::PerTurn;
        let mut random = Random(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut world = World::default();
        let mut state = State::new(runtime, TIMING);
        let mut now = 0;
        let mut next_id = 0;
        let mut answered: HashMap<u64, usize> = HashMap::new();
        let mut delivered = Vec::new();
        let mut feed = |state: State, event: Event, now: u64, world: &mut World| {
            let busy_before = state.busy() && !state.closed && !state.failed;
            let asked = match &event {
                Event::Message(m) => Some((m.id, m.queue)),
                _ => None,
            };
            let (next, effects) = reduce(state, event, now);
            for effect in &effects {
                world.apply(effect, seed);
                match effect {
                    Effect::StartTurn(m) | Effect::Steer(m) => {
                        for message in m {
                            *answered.entry(message.id).or_default() += 1;
                            delivered.push(message.id);
                        }
                    }
                    Effect::Refuse { id, .. } => *answered.entry(*id).or_default() += 1,
                    _ => {}
                }
            }
            if let Some((id, false)) = asked
                && busy_before
            {
                assert!(
                    effects.contains(&Effect::Refuse {
                        id,
                        why: Refusal::TurnInProgress
                    }),
                    "seed {seed}: message {id} mid-turn was not refused: {effects:?}"
                );
            }
            next
        };
        state = feed(state, Event::Opened, now, &mut world);
        for _ in 0..200 {
            now += random.below(4_000);
            let event = world.event(&mut random, &mut next_id, per_turn);
            state = feed(state, event, now, &mut world);
        }
        // The session closes; the world winds down whatever is left.
        state = feed(state, Event::Close, now, &mut world);
        if world.spawn_pending {
            world.spawn_pending = false;
            world.alive = true;
            state = feed(state, Event::Spawned, now, &mut world);
        }
        if world.turn_running {
            world.turn_running = false;
            state = feed(state, Event::TurnEnded, now, &mut world);
        }
        if world.alive {
            world.alive = false;
            state = feed(state, Event::Exited, now, &mut world);
        }
        assert!(state.queue.is_empty(), "seed {seed}: messages left waiting");
        for id in 1..=next_id {
            assert_eq!(
                answered.get(&id),
                Some(&1),
                "seed {seed}: message {id} answered {:?} times",
                answered.get(&id)
            );
        }
        assert!(
            delivered.windows(2).all(|w| w[0] < w[1]),
            "seed {seed}: delivered out of order: {delivered:?}"
        );
    }
}

/// The executor ticks only at `next_deadline`: a tick any earlier must change nothing, or a
/// stall, a sleep or a backed-off spawn would be missed between ticks.
#[test]
fn a_tick_before_the_next_deadline_changes_nothing() {
    for seed in 1..=500u64 {
        let runtime = if seed % 2 == 0 {
            PERSISTENT
        } else {
            Runtime {
                lifecycle: Lifecycle::PerTurn,
                steering: Steering::None,
                defer_spawn: true,
                terminate_on_end: false,
            }
        };
        let per_turn = runtime.lifecycle == Lifecycle::PerTurn;
        let mut random = Random(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut world = World::default();
        let (mut state, effects) = reduce(State::new(runtime, TIMING), Event::Opened, 0);
        effects.iter().for_each(|e| world.apply(e, seed));
        let mut now = 0;
        let mut next_id = 0;
        for _ in 0..200 {
            let early = match state.next_deadline() {
                Some(deadline) if deadline > now => Some(deadline - 1),
                Some(_) => None,
                None => Some(now + 1 + random.below(100_000)),
            };
            if let Some(at) = early {
                let (ticked, effects) = reduce(state.clone(), Event::Tick, at);
                assert!(
                    effects.is_empty(),
                    "seed {seed}: {effects:?} at {at} from {state:?}"
                );
                assert_eq!(
                    State { now: 0, ..ticked },
                    State {
                        now: 0,
                        ..state.clone()
                    },
                    "seed {seed}"
                );
            }
            now += random.below(4_000);
            let event = world.event(&mut random, &mut next_id, per_turn);
            let (next, effects) = reduce(state, event, now);
            effects.iter().for_each(|e| world.apply(e, seed));
            state = next;
        }
    }
}
