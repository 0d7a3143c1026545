//! Load benchmark for `corral serve`: prints a table of figures, asserts nothing.
//!
//!     cargo bench --bench server_load            # N = 1, 8, 32 concurrent sessions
//!     cargo bench --bench server_load -- 4 16    # other session counts
//!     cargo bench --bench server_load -- --scale-out 100
//!
//! `--scale-out N`: N sessions streaming at once through the single-process `serve`, then the
//! same N spread over 3 `corral node`s behind `serve --nats` (a real `nats-server -js` on
//! 127.0.0.1, from scripts/install-nats-server); the figure is the overhead ratio of the
//! second to the first (frames per second, p99 frame latency). RSS there is `serve`'s alone
//! (the nodes are other processes).
//!
//! For each N: a fresh `corral serve` (release binary) and a fresh fake model server on
//! 127.0.0.1, both in this run. N sessions are opened over REST and attached over WebSocket;
//! then all N receive a user message at once, and each turn streams 200 text chunks from the
//! fake model, 2 ms apart.
//!
//! Latency (model chunk → client frame): each session's reply carries its own chunk text
//! (`r{i} `), so the client knows which scripted reply — and therefore which recorded chat
//! request of the fake server — it is reading. The fake server records when each chat request
//! arrived (its first body chunk is written at once) and when the last chunk of the body was
//! taken by hyper. Text chunk k of a reply is body chunk k (chunk 0 is the role delta), so its
//! emission time is interpolated as `arrived + k × (finished − arrived) / (chunks − 1)`: the
//! nominal 2 ms spacing corrected for the timer's actual spacing (and for any back-pressure from
//! corral). A token frame is matched to the last chunk it contains (frames may coalesce
//! chunks); its latency is its arrival time at the client minus that chunk's emission time.
//! Client and fake server share this process, hence one clock.
//! "First frame" is the median, over sessions, of the first token frame's latency; any
//! start-of-turn stall shows there (and in p99, as the first chunks arrive together).
//! Negative values mean the interpolated emission time is later than the real one: the fit
//! is linear, the timer's jitter accumulates along the 200 chunks.
//!
//! RSS: VmRSS of the `corral serve` process from /proc/<pid>/status, once after start-up
//! (0 sessions) and once after the N sessions finished their turn and sat idle (WebSockets
//! still attached) for a second; per idle session = (RSS with N − RSS with 0) / N.
//!
//! Memory, after the table (one fresh server each):
//! - idle sessions: RSS with 0 and with 50 sessions opened over REST, no turn run;
//! - growth per turn: RSS after 5 and after 45 short turns on one session, over 40;
//! - a slow reader: a WebSocket client whose socket receives into 4 KB and reads nothing
//!   while a 64 MB answer streams; RSS before, the peak while it streams (sampled), once the
//!   stream has been worked off, and the close code the client finds when it reads again.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "../tests/it/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use support::cluster::{CLUSTER_CONFIG, Nats, Node};
use support::reply::Action;
use support::server::Server;
use support::{FakeModel, Format, Harness, Reply};
use tokio_tungstenite::tungstenite::Message;

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

const CORRAL: &str = env!("CARGO_BIN_EXE_corral");
const TOKENS: usize = 200;
const CHUNK_DELAY: Duration = Duration::from_millis(2);
const WAIT: Duration = Duration::from_secs(120);
const IDLE_SETTLE: Duration = Duration::from_secs(1);

/// Where the sessions run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Topology {
    /// In `serve` itself.
    Single,
    /// On this many `corral node`s behind `serve --nats`.
    Nodes(usize),
}

impl std::fmt::Display for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Topology::Single => f.write_str("serve"),
            Topology::Nodes(k) => write!(f, "serve --nats, {k} nodes"),
        }
    }
}

/// What a section runs on: the server, and for a cluster its NATS and nodes (kept alive).
struct Deployment {
    server: Server,
    _nats: Option<Nats>,
    _nodes: Vec<Node>,
}

