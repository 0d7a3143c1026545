//! What the kernel lets the sandbox enforce, and, for a given spec, what falls short.
//!
//! The probe is a trial, not a guess: a short-lived `corral __sandbox-exec --probe` child goes
//! through every step a tool process would (namespaces, id maps, read-only bind mounts of the
//! protected directories, landlock with filesystem and network rules) and reports what worked
//! as one JSON line. The helper uses the same [`SandboxSupport::gaps`] before running a tool,
//! so what the session reports at start and what strict mode refuses are one judgement.

use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::spec::{NetworkMode, SandboxSpec};

/// A probe that takes longer is broken; the session goes on without its answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// What works on this machine. Every `*_error` is `None` when the step worked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SandboxSupport {
    /// The kernel's landlock ABI version; `None` when landlock is unavailable.
    pub landlock_abi: Option<i32>,
    pub landlock_error: Option<String>,
    /// Filesystem rights the kernel's landlock controls (`write_file`, `truncate` …).
    pub fs_rights: Vec<String>,
    /// landlock can block TCP connect/bind.
    pub net_tcp: bool,
    /// landlock can block UDP (newer ABIs only).
    pub net_udp: bool,
    /// Creating a user namespace (needed to mount without privileges).
    pub userns_error: Option<String>,
    /// Creating a private mount namespace (with or without a user namespace).
    pub mountns_error: Option<String>,
    /// Creating an empty network namespace.
    pub netns_error: Option<String>,
    /// Bind-mounting the protected directories read-only.
    pub protect_error: Option<String>,
    /// Why a tool call has no PID namespace of its own (its background processes are then
    /// held by a subreaper, which a SIGKILL of the helper defeats).
    #[serde(default)]
    pub pidns_error: Option<String>,
    /// Why tools see the host's `/proc` instead of one with only their own processes.
    #[serde(default)]
    pub proc_error: Option<String>,
    /// Tools run as root: without a user namespace they keep root's capabilities.
    #[serde(default)]
    pub runs_as_root: bool,
    /// Covering the hidden paths and the Unix sockets outside the sandbox.
    #[serde(default)]
    pub hide_error: Option<String>,
    /// landlock keeps signals from reaching processes outside the sandbox (ABI 6).
    #[serde(default)]
    pub scope_signal: bool,
    /// landlock keeps abstract Unix sockets of processes outside the sandbox out of reach
    /// (ABI 6).
    #[serde(default)]
    pub scope_abstract_unix: bool,
    /// Marking inherited descriptors close-on-exec.
    #[serde(default)]
    pub fds_error: Option<String>,
    /// Dropping every capability and refusing setuid/setgid bits (seccomp).
    #[serde(default)]
    pub privs_error: Option<String>,
}

impl SandboxSupport {
    /// Nothing known to work: the probe itself could not run.
    pub fn unknown(reason: &str) -> SandboxSupport {
        let why = Some(format!("the sandbox probe failed: {reason}"));
        SandboxSupport {
            landlock_error: why.clone(),
            userns_error: why.clone(),
            mountns_error: why.clone(),
            netns_error: why.clone(),
            protect_error: why.clone(),
            hide_error: why.clone(),
            fds_error: why.clone(),
            privs_error: why.clone(),
            pidns_error: why,
            ..SandboxSupport::default()
        }
    }

