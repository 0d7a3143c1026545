//! `corral doctor`: what this machine gives corral, one line per item — `ok`, `missing` or
//! `warn` and a short reason. The sandbox lines come from a real trial (the same probe a
//! session runs), the desktop lines from connecting, the model lines from one request each,
//! the ACP agent lines from starting each installed agent for one `initialize`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::Config;
use crate::sandbox::{NetworkMode, SandboxMode, SandboxSpec, SandboxSupport};

mod acp_agents;
mod agent_clis;
mod mcp;
mod models;
mod serve;

/// Each network check; a machine that needs longer is as good as unreachable here.
const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Ok,
    Missing,
    Warn,
}

struct Report(Vec<(State, String, String)>);

impl Report {
    fn line(&mut self, state: State, what: &str, detail: impl Into<String>) {
        self.0.push((state, what.to_owned(), detail.into()));
    }

    fn line_from(&mut self, (state, what, detail): (State, &str, String)) {
        self.line(state, what, detail);
    }

    fn text(&self) -> String {
        self.0
            .iter()
            .map(|(state, what, detail)| {
                let state = match state {
                    State::Ok => "ok",
                    State::Missing => "missing",
                    State::Warn => "warn",
                };
                format!("{state:<8} {what}: {detail}\n")
            })
            .collect()
    }
}

/// The report as text. `config_path`: `--config`, else the default location.
pub async fn doctor(config_path: Option<PathBuf>) -> String {
    let mut report = Report(Vec::new());
    kernel(&mut report);
    sandbox(&mut report).await;
    for line in crate::policy::doctor_lines() {
        let state = if line.ok { State::Ok } else { State::Warn };
        report.line(state, line.what, line.detail);
    }
    desktop(&mut report).await;
    let named = config_path.is_some();
    let config_path = config_path.or_else(Config::default_path);
    let config = files(&mut report, config_path.as_deref(), named);
    output(&mut report, &config);
    agents(&mut report, &config);
    agent_clis::agent_clis(&mut report).await;
    acp_agents::acp_agents(&mut report).await;
    serve::serve(&mut report, &config);
    mcp::mcp_servers(&mut report, &config).await;
    models::models(&mut report, &config).await;
    report.text()
}

fn kernel(report: &mut Report) {
    match nix::sys::utsname::uname() {
        Ok(u) => report.line(
            State::Ok,
            "kernel",
            format!(
                "{} {} {}",
                u.sysname().to_string_lossy(),
                u.release().to_string_lossy(),
                u.machine().to_string_lossy()
            ),
        ),
        Err(e) => report.line(State::Warn, "kernel", format!("uname failed: {e}")),
    }
}

