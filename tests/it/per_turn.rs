//! Per-turn runtimes (`gemini:`, `qwen:`, `copilot:`, `opencode:`, `cursor:`, `antigravity`):
//! a process per turn, the conversation resumed by the runtime's own session id. The real
//! programs (from npm) run against the fake model server; cursor-agent and antigravity, which
//! no package registry has, are scripted stand-ins that speak their formats.

mod gemini;
mod others;
mod pi;
mod standins;

use std::path::PathBuf;
use std::time::Duration;

use crate::support::{Cmd, Harness, Outcome};

/// Real agents take seconds to start on two shared cores.
const AGENT_TIMEOUT: Duration = Duration::from_secs(180);

/// PATH with the installed agent programs first; fails the test when `program` is missing.
fn path_with(program: &str) -> String {
    let home = std::env::var_os("HOME").expect("HOME");
    let bin = PathBuf::from(home).join(".cache/corral-ci/agent-clis/node_modules/.bin");
    assert!(
        bin.join(program).is_file(),
        "{program} is not installed in {}: run scripts/install-agent-clis",
        bin.display()
    );
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    format!("{}:{path}", bin.display())
}

/// `corral run --json -m <spec> <args…>` with `env` set, given a real agent's time.
fn corral_run(h: &Harness, spec: &str, env: &[(&str, &str)], args: &[&str]) -> Cmd {
    let mut cmd = h
        .corral()
        .args(["run", "--json", "-m", spec])
        .timeout(AGENT_TIMEOUT);
    for (name, value) in env {
        cmd = cmd.env(name, value);
    }
    for arg in args {
        cmd = cmd.arg(arg);
    }
    cmd
}

/// Runs `cmd` (started with `-i <first>`) for one more line, `second`; `between` checks the
/// state after the first turn. Both turns must end well.
async fn two_turns(cmd: Cmd, second: &str, between: impl FnOnce()) -> Outcome {
    let mut running = cmd.live_stdin().spawn().await;
    running.wait_for_event(0, |e| e["kind"] == "result").await;
    between();
    running.send_line(second).await;
    running.close_stdin();
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    crate::common::assert_well_formed(&out);
    assert_eq!(
        stop_reasons(&out),
        ["end_turn", "end_turn"],
        "{:#?}",
        out.events()
    );
    out
}

/// The results' stop reasons, in order.
fn stop_reasons(out: &Outcome) -> Vec<String> {
    out.of_kind("result")
        .iter()
        .map(|r| {
            r["data"]["stopReason"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// Processes whose command line has `needle` and whose cwd is the work dir, corral itself
/// aside: what a turn left.
fn left_in(h: &Harness, needle: &str) -> Vec<String> {
    crate::common::procs_in(&h.work(), needle)
        .into_iter()
        .map(|(_, line)| line)
        .filter(|line| {
            let program = line.split(' ').next().unwrap_or_default();
            !program.ends_with("/corral")
        })
        .collect()
}
