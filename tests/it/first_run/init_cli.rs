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

#[tokio::test]
async fn on_a_terminal_init_asks_which_model_by_number() {
    let h = Harness::new();
    let upstream = FakeModel::start().await;
    install_small_model(&h, &upstream);
    let server = FakeModel::start().await;
    server.set_models(vec![
        ModelInfo::new("chatty", &["completion"], 8192),
        ModelInfo::new("qwen3:8b", &["completion", "tools"], 40960),
    ]);
    let ports = ollama_probe_port(&server);
    let command = format!(
        "{} init; echo EXIT=$?; sleep 60",
        env!("CARGO_BIN_EXE_corral")
    );
    let tmux = crate::support::Tmux::start_with_env(
        &h,
        &command,
        &[("CORRAL_TEST_PROBE_PORTS", ports.as_str())],
    );
    let screen = tmux.wait_for("Use which? [1-3, Enter: 1]").await;
    let gguf = format!("gguf:{}", small_model_path(&h).display());
    for (n, model) in [
        (1, "ollama:qwen3:8b at "),
        (2, gguf.as_str()),
        (3, "ollama:chatty at "),
    ] {
        assert!(
            screen.contains(&format!("  {n}. {model}")),
            "{n}. {model}:\n{screen}"
        );
    }
    tmux.type_text("9");
    tmux.keys("Enter");
    tmux.wait_for("\"9\" is not a number from 1 to 3").await;
    tmux.type_text("3");
    tmux.keys("Enter");
    let screen = tmux.wait_for("EXIT=").await;
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(screen.contains("model = ollama:chatty"), "{screen}");
    let text = std::fs::read_to_string(h.config_dir().join("corral/config.toml")).unwrap();
    assert!(text.contains("\nmodel = \"ollama:chatty\"\n"), "{text}");
    assert!(text.contains("\n# model = \"ollama:qwen3:8b\"\n"), "{text}");
    assert!(
        text.contains(&format!("\n# model = \"{gguf}\"\n")),
        "{text}"
    );
}

#[tokio::test]
async fn init_recognises_llamacpp_lm_studio_and_vllm_by_their_apis() {
    let h = Harness::new();
    let llamacpp = FakeModel::start().await;
    let lmstudio = FakeModel::start().await;
    let vllm = FakeModel::start().await;
    let port = |server: &FakeModel| server.base_url().rsplit(':').next().unwrap().to_string();
    let closed = closed_probe_ports();
    let ollama_closed = closed.split(',').next().unwrap();
    let ports = format!(
        "{ollama_closed},llamacpp={},lmstudio={},vllm={}",
        port(&llamacpp),
        port(&lmstudio),
        port(&vllm)
    );
    let out = h
        .corral()
        .args(["init", "--yes"])
        .env("CORRAL_TEST_PROBE_PORTS", &ports)
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let text = std::fs::read_to_string(h.config_dir().join("corral/config.toml")).unwrap();
    // None says it calls tools (the fakes serve no /props template or LM Studio listing):
    // the first found is taken, the others offered in comments.
    assert!(
        text.contains("\nmodel = \"llamacpp:fake-model\"\n"),
        "{text}"
    );
    assert!(
        text.contains("\n# model = \"lmstudio:fake-model\"\n"),
        "{text}"
    );
    assert!(text.contains("\n# model = \"vllm:fake-model\"\n"), "{text}");
    for (provider, server) in [
        ("llamacpp", &llamacpp),
        ("lmstudio", &lmstudio),
        ("vllm", &vllm),
    ] {
        assert!(
            text.contains(&format!(
                "[providers.{provider}]\nbase_url = \"{}\"\n",
                server.openai_base()
            )),
            "{provider}: {text}"
        );
    }
    // Each was asked through its own API.
    let paths = |server: &FakeModel| -> Vec<String> {
        server.requests().iter().map(|r| r.path.clone()).collect()
    };
    assert!(paths(&llamacpp).contains(&"/health".to_string()));
    assert!(paths(&lmstudio).contains(&"/api/v0/models".to_string()));
    assert!(paths(&vllm).contains(&"/v1/models".to_string()));
}

/// A model name is the server's text: it reaches the terminal escaped and the file quoted.
#[tokio::test]
async fn a_hostile_model_name_never_reaches_the_terminal_raw_or_breaks_the_file() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let hostile = "evil\u{1b}]52;c;cm0gLXJmIH4=\u{7}\"\nmodel = \"pwned";
    server.set_models(vec![ModelInfo::new(
        hostile,
        &["completion", "tools"],
        8192,
    )]);
    let ports = ollama_probe_port(&server);
    let init = h
        .corral()
        .args(["init", "--yes"])
        .env("CORRAL_TEST_PROBE_PORTS", &ports)
        .run()
        .await;
    assert_eq!(init.code, Some(0), "{init:?}");
    let doctor = h
        .corral()
        .arg("doctor")
        .env("CORRAL_TEST_PROBE_PORTS", &ports)
        .run()
        .await;
    for out in [&init, &doctor] {
        assert!(
            !out.stdout.contains('\u{1b}'),
            "raw escape: {:?}",
            out.stdout
        );
        assert!(
            !out.stderr.contains('\u{1b}'),
            "raw escape: {:?}",
            out.stderr
        );
    }
    let text = std::fs::read_to_string(h.config_dir().join("corral/config.toml")).unwrap();
    let config: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(
        config["model"].as_str(),
        Some(format!("ollama:{hostile}").as_str())
    );
}