async fn sandbox(report: &mut Report) {
    // A throwaway root with a .git, so protecting it is tried for real.
    let scratch = tempfile::Builder::new().prefix("corral-doctor-").tempdir();
    let mut spec = SandboxSpec::new(SandboxMode::Strict, NetworkMode::Off);
    if let Ok(dir) = &scratch {
        let git = dir.path().join(".git");
        if std::fs::create_dir(&git).is_ok() {
            spec.protected.push(git);
        }
        // A worktree's or submodule's `.git` is a file: file mounts are tried too.
        let file = dir.path().join("sub/.git");
        if std::fs::create_dir(dir.path().join("sub")).is_ok()
            && std::fs::write(&file, "gitdir: ../.git\n").is_ok()
        {
            spec.protected.push(file);
        }
        spec.writable.push(dir.path().to_path_buf());
    }
    spec.hidden = crate::sandbox::default_hidden();
    let s = SandboxSupport::probe(&spec).await;
    match (s.landlock_abi, s.fs_rights.is_empty()) {
        (Some(abi), false) => report.line(
            State::Ok,
            "landlock",
            format!("ABI {abi}; filesystem rights: {}", s.fs_rights.join(", ")),
        ),
        _ => report.line(
            State::Missing,
            "landlock",
            s.landlock_error
                .clone()
                .unwrap_or_else(|| "unavailable".into()),
        ),
    }
    // The network namespace is the first layer; landlock's rules only matter without it.
    let netns = s.netns_error.is_none();
    let (state, net) = match (s.net_tcp, s.net_udp, netns) {
        (true, true, _) => (State::Ok, "TCP bind/connect: yes; UDP: yes"),
        (true, false, true) => (
            State::Ok,
            "TCP bind/connect: yes; UDP: no (newer ABIs; the network namespace covers it)",
        ),
        (true, false, false) => (State::Warn, "TCP bind/connect: yes; UDP: no (newer ABIs)"),
        (false, _, true) => (
            State::Ok,
            "none (ABI 4 or later); the network namespace cuts tools off",
        ),
        (false, _, false) => (State::Missing, "no network rules (ABI 4 or later)"),
    };
    report.line(state, "landlock network", net);
    for (what, error) in [
        ("user namespaces", &s.userns_error),
        ("mount namespaces", &s.mountns_error),
        ("network namespaces", &s.netns_error),
        (
            ".git and agent config protection (read-only bind mounts, dirs and files)",
            &s.protect_error,
        ),
        ("tool-call boundary (PID namespace)", &s.pidns_error),
    ] {
        match error {
            None => report.line(State::Ok, what, "usable"),
            Some(e) => report.line(State::Missing, what, e.clone()),
        }
    }
    report.line(
        State::Ok,
        "git files and agent config (file tools)",
        "write_file refuses .git in every form and preset; agent config always asks a person; \
         agent config a shell or python call makes without a person's yes is quarantined",
    );
    confinement(report, &s);
    let limits = s.limits(&spec);
    match s.shortfall(&spec) {
        None if limits.is_empty() => report.line(
            State::Ok,
            "sandbox strict",
            "everything enforced (writes, .git read-only, network off, hidden state and \
             credentials, Unix sockets, signals, device ioctls, inherited descriptors, no root \
             powers)",
        ),
        None => report.line(
            State::Warn,
            "sandbox strict",
            format!("runs, with limits: {}", limits.join("; ")),
        ),
        Some(gap) => report.line(
            State::Warn,
            "sandbox strict",
            format!("would refuse: {gap}"),
        ),
    }
}

/// The protections beyond writes and the network, one line each.
fn confinement(report: &mut Report, s: &SandboxSupport) {
    let mounts = s.mountns_error.as_ref().or(s.hide_error.as_ref());
    match mounts {
        None => report.line(
            State::Ok,
            "hidden from tools",
            "corral's config, cache and data, credential stores (~/.ssh, ~/.aws …), socket \
             directories: empty mounts",
        ),
        Some(e) => report.line(State::Missing, "hidden from tools", e.clone()),
    }
    let has = |right: &str| s.fs_rights.iter().any(|r| r == right);
    match (has("resolve_unix"), mounts) {
        (true, _) => report.line(
            State::Ok,
            "pathname unix sockets",
            "landlock RESOLVE_UNIX: only beneath the root and the preset's `sockets`",
        ),
        (false, None) => report.line(
            State::Warn,
            "pathname unix sockets",
            "hidden by mount (kernel lacks landlock RESOLVE_UNIX)",
        ),
        (false, Some(e)) => report.line(State::Missing, "pathname unix sockets", e.clone()),
    }
    let scoped = |yes: bool, what: &str| {
        if yes {
            (State::Ok, format!("{what}: scoped by landlock"))
        } else {
            (
                State::Missing,
                format!("{what}: needs landlock ABI 6 or later"),
            )
        }
    };
    let (state, text) = scoped(
        s.scope_abstract_unix,
        "outside the sandbox, network on or off",
    );
    report.line(state, "abstract unix sockets", text);
    let (state, text) = scoped(s.scope_signal, "to processes outside the sandbox");
    report.line(state, "signals", text);
    if has("ioctl_dev") {
        report.line(State::Ok, "device ioctls", "landlock ioctl_dev");
    } else {
        report.line(
            State::Missing,
            "device ioctls",
            "needs landlock ABI 5 or later",
        );
    }
    match &s.fds_error {
        None => report.line(
            State::Ok,
            "inherited descriptors",
            "closed on exec above stderr",
        ),
        Some(e) => report.line(State::Missing, "inherited descriptors", e.clone()),
    }
    match &s.privs_error {
        None => report.line(
            State::Ok,
            "root powers",
            "every capability dropped; setuid/setgid bits refused (seccomp)",
        ),
        Some(e) => report.line(State::Missing, "root powers", e.clone()),
    }
    if s.runs_as_root {
        let how = match &s.userns_error {
            None => "tools run as uid 0 without capabilities, in their own user namespace",
            Some(_) => "and tools keep root's capabilities (no user namespace)",
        };
        report.line(State::Warn, "corral runs as root", how);
    }
}

