//! Process tools: `shell` (`bash -c`) and `python` (`python3 -u -c`). Output streams as
//! `tool_output` events while the process runs; the result holds the combined output (head and
//! tail when long) and, on failure, how the process ended — the model must see the output
//! either way to fix what went wrong.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

mod after;

use super::output::parse_args;
use super::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use crate::sandbox::paths::resolve_in_root;
use crate::sandbox::process::{self, ProcessOutcome, ProcessSpec};
use crate::sandbox::{NetworkMode, SandboxSpec};

/// Room kept below the output cap for the notes added here, so the result is not cut twice.
const NOTE_RESERVE: usize = 256;
/// Even a tiny cap keeps something to look at.
const MIN_PROCESS_OUTPUT: usize = 1024;

pub(crate) struct Shell;
pub(crate) struct Python;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ShellArgs {
    command: String,
    timeout: Option<i64>,
    cwd: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PythonArgs {
    code: String,
    timeout: Option<i64>,
}

impl Tool for Shell {
    fn name(&self) -> &'static str {
        "shell"
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args: ShellArgs = parse_args(args)?;
            let cwd = match args.cwd.as_deref() {
                None | Some("") | Some(".") => ctx.root.clone(),
                Some(dir) => working_dir(ctx, dir)?,
            };
            let program = ctx.settings.shell.clone();
            let argv = vec!["-c".to_owned(), args.command];
            execute(ctx, program, argv, cwd, args.timeout).await
        })
    }
}

impl Tool for Python {
    fn name(&self) -> &'static str {
        "python"
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args: PythonArgs = parse_args(args)?;
            let program = ctx.settings.python.clone();
            // -u: unbuffered, so output streams as it is printed rather than at exit.
            let argv = vec!["-u".to_owned(), "-c".to_owned(), args.code];
            execute(ctx, program, argv, ctx.root.clone(), args.timeout).await
        })
    }
}

/// `cwd` resolved inside the session root; it must be an existing directory.
fn working_dir(ctx: &ToolContext, dir: &str) -> Result<PathBuf, ToolError> {
    let path = resolve_in_root(&ctx.root, dir)?;
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_dir() => Ok(path),
        Ok(_) => Err(ToolError::InvalidArguments(format!(
            "cwd {dir} is not a directory"
        ))),
        Err(_) => Err(ToolError::NotFound(format!(
            "cwd {dir} does not exist (paths are relative to the working directory)"
        ))),
    }
}

async fn execute(
    ctx: &ToolContext,
    program: String,
    args: Vec<String>,
    cwd: PathBuf,
    requested: Option<i64>,
) -> Result<ToolOutput, ToolError> {
    let (timeout, clamp_note) = pick_timeout(ctx, requested)?;
    let before = after::Before::take(ctx).await;
    let spec = ProcessSpec {
        program: program.clone(),
        args,
        cwd: cwd.clone(),
        env: ctx.settings.env.clone(),
        timeout,
        max_output_bytes: ctx
            .max_output_bytes
            .saturating_sub(NOTE_RESERVE)
            .max(MIN_PROCESS_OUTPUT),
        sandbox: ctx.settings.sandbox.clone(),
        redactor: ctx.settings.redactor.clone(),
    };
    let outcome = process::run(spec, &ctx.output, &ctx.cancel)
        .await
        .map_err(|e| spawn_error(&program, &e, &cwd))?;
    if let Some(why) = &outcome.refused {
        return Err(ToolError::Sandbox(format!(
            "the sandbox refused to run it: {why}"
        )));
    }
    let sandbox = ctx
        .settings
        .sandbox
        .as_ref()
        .filter(|s| s.mode != crate::sandbox::SandboxMode::Off)
        .map(|s| (s, ctx.root.as_path()));
    let result = shape(outcome, clamp_note, timeout, sandbox);
    after::undo(ctx, before, result).await
}