    /// What `spec` asks for and the kernel cannot enforce, one short clause each; empty when
    /// everything is enforced.
    pub fn gaps(&self, spec: &SandboxSpec) -> Vec<String> {
        let mut gaps = Vec::new();
        if self.fs_rights.is_empty() {
            let why = e_or(&self.landlock_error, "landlock is unavailable");
            gaps.push(format!("writes are not confined ({why})"));
        } else if !self.fs_rights.iter().any(|r| r == "truncate") {
            let abi = self
                .landlock_abi
                .map_or_else(String::new, |a| format!(" ABI {a}"));
            gaps.push(format!(
                "truncating files outside the writable paths is not blocked (landlock{abi} \
                 predates truncate control)"
            ));
        } else if let Some(e) = &self.landlock_error {
            gaps.push(format!("landlock is not fully enforced ({e})"));
        }
        if !spec.protected.is_empty() {
            let reason = match (&self.mountns_error, &self.protect_error) {
                (Some(mount), _) => Some(match &self.userns_error {
                    Some(user) => format!("user namespaces unavailable: {user}"),
                    None => format!("mount namespaces unavailable: {mount}"),
                }),
                (None, Some(e)) => Some(format!("cannot mount it read-only: {e}")),
                (None, None) => None,
            };
            if let Some(reason) = reason {
                gaps.push(format!(
                    "{} not protected ({reason})",
                    names(&spec.protected)
                ));
            }
        }
        if !spec.hidden.is_empty() {
            let reason = match (&self.mountns_error, &self.hide_error) {
                (Some(mount), _) => Some(match &self.userns_error {
                    Some(user) => format!("user namespaces unavailable: {user}"),
                    None => format!("mount namespaces unavailable: {mount}"),
                }),
                (None, Some(e)) => Some(e.clone()),
                (None, None) => None,
            };
            if let Some(reason) = reason {
                gaps.push(format!(
                    "corral's state, credential stores and Unix sockets outside the sandbox are \
                     not hidden ({reason})"
                ));
            }
        }
        self.landlock_gaps(spec, &mut gaps);
        if let Some(e) = &self.fds_error {
            gaps.push(format!("inherited descriptors may reach tools ({e})"));
        }
        if let Some(e) = &self.privs_error {
            gaps.push(format!(
                "tools may keep capabilities or set setuid/setgid bits ({e})"
            ));
        }
        if self.runs_as_root
            && let Some(user) = &self.userns_error
        {
            gaps.push(format!(
                "tools keep root's capabilities (no user namespace: {user})"
            ));
        }
        if let Some(pidns) = &self.pidns_error {
            gaps.push(format!(
                "background processes of a tool are not held by a PID namespace ({pidns})"
            ));
        }
        if spec.network == NetworkMode::Off
            && let Some(netns) = &self.netns_error
        {
            let abi = self
                .landlock_abi
                .map_or_else(String::new, |a| format!(" ABI {a}"));
            if !self.net_tcp {
                gaps.push(format!(
                    "network is not cut off (no network namespace: {netns}; landlock{abi} has no \
                     network rules)"
                ));
            } else if !self.net_udp {
                gaps.push(format!(
                    "network off blocks TCP only, not UDP (no network namespace: {netns}; \
                     landlock{abi} has no UDP rules)"
                ));
            }
        }
        gaps
    }

    /// Scoping and ioctl control, which came with newer ABIs than writes did.
    fn landlock_gaps(&self, spec: &SandboxSpec, gaps: &mut Vec<String>) {
        if self.fs_rights.is_empty() {
            return;
        }
        let abi = self
            .landlock_abi
            .map_or_else(String::new, |a| format!(" ABI {a}"));
        if !self.fs_rights.iter().any(|r| r == "ioctl_dev") {
            gaps.push(format!(
                "ioctl on devices (a terminal's TIOCSTI) is not blocked (landlock{abi} predates \
                 ioctl_dev, ABI 5)"
            ));
        }
        if !self.scope_signal {
            gaps.push(format!(
                "signals to processes outside the sandbox are not blocked (landlock{abi} \
                 predates signal scoping, ABI 6)"
            ));
        }
        // With network off and a network namespace, the host's abstract sockets are in
        // another namespace already.
        let netns_covers = spec.network == NetworkMode::Off && self.netns_error.is_none();
        if !self.scope_abstract_unix && !netns_covers {
            gaps.push(format!(
                "abstract Unix sockets outside the sandbox are reachable (landlock{abi} \
                 predates socket scoping, ABI 6)"
            ));
        }
    }

    /// What is enforced by a weaker means than the kernel could offer: said by `doctor` and
    /// logged, not refused (strict mode runs with them).
    pub fn limits(&self, spec: &SandboxSpec) -> Vec<String> {
        let mut limits = Vec::new();
        let resolve_unix = self.fs_rights.iter().any(|r| r == "resolve_unix");
        if !resolve_unix && !spec.hidden.is_empty() && self.hide_error.is_none() {
            limits.push(
                "pathname unix sockets: hidden by mount (kernel lacks landlock RESOLVE_UNIX, \
                 ABI 9): only the sockets listed when a tool starts and the usual socket \
                 places are covered"
                    .to_owned(),
            );
        }
        limits
    }

    /// The gaps as one sentence; `None` when `spec` is fully enforced.
    pub fn shortfall(&self, spec: &SandboxSpec) -> Option<String> {
        let gaps = self.gaps(spec);
        (!gaps.is_empty()).then(|| gaps.join("; "))
    }

