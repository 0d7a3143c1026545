//! Which ACP agents this machine has, and which version of each: for `corral doctor`.
//!
//! An installed agent is started as a session starts it (its own process group, tracked for
//! the reaper) but through the sandbox helper, writing only in an empty directory and a
//! private home that are thrown away after — it has no session to work for. It is asked
//! `initialize` and nothing else (no session, no prompt), and stopped, group and all, whatever
//! the answer. `initialize` answers carry `agentInfo {name, version}` (ACP 1).
//!
//! The network stays on: opencode serves itself on a loopback port and fails to start
//! without one. What each agent would fetch at start (updates, model lists, usage
//! statistics) is switched off the way a session's hermetic home would have it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::launch;
use super::rpc::{Rpc, RpcError};
use crate::error::Error;
use crate::sandbox::agent_process::{AgentProcess, Launch};
use crate::sandbox::{NetworkMode, SandboxMode, SandboxSpec};

/// The agents corral knows, by their spec name (`acp:<agent>`) and program.
pub const KNOWN_AGENTS: [(&str, &str); 3] = [
    ("claude", "claude-agent-acp"),
    ("gemini", "gemini"),
    ("opencode", "opencode"),
];

/// What keeps opencode from fetching updates and model lists at start (claude-agent-acp gets
/// claude's own `QUIET_ENV`).
const QUIET: [(&str, &str); 4] = [
    ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
    ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
    ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1"),
    ("OPENCODE_DISABLE_SHARE", "1"),
];

const GEMINI_SETTINGS: &str = r#"{"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false},"general":{"disableAutoUpdate":true,"disableUpdateNag":true}}"#;

/// What asking one agent found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// It answered `initialize`. `name`/`version` are empty when it left `agentInfo` out.
    Answered {
        name: String,
        version: String,
        took: Duration,
    },
    /// Not installed: where it was looked for and how to install it.
    Missing(String),
    /// Started, but no answer within the time given.
    NoAnswer(Duration),
    /// It could not be started, exited, or refused `initialize`.
    Failed(String),
}

/// Starts `agent` (a spec name: `claude`, `gemini`, `opencode`, `cmd=<command line>`), asks
/// `initialize`, waits at most `timeout`, and stops it.
pub async fn probe(agent: &str, timeout: Duration) -> Probe {
    let (program, args) = match launch::command_for(Some(agent)) {
        Ok(command) => command,
        Err(Error::Usage(message)) if message.contains("not installed") => {
            return Probe::Missing(message);
        }
        Err(e) => return Probe::Failed(e.to_string()),
    };
    let scratch = match tempfile::Builder::new()
        .prefix("corral-doctor-acp-")
        .tempdir()
    {
        Ok(dir) => dir,
        Err(e) => return Probe::Failed(format!("cannot make a scratch directory: {e}")),
    };
    let launch = match sandboxed(agent, program, args, scratch.path()) {
        Ok(launch) => launch,
        Err(e) => return Probe::Failed(e),
    };
    let (mut process, pipes) = match AgentProcess::spawn(&launch) {
        Ok(started) => started,
        Err(e) => return Probe::Failed(e.to_string()),
    };
    let (rpc, mut incoming) = Rpc::start(pipes.stdin, pipes.stdout);
    let started = Instant::now();
    let answer = tokio::time::timeout(
        timeout,
        super::call(
            &rpc,
            &mut incoming,
            "initialize",
            super::initialize_params(),
        ),
    )
    .await;
    let probe = match answer {
        Ok(Ok(init)) => answered(&init, started.elapsed()),
        Ok(Err(RpcError::Closed)) => Probe::Failed(process.crash_report().await),
        Ok(Err(e)) => Probe::Failed(format!("refused initialize: {e}")),
        Err(_) => Probe::NoAnswer(timeout),
    };
    process.stop(None).await;
    probe
}

fn answered(init: &Value, took: Duration) -> Probe {
    let text = |key: &str| {
        init["agentInfo"][key]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    Probe::Answered {
        name: text("name"),
        version: text("version"),
        took,
    }
}

/// The agent under the sandbox helper: it may write only in `scratch` (its home and its
/// working directory), reach no network, and see none of the secrets a tool may not.
fn sandboxed(
    agent: &str,
    program: PathBuf,
    args: Vec<String>,
    scratch: &std::path::Path,
) -> Result<Launch, String> {
    let scratch = scratch
        .canonicalize()
        .map_err(|e| format!("{}: {e}", scratch.display()))?;
    let (home, work) = (scratch.join("home"), scratch.join("work"));
    for dir in [&home, &work] {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let mut spec = SandboxSpec::new(SandboxMode::BestEffort, NetworkMode::On);
    spec.writable = vec![scratch.clone(), PathBuf::from("/dev/null")];
    spec.hidden = crate::sandbox::default_hidden();
    let (helper, helper_args) = spec.wrap(&program, args);
    // gemini reads its settings from the home; without these it reports usage statistics.
    let gemini = home.join(".gemini");
    std::fs::create_dir_all(&gemini)
        .and_then(|()| std::fs::write(gemini.join("settings.json"), GEMINI_SETTINGS))
        .map_err(|e| format!("{}: {e}", gemini.display()))?;
    let mut env = launch::agent_env(false, Some(&home));
    env.push(("TMPDIR".to_owned(), scratch.to_string_lossy().into_owned()));
    env.extend(
        crate::backend::claude::launch::QUIET_ENV
            .iter()
            .chain(&QUIET)
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned())),
    );
    Ok(Launch {
        program: helper,
        args: helper_args,
        cwd: work,
        env,
        env_remove: Vec::new(),
        env_clear: false,
        stderr_log: None,
        kind: "acp-probe",
        display_name: Some(agent.trim_start_matches("cmd=").to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agents_info_is_read_from_the_answer() {
        let init = serde_json::json!({"protocolVersion": 1,
            "agentInfo": {"name": "OpenCode", "version": "1.18.33"}});
        let took = Duration::from_millis(5);
        assert_eq!(
            answered(&init, took),
            Probe::Answered {
                name: "OpenCode".into(),
                version: "1.18.33".into(),
                took
            }
        );
        let Probe::Answered { name, version, .. } = answered(&serde_json::json!({}), took) else {
            panic!("an answer without agentInfo is still an answer");
        };
        assert_eq!((name.as_str(), version.as_str()), ("", ""));
    }
}