/// What sandbox denials look like in a process's output.
const WRITE_DENIALS: [&str; 3] = [
    "Permission denied",
    "Read-only file system",
    "Operation not permitted",
];
const NETWORK_DENIALS: [&str; 2] = ["Network is unreachable", "Connection refused"];

/// A sandboxed call that failed with a denial in its output is reported as the sandbox's doing,
/// with what the sandbox allows, so the model does not retry the same thing and the turn is
/// not counted as a success.
fn blame(text: String, sandbox: &SandboxSpec, root: &Path) -> ToolError {
    let network_off = sandbox.network == NetworkMode::Off;
    let wrote = WRITE_DENIALS.iter().any(|m| text.contains(m));
    let connected = network_off && NETWORK_DENIALS.iter().any(|m| text.contains(m));
    if !wrote && !connected {
        return ToolError::Failed(text);
    }
    let mut allowed = Vec::new();
    if wrote {
        let except = if sandbox.protected.is_empty() {
            ""
        } else {
            " (git's files and agent config are read-only)"
        };
        allowed.push(format!(
            "writes are allowed only under {}{except} and $TMPDIR",
            root.display()
        ));
    }
    if network_off {
        allowed.push("network is off".to_owned());
    }
    ToolError::SandboxDenied(format!(
        "{text}\n[the sandbox blocked this: {}]",
        allowed.join("; ")
    ))
}

/// The call's timeout: its own, else the default; never above the maximum (then a note says
/// so, so the model knows why a long job stopped early).
fn pick_timeout(
    ctx: &ToolContext,
    requested: Option<i64>,
) -> Result<(Duration, Option<String>), ToolError> {
    let max = ctx.settings.max_timeout;
    let Some(secs) = requested else {
        return Ok((ctx.settings.default_timeout.min(max), None));
    };
    if secs < 1 {
        return Err(ToolError::InvalidArguments(format!(
            "timeout must be at least 1 second (got {secs})"
        )));
    }
    let asked = Duration::from_secs(secs.unsigned_abs());
    if asked <= max {
        return Ok((asked, None));
    }
    let note = format!(
        "[timeout {secs} s is over the {} s limit; it was lowered to {} s]",
        max.as_secs(),
        max.as_secs()
    );
    Ok((max, Some(note)))
}

fn spawn_error(program: &str, e: &io::Error, cwd: &Path) -> ToolError {
    // A spawn into a directory that is gone fails with ENOENT too: say which is missing.
    if e.kind() == io::ErrorKind::NotFound && !cwd.is_dir() {
        return ToolError::Failed(format!(
            "cannot run {program}: its working directory {} no longer exists (was it deleted \
             or moved?)",
            cwd.display()
        ));
    }
    match e.kind() {
        io::ErrorKind::NotFound => ToolError::Failed(format!(
            "cannot run {program}: it was not found (is it installed and on PATH?)"
        )),
        io::ErrorKind::PermissionDenied => {
            ToolError::Failed(format!("cannot run {program}: permission denied"))
        }
        _ => ToolError::Failed(format!("cannot run {program}: {e}")),
    }
}