    /// Runs the helper's probe for `spec` (its protected paths are tried for real).
    pub async fn probe(spec: &SandboxSpec) -> SandboxSupport {
        let helper = spec.helper_path();
        let mut command = tokio::process::Command::new(&helper);
        command
            .args(spec.helper_args(true))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let output = match tokio::time::timeout(PROBE_TIMEOUT, command.output()).await {
            Ok(Ok(output)) => output,
            Ok(Err(e)) => return SandboxSupport::unknown(&format!("{}: {e}", helper.display())),
            Err(_) => return SandboxSupport::unknown("it did not answer within 10 s"),
        };
        let stdout = String::from_utf8_lossy(&output.stdout);
        match stdout.lines().last().map(serde_json::from_str) {
            Some(Ok(support)) => support,
            _ => {
                let stderr = String::from_utf8_lossy(&output.stderr);
                SandboxSupport::unknown(&format!("{} {}", output.status, stderr.trim()))
            }
        }
    }
}

fn e_or(error: &Option<String>, fallback: &str) -> String {
    error.clone().unwrap_or_else(|| fallback.to_owned())
}

/// `.git` for `<root>/.git` (what the person recognises), the full path otherwise.
fn names(paths: &[std::path::PathBuf]) -> String {
    let mut list: Vec<String> = paths
        .iter()
        .map(|p| match p.file_name() {
            Some(name) if name == ".git" => ".git".to_owned(),
            _ => p.display().to_string(),
        })
        .collect();
    list.dedup();
    let verb = if list.len() == 1 { "is" } else { "are" };
    format!("{} {verb}", list.join(", "))
}