async fn desktop(report: &mut Report) {
    let display = std::env::var("DISPLAY").ok().filter(|d| !d.is_empty());
    let wayland = std::env::var("WAYLAND_DISPLAY")
        .ok()
        .filter(|d| !d.is_empty());
    match &wayland {
        // The Wayland lines below say what the compositor offers, the clipboard included.
        Some(w) => report.line(
            State::Ok,
            "display",
            format!(
                "WAYLAND_DISPLAY={w}: the desktop tools act through Wayland{}",
                if display.is_some() {
                    " (DISPLAY names XWayland, which reaches X programs only)"
                } else {
                    ""
                }
            ),
        ),
        None => x_display(report, display).await,
    }
    desktop_rest(report).await;
}

/// The display and clipboard lines of an X session.
async fn x_display(report: &mut Report, display: Option<String>) {
    let x = match &display {
        None => Err("DISPLAY is not set".to_owned()),
        Some(display) => {
            let name = display.clone();
            let connect = tokio::task::spawn_blocking(move || {
                x11rb::connect(Some(&name))
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            });
            match tokio::time::timeout(CHECK_TIMEOUT, connect).await {
                Ok(Ok(result)) => result,
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err("no answer".into()),
            }
        }
    };
    match (&display, &x) {
        (Some(d), Ok(())) => report.line(State::Ok, "display", format!("DISPLAY={d}, X answers")),
        (Some(d), Err(e)) => report.line(State::Missing, "display", format!("DISPLAY={d}: {e}")),
        (None, Err(e)) => report.line(State::Missing, "display", e.clone()),
        (None, Ok(())) => {}
    }
    match x {
        Ok(()) => report.line(State::Ok, "clipboard", "X11 CLIPBOARD selection"),
        Err(_) => report.line(State::Missing, "clipboard", "needs an X display"),
    }
}

/// What the desktop offers for automation, and the session bus's notifications.
async fn desktop_rest(report: &mut Report) {
    let env: Vec<(String, String)> = std::env::vars().collect();
    for (offered, what, detail) in crate::tool::desktop_automation(&env).await {
        let state = if offered { State::Ok } else { State::Missing };
        report.line(state, &what, detail);
    }
    let Some(address) = std::env::var("DBUS_SESSION_BUS_ADDRESS")
        .ok()
        .filter(|a| !a.is_empty())
    else {
        report.line(
            State::Missing,
            "session bus",
            "DBUS_SESSION_BUS_ADDRESS is not set",
        );
        report.line(State::Missing, "notifications", "need a session bus");
        return;
    };
    let bus = async {
        const BUS: &str = "org.freedesktop.DBus";
        const NAME: &str = "org.freedesktop.Notifications";
        let connection = zbus::connection::Builder::address(address.as_str())
            .build()
            .await?;
        let ask = |method: &'static str, body: &'static str| {
            let connection = connection.clone();
            async move {
                if body.is_empty() {
                    connection
                        .call_method(Some(BUS), "/org/freedesktop/DBus", Some(BUS), method, &())
                        .await
                } else {
                    connection
                        .call_method(Some(BUS), "/org/freedesktop/DBus", Some(BUS), method, &body)
                        .await
                }
            }
        };
        let owned: bool = ask("NameHasOwner", NAME).await?.body().deserialize()?;
        let names: Vec<String> = ask("ListActivatableNames", "")
            .await?
            .body()
            .deserialize()?;
        Ok::<_, zbus::Error>((owned, names.iter().any(|n| n == NAME)))
    };
    match tokio::time::timeout(CHECK_TIMEOUT, bus).await {
        Ok(Ok((owned, activatable))) => {
            report.line(State::Ok, "session bus", format!("{address} answers"));
            match (owned, activatable) {
                (true, _) => report.line(
                    State::Ok,
                    "notifications",
                    "org.freedesktop.Notifications is owned",
                ),
                (false, true) => report.line(
                    State::Warn,
                    "notifications",
                    "no daemon running; the bus starts one on demand",
                ),
                (false, false) => report.line(
                    State::Missing,
                    "notifications",
                    "no notification daemon (e.g. dunst) on the bus",
                ),
            }
        }
        Ok(Err(e)) => {
            report.line(State::Missing, "session bus", format!("{address}: {e}"));
            report.line(State::Missing, "notifications", "need a session bus");
        }
        Err(_) => {
            report.line(
                State::Missing,
                "session bus",
                format!("{address}: no answer"),
            );
            report.line(State::Missing, "notifications", "need a session bus");
        }
    }
}

