//! `corral doctor` on the model side: a gguf model's file and server checked for real, the
//! small model's install, the usual local servers probed by their APIs, agent CLIs and MCP
//! servers with their versions.

use super::{closed_probe_ports, install_small_model, ollama_probe_port};
use crate::support::{FakeModel, Harness};

fn line<'a>(report: &'a str, start: &str) -> &'a str {
    report
        .lines()
        .find(|l| l.contains(start))
        .unwrap_or_else(|| panic!("no {start:?} line in:\n{report}"))
}

#[tokio::test]
async fn a_gguf_model_without_its_file_or_server_is_reported_missing_with_how_to_install() {
    let h = Harness::new();
    let gone = h.work().join("gone.gguf");
    h.write_config(&format!("model = \"gguf:{}\"\n", gone.display()));
    let out = h
        .corral()
        .arg("doctor")
        .env("CORRAL_TEST_PROBE_PORTS", closed_probe_ports())
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let default = line(&out.stdout, "default model:");
    assert!(
        default.starts_with("missing ")
            && default.contains("the model file is missing")
            && default.contains("llama-server is not installed")
            && default.contains("scripts/setup"),
        "{default}"
    );
    let local = line(&out.stdout, "local model (scripts/setup):");
    assert!(
        local.starts_with("missing ") && local.contains("run scripts/setup"),
        "{local}"
    );
    for server in ["ollama", "llamacpp", "lmstudio", "vllm"] {
        let probe = line(&out.stdout, &format!("model server {server}:"));
        assert!(probe.starts_with("missing "), "{probe}");
    }
}

#[tokio::test]
async fn installed_models_running_servers_agent_clis_and_mcp_versions_are_listed() {
    let h = Harness::new();
    let upstream = FakeModel::start().await;
    install_small_model(&h, &upstream);
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/it/mcp_client/fixtures/scripted_server.py"
    );
    h.write_config(&format!(
        "[mcp_servers.scripted]\ncommand = \"python3\"\nargs = [\"{script}\"]\n\n\
         [mcp_servers.gone]\ncommand = \"corral-no-such-mcp-server\"\n"
    ));
    let out = h
        .corral()
        .arg("doctor")
        .env("CORRAL_TEST_PROBE_PORTS", ollama_probe_port(&upstream))
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let local = line(&out.stdout, "local model (scripts/setup):");
    assert!(
        local.starts_with("ok ") && local.contains("served by corral"),
        "{local}"
    );
    let ollama = line(&out.stdout, "model server ollama:");
    assert!(
        ollama.starts_with("ok ")
            && ollama.contains(&format!("{} answers: 1 model", upstream.base_url()))
            && ollama.contains("calls tools: fake-model"),
        "{ollama}"
    );
    // Every runtime, found or not, with its lifecycle and steering mode.
    for (cli, how) in [
        ("claude", "persistent, steering gated"),
        ("codex", "persistent, steering direct"),
        ("pi", "persistent, steering direct"),
        ("kimi", "persistent, steering none"),
        ("gemini", "per-turn, defer-spawn, steering none"),
        ("qwen", "per-turn, defer-spawn, steering none"),
        ("copilot", "per-turn, defer-spawn, steering none"),
        (
            "opencode",
            "per-turn, defer-spawn, terminate-on-end, steering none",
        ),
        ("cursor", "per-turn, defer-spawn, steering none"),
        ("antigravity", "per-turn, defer-spawn, steering none"),
    ] {
        let found = line(&out.stdout, &format!("agent cli {cli} (-m {cli}):"));
        assert!(
            found.starts_with("ok ") || found.contains("is not installed"),
            "{found}"
        );
        assert!(found.contains(how), "{found}");
    }
    // What no package registry has says where it comes from instead.
    let cursor = line(&out.stdout, "agent cli cursor (-m cursor):");
    assert!(cursor.contains("https://cursor.com/install"), "{cursor}");
    let scripted = line(&out.stdout, "MCP server scripted:");
    assert!(
        scripted.starts_with("ok ") && scripted.contains("scripted 1 — "),
        "{scripted}"
    );
    let gone = line(&out.stdout, "MCP server gone:");
    assert!(gone.starts_with("missing "), "{gone}");
}