/// Landlock rights by their kernel names, for reports.
pub(crate) fn right_names(rights: impl IntoIterator<Item = landlock::AccessFs>) -> Vec<String> {
    use landlock::AccessFs as A;
    rights
        .into_iter()
        .map(|right| {
            match right {
                A::Execute => "execute",
                A::WriteFile => "write_file",
                A::ReadFile => "read_file",
                A::ReadDir => "read_dir",
                A::RemoveDir => "remove_dir",
                A::RemoveFile => "remove_file",
                A::MakeChar => "make_char",
                A::MakeDir => "make_dir",
                A::MakeReg => "make_reg",
                A::MakeSock => "make_sock",
                A::MakeFifo => "make_fifo",
                A::MakeBlock => "make_block",
                A::MakeSym => "make_sym",
                A::Refer => "refer",
                A::Truncate => "truncate",
                A::IoctlDev => "ioctl_dev",
                A::ResolveUnix => "resolve_unix",
                _ => "other",
            }
            .to_owned()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::spec::SandboxMode;
    use super::*;

    fn full() -> SandboxSupport {
        SandboxSupport {
            landlock_abi: Some(7),
            fs_rights: vec!["write_file".into(), "truncate".into(), "ioctl_dev".into()],
            net_tcp: true,
            scope_signal: true,
            scope_abstract_unix: true,
            ..SandboxSupport::default()
        }
    }

    fn spec(network: NetworkMode, protected: &[&str]) -> SandboxSpec {
        let mut spec = SandboxSpec::new(SandboxMode::Strict, network);
        spec.protected = protected.iter().map(Into::into).collect();
        spec
    }

    fn hiding(network: NetworkMode) -> SandboxSpec {
        let mut spec = spec(network, &[]);
        spec.hidden = vec!["/h/.ssh".into()];
        spec
    }

    #[test]
    fn hiding_needs_a_mount_namespace_and_says_what_failed() {
        assert_eq!(full().shortfall(&hiding(NetworkMode::On)), None);
        let no_mount = SandboxSupport {
            mountns_error: Some("EPERM".into()),
            userns_error: Some("ENOSPC".into()),
            ..full()
        };
        let gap = no_mount.shortfall(&hiding(NetworkMode::On)).unwrap();
        assert!(
            gap.starts_with("corral's state, credential stores"),
            "{gap}"
        );
        assert!(
            gap.ends_with("(user namespaces unavailable: ENOSPC)"),
            "{gap}"
        );
        let failed = SandboxSupport {
            hide_error: Some("cannot hide /h/.ssh: EINVAL".into()),
            ..full()
        };
        let gap = failed.shortfall(&hiding(NetworkMode::On)).unwrap();
        assert!(
            gap.ends_with("not hidden (cannot hide /h/.ssh: EINVAL)"),
            "{gap}"
        );
        // Nothing asked, nothing missing.
        assert_eq!(no_mount.shortfall(&spec(NetworkMode::On, &[])), None);
    }

    #[test]
    fn older_landlock_abis_name_what_they_lack() {
        let v4 = SandboxSupport {
            landlock_abi: Some(4),
            fs_rights: vec!["write_file".into(), "truncate".into()],
            scope_signal: false,
            scope_abstract_unix: false,
            ..full()
        };
        let gaps = v4.gaps(&spec(NetworkMode::On, &[]));
        assert_eq!(gaps.len(), 3, "{gaps:?}");
        assert!(
            gaps[0].contains("landlock ABI 4 predates ioctl_dev"),
            "{gaps:?}"
        );
        assert!(
            gaps[1].starts_with("signals to processes outside"),
            "{gaps:?}"
        );
        assert!(gaps[2].starts_with("abstract Unix sockets"), "{gaps:?}");
        // Network off in its own namespace: the host's abstract sockets are elsewhere.
        assert_eq!(v4.gaps(&spec(NetworkMode::Off, &[])).len(), 2);
        let fds = SandboxSupport {
            fds_error: Some("no /proc".into()),
            ..full()
        };
        let gap = fds.shortfall(&spec(NetworkMode::On, &[])).unwrap();
        assert_eq!(gap, "inherited descriptors may reach tools (no /proc)");
        let privs = SandboxSupport {
            privs_error: Some("capset: EPERM".into()),
            ..full()
        };
        let gap = privs.shortfall(&spec(NetworkMode::On, &[])).unwrap();
        assert!(gap.ends_with("setuid/setgid bits (capset: EPERM)"), "{gap}");
    }

    #[test]
    fn sockets_hidden_by_mount_are_a_limit_not_a_gap() {
        let limits = full().limits(&hiding(NetworkMode::On));
        assert_eq!(limits.len(), 1, "{limits:?}");
        assert!(
            limits[0].contains("lacks landlock RESOLVE_UNIX"),
            "{limits:?}"
        );
        let v9 = SandboxSupport {
            fs_rights: vec!["resolve_unix".into(), "ioctl_dev".into(), "truncate".into()],
            ..full()
        };
        assert!(v9.limits(&hiding(NetworkMode::On)).is_empty());
    }

    #[test]
    fn a_full_kernel_enforces_everything() {
        assert_eq!(
            full().shortfall(&spec(NetworkMode::Off, &["/r/.git"])),
            None
        );
    }

    #[test]
    fn each_missing_piece_is_named() {
        let no_userns = SandboxSupport {
            userns_error: Some("EPERM".into()),
            mountns_error: Some("EPERM".into()),
            netns_error: Some("EPERM".into()),
            ..full()
        };
        assert_eq!(
            no_userns.shortfall(&spec(NetworkMode::On, &["/r/.git"])),
            Some(".git is not protected (user namespaces unavailable: EPERM)".into())
        );
        let net = no_userns.shortfall(&spec(NetworkMode::Off, &[])).unwrap();
        assert!(net.contains("TCP only, not UDP"), "{net}");
        let old = SandboxSupport {
            net_tcp: false,
            ..no_userns.clone()
        };
        let net = old.shortfall(&spec(NetworkMode::Off, &[])).unwrap();
        assert!(net.starts_with("network is not cut off"), "{net}");
        let none = SandboxSupport::unknown("boom");
        let all = none.gaps(&spec(NetworkMode::Off, &["/r/.git", "/r/sub/.git"]));
        assert_eq!(all.len(), 6, "{all:?}");
        let root = SandboxSupport {
            runs_as_root: true,
            ..no_userns
        };
        let gap = root.shortfall(&spec(NetworkMode::On, &[])).unwrap();
        assert!(gap.starts_with("tools keep root's capabilities"), "{gap}");
        assert!(all[0].starts_with("writes are not confined (the sandbox probe failed: boom"));
        let no_truncate = SandboxSupport {
            fs_rights: vec!["write_file".into()],
            landlock_abi: Some(2),
            ..full()
        };
        let no_pidns = SandboxSupport {
            pidns_error: Some("no PID namespace (EPERM)".into()),
            ..full()
        };
        let gap = no_pidns.shortfall(&spec(NetworkMode::On, &[])).unwrap();
        assert!(gap.starts_with("background processes of a tool"), "{gap}");
        let gap = no_truncate.shortfall(&spec(NetworkMode::On, &[])).unwrap();
        assert!(gap.contains("landlock ABI 2 predates truncate"), "{gap}");
    }
}