impl Deployment {
    async fn start(h: &Harness, topology: Topology, sessions: usize) -> Deployment {
        let Topology::Nodes(k) = topology else {
            return Deployment {
                server: Server::start(h, &[]).await,
                _nats: None,
                _nodes: Vec::new(),
            };
        };
        let nats = Nats::start().await;
        let capacity = sessions.div_ceil(k) + 1;
        let mut nodes = Vec::new();
        for i in 0..k {
            let capacity = capacity.to_string();
            nodes.push(Node::start(&nats, &format!("node{i}"), &["--capacity", &capacity]).await);
        }
        h.write_config(CLUSTER_CONFIG);
        let server = Server::start_with(h, &[], &["--nats", &nats.url]).await;
        let token = server.token("bench", true);
        for _ in 0..300 {
            let (_, body) = server.get("/api/v1/nodes", &token).await;
            let alive = body["nodes"]
                .as_array()
                .map_or(0, |n| n.iter().filter(|n| n["alive"] == true).count());
            if alive == k {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Deployment {
            server,
            _nats: Some(nats),
            _nodes: nodes,
        }
    }
}

struct Row {
    topology: Topology,
    sessions: usize,
    token_frames: usize,
    chunks: usize,
    wall: Duration,
    interval_ms: f64,
    p50: f64,
    p99: f64,
    /// Median over sessions of the first token frame's latency.
    first: f64,
    rss_zero_kib: u64,
    rss_idle_kib: u64,
}

/// What one session's client saw during its turn.
struct Seen {
    /// Token frames: their text and arrival time.
    tokens: Vec<(String, Instant)>,
    done: Instant,
    ws: Ws,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn vm_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The chunk text of the `i`-th scripted reply.
fn unit(i: usize) -> String {
    format!("r{i} ")
}

fn reply(i: usize) -> Reply {
    Reply::new()
        .many_text_chunks(TOKENS, &unit(i))
        .finish("stop")
        .chunk_delay(CHUNK_DELAY)
}

/// Opens a session for `sub` over REST and attaches a WebSocket; returns it once the
/// server's first `agent_state` (idle) arrived.
async fn open(server: &Server, h: &Harness, model: &FakeModel, sub: &str) -> Ws {
    let body = json!({
        "cwd": h.work(),
        "model": "llamacpp:fake-model",
        "base_url": model.openai_base(),
        "permission": "bypass",
    });
    // bypass is for admin tokens (a user token is not the host's owner).
    let token = server.token(sub, true);
    let (status, json) = server.post("/api/v1/sessions", &token, &body).await;
    assert_eq!(status, 201, "{json}");
    let id = json["id"].as_str().unwrap();
    let url = format!("{}/ws/v1/sessions/{id}?token={token}", server.ws_base);
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let hello = next(&mut ws).await;
    assert_eq!(hello["type"], "agent_state", "{hello}");
    ws
}

/// The next JSON text message (control frames skipped).
async fn next(ws: &mut Ws) -> Value {
    loop {
        let frame = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("no message in time")
            .expect("stream ended")
            .unwrap();
        match frame {
            Message::Text(text) => return serde_json::from_str(text.as_str()).unwrap(),
            Message::Close(frame) => panic!("closed: {frame:?}"),
            _ => {}
        }
    }
}

/// Sends one user message and reads the turn up to `done`, timing every token frame.
async fn turn(mut ws: Ws) -> Seen {
    let message = json!({"type": "user_message",
        "payload": {"text": "stream, please", "mode": "normal"}});
    ws.send(Message::text(message.to_string())).await.unwrap();
    let mut tokens = Vec::with_capacity(TOKENS);
    loop {
        let m = next(&mut ws).await;
        let now = Instant::now();
        match m["type"].as_str() {
            Some("token") => tokens.push((m["payload"]["text"].as_str().unwrap().to_owned(), now)),
            Some("done") => {
                return Seen {
                    tokens,
                    done: now,
                    ws,
                };
            }
            Some("error") => panic!("turn failed: {m}"),
            _ => {}
        }
    }
}

/// Body chunks of one scripted reply (the emission model needs their count).
fn body_chunks() -> usize {
    reply(0)
        .render(Format::OpenAi, "fake-model")
        .iter()
        .filter(|a| matches!(a, Action::Send(_)))
        .count()
}

async fn section(n: usize, topology: Topology) -> Row {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let deployment = Deployment::start(&h, topology, n).await;
    let server = &deployment.server;
    let pid = server.child.id().unwrap();
    tokio::time::sleep(IDLE_SETTLE).await;
    let rss_zero_kib = vm_rss_kib(pid);

    let mut sockets = Vec::with_capacity(n);
    for i in 0..n {
        sockets.push(open(server, &h, &model, &format!("load{i}")).await);
    }
    let base = model.chat_times().len();
    for i in 0..n {
        model.push(reply(base + i));
    }

    let start = Instant::now();
    let tasks: Vec<_> = sockets
        .into_iter()
        .map(|ws| tokio::spawn(turn(ws)))
        .collect();
    let mut seen = Vec::with_capacity(n);
    for task in tasks {
        seen.push(task.await.unwrap());
    }
    let wall = seen.iter().map(|s| s.done).max().unwrap() - start;

    let times = model.chat_times();
    assert_eq!(times.len(), base + n, "one chat request per session");
    let chunks = body_chunks();
    let mut latencies = Vec::new();
    let mut firsts = Vec::new();
    let mut intervals = Vec::new();
    let mut total_chunks = 0;
    for s in &seen {
        let first = &s.tokens.first().expect("no token frame").0;
        let index: usize = first[1..first.find(' ').unwrap()].parse().unwrap();
        let unit = unit(index);
        let (arrived, finished) = times[index];
        let finished = finished.expect("reply body not finished");
        let step = (finished - arrived).as_secs_f64() / (chunks - 1) as f64;
        intervals.push(step * 1e3);
        let mut k = 0;
        for (text, at) in &s.tokens {
            k += text.matches(unit.as_str()).count();
            let emitted = arrived + Duration::from_secs_f64(k as f64 * step);
            let latency = if *at >= emitted {
                (*at - emitted).as_secs_f64()
            } else {
                -(emitted - *at).as_secs_f64()
            };
            if k == text.matches(unit.as_str()).count() {
                firsts.push(latency * 1e3);
            }
            latencies.push(latency * 1e3);
        }
        assert_eq!(k, TOKENS, "session {index} saw {k} of {TOKENS} chunks");
        total_chunks += k;
    }
    latencies.sort_by(f64::total_cmp);
    firsts.sort_by(f64::total_cmp);

    tokio::time::sleep(IDLE_SETTLE).await;
    let rss_idle_kib = vm_rss_kib(pid);
    let token_frames = seen.iter().map(|s| s.tokens.len()).sum();
    for s in seen {
        let mut ws = s.ws;
        let _ = ws.close(None).await;
    }
    deployment.server.stop().await;
    Row {
        topology,
        sessions: n,
        token_frames,
        chunks: total_chunks,
        wall,
        interval_ms: intervals.iter().sum::<f64>() / intervals.len() as f64,
        p50: percentile(&latencies, 50.0),
        p99: percentile(&latencies, 99.0),
        first: percentile(&firsts, 50.0),
        rss_zero_kib,
        rss_idle_kib,
    }
}

/// Opens a session over REST as an admin; its id and the token.
async fn open_id(server: &Server, h: &Harness, model: &FakeModel) -> (String, String) {
    let body = json!({"cwd": h.work(), "model": "llamacpp:fake-model",
        "base_url": model.openai_base()});
    let token = server.token("mem", true);
    let (status, json) = server.post("/api/v1/sessions", &token, &body).await;
    assert_eq!(status, 201, "{json}");
    (json["id"].as_str().unwrap().to_string(), token)
}

/// Runs one turn over a fresh WebSocket and waits for its `done`.
async fn ws_turn(server: &Server, id: &str, token: &str) {
    let url = format!("{}/ws/v1/sessions/{id}?token={token}", server.ws_base);
    let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let mut ws = ws;
    next(&mut ws).await;
    turn(ws).await;
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

async fn idle_and_per_turn() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let pid = server.child.id().unwrap();
    tokio::time::sleep(IDLE_SETTLE).await;
    let zero = vm_rss_kib(pid);
    let mut ids = Vec::new();
    for _ in 0..50 {
        ids.push(open_id(&server, &h, &model).await);
    }
    tokio::time::sleep(IDLE_SETTLE).await;
    let fifty = vm_rss_kib(pid);
    println!(
        "idle sessions: {:.1} MiB with 0, {:.1} MiB with 50 ({:.0} KiB each)",
        mib(zero),
        mib(fifty),
        (fifty as f64 - zero as f64) / 50.0
    );
    let (id, token) = &ids[0];
    let mut at = Vec::new();
    for t in 0..45 {
        model.push(reply(t).chunk_delay(Duration::ZERO));
        ws_turn(&server, id, token).await;
        if t == 4 || t == 44 {
            tokio::time::sleep(IDLE_SETTLE).await;
            at.push(vm_rss_kib(pid));
        }
    }
    println!(
        "growth per turn ({TOKENS} chunks each): {:.1} KiB ({:.1} → {:.1} MiB over 40 turns)",
        (at[1] as f64 - at[0] as f64) / 40.0,
        mib(at[0]),
        mib(at[1])
    );
    server.stop().await;
}

async fn slow_reader() {
    const CHUNKS: usize = 64_000;
    let h = Harness::new();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[("CORRAL_WS_SEND_SECS", "120")]).await;
    let pid = server.child.id().unwrap();
    let (id, token) = open_id(&server, &h, &model).await;
    let url = format!("{}/ws/v1/sessions/{id}?token={token}", server.ws_base);
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let addr = server.base.trim_start_matches("http://").parse().unwrap();
    let tcp = socket.connect(addr).await.unwrap();
    let plain = tokio_tungstenite::MaybeTlsStream::Plain(tcp);
    let (mut ws, _) = tokio_tungstenite::client_async(url.as_str(), plain)
        .await
        .unwrap();
    next(&mut ws).await;
    let before = vm_rss_kib(pid);
    let text = format!("{}\n", "x".repeat(999));
    model.push(Reply::new().many_text_chunks(CHUNKS, &text).finish("stop"));
    let message = json!({"type": "user_message", "payload": {"text": "go", "mode": "normal"}});
    ws.send(Message::text(message.to_string())).await.unwrap();
    let started = Instant::now();
    let mut peak = before;
    // The turn is over when the fake server has written the whole answer and a new connection
    // is then told `idle` (the slow one fell behind long before: it is not replaced).
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = vm_rss_kib(pid);
        peak = peak.max(now);
        let written = model.chat_times().last().is_some_and(|t| t.1.is_some());
        if written {
            let (mut probe, _) = tokio_tungstenite::connect_async(url.as_str())
                .await
                .unwrap();
            if next(&mut probe).await["payload"]["state"] == "idle" {
                break;
            }
        }
        assert!(started.elapsed() < WAIT, "the slow-reader turn never ended");
    }
    // Worked off: RSS stops falling (one reading per second, at most 30).
    let mut settled = vm_rss_kib(pid);
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = vm_rss_kib(pid);
        if now >= settled {
            break;
        }
        settled = now;
    }
    let code = loop {
        match tokio::time::timeout(WAIT, ws.next()).await {
            Ok(Some(Ok(Message::Close(frame)))) => break frame.map(|f| u16::from(f.code)),
            Ok(Some(Ok(_))) => {}
            _ => break None,
        }
    };
    println!(
        "slow reader ({} MB answer, 4 KB receive buffer, reads nothing): RSS {:.1} MiB before, \
         {:.1} peak, {:.1} settled; closed with {}",
        CHUNKS / 1000,
        mib(before),
        mib(peak),
        mib(settled),
        code.map_or("no close frame".to_string(), |c| c.to_string())
    );
    server.stop().await;
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench_main());
}

