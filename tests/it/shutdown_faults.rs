//! Faults at the end of a runtime: every way `serve`, `run`, `mcp` and `acp` exit (SIGTERM,
//! SIGINT, SIGHUP, stdin closed) waits until each tool process group it started is gone — a
//! tool that ignores SIGTERM included — and its `pids.json` entry goes only after that; the
//! next start reaps what a crashed runtime left (members of a group whose leader is gone
//! too, recycled pids never) and removes the crashed sessions' temp dirs, never a live one's.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;
use crate::support::procs::{members, pgid_of, start_time_of, tracked};
use crate::support::server::Server;
use crate::support::{FakeModel, Harness, Reply, Running};

/// A tool call whose processes (a shell and twenty sleeps) ignore SIGTERM; `word` is in the
/// shell's command line, and `<word>.ready` appears in the work dir once SIGTERM is ignored.
/// Many members make the group's end take a moment to be complete.
pub(crate) fn stubborn(word: &str) -> Reply {
    let command = format!(
        "trap '' TERM; : {word}; for i in $(seq 20); do sleep 1000 & done; touch {word}.ready; \
         wait; :"
    );
    let args = json!({ "command": command }).to_string();
    Reply::new().tool_call("c1", "shell", &args)
}

pub(crate) fn pids_json(h: &Harness) -> PathBuf {
    h.cache_dir().join("corral/agents/pids.json")
}

pub(crate) fn listed(path: &Path, pgid: u32) -> bool {
    tracked(path).iter().any(|e| e["pgid"] == pgid)
}

/// The process group of the [`stubborn`] tool holding `word`, once it ignores SIGTERM and is
/// listed in pids.json.
async fn tool_group(h: &Harness, word: &str) -> u32 {
    let ready = h.work().join(format!("{word}.ready"));
    wait_until("the tool to ignore SIGTERM", || ready.exists()).await;
    let pgid = holding(word).first().and_then(|pid| pgid_of(*pid)).unwrap();
    wait_until("the tool to be listed in pids.json", || {
        listed(&pids_json(h), pgid)
    })
    .await;
    pgid
}

/// Watches, until [`Watch::finish`], that pids.json lists the group whenever it has a live
/// member: pids.json is read first, so a group seen alive after its entry went is a fault.
struct Watch {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Option<String>>,
}

