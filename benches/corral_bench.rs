//! corral's benchmark suite: prints a table of figures, asserts nothing.
//!
//!     cargo bench --bench corral_bench            # everything
//!     cargo bench --bench corral_bench -- stream  # one section:
//!                                                 # stream|startup|loop|memory|search|resume|hostile|local|mcp|tui|reducer|wake
//!
//! Each figure is measured in this run against the fake model server on 127.0.0.1 (the same
//! one the tests use), with the release-built `corral` binary; the `local` section runs the
//! README's main job with the real llama-server and SmolLM2 that `scripts/setup` installs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "../tests/it/support/mod.rs"]
mod support;

#[path = "corral_bench/hostile.rs"]
mod hostile;
#[path = "corral_bench/local.rs"]
mod local;
#[path = "corral_bench/mcp.rs"]
mod mcp;
#[path = "corral_bench/reducer.rs"]
mod reducer;
#[path = "corral_bench/tui.rs"]
mod tui;
#[path = "corral_bench/wake.rs"]
mod wake;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use support::{FakeModel, Harness, Reply};
use tokio::io::{AsyncBufReadExt, BufReader};

const CORRAL: &str = env!("CARGO_BIN_EXE_corral");
const STREAM_TOKENS: usize = 20_000;
const LOOP_STEPS: usize = 100;
const MEMORY_STEPS: usize = 50;

struct Row {
    name: &'static str,
    figure: String,
    goal: &'static str,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    percentile(&values, 50.0)
}

/// CPU time (user + system) of all waited-for children so far.
fn children_cpu() -> Duration {
    let usage =
        nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN).unwrap();
    let tv = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(t.tv_sec() as u64) + Duration::from_micros(t.tv_usec() as u64)
    };
    tv(usage.user_time()) + tv(usage.system_time())
}

fn corral_cmd(h: &Harness, server: &FakeModel, extra: &[&str]) -> tokio::process::Command {
    corral_cmd_with(h, "llamacpp:bench", &server.openai_base(), extra)
}

/// `corral run --json -p bypass -m MODEL --base-url BASE EXTRA…` in `h`'s environment.
fn corral_cmd_with(
    h: &Harness,
    model: &str,
    base: &str,
    extra: &[&str],
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(CORRAL);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", h.home_dir())
        .env("XDG_CACHE_HOME", h.cache_dir())
        .env("XDG_CONFIG_HOME", h.config_dir())
        .env("XDG_DATA_HOME", h.data_dir())
        .current_dir(h.work())
        .args([
            "run",
            "--json",
            "-p",
            "bypass",
            "-m",
            model,
            "--base-url",
            base,
        ])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    cmd
}

/// Runs corral to the end; returns wall time, CPU time, and when the first assistant_text
/// line appeared (since spawn).
async fn run_corral(
    h: &Harness,
    server: &FakeModel,
    extra: &[&str],
) -> (Duration, Duration, Option<Duration>) {
    let cpu_before = children_cpu();
    let started = Instant::now();
    let mut child = corral_cmd(h, server, extra).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut first_text = None;
    while let Some(line) = lines.next_line().await.unwrap() {
        if first_text.is_none() && line.contains("\"kind\":\"assistant_text\"") {
            first_text = Some(started.elapsed());
        }
    }
    let status = child.wait().await.unwrap();
    assert!(status.success(), "corral failed: {status}");
    (started.elapsed(), children_cpu() - cpu_before, first_text)
}

/// The minimal client, measured like corral: its own process (this binary re-executed with
/// `CORRAL_BENCH_MINIMAL=<base>`), timed from spawn to exit.
async fn minimal_client(server: &FakeModel) -> Duration {
    let started = Instant::now();
    let status = tokio::process::Command::new(std::env::current_exe().unwrap())
        .env("CORRAL_BENCH_MINIMAL", server.openai_base())
        .stdout(Stdio::null())
        .status()
        .await
        .unwrap();
    assert!(status.success(), "the minimal client failed");
    started.elapsed()
}