async fn bench_main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let scale_out = args.iter().any(|a| a == "--scale-out");
    let mut counts: Vec<usize> = args
        .iter()
        .filter_map(|a| a.parse().ok())
        .filter(|n| *n > 0)
        .collect();
    if counts.is_empty() {
        counts = if scale_out { vec![100] } else { vec![1, 8, 32] };
    }
    let mut rows = Vec::new();
    for n in counts {
        rows.push(section(n, Topology::Single).await);
        if scale_out {
            rows.push(section(n, Topology::Nodes(3)).await);
        }
    }
    println!("corral serve load — {}", support::host::machine());
    println!("binary: {CORRAL}");
    println!(
        "each session: {TOKENS} text chunks, {} ms apart (nominal); latency = client frame \
         arrival − interpolated emission of the frame's last chunk at the fake server",
        CHUNK_DELAY.as_millis()
    );
    println!();
    println!(
        "| where | sessions | token frames (chunks) | wall (s) | frames/s | chunk interval (ms) | \
         latency p50 (ms) | latency p99 (ms) | first frame (ms) | RSS 0 sessions (MiB) | RSS N idle (MiB) | \
         RSS per idle session (KiB) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let overheads: Vec<String> = rows
        .chunks(2)
        .filter(|pair| scale_out && pair.len() == 2)
        .map(|pair| {
            let rate = |r: &Row| r.token_frames as f64 / r.wall.as_secs_f64();
            format!(
                "{} sessions over {}: frames/s ×{:.2}, p99 latency ×{:.2} ({:.2} ms → {:.2} ms)",
                pair[1].sessions,
                pair[1].topology,
                rate(&pair[1]) / rate(&pair[0]),
                pair[1].p99 / pair[0].p99,
                pair[0].p99,
                pair[1].p99
            )
        })
        .collect();
    for r in rows {
        let per_session = (r.rss_idle_kib as f64 - r.rss_zero_kib as f64) / r.sessions as f64;
        println!(
            "| {} | {} | {} ({}) | {:.2} | {:.0} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} | {:.1} | {:.0} |",
            r.topology,
            r.sessions,
            r.token_frames,
            r.chunks,
            r.wall.as_secs_f64(),
            r.token_frames as f64 / r.wall.as_secs_f64(),
            r.interval_ms,
            r.p50,
            r.p99,
            r.first,
            r.rss_zero_kib as f64 / 1024.0,
            r.rss_idle_kib as f64 / 1024.0,
            per_session,
        );
    }
    println!();
    if scale_out {
        println!("overhead of the scale-out (second row against the first):");
        for line in overheads {
            println!("  {line}");
        }
        return;
    }
    idle_and_per_turn().await;
    slow_reader().await;
}
