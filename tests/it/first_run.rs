//! A newcomer's first run: no `-m`, no config, maybe no server — the model `scripts/setup`
//! installed is used, with a note; a server that is not there fails at once with a hint; a
//! model the server lacks is named with the ones it has; bare model names and the list of
//! backends; desktop tools withheld where there is no desktop. `corral init` and `corral doctor`
//! are in `first_run/`.
//!
//! The "installed model" here is a real GGUF file (a header with a chat template, no weights)
//! and a stand-in `llama-server` (python3, at the place scripts/setup installs it) that
//! answers `/health` and forwards the OpenAI routes to the fake model server.

use std::path::PathBuf;

use serde_json::Value;

use crate::common::*;
use crate::support::{FakeModel, Harness, ModelInfo, Reply};

mod doctor_cli;
mod init_cli;
mod servers;

/// `CORRAL_TEST_PROBE_PORTS` naming four loopback ports nothing listens on, so the usual
/// servers are "not running" whatever this machine runs.
pub fn closed_probe_ports() -> String {
    let ports: Vec<u16> = (0..4)
        .map(|_| {
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        })
        .collect();
    format!(
        "ollama={},llamacpp={},lmstudio={},vllm={}",
        ports[0], ports[1], ports[2], ports[3]
    )
}

/// The probe ports with a fake server on Ollama's.
pub fn ollama_probe_port(server: &FakeModel) -> String {
    let port = server.base_url().rsplit(':').next().unwrap().to_string();
    let closed = closed_probe_ports();
    let rest = closed.split_once(',').unwrap().1;
    format!("ollama={port},{rest}")
}

/// Where scripts/setup puts the small model, under the harness's data dir.
pub fn small_model_path(h: &Harness) -> PathBuf {
    h.data_dir()
        .join("corral/models/SmolLM2-135M-Instruct.Q4_1.gguf")
}

/// A GGUF header whose only metadata is a chat template that renders tools.
fn gguf_bytes() -> Vec<u8> {
    let template = "{% for m in messages %}{{ m.content }}{% endfor %}{{ tools }}{{ tool_calls }}";
    let key = "tokenizer.chat_template";
    let mut bytes = b"GGUF".to_vec();
    bytes.extend(3u32.to_le_bytes());
    bytes.extend(0u64.to_le_bytes());
    bytes.extend(1u64.to_le_bytes());
    bytes.extend((key.len() as u64).to_le_bytes());
    bytes.extend(key.as_bytes());
    bytes.extend(8u32.to_le_bytes());
    bytes.extend((template.len() as u64).to_le_bytes());
    bytes.extend(template.as_bytes());
    bytes
}