impl Watch {
    fn start(h: &Harness, pgid: u32) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let (path, stopped) = (pids_json(h), stop.clone());
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::SeqCst) {
                let was_listed = listed(&path, pgid);
                let alive = members(pgid);
                if !was_listed && !alive.is_empty() {
                    return Some(format!(
                        "pids.json dropped group {pgid} while {alive:?} still ran"
                    ));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            None
        });
        Watch { stop, thread }
    }

    /// Fails the test unless the group is gone now, its entry with it, and the entry never
    /// went first.
    fn finish(self, h: &Harness, pgid: u32, owner: u32, what: &str) {
        let left = members(pgid);
        for pid in &left {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(*pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        self.stop.store(true, Ordering::SeqCst);
        let early = self.thread.join().unwrap();
        assert!(
            left.is_empty(),
            "{what}: {left:?} of group {pgid} outlived corral"
        );
        assert_eq!(early, None, "{what}");
        let mine: Vec<Value> = tracked(&pids_json(h))
            .into_iter()
            .filter(|e| e["owner_pid"] == owner)
            .collect();
        assert!(mine.is_empty(), "{what}: pids.json still lists {mine:?}");
    }
}

/// `corral serve` with a session (its id returned, with an admin token) whose turn runs the
/// [`stubborn`] tool holding `word`, once that tool's group (also returned) is listed.
pub(crate) async fn serve_mid_tool(
    h: &Harness,
    model: &FakeModel,
    word: &str,
) -> (Server, String, String, u32) {
    model.push(stubborn(word));
    let server = Server::start(h, &[]).await;
    let token = server.token("alice", true);
    let body = json!({"cwd": h.work(), "model": "llamacpp:fake-model",
                      "base_url": model.openai_base(), "permission": "bypass"});
    let (status, session) = server.post("/api/v1/sessions", &token, &body).await;
    assert_eq!(status, 201, "{session}");
    let id = session["id"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/sessions/{id}/messages");
    let (status, sent) = server.post(&path, &token, &json!({"text": "go"})).await;
    assert!((200..300).contains(&status), "{sent}");
    let pgid = tool_group(h, word).await;
    (server, token, id, pgid)
}

/// `corral serve` with a session whose tool ignores SIGTERM, stopped by `signal`.
async fn serve_stopped_by(signal: &str) {
    let h = Harness::new();
    let word = marker(&format!("serve-{signal}"));
    let model = FakeModel::start().await;
    let (mut server, _, _, pgid) = serve_mid_tool(&h, &model, &word).await;
    let owner = server.child.id().unwrap();
    let watch = Watch::start(&h, pgid);
    let kill = std::process::Command::new("kill")
        .args([format!("-{signal}"), owner.to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = tokio::time::timeout(Duration::from_secs(30), server.child.wait())
        .await
        .expect("serve did not exit within 30 s")
        .unwrap();
    watch.finish(&h, pgid, owner, &format!("serve on SIG{signal}"));
    assert!(
        status.code().is_some(),
        "serve died of a signal: {status:?}"
    );
}

#[tokio::test]
async fn serve_on_sigterm_waits_for_a_tool_that_ignores_it() {
    serve_stopped_by("TERM").await;
}

#[tokio::test]
async fn serve_on_sigint_waits_for_a_tool_that_ignores_sigterm() {
    serve_stopped_by("INT").await;
}

#[tokio::test]
async fn serve_on_sighup_waits_for_a_tool_that_ignores_sigterm() {
    serve_stopped_by("HUP").await;
}

/// `corral run` mid-call, stopped by `signal`.
async fn run_stopped_by(signal: &str) {
    let h = Harness::new();
    let word = marker(&format!("run-{signal}"));
    let model = FakeModel::start().await;
    model.push(stubborn(&word));
    let running = openai_run(&h, &model, "go")
        .args(["-p", "bypass"])
        .spawn()
        .await;
    let pgid = tool_group(&h, &word).await;
    let owner = running.pid();
    let watch = Watch::start(&h, pgid);
    running.signal(signal).await;
    let _ = running.wait().await;
    watch.finish(&h, pgid, owner, &format!("run on SIG{signal}"));
}

#[tokio::test]
async fn run_on_sigterm_waits_for_a_tool_that_ignores_it() {
    run_stopped_by("TERM").await;
}

#[tokio::test]
async fn run_on_sighup_waits_for_a_tool_that_ignores_sigterm() {
    run_stopped_by("HUP").await;
}

/// Closes stdin of a protocol server (`mcp`, `acp`) whose session runs `word`'s tool.
async fn stdin_closed(h: &Harness, mut running: Running, word: &str, what: &str) {
    let pgid = tool_group(h, word).await;
    let owner = running.pid();
    let watch = Watch::start(h, pgid);
    running.close_stdin();
    let _ = running.wait().await;
    watch.finish(h, pgid, owner, what);
}

#[tokio::test]
async fn mcp_on_stdin_closed_waits_for_a_tool_that_ignores_sigterm() {
    let h = Harness::new();
    let word = marker("mcp");
    let model = FakeModel::start().await;
    model.push(stubborn(&word));
    let (running, _, _) = mcp_turn_started(&h, &model).await;
    stdin_closed(&h, running, &word, "mcp with stdin closed").await;
}

#[tokio::test]
async fn acp_on_stdin_closed_waits_for_a_tool_that_ignores_sigterm() {
    let h = Harness::new();
    let word = marker("acp");
    let model = FakeModel::start().await;
    model.push(stubborn(&word));
    let mut running = h
        .corral()
        .args(["acp", "-m", "llamacpp:fake-model", "-p", "bypass"])
        .args(["--base-url", &model.openai_base()])
        .live_stdin()
        .spawn()
        .await;
    let session = acp_open(&mut running, &h).await;
    let prompt = json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                        "params": {"sessionId": session,
                                   "prompt": [{"type": "text", "text": "go"}]}});
    running.send_line(&prompt.to_string()).await;
    stdin_closed(&h, running, &word, "acp with stdin closed").await;
}

/// A process group whose leader exited while a member holding `word` runs on. Returns the
/// leader's pid (the pgid) and start time.
fn orphaned_group(word: &str) -> (u32, u64) {
    use std::os::unix::process::CommandExt;
    let mut leader = std::process::Command::new("bash")
        .args(["-c", &format!("(exec -a {word} sleep 1000) & read _")])
        .stdin(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let start = start_time_of(leader.id()).unwrap();
    while holding(word).is_empty() {
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(leader.stdin.take());
    leader.wait().unwrap();
    (leader.id(), start)
}

fn kill_all(words: &[&str]) {
    for pid in words.iter().flat_map(|w| holding(w)) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// A dead runtime's pids.json: an orphaned group (leader gone, a member on), a live group
/// whose leader pid was recorded with another start time (recycled), and an orphaned group
/// whose member is older than the recorded leader (not that group). Returns their words.
fn plant_leftovers(h: &Harness, tag: &str) -> [String; 3] {
    let words = [
        marker(&format!("{tag}-orphan")),
        marker(&format!("{tag}-recycled")),
        marker(&format!("{tag}-older")),
    ];
    let mut owner = std::process::Command::new("true").spawn().unwrap();
    owner.wait().unwrap();
    let entry = |pid: u32, start: u64| {
        json!({"pid": pid, "pgid": pid, "start_time": start, "owner_pid": owner.id(),
               "owner_start_time": 1, "kind": "tool"})
    };
    let (orphan, orphan_start) = orphaned_group(&words[0]);
    let recycled = {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("bash")
            .args(["-c", &format!("exec -a {} sleep 1000", words[1])])
            .process_group(0)
            .spawn()
            .unwrap();
        wait_for(|| !holding(&words[1]).is_empty());
        let pid = child.id();
        // Reaped once the test kills it.
        std::thread::spawn(move || child.wait());
        pid
    };
    let recycled_start = start_time_of(recycled).unwrap();
    let (older, older_start) = orphaned_group(&words[2]);
    let planted = json!([
        entry(orphan, orphan_start),
        entry(recycled, recycled_start - 1),
        entry(older, older_start + 1_000_000),
    ]);
    let path = pids_json(h);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, planted.to_string()).unwrap();
    words
}

fn wait_for(cond: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "timed out");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// After the reap: the orphan's member is dead, the other two live, the dead runtime's
/// entries are forgotten.
fn assert_reaped(h: &Harness, words: &[String; 3], what: &str) {
    let left: Vec<Vec<u32>> = words.iter().map(|w| holding(w)).collect();
    let listed = tracked(&pids_json(h));
    kill_all(&words.each_ref().map(String::as_str));
    assert!(
        left[0].is_empty(),
        "{what}: the orphaned member {:?} lives",
        left[0]
    );
    assert!(
        !left[1].is_empty(),
        "{what}: a recycled pid's group was killed"
    );
    assert!(
        !left[2].is_empty(),
        "{what}: an older process in the group was killed"
    );
    assert!(
        listed.is_empty(),
        "{what}: pids.json still lists {listed:?}"
    );
}

#[tokio::test]
async fn serve_reaps_at_start_the_members_of_a_group_whose_leader_is_gone() {
    let h = Harness::new();
    let words = plant_leftovers(&h, "serve");
    // No session opened: the reap happens before the server listens.
    let server = Server::start(&h, &[]).await;
    assert_reaped(&h, &words, "serve");
    assert!(server.stop().await.success());
}

#[tokio::test]
async fn run_reaps_the_members_of_a_group_whose_leader_is_gone() {
    let h = Harness::new();
    let words = plant_leftovers(&h, "run");
    let model = FakeModel::start().await;
    model.push(Reply::new().text("hello"));
    let out = openai_run(&h, &model, "hi").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_reaped(&h, &words, "run");
}

/// The session temp dirs under `tmp` (the `TMPDIR` the runs get), by session id.
fn session_tmp_of(tmp: &Path, id: &str) -> Option<PathBuf> {
    std::fs::read_dir(tmp)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("corral-") && n.contains(&format!("-{id}-")))
        })
}

/// `corral run` with `TMPDIR=tmp` whose tool holds `word` until killed; returned once it runs,
/// with its session id.
async fn run_mid_tool(h: &Harness, model: &FakeModel, tmp: &Path, word: &str) -> (Running, String) {
    let args = json!({ "command": format!(": {word}; sleep 1000; :") }).to_string();
    model.push(Reply::new().tool_call("c1", "shell", &args));
    let running = openai_run(h, model, "go")
        .args(["-p", "bypass"])
        .env("TMPDIR", tmp)
        .spawn()
        .await;
    wait_until("the tool to start", || !holding(word).is_empty()).await;
    let first = running.wait_for_event(0, |e| e["agent"].is_string()).await;
    let id = first["agent"].as_str().unwrap().to_owned();
    (running, id)
}

#[tokio::test]
async fn the_next_start_removes_a_crashed_sessions_temp_dir_and_keeps_a_live_one() {
    let h = Harness::new();
    let tmp = h.home_dir().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let model = FakeModel::start().await;
    let (crashed_word, live_word) = (marker("tmp-crashed"), marker("tmp-live"));
    let (crashed, crashed_id) = run_mid_tool(&h, &model, &tmp, &crashed_word).await;
    let crashed_tmp = session_tmp_of(&tmp, &crashed_id).expect("the session's temp dir");
    std::fs::write(crashed_tmp.join("scratch"), "left behind").unwrap();
    // Killed only once its tool is recorded: a tool seen running may not be in pids.json yet,
    // and what was never recorded cannot be reaped.
    let owner = crashed.pid();
    wait_until("the crashed run's tool to be listed in pids.json", || {
        tracked(&pids_json(&h))
            .iter()
            .any(|e| e["kind"] == "tool" && e["owner_pid"] == owner)
    })
    .await;
    crashed.signal("KILL").await;
    let _ = crashed.wait().await;
    assert!(crashed_tmp.exists(), "a SIGKILLed run removes nothing");
    let (live, live_id) = run_mid_tool(&h, &model, &tmp, &live_word).await;
    let live_tmp = session_tmp_of(&tmp, &live_id).expect("the live session's temp dir");

    model.push(Reply::new().text("hello"));
    let out = openai_run(&h, &model, "hi").env("TMPDIR", &tmp).run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let (crashed_left, live_kept) = (crashed_tmp.exists(), live_tmp.exists());
    live.signal("TERM").await;
    let _ = live.wait().await;
    assert!(
        !crashed_left,
        "the crashed session's temp dir is still there"
    );
    assert!(live_kept, "the live session's temp dir was removed");
    assert!(
        !live_tmp.exists(),
        "a session removes its own temp dir at exit"
    );
    assert!(
        holding(&crashed_word).is_empty(),
        "the crashed run's tool was reaped"
    );
}

/// An agent CLI a SIGKILLed `corral run` left behind (its own process group, stdin closed,
/// still running: here one whose ACP handshake never answers) is reaped by the next start.
#[tokio::test]
async fn the_next_start_reaps_an_agent_cli_a_killed_runtime_left_running() {
    let h = Harness::new();
    let word = marker("agent-left");
    let agent = h.home_dir().join("agent.sh");
    std::fs::write(&agent, format!("#!/bin/bash\nexec -a {word} sleep 1000\n")).unwrap();
    std::fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let running = h
        .corral()
        .args(["run", "--json", "-m"])
        .arg(format!("acp:cmd={}", agent.display()))
        .arg("hello")
        .spawn()
        .await;
    let owner = running.pid();
    wait_until("the agent to be listed in pids.json", || {
        tracked(&pids_json(&h))
            .iter()
            .any(|e| e["kind"] == "acp" && e["owner_pid"] == owner)
            && !holding(&word).is_empty()
    })
    .await;
    running.signal("KILL").await;
    let _ = running.wait().await;
    let left_by_the_crash = holding(&word);
    assert!(
        !left_by_the_crash.is_empty(),
        "the agent died with corral: nothing to reap"
    );

    let model = FakeModel::start().await;
    model.push(Reply::new().text("hello"));
    let out = openai_run(&h, &model, "hi").run().await;
    let left = holding(&word);
    kill_all(&[word.as_str()]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        left,
        Vec::<u32>::new(),
        "the next start left the agent running"
    );
    let listed = tracked(&pids_json(&h));
    assert!(listed.is_empty(), "pids.json still lists {listed:?}");
}

/// A GGUF file whose chat template is ChatML without tools, so corral writes its own tool
/// template to a temp file for the server.
fn chatml_gguf(path: &Path) {
    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend((s.len() as u64).to_le_bytes());
        out.extend(s.as_bytes());
    }
    let mut bytes = b"GGUF".to_vec();
    bytes.extend(3u32.to_le_bytes());
    bytes.extend(0u64.to_le_bytes());
    bytes.extend(1u64.to_le_bytes());
    string(&mut bytes, "tokenizer.chat_template");
    bytes.extend(8u32.to_le_bytes());
    string(&mut bytes, "<|im_start|>{{ message }}");
    std::fs::write(path, bytes).unwrap();
}

