//! The session lifecycle reducer (`corral::lifecycle::reduce`): events per second over a
//! 10,000-event trace of many turns (messages queued and steered, progress, ticks, a sleep
//! and a wake), the state moved through every event as the manager's executor does.

use std::time::Instant;

use corral::lifecycle::{
    Boundary, Effect, Event, Lifecycle, Message, Runtime, State, Steering, Timing, reduce,
};

use super::Row;

const EVENTS: usize = 10_000;
const ROUNDS: usize = 20;

/// A plausible trace: each turn is a message, spawn or start, progress, a steered message,
/// more progress and the end; every tenth turn the runtime sleeps and is woken.
fn trace() -> Vec<(u64, Event)> {
    let mut events = vec![(0, Event::Opened), (1, Event::Spawned)];
    let mut now = 2;
    let mut id = 0;
    let mut turn = 0;
    while events.len() < EVENTS {
        turn += 1;
        id += 1;
        let message = |id: u64, queue: bool| {
            Event::Message(Message {
                id,
                text: format!("message {id}"),
                queue,
            })
        };
        events.push((now, message(id, false)));
        for n in 0..8 {
            now += 50;
            events.push((
                now,
                Event::Progress(Boundary {
                    block_open: n % 3 == 1,
                    ..Boundary::default()
                }),
            ));
            if n == 4 {
                id += 1;
                events.push((now, message(id, true)));
            }
        }
        events.push((now, Event::Tick));
        events.push((now, Event::TurnEnded));
        if turn % 10 == 0 {
            now += 120_000;
            events.push((now, Event::Tick));
            events.push((now, Event::Exited));
            id += 1;
            events.push((now, message(id, false)));
            events.push((now, Event::Spawned));
            events.push((now, Event::TurnEnded));
        }
    }
    events.truncate(EVENTS);
    events
}

pub fn reducer(rows: &mut Vec<Row>) {
    let runtime = Runtime {
        lifecycle: Lifecycle::Persistent,
        steering: Steering::Gated,
        defer_spawn: false,
        terminate_on_end: false,
    };
    let timing = Timing {
        idle_sleep: Some(60_000),
        stall: Some(300_000),
        grace: 10_000,
        max_restarts: 5,
        backoff: 1_000,
    };
    let events = trace();
    let mut rates = Vec::new();
    let mut effects = 0;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let mut state = State::new(runtime, timing);
        effects = 0;
        for (at, event) in &events {
            let (next, out) = reduce(state, event.clone(), *at);
            state = next;
            effects += out.len();
            if out.iter().any(|e| matches!(e, Effect::Refuse { .. })) {
                panic!("the trace was refused a message: {out:?}");
            }
        }
        rates.push(events.len() as f64 / started.elapsed().as_secs_f64());
    }
    rates.sort_by(f64::total_cmp);
    rows.push(Row {
        name: "lifecycle reducer: events per second (10,000-event trace)",
        figure: format!(
            "median {:.2} M events/s, slowest {:.2} M ({ROUNDS} rounds, {effects} effects each)",
            super::percentile(&rates, 50.0) / 1e6,
            rates[0] / 1e6
        ),
        goal: "—",
    });
}
