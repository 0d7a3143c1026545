//! `corral init`: the servers it finds (fake ones on the probed ports), what it picks without a
//! terminal, the file it writes and what it refuses to overwrite.

use std::os::unix::fs::PermissionsExt;

use super::{closed_probe_ports, install_small_model, ollama_probe_port, small_model_path};
use crate::support::{FakeModel, Harness, ModelInfo, Reply};

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn without_a_terminal_init_takes_a_running_servers_tool_model() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.set_models(vec![
        ModelInfo::new("chatty", &["completion"], 8192),
        ModelInfo::new("qwen3:8b", &["completion", "tools"], 40960),
    ]);
    let ports = ollama_probe_port(&server);
    let out = h
        .corral()
        .arg("init")
        .env("CORRAL_TEST_PROBE_PORTS", &ports)
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let path = h.config_dir().join("corral/config.toml");
    assert!(
        out.stdout.contains(&format!(
            "wrote {}: model = ollama:qwen3:8b",
            path.display()
        )),
        "{}",
        out.stdout
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\nmodel = \"ollama:qwen3:8b\"\n"), "{text}");
    assert!(text.contains("\n# model = \"ollama:chatty\"\n"), "{text}");
    assert!(
        text.contains(&format!(
            "[providers.ollama]\nbase_url = \"{}\"\n",
            server.base_url()
        )),
        "{text}"
    );
    assert_eq!(mode(&path), 0o600);

    // The file works: a run with no -m uses it, without probing anything.
    server.push(Reply::new().text("hi"));
    let run = h
        .corral()
        .args(["run", "--json", "x"])
        .env("CORRAL_TEST_PROBE_PORTS", closed_probe_ports())
        .run()
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(server.chat_requests()[0]["model"], "qwen3:8b");

    // Never overwritten without --force; with it, the old file is kept.
    std::fs::write(&path, "# mine\nmax_steps = 7\n").unwrap();
    let again = h
        .corral()
        .arg("init")
        .env("CORRAL_TEST_PROBE_PORTS", &ports)
        .run()
        .await;
    assert_eq!(again.code, Some(2), "{again:?}");
    assert!(again.stderr.contains("--force"), "{}", again.stderr);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "# mine\nmax_steps = 7\n"
    );
    let forced = h
        .corral()
        .args(["init", "--force"])
        .env("CORRAL_TEST_PROBE_PORTS", &ports)
        .run()
        .await;
    assert_eq!(forced.code, Some(0), "{forced:?}");
    let backup = h.config_dir().join("corral/config.toml.bak");
    assert_eq!(
        std::fs::read_to_string(&backup).unwrap(),
        "# mine\nmax_steps = 7\n"
    );
    assert_eq!(mode(&backup), 0o600);
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .contains("model = \"ollama:qwen3:8b\"")
    );
    assert_eq!(mode(&path), 0o600);
}

#[tokio::test]
async fn with_nothing_running_init_picks_the_installed_small_model() {
    let h = Harness::new();
    let upstream = FakeModel::start().await;
    install_small_model(&h, &upstream);
    let path = h.home_dir().join("elsewhere/corral.toml");
    let out = h
        .corral()
        .args(["init", "--yes", "--config"])
        .arg(path.display().to_string())
        .env("CORRAL_TEST_PROBE_PORTS", closed_probe_ports())
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let text = std::fs::read_to_string(&path).unwrap();
    let spec = format!("gguf:{}", small_model_path(&h).display());
    assert!(text.contains(&format!("\nmodel = \"{spec}\"\n")), "{text}");
    assert!(text.contains("cannot write or fix code"), "{text}");
    assert!(!text.contains("[providers."), "{text}");
    assert_eq!(mode(&path), 0o600);
    assert!(!h.config_dir().join("corral/config.toml").exists());
}

#[tokio::test]
async fn with_nothing_at_all_init_writes_nothing_and_says_what_to_do() {
    let h = Harness::new();
    let out = h
        .corral()
        .arg("init")
        .env("CORRAL_TEST_PROBE_PORTS", closed_probe_ports())
        .run()
        .await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains("no model found") && out.stderr.contains("scripts/setup"),
        "{}",
        out.stderr
    );
    assert!(!h.config_dir().join("corral/config.toml").exists());
}