/// The minimal client itself: the same request, the same SSE stream, parsed and counted, on
/// a single-threaded runtime like `corral run`.
async fn minimal_client_main(base: String) {
    let body = serde_json::json!({"model": "bench", "stream": true, "messages": [{"role": "user", "content": "x"}]});
    let response = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .unwrap()
        .post(format!("{base}/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let mut events = eventsource_stream::Eventsource::eventsource(response.bytes_stream());
    let mut chunks = 0usize;
    while let Some(event) = events.next().await {
        let event = event.unwrap();
        if event.data == "[DONE]" {
            break;
        }
        let value: serde_json::Value = serde_json::from_str(&event.data).unwrap();
        if value.pointer("/choices/0/delta/content").is_some() {
            chunks += 1;
        }
    }
    assert!(chunks >= STREAM_TOKENS);
}

async fn stream_overhead(rows: &mut Vec<Row>) {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let runs = 5;
    let (mut ours, mut theirs, mut cpu) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        server.push(
            Reply::new()
                .many_text_chunks(STREAM_TOKENS, "tok ")
                .usage(10, STREAM_TOKENS as u64),
        );
        let (wall, used, _) = run_corral(&h, &server, &["--tool-choice", "none", "go"]).await;
        ours.push(wall.as_secs_f64());
        cpu.push(used.as_secs_f64() * 1000.0 / (STREAM_TOKENS as f64 / 1000.0));
        server.push(
            Reply::new()
                .many_text_chunks(STREAM_TOKENS, "tok ")
                .usage(10, STREAM_TOKENS as u64),
        );
        theirs.push(minimal_client(&server).await.as_secs_f64());
    }
    let (ours, theirs) = (median(ours), median(theirs));
    rows.push(Row {
        name: "stream overhead: corral run --json / minimal client process (20k tokens)",
        figure: format!(
            "{:.3} ({:.0} ms / {:.0} ms, median of {runs})",
            ours / theirs,
            ours * 1e3,
            theirs * 1e3
        ),
        goal: "≤ 1.02",
    });
    rows.push(Row {
        name: "stream CPU time per 1k tokens (corral process)",
        figure: format!("{:.2} ms", median(cpu)),
        goal: "—",
    });
}

async fn startup(rows: &mut Vec<Row>) {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let runs = 20;
    let (mut to_request, mut to_text) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        server.push(Reply::new().text("hi"));
        let before = server.chat_requests().len();
        let started = Instant::now();
        let mut child = corral_cmd(&h, &server, &["go"]).spawn().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut first_text = None;
        let mut first_request = None;
        while let Some(line) = lines.next_line().await.unwrap() {
            if first_request.is_none() && server.chat_requests().len() > before {
                first_request = server.first_byte_after(started);
            }
            if first_text.is_none() && line.contains("\"kind\":\"assistant_text\"") {
                first_text = Some(started.elapsed());
            }
        }
        child.wait().await.unwrap();
        let first_request = first_request
            .or_else(|| server.first_byte_after(started))
            .unwrap();
        to_request.push(first_request.as_secs_f64() * 1e3);
        to_text.push(first_text.unwrap().as_secs_f64() * 1e3);
    }
    to_request.sort_by(f64::total_cmp);
    to_text.sort_by(f64::total_cmp);
    rows.push(Row {
        name: "start-up: spawn → first byte of the model request",
        figure: format!(
            "p50 {:.1} ms, p99 {:.1} ms ({runs} runs)",
            percentile(&to_request, 50.0),
            percentile(&to_request, 99.0)
        ),
        goal: "≤ 20 ms",
    });
    rows.push(Row {
        name: "start-up: spawn → first assistant_text on stdout",
        figure: format!(
            "p50 {:.1} ms, p99 {:.1} ms",
            percentile(&to_text, 50.0),
            percentile(&to_text, 99.0)
        ),
        goal: "—",
    });
}

