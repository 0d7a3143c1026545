//! What a session asks of the kernel for its tool processes, and how that request travels to
//! the `corral __sandbox-exec` helper on its command line.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How hard the sandbox insists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// No confinement: tools run like any process of the user.
    Off,
    /// Confine with whatever the kernel offers; what it cannot do is reported once.
    #[default]
    BestEffort,
    /// Refuse to run a tool unless every part of the confinement is enforced.
    Strict,
}

impl SandboxMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Off => "off",
            SandboxMode::BestEffort => "best-effort",
            SandboxMode::Strict => "strict",
        }
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SandboxMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" => Ok(SandboxMode::Off),
            "best-effort" | "best_effort" => Ok(SandboxMode::BestEffort),
            "strict" => Ok(SandboxMode::Strict),
            _ => Err(format!(
                "sandbox mode must be strict, best-effort or off, got {s:?}"
            )),
        }
    }
}

/// Whether tool processes may use the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    #[default]
    On,
    Off,
}

impl NetworkMode {
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkMode::On => "on",
            NetworkMode::Off => "off",
        }
    }
}

impl FromStr for NetworkMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "on" => Ok(NetworkMode::On),
            "off" => Ok(NetworkMode::Off),
            _ => Err(format!("network must be on or off, got {s:?}")),
        }
    }
}

/// The confinement of one session's shell and python processes.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxSpec {
    pub mode: SandboxMode,
    pub network: NetworkMode,
    /// Everything may be done here (the session root, its TMPDIR, /dev/null, policy paths);
    /// everywhere else is read-only.
    pub writable: Vec<PathBuf>,
    /// Directories inside writable ones that stay read-only (`<root>/.git`): landlock only adds
    /// rights, so these are bind-mounted read-only in a private mount namespace.
    pub protected: Vec<PathBuf>,
    /// Paths tools must not see at all (corral's own state, credential stores, socket
    /// directories): an empty read-only tmpfs over a directory, `/dev/null` over anything else.
    /// A writable path inside one stays visible (its siblings are hidden instead).
    pub hidden: Vec<PathBuf>,
    /// Pathname Unix sockets outside the writable paths that tools may still connect to; every
    /// other socket outside them is hidden (or refused by landlock where the kernel can).
    pub sockets: Vec<PathBuf>,
    /// The helper executable; `None`: this executable (`corral`). Tests point it elsewhere.
    pub helper: Option<PathBuf>,
}

impl SandboxSpec {
    pub fn new(mode: SandboxMode, network: NetworkMode) -> Self {
        SandboxSpec {
            mode,
            network,
            writable: Vec::new(),
            protected: Vec::new(),
            hidden: Vec::new(),
            sockets: Vec::new(),
            helper: None,
        }
    }

    /// The helper to start: `/proc/self/exe` by default, which still works when the binary
    /// was replaced or deleted since the runtime started (an upgrade mid-session).
    pub(crate) fn helper_path(&self) -> PathBuf {
        self.helper
            .clone()
            .unwrap_or_else(|| PathBuf::from("/proc/self/exe"))
    }

    /// `program args…` run confined by this spec: the helper and its whole command line
    /// (a long-lived child's, without the probe).
    pub(crate) fn wrap(
        &self,
        program: &std::path::Path,
        args: impl IntoIterator<Item = String>,
    ) -> (PathBuf, Vec<String>) {
        let mut line: Vec<String> = self
            .helper_args(false)
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        line.push(program.to_string_lossy().into_owned());
        line.extend(args);
        (self.helper_path(), line)
    }

    /// The helper's command line up to and including `--`; the program and its arguments
    /// follow.
    pub(crate) fn helper_args(&self, probe: bool) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            HELPER_COMMAND.into(),
            "--mode".into(),
            self.mode.as_str().into(),
            "--network".into(),
            self.network.as_str().into(),
        ];
        for (flag, paths) in [
            ("--rw", &self.writable),
            ("--protect", &self.protected),
            ("--hide", &self.hidden),
            ("--socket", &self.sockets),
        ] {
            for path in paths {
                args.push(flag.into());
                args.push(path.into());
            }
        }
        if probe {
            args.push("--probe".into());
        }
        args.push("--".into());
        args
    }
}