/// Config file, presets and event logs; returns the config (default if unreadable).
/// `named`: the path came from `--config`, so it must exist.
fn files(report: &mut Report, config_path: Option<&Path>, named: bool) -> Config {
    let config = match config_path {
        None => {
            report.line(State::Warn, "config file", "no config directory (set HOME)");
            Config::default()
        }
        Some(path) if !path.exists() && named => {
            let detail = format!("{} does not exist (named with --config)", path.display());
            report.line(State::Missing, "config file", detail);
            Config::default()
        }
        Some(path) if !path.exists() => {
            let detail = format!("{} (not present: defaults apply)", path.display());
            report.line(State::Ok, "config file", detail);
            Config::default()
        }
        Some(path) => match Config::load(path) {
            Ok(config) => {
                report.line(State::Ok, "config file", format!("{}", path.display()));
                config
            }
            Err(e) => {
                report.line(State::Warn, "config file", e.to_string());
                Config::default()
            }
        },
    };
    let dir_line = |report: &mut Report, what: &str, dir: Option<PathBuf>| match dir {
        Some(dir) if dir.is_dir() => report.line(State::Ok, what, format!("{}", dir.display())),
        Some(dir) => report.line(
            State::Ok,
            what,
            format!("{} (not created yet)", dir.display()),
        ),
        None => report.line(State::Warn, what, "no directory (set HOME)"),
    };
    dir_line(report, "policies dir", super::run::user_policy_dir());
    let logs = dirs::cache_dir().map(|d| d.join("corral").join("agents"));
    dir_line(report, "event log dir", logs);
    config
}

/// What reaches the terminal, and what tool output is cut of.
fn output(report: &mut Report, config: &Config) {
    report.line(
        State::Ok,
        "terminal output",
        "model and tool text shown with controls, escape sequences (OSC 52 too) and bidi \
         overrides escaped; approvals list the commands bash will run",
    );
    let redactor = crate::sandbox::env::Redactor::from_env(
        std::env::vars(),
        crate::host::open::held_secrets(config),
    );
    let mut names: Vec<&str> = redactor.names().collect();
    names.sort_unstable();
    let detail = if names.is_empty() {
        "no secrets known (environment, config, the server's secret file)".to_string()
    } else {
        format!(
            "{} secret{} cut from tool output, also when printed in pieces: {}",
            names.len(),
            if names.len() == 1 { "" } else { "s" },
            names.join(", ")
        )
    };
    report.line(State::Ok, "redaction", detail);
}

/// External agents (claude, codex, ACP): what corral holds them to, from their config.
fn agents(report: &mut Report, config: &Config) {
    report.line(
        State::Ok,
        "agent paths",
        "every path in an external agent's permission request must resolve inside the \
         session root (what an agent does without asking is not seen)",
    );
    if config.agents.project_settings == Some(true) {
        report.line(
            State::Warn,
            "agent project settings",
            "loaded ([agents] project_settings = true): hooks and MCP commands planted in a \
             project run outside the sandbox",
        );
    } else {
        report.line(
            State::Ok,
            "agent project settings",
            "not loaded (claude, claude-agent-acp, opencode, gemini, codex); opt in with \
             [agents] project_settings = true",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_aligned_with_the_state_first() {
        let mut report = Report(Vec::new());
        report.line(State::Ok, "kernel", "Linux");
        report.line(State::Missing, "display", "DISPLAY is not set");
        assert_eq!(
            report.text(),
            "ok       kernel: Linux\nmissing  display: DISPLAY is not set\n"
        );
    }
}