async fn tool_loop(rows: &mut Vec<Row>) {
    let h = Harness::new();
    for i in 0..20 {
        std::fs::write(
            h.work().join(format!("f{i}.txt")),
            format!("file {i}\n").repeat(20),
        )
        .unwrap();
    }
    let server = FakeModel::start().await;
    for step in 0..LOOP_STEPS {
        let reply = if step % 2 == 0 {
            Reply::new().tool_call(&format!("c{step}"), "list_directory", "{}")
        } else {
            Reply::new().tool_call(
                &format!("c{step}"),
                "read_file",
                &format!("{{\"path\":\"f{}.txt\"}}", step % 20),
            )
        };
        server.push(reply);
    }
    server.push(Reply::new().text("done"));
    let steps = (LOOP_STEPS + 1).to_string();
    run_corral(&h, &server, &["--max-steps", &steps, "go"]).await;
    // Per step: from the end of one reply to the next request's arrival — the runtime's own
    // work (parse, validate, gate, run the tool, events, log, build the next request).
    let mut gaps: Vec<f64> = server
        .turnarounds()
        .into_iter()
        .map(|d| d.as_secs_f64() * 1e3)
        .collect();
    gaps.sort_by(f64::total_cmp);
    rows.push(Row {
        name: "tool loop: per-step runtime overhead (list_directory/read_file)",
        figure: format!(
            "p50 {:.2} ms, p99 {:.2} ms ({} steps)",
            percentile(&gaps, 50.0),
            percentile(&gaps, 99.0),
            gaps.len()
        ),
        goal: "≤ 1 ms p50",
    });
}

fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Drains the child's stdout until it exits; its peak RSS (KiB) and exit status.
async fn peak_rss_kib(mut child: tokio::process::Child) -> (u64, std::process::ExitStatus) {
    let pid = child.id().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let drain =
        tokio::spawn(async move { tokio::io::copy(&mut stdout, &mut tokio::io::sink()).await });
    let mut peak = 0;
    let status = loop {
        if let Some(kib) = vm_hwm_kib(pid) {
            peak = peak.max(kib);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    drain.await.unwrap().unwrap();
    (peak, status)
}

async fn memory(rows: &mut Vec<Row>) {
    let h = Harness::new();
    std::fs::write(h.work().join("a.txt"), "a\n".repeat(1000)).unwrap();
    let server = FakeModel::start().await;
    for step in 0..MEMORY_STEPS {
        server.push(
            Reply::new()
                .text("working on it ")
                .tool_call(&format!("c{step}"), "read_file", "{\"path\":\"a.txt\"}")
                .usage(1000, 20),
        );
    }
    server.push(Reply::new().text("done"));
    let steps = (MEMORY_STEPS + 1).to_string();
    let child = corral_cmd(&h, &server, &["--max-steps", &steps, "go"])
        .spawn()
        .unwrap();
    let (peak, _) = peak_rss_kib(child).await;
    rows.push(Row {
        name: "memory: peak RSS of corral run, 50-step session",
        figure: format!("{:.1} MiB", peak as f64 / 1024.0),
        goal: "≤ 20 MiB",
    });
}

fn search_tree() -> Option<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
    std::fs::read_dir(home.join("registry/src"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
}

async fn search(rows: &mut Vec<Row>) {
    let Some(tree) = search_tree() else {
        rows.push(Row {
            name: "search_files vs rg",
            figure: "skipped: no cargo registry sources".into(),
            goal: "≤ 1.5",
        });
        return;
    };
    let needle = "LANDLOCK_CREATE_RULESET_VERSION";
    let registry = corral::ToolRegistry::builtin().unwrap();
    let tool = registry.get("search_files").unwrap().tool.clone();
    let root = tree.canonicalize().unwrap();
    let mut ours = Vec::new();
    let mut rg = Vec::new();
    let mut our_files = 0;
    let mut rg_files = 0;
    for run in 0..6 {
        let ctx = corral::ToolContext::new(root.clone(), "bench");
        let started = Instant::now();
        let out = tool
            .call(
                serde_json::json!({"query": needle, "caseSensitive": true}),
                &ctx,
            )
            .await
            .unwrap();
        let elapsed = started.elapsed().as_secs_f64();
        our_files = count_files(&out.text);
        let started = Instant::now();
        let output = std::process::Command::new("rg")
            .args(["-l", "-F", needle])
            .current_dir(&root)
            .output();
        let rg_elapsed = started.elapsed().as_secs_f64();
        let Ok(output) = output else {
            rows.push(Row {
                name: "search_files vs rg",
                figure: "skipped: rg is not installed (apt install ripgrep)".into(),
                goal: "≤ 1.5",
            });
            return;
        };
        rg_files = String::from_utf8_lossy(&output.stdout).lines().count();
        if run > 0 {
            // The first run warms the page cache for both.
            ours.push(elapsed);
            rg.push(rg_elapsed);
        }
    }
    let (ours, rg) = (median(ours), median(rg));
    rows.push(Row {
        name: "search_files / rg -l on the cargo registry sources",
        figure: format!(
            "{:.2} ({:.0} ms / {:.0} ms; {our_files} / {rg_files} files)",
            ours / rg,
            ours * 1e3,
            rg * 1e3
        ),
        goal: "≤ 1.5",
    });
}

/// Writes the event log and metadata of a finished session of `calls` tool calls (one
/// `read_file` per step, 50 steps a turn), as corral writes them; returns its id.
fn write_session_log(h: &Harness, server: &FakeModel, calls: usize) -> String {
    use corral::{
        ContentBlock, Envelope, Payload, ResultData, StopReason, TextData, Timestamp, ToolCallInfo,
        ToolCallStatus, ToolResultData, ToolResultRecord, ToolUpdate, ToolUseData, Usage,
        UserTextData,
    };
    use std::io::Write;
    let id = format!("bench{calls}");
    let dir = h.cache_dir().join("corral").join("agents");
    std::fs::create_dir_all(&dir).unwrap();
    corral::SessionMeta {
        id: id.clone(),
        model: "llamacpp:bench".into(),
        base_url: server.openai_base(),
        cwd: h.work(),
        created_at: Timestamp::now().to_string(),
        system: None,
        worktree: None,
        external_id: None,
        owner: None,
        permission: None,
        mcp_servers: None,
        effort: None,
        parent: None,
    }
    .save(&dir)
    .unwrap();
    let file = std::fs::File::create(corral::log_path(&dir, &id)).unwrap();
    let mut out = std::io::BufWriter::new(file);
    let (mut seq, mut turn) = (0u64, 0u32);
    let mut write = |turn: u32, payload: Payload| {
        seq += 1;
        let envelope = Envelope {
            seq,
            ts: Timestamp::now(),
            session: id.as_str().into(),
            turn,
            payload,
        };
        serde_json::to_writer(&mut out, &envelope).unwrap();
        out.write_all(b"\n").unwrap();
    };
    let text = |t: &str| ContentBlock::Text { text: t.into() };
    for call in 0..calls {
        if call % 50 == 0 {
            if call > 0 {
                write(
                    turn,
                    Payload::AssistantText(TextData {
                        delta: false,
                        content: text("done"),
                    }),
                );
                write(
                    turn,
                    Payload::Result(ResultData {
                        stop_reason: StopReason::EndTurn,
                        usage: Usage::default(),
                        error: None,
                    }),
                );
            }
            turn += 1;
            write(
                turn,
                Payload::UserText(UserTextData {
                    content: text("read the files"),
                }),
            );
        }
        let call_id = format!("call_{call:012}");
        let info = |raw_input: Option<serde_json::Value>| ToolCallInfo {
            tool_call_id: call_id.clone(),
            title: "Read file".into(),
            kind: "read".into(),
            status: ToolCallStatus::Pending,
            content: Vec::new(),
            locations: Vec::new(),
            raw_input,
        };
        write(
            turn,
            Payload::ToolUse(ToolUseData::new("read_file", info(None))),
        );
        let input = serde_json::json!({"path": format!("f{}.txt", call % 20)});
        write(
            turn,
            Payload::ToolUse(ToolUseData::new("read_file", info(Some(input)))),
        );
        write(
            turn,
            Payload::ToolResult(ToolResultData {
                update: ToolUpdate {
                    tool_call_id: call_id.clone(),
                    status: ToolCallStatus::Completed,
                    content: Vec::new(),
                },
                result: ToolResultRecord {
                    tool_call_id: call_id.clone(),
                    tool: "read_file".into(),
                    success: true,
                    output: Some(format!("file {}", call % 20)),
                    error: None,
                    duration_ms: 1,
                },
            }),
        );
    }
    write(
        turn,
        Payload::Result(ResultData {
            stop_reason: StopReason::EndTurn,
            usage: Usage::default(),
            error: None,
        }),
    );
    out.flush().unwrap();
    id
}

/// `corral run --resume` of logs with many tool calls: spawn → the resumed request reaches
/// the model server (reading the log, rebuilding the history, sending it).
async fn resume(rows: &mut Vec<Row>) {
    let mut figures = Vec::new();
    for calls in [4_000, 16_000, 32_000] {
        let h = Harness::new();
        let server = FakeModel::start().await;
        // Room for the whole history: no compaction before the first request.
        h.write_config("[providers.ollama]\nnum_ctx = 100000000\n");
        server.set_models(vec![support::ModelInfo::new(
            "bench",
            &["completion", "tools"],
            1 << 30,
        )]);
        let id = write_session_log(&h, &server, calls);
        server.push(Reply::new().text("ok"));
        let started = Instant::now();
        // Ollama's `/api/show` tells the fake's context length (no compaction first).
        let out = corral_cmd_with(
            &h,
            "ollama:bench",
            &server.base_url(),
            &["--resume", &id, "go on"],
        )
        .stderr(Stdio::piped())
        .output()
        .await
        .unwrap();
        assert!(
            out.status.success(),
            "corral --resume failed: {}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|l| !l.contains("\"tool_"))
                .map(|l| &l[..l.len().min(300)])
                .collect::<Vec<_>>()
                .join("\n")
        );
        let (arrived, _) = server.chat_times()[0];
        let sent = server.chat_requests()[0]["messages"]
            .as_array()
            .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
        assert_eq!(sent, calls, "every call is in the resumed history");
        figures.push(format!(
            "{}k calls {:.0} ms",
            calls / 1000,
            arrived.duration_since(started).as_secs_f64() * 1e3
        ));
    }
    rows.push(Row {
        name: "resume: spawn → resumed request at the model (event log of N tool calls)",
        figure: figures.join(", "),
        goal: "32k calls < 1 s",
    });
}

fn count_files(output: &str) -> usize {
    let mut files: Vec<&str> = output
        .lines()
        .filter_map(|l| l.split(':').next())
        .filter(|f| !f.starts_with('['))
        .collect();
    files.dedup();
    files.len()
}

fn main() {
    if let Ok(base) = std::env::var("CORRAL_BENCH_MINIMAL") {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(minimal_client_main(base));
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench_main());
}

async fn bench_main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wants = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()));
    let mut rows = Vec::new();
    if wants("stream") {
        stream_overhead(&mut rows).await;
    }
    if wants("startup") {
        startup(&mut rows).await;
    }
    if wants("loop") {
        tool_loop(&mut rows).await;
    }
    if wants("memory") {
        memory(&mut rows).await;
    }
    if wants("search") {
        search(&mut rows).await;
    }
    if wants("resume") {
        resume(&mut rows).await;
    }
    if wants("hostile") {
        hostile::hostile(&mut rows).await;
    }
    if wants("local") {
        local::local(&mut rows).await;
    }
    if wants("mcp") {
        mcp::mcp(&mut rows).await;
    }
    if wants("tui") {
        tui::tui(&mut rows);
    }
    if wants("reducer") {
        reducer::reducer(&mut rows);
    }
    if wants("wake") {
        wake::wake(&mut rows).await;
        wake::per_turn_wake(&mut rows).await;
    }
    println!("corral benchmarks — {}", support::host::machine());
    println!("binary: {CORRAL}");
    println!();
    println!("| measure | figure | goal |");
    println!("|---|---|---|");
    for row in rows {
        println!("| {} | {} | {} |", row.name, row.figure, row.goal);
    }
    let _ = Path::new(CORRAL);
}