/// Installs the small model and a stand-in llama-server that forwards to `upstream`, where
/// scripts/setup installs them. Returns the file the stand-in writes its arguments to.
pub fn install_small_model(h: &Harness, upstream: &FakeModel) -> PathBuf {
    let model = small_model_path(h);
    std::fs::create_dir_all(model.parent().unwrap()).unwrap();
    std::fs::write(&model, gguf_bytes()).unwrap();
    let bin = h.data_dir().join("corral/llama-server/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let args_log = h.home_dir().join("llama-server.args");
    let script = format!(
        r#"#!/usr/bin/python3
import http.server, sys, urllib.error, urllib.request
UPSTREAM = "{upstream}"
args = sys.argv[1:]
open("{log}", "a").write(" ".join(args) + "\n")
port = int(args[args.index("--port") + 1])
class Handler(http.server.BaseHTTPRequestHandler):
    def forward(self, body):
        request = urllib.request.Request(UPSTREAM + self.path, data=body, method=self.command,
                                         headers={{"Content-Type": "application/json"}})
        try:
            response = urllib.request.urlopen(request)
        except urllib.error.HTTPError as e:
            response = e
        self.send_response(response.status)
        self.send_header("Content-Type", response.headers.get("Content-Type", "application/json"))
        self.end_headers()
        while True:
            chunk = response.read1(65536)
            if not chunk:
                break
            self.wfile.write(chunk)
            self.wfile.flush()
    def do_GET(self):
        if self.path == "/health":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{{"status":"ok"}}')
        else:
            self.forward(None)
    def do_POST(self):
        self.forward(self.rfile.read(int(self.headers["Content-Length"])))
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
"#,
        upstream = upstream.base_url(),
        log = args_log.display()
    );
    let server = bin.join("llama-server");
    std::fs::write(&server, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&server, std::fs::Permissions::from_mode(0o755)).unwrap();
    args_log
}

fn tool_choices(server: &FakeModel) -> Vec<Value> {
    server
        .chat_requests()
        .iter()
        .map(|r| r["tool_choice"].clone())
        .collect()
}

#[tokio::test]
async fn with_nothing_running_the_model_setup_installed_is_used_with_a_note() {
    let h = Harness::new();
    let upstream = FakeModel::start().await;
    let args_log = install_small_model(&h, &upstream);
    std::fs::write(h.work().join("notes.txt"), "hello\n").unwrap();
    upstream.push(Reply::new().tool_call("c1", "list_directory", r#"{"path":"."}"#));
    upstream.push(Reply::new().text("There is notes.txt."));
    let out = h
        .corral()
        .args(["run", "--json", "list the files here"])
        .env("CORRAL_TEST_PROBE_PORTS", closed_probe_ports())
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let model = small_model_path(&h);
    let note = out
        .stderr
        .lines()
        .find(|l| l.contains("no model named"))
        .unwrap_or_else(|| panic!("no note on stderr: {}", out.stderr));
    assert!(
        note.contains(&format!("using gguf:{}", model.display()))
            && note.contains("no model server is running")
            && note.contains("scripts/setup installed")
            && note.contains("cannot write or fix code"),
        "{note}"
    );
    // corral started the installed server for the installed file.
    let started = std::fs::read_to_string(&args_log).unwrap();
    assert!(started.contains(&model.display().to_string()), "{started}");
    // A small local model: the turn's first step requires a tool, the next leaves it free.
    assert_eq!(tool_choices(&upstream), ["required", "auto"]);
    let results = tool_results(&out);
    assert_eq!(results[0]["success"], true, "{results:?}");
    assert_eq!(deltas(&out, "assistant_text"), "There is notes.txt.");
}

#[tokio::test]
async fn a_chosen_tool_choice_wins_over_the_small_models_default() {
    let h = Harness::new();
    let upstream = FakeModel::start().await;
    install_small_model(&h, &upstream);
    let closed = closed_probe_ports();
    upstream.push(Reply::new().text("flag"));
    let out = h
        .corral()
        .args(["run", "--json", "--tool-choice", "auto", "x"])
        .env("CORRAL_TEST_PROBE_PORTS", &closed)
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    h.write_config("tool_choice = \"none\"\n");
    upstream.push(Reply::new().text("config"));
    let out = h
        .corral()
        .args(["run", "--json", "x"])
        .env("CORRAL_TEST_PROBE_PORTS", &closed)
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(tool_choices(&upstream), ["auto", "none"]);
}

#[tokio::test]
async fn a_running_servers_tool_model_comes_before_the_small_model() {
    let h = Harness::new();
    let upstream = FakeModel::start().await;
    install_small_model(&h, &upstream);
    let ollama = FakeModel::start().await;
    ollama.set_models(vec![ModelInfo::new(
        "qwen3:8b",
        &["completion", "tools"],
        40960,
    )]);
    ollama.push(Reply::new().text("hi"));
    let out = h
        .corral()
        .args(["run", "--json", "x"])
        .env("CORRAL_TEST_PROBE_PORTS", ollama_probe_port(&ollama))
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(ollama.chat_requests()[0]["model"], "qwen3:8b");
    assert!(upstream.chat_requests().is_empty());
    assert!(
        out.stderr.contains(&format!(
            "using ollama:qwen3:8b, the first tool-capable model of the ollama server at {}",
            ollama.base_url()
        )),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn with_nothing_running_and_nothing_installed_the_error_says_how_to_get_a_model() {
    let h = Harness::new();
    let out = h
        .corral()
        .args(["run", "x"])
        .env("CORRAL_TEST_PROBE_PORTS", closed_probe_ports())
        .run()
        .await;
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr
            .contains("no model server answered at http://127.0.0.1:")
            && out.stderr.contains(&format!(
                "the small model scripts/setup installs is not at {}",
                small_model_path(&h).display()
            ))
            && out.stderr.contains("Run scripts/setup"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn desktop_tools_are_not_offered_without_a_display_or_a_bus() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    // A model that calls a withheld tool anyway is refused before the gate.
    server.push(Reply::new().tool_call("c1", "clipboard_read", "{}"));
    server.push(Reply::new().text("ok"));
    let out = openai_run(&h, &server, "what did I copy?").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let offered = offered_tools(&server, 0);
    for desktop in [
        "screenshot",
        "clipboard_read",
        "clipboard_write",
        "computer",
        "windows",
        "notify",
    ] {
        assert!(!offered.iter().any(|t| t == desktop), "{desktop} offered");
    }
    assert!(offered.iter().any(|t| t == "read_file"), "{offered:?}");
    // One line at start, not an event: the session's events are what happened in it.
    let notes: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("desktop tools not offered: "))
        .collect();
    assert_eq!(notes.len(), 1, "{}", out.stderr);
    assert!(
        notes[0].contains(
            "clipboard_read, clipboard_write, computer, screenshot, windows (no display: \
             DISPLAY is not set)"
        ) && notes[0].contains("notify (no session bus: DBUS_SESSION_BUS_ADDRESS is not set)"),
        "{}",
        notes[0]
    );
    assert!(out.of_kind("error").is_empty(), "{out:?}");
    let result = &tool_results(&out)[0];
    assert_eq!(result["success"], false);
    assert!(
        result["error"]
            .as_str()
            .unwrap()
            .contains("clipboard_read is not available in this session (no display"),
        "{result}"
    );
    assert!(out.of_kind("permission").is_empty(), "the gate was asked");

    // A display that does not answer is no display either; text mode shows the note.
    server.push(Reply::new().text("ok"));
    let out = h
        .corral()
        .args(["run", "-m", "llamacpp:fake-model", "--base-url"])
        .arg(server.openai_base())
        .arg("hi")
        .env("DISPLAY", ":4242")
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr
            .contains("desktop tools not offered: clipboard_read, clipboard_write, computer, screenshot, windows (the display :4242 refuses connections"),
        "{}",
        out.stderr
    );
    let offered = offered_tools(&server, server.chat_requests().len() - 1);
    assert!(!offered.iter().any(|t| t == "screenshot"), "{offered:?}");
}

#[tokio::test]
async fn a_base_url_without_a_model_takes_the_first_model_that_server_lists() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("hi"));
    let out = h
        .corral()
        .args(["run", "--json", "--base-url"])
        .arg(server.openai_base())
        .arg("x")
        .env("CORRAL_TEST_PROBE_PORTS", closed_probe_ports())
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(server.chat_requests()[0]["model"], "fake-model");
    assert!(
        out.stderr.contains(&format!(
            "using openai:fake-model, the first model the server at {} lists",
            server.openai_base()
        )),
        "{}",
        out.stderr
    );
}
