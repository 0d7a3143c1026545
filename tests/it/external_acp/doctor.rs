//! `corral doctor`'s ACP agent lines: the real claude-agent-acp answers `initialize` with its
//! name and version, an agent that never answers is reported (and stopped), a missing one
//! says how to install it.

use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::support::Harness;

/// The processes whose command line mentions `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
        .filter(|cmdline| cmdline.contains(marker))
        .collect()
}

#[tokio::test]
async fn doctor_shows_each_acp_agents_version_or_why_not() {
    let h = Harness::new();
    let bin = h.home_dir().join("agents-bin");
    std::fs::create_dir_all(&bin).unwrap();
    // The real claude-agent-acp, and a gemini that starts but never says a word.
    let real = agent_clis().join("claude-agent-acp");
    assert!(real.is_file(), "run scripts/install-agent-clis");
    std::os::unix::fs::symlink(&real, bin.join("claude-agent-acp")).unwrap();
    let silent = bin.join("gemini");
    std::fs::write(&silent, "#!/bin/sh\nwhile :; do sleep 1; done\n").unwrap();
    std::fs::set_permissions(&silent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = h
        .corral()
        .arg("doctor")
        .env(
            "PATH",
            format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()),
        )
        .timeout(AGENT_TIMEOUT)
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let line = |what: &str| {
        out.stdout
            .lines()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("{what}: {}", out.stdout))
            .to_owned()
    };
    let claude = line("acp agent claude-agent-acp (acp:claude)");
    assert!(
        claude.starts_with("ok")
            && claude.contains("@agentclientprotocol/claude-agent-acp 0.101.0")
            && claude.contains("answered initialize in"),
        "{claude}"
    );
    let gemini = line("acp agent gemini (acp:gemini)");
    assert!(
        gemini.starts_with("warn") && gemini.contains("did not answer initialize within 20 s"),
        "{gemini}"
    );
    let opencode = line("acp agent opencode (acp:opencode)");
    assert!(
        opencode.starts_with("missing")
            && opencode.contains("opencode is not installed")
            && opencode.contains("opencode-ai"),
        "{opencode}"
    );
    // Nothing doctor started is left: the silent one was stopped with its group.
    let marker = bin.display().to_string();
    assert_eq!(processes_with(&marker), Vec::<String>::new());
}