/// Exit 0 → the output as it is; anything else → an error carrying the output and a last line
/// saying how the process ended.
fn shape(
    outcome: ProcessOutcome,
    clamp_note: Option<String>,
    timeout: Duration,
    sandbox: Option<(&SandboxSpec, &Path)>,
) -> Result<ToolOutput, ToolError> {
    if outcome.cancelled {
        return Err(ToolError::Cancelled);
    }
    let mut text = String::new();
    if let Some(note) = clamp_note {
        text.push_str(&note);
        text.push('\n');
    }
    text.push_str(&outcome.output);
    let ending = if outcome.timed_out {
        format!(
            "[timed out after {} s; the process group was killed]",
            timeout.as_secs()
        )
    } else {
        match (outcome.exit_code, outcome.signal) {
            (Some(0), _) if text.is_empty() => return Ok(ToolOutput::text("(no output)")),
            (Some(0), _) => return Ok(ToolOutput::text(text)),
            (Some(code), _) => format!("[exit code {code}]"),
            (None, Some(signal)) => format!("[killed by signal {signal}]"),
            (None, None) => "[the process ended without an exit status]".to_owned(),
        }
    };
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&ending);
    match sandbox {
        Some((spec, root)) if !outcome.timed_out => Err(blame(text, spec, root)),
        _ => Err(ToolError::Failed(text)),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use serde_json::json;

    use super::super::ToolSettings;
    use super::super::output::testing::session;
    use super::*;
    use crate::sandbox::OutputSink;

    fn with_settings(ctx: &mut ToolContext, edit: impl FnOnce(&mut ToolSettings)) {
        let mut settings = (*ctx.settings).clone();
        edit(&mut settings);
        ctx.settings = Arc::new(settings);
    }

    #[tokio::test]
    async fn shell_returns_output_and_streams_it() {
        let (_tmp, mut ctx) = session();
        let seen = Arc::new(Mutex::new(String::new()));
        let sink = seen.clone();
        ctx.output = OutputSink::new(move |_, t| sink.lock().unwrap().push_str(t));
        // Two pipes have no common order: the pause keeps this one deterministic.
        let args = json!({"command": "echo one; sleep 0.1; echo two >&2; sleep 0.1; pwd"});
        let out = Shell.call(args, &ctx).await.unwrap();
        let expected = format!("one\ntwo\n{}\n", ctx.root.display());
        assert_eq!(out.text, expected);
        assert_eq!(*seen.lock().unwrap(), expected);
        let quiet = Shell.call(json!({"command": "true"}), &ctx).await.unwrap();
        assert_eq!(quiet.text, "(no output)");
    }

    #[tokio::test]
    async fn a_failure_carries_the_output_and_the_exit_code() {
        let (_tmp, ctx) = session();
        let err = Shell
            .call(json!({"command": "echo oops; exit 3"}), &ctx)
            .await
            .unwrap_err();
        assert_eq!(err, ToolError::Failed("oops\n[exit code 3]".into()));
        assert_eq!(err.to_string(), "oops\n[exit code 3]");
        let killed = Shell.call(json!({"command": "kill -9 $$"}), &ctx).await;
        assert_eq!(
            killed,
            Err(ToolError::Failed("[killed by signal 9]".into()))
        );
    }

    #[tokio::test]
    async fn cwd_is_resolved_inside_the_root() {
        let (_tmp, ctx) = session();
        std::fs::create_dir(ctx.root.join("sub")).unwrap();
        let args = json!({"command": "pwd", "cwd": "sub"});
        let out = Shell.call(args, &ctx).await.unwrap();
        assert_eq!(out.text, format!("{}\n", ctx.root.join("sub").display()));
        let outside = Shell
            .call(json!({"command": "pwd", "cwd": ".."}), &ctx)
            .await;
        assert!(
            matches!(outside, Err(ToolError::OutsideRoot(_))),
            "{outside:?}"
        );
        let missing = Shell
            .call(json!({"command": "pwd", "cwd": "nope"}), &ctx)
            .await;
        assert!(
            matches!(missing, Err(ToolError::NotFound(_))),
            "{missing:?}"
        );
    }

    #[tokio::test]
    async fn timeouts_are_reported_and_clamped() {
        let (_tmp, mut ctx) = session();
        let args = json!({"command": "echo partial; sleep 30", "timeout": 1});
        let err = Shell.call(args, &ctx).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "partial\n[timed out after 1 s; the process group was killed]"
        );
        with_settings(&mut ctx, |s| s.max_timeout = Duration::from_secs(5));
        let out = Shell
            .call(json!({"command": "echo ok", "timeout": 900}), &ctx)
            .await
            .unwrap();
        let note = "[timeout 900 s is over the 5 s limit; it was lowered to 5 s]\nok\n";
        assert_eq!(out.text, note);
        let zero = Shell
            .call(json!({"command": "true", "timeout": 0}), &ctx)
            .await;
        assert!(matches!(zero, Err(ToolError::InvalidArguments(_))));
    }

    #[tokio::test]
    async fn python_runs_code_unbuffered_in_the_root() {
        let (_tmp, ctx) = session();
        let code =
            "import os, sys, time\nprint(os.getcwd())\ntime.sleep(0.1)\nsys.stderr.write('e\\n')";
        let out = Python.call(json!({"code": code}), &ctx).await.unwrap();
        assert_eq!(out.text, format!("{}\ne\n", ctx.root.display()));
        let err = Python
            .call(json!({"code": "raise SystemExit(2)"}), &ctx)
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "[exit code 2]");
    }

    #[tokio::test]
    async fn a_missing_interpreter_is_a_clear_error() {
        let (_tmp, mut ctx) = session();
        with_settings(&mut ctx, |s| s.python = "corral-no-python".into());
        let err = Python.call(json!({"code": "1"}), &ctx).await.unwrap_err();
        assert!(
            err.to_string().contains("cannot run corral-no-python"),
            "{err}"
        );
        let unknown = Shell
            .call(json!({"command": "true", "shell": "zsh"}), &ctx)
            .await;
        assert!(matches!(unknown, Err(ToolError::InvalidArguments(_))));
    }

    #[tokio::test]
    async fn the_process_gets_the_session_environment_only() {
        let (_tmp, mut ctx) = session();
        with_settings(&mut ctx, |s| {
            s.env = vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("ONLY".into(), "me".into()),
            ];
        });
        let out = Shell
            .call(
                json!({"command": "env | grep -v '^_=\\|^PWD=\\|^SHLVL='"}),
                &ctx,
            )
            .await
            .unwrap();
        let mut lines: Vec<&str> = out.text.lines().collect();
        lines.sort_unstable();
        assert_eq!(lines, ["ONLY=me", "PATH=/usr/bin:/bin"]);
    }

    #[tokio::test]
    async fn a_flood_is_cut_to_the_cap_with_room_for_the_ending() {
        let (_tmp, mut ctx) = session();
        ctx.max_output_bytes = 4096;
        let args = json!({"command": "seq 1 200000; exit 1"});
        let err = Shell.call(args, &ctx).await.unwrap_err().to_string();
        assert!(err.len() <= 4096, "{}", err.len());
        assert!(err.starts_with("1\n2\n") && err.ends_with("200000\n[exit code 1]"));
        assert!(err.contains("bytes omitted"));
    }

    #[test]
    fn sandbox_denials_are_named_and_other_failures_left_alone() {
        use crate::sandbox::SandboxMode;
        let mut spec = SandboxSpec::new(SandboxMode::BestEffort, NetworkMode::On);
        let root = Path::new("/r");
        let denied = "bash: /x: Permission denied\n[exit code 1]";
        assert_eq!(
            blame(denied.into(), &spec, root),
            ToolError::SandboxDenied(format!(
                "{denied}\n[the sandbox blocked this: writes are allowed only under /r and $TMPDIR]"
            ))
        );
        let refused = "ConnectionRefusedError: [Errno 111] Connection refused\n[exit code 1]";
        assert_eq!(
            blame(refused.into(), &spec, root),
            ToolError::Failed(refused.into()),
            "with network on, a refused connection is the server's doing"
        );
        (spec.network, spec.protected) = (NetworkMode::Off, vec!["/r/.git".into()]);
        assert_eq!(
            blame(refused.into(), &spec, root).to_string(),
            format!("{refused}\n[the sandbox blocked this: network is off]")
        );
        let rofs = "touch: cannot touch '.git/x': Read-only file system\n[exit code 1]";
        assert!(blame(rofs.into(), &spec, root).to_string().ends_with(
            "[the sandbox blocked this: writes are allowed only under /r (git's files and agent \
             config are read-only) and $TMPDIR; network is off]"
        ));
        let plain = "oops\n[exit code 3]";
        assert_eq!(
            blame(plain.into(), &spec, root),
            ToolError::Failed(plain.into())
        );
    }
}