/// A llama-server stand-in: `python3 FILE MARKER --port N …` ignores SIGTERM and SIGHUP,
/// starts a child holding `MARKER-child`, answers `/health`, and replies to the first chat
/// request with a shell call holding `MARKER-tool` that runs until killed.
const FAKE_LLAMA_SERVER: &str = r#"
import http.server, json, signal, subprocess, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
marker = sys.argv[1]
port = int(sys.argv[sys.argv.index("--port") + 1])
subprocess.Popen(["bash", "-c", f"exec -a {marker}-child sleep 1000"])
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args): pass
    def reply(self, kind, body):
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        self.reply("application/json", json.dumps({"status": "ok", "data": [{"id": "tiny"}]}).encode())
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        args = json.dumps({"command": f": {marker}-tool; sleep 1000; :"})
        call = {"index": 0, "id": "c1", "type": "function",
                "function": {"name": "shell", "arguments": args}}
        chunks = [{"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]},
                  {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
        body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
        self.reply("text/event-stream", body + b"data: [DONE]\n\n")
http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
"#;

/// `corral run -m gguf:…` stopped by `signal` while its tool runs: the model server (which
/// ignores SIGTERM and SIGHUP), its child and the tool are gone; the chat template corral
/// wrote for the server was removed as soon as the server was up.
async fn gguf_run_mid_tool_stopped_by(signal: &str) {
    let h = Harness::new();
    let word = marker(&format!("llama-up-{signal}"));
    let tmp = h.home_dir().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let server = h.home_dir().join("fake_llama_server.py");
    std::fs::write(&server, FAKE_LLAMA_SERVER).unwrap();
    h.write_config(&format!(
        "[local]\nserver_command = \"python3 {} {word}\"\n",
        server.display()
    ));
    let model = h.home_dir().join("tiny.gguf");
    chatml_gguf(&model);
    let running = h
        .corral()
        .args(["run", "-p", "bypass", "-m"])
        .arg(format!("gguf:{}", model.display()))
        .arg("go")
        .env("TMPDIR", &tmp)
        .spawn()
        .await;
    let tool = format!("{word}-tool");
    wait_until("the tool to run", || !holding(&tool).is_empty()).await;
    assert!(
        holding(&word).len() >= 3,
        "the server, its child and the tool"
    );
    assert_eq!(
        templates_in(&tmp),
        Vec::<PathBuf>::new(),
        "the template is removed once the server is up"
    );
    running.signal(signal).await;
    let out = running.wait().await;
    let left = holding(&word);
    kill_all(&[word.as_str()]);
    assert_eq!(
        left,
        Vec::<u32>::new(),
        "SIG{signal} left processes: {out:?}"
    );
    assert!(out.code.is_some(), "corral died of the signal: {out:?}");
}

#[tokio::test]
async fn run_on_sigterm_mid_tool_stops_the_local_model_server_too() {
    gguf_run_mid_tool_stopped_by("TERM").await;
}

#[tokio::test]
async fn run_on_sighup_mid_tool_stops_the_local_model_server_too() {
    gguf_run_mid_tool_stopped_by("HUP").await;
}

/// The chat templates corral wrote for a llama-server into `tmp`.
fn templates_in(tmp: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains("corral-chatml-tools-"))
        .collect()
}

/// `corral run -m gguf:…` stopped by `signal` while its model server starts: the server
/// (which ignores SIGTERM and SIGHUP) and its child are gone, and so is the chat template
/// corral wrote for it.
async fn gguf_run_stopped_by(signal: &str) {
    let h = Harness::new();
    let word = marker(&format!("llama-{signal}"));
    let tmp = h.home_dir().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let server = h.home_dir().join("fake-llama-server");
    std::fs::write(
        &server,
        "#!/bin/bash\ntrap '' TERM HUP\n(exec -a \"$1-child\" sleep 1000) &\nexec -a \"$1\" sleep 1000\n",
    )
    .unwrap();
    std::fs::set_permissions(&server, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    h.write_config(&format!(
        "[local]\nserver_command = \"{} {word}\"\nstartup_timeout_secs = 600\n",
        server.display()
    ));
    let model = h.home_dir().join("tiny.gguf");
    chatml_gguf(&model);
    let templates = || templates_in(&tmp);
    let running = h
        .corral()
        .args(["run", "-m"])
        .arg(format!("gguf:{}", model.display()))
        .arg("hi")
        .env("TMPDIR", &tmp)
        .spawn()
        .await;
    wait_until("the model server and its child to run", || {
        holding(&word).len() >= 2
    })
    .await;
    assert_eq!(templates().len(), 1, "the template corral wrote");
    running.signal(signal).await;
    let out = running.wait().await;
    let left = holding(&word);
    kill_all(&[word.as_str()]);
    assert_eq!(
        left,
        Vec::<u32>::new(),
        "SIG{signal} left the model server running: {out:?}"
    );
    assert_eq!(
        templates(),
        Vec::<PathBuf>::new(),
        "SIG{signal} left the template"
    );
    assert!(out.code.is_some(), "corral died of the signal: {out:?}");
}

#[tokio::test]
async fn run_on_sigterm_stops_a_starting_local_model_server_and_removes_its_files() {
    gguf_run_stopped_by("TERM").await;
}

#[tokio::test]
async fn run_on_sighup_stops_a_starting_local_model_server_and_removes_its_files() {
    gguf_run_stopped_by("HUP").await;
}