/// The hidden subcommand the helper answers to.
pub const HELPER_COMMAND: &str = "__sandbox-exec";

/// The helper's arguments, parsed (everything after `__sandbox-exec`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HelperArgs {
    pub spec: SandboxSpec,
    /// Try every step, report what works as one JSON line on stdout, run nothing.
    pub probe: bool,
    /// The program and its arguments.
    pub command: Vec<OsString>,
}

impl HelperArgs {
    pub fn parse(args: &[OsString]) -> Result<HelperArgs, String> {
        let mut spec = SandboxSpec::new(SandboxMode::BestEffort, NetworkMode::On);
        let mut probe = false;
        let mut rest = args.iter();
        let text = |value: Option<&OsString>, flag: &str| -> Result<String, String> {
            value
                .and_then(|v| v.to_str())
                .map(str::to_owned)
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        while let Some(arg) = rest.next() {
            match arg.to_str() {
                Some("--") => {
                    return Ok(HelperArgs {
                        spec,
                        probe,
                        command: rest.cloned().collect(),
                    });
                }
                Some("--probe") => probe = true,
                Some("--mode") => spec.mode = text(rest.next(), "--mode")?.parse()?,
                Some("--network") => spec.network = text(rest.next(), "--network")?.parse()?,
                Some(flag @ ("--rw" | "--protect" | "--hide" | "--socket")) => {
                    let path = rest
                        .next()
                        .map(PathBuf::from)
                        .ok_or_else(|| format!("{flag} needs a path"))?;
                    match flag {
                        "--rw" => spec.writable.push(path),
                        "--protect" => spec.protected.push(path),
                        "--hide" => spec.hidden.push(path),
                        _ => spec.sockets.push(path),
                    }
                }
                _ => return Err(format!("unknown argument {:?}", OsStr::new(arg))),
            }
        }
        Err("missing `--` before the program".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_helper_command_line_round_trips() {
        let mut spec = SandboxSpec::new(SandboxMode::Strict, NetworkMode::Off);
        spec.writable = vec!["/r".into(), "/tmp/t d".into()];
        spec.protected = vec!["/r/.git".into()];
        spec.hidden = vec!["/h/.ssh".into(), "/run/user".into()];
        spec.sockets = vec!["/run/user/1000/bus".into()];
        let mut args = spec.helper_args(false);
        assert_eq!(args[0], HELPER_COMMAND);
        args.extend(["bash".into(), "-c".into(), "echo --rw".into()]);
        let parsed = HelperArgs::parse(&args[1..]).unwrap();
        assert_eq!(parsed.spec, spec);
        assert!(!parsed.probe);
        assert_eq!(parsed.command, ["bash", "-c", "echo --rw"]);
        let probe = HelperArgs::parse(&spec.helper_args(true)[1..]).unwrap();
        assert!(probe.probe && probe.command.is_empty());
    }

    #[test]
    fn bad_helper_arguments_are_named() {
        let parse = |args: &[&str]| {
            let args: Vec<OsString> = args.iter().map(OsString::from).collect();
            HelperArgs::parse(&args).unwrap_err()
        };
        assert!(parse(&["--mode", "loose", "--"]).contains("loose"));
        assert!(parse(&["--rw"]).contains("--rw"));
        assert!(parse(&["--bogus", "--"]).contains("--bogus"));
        assert!(parse(&["--probe"]).contains("--"));
        assert_eq!("best_effort".parse(), Ok(SandboxMode::BestEffort));
        assert!(SandboxMode::Off < SandboxMode::BestEffort);
        assert!(SandboxMode::BestEffort < SandboxMode::Strict);
    }
}
