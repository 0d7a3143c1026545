//! `corral __sandbox-exec [options] -- PROGRAM ARGS…`: confines its own process, then
//! `exec`s the program, which inherits every restriction (and so do its children).
//!
//! The runtime is never confined itself: landlock's `restrict_self` binds only the calling
//! thread, and the tokio threads already exist. This helper is started fresh for each tool
//! process and runs single-threaded, before any runtime, which `unshare(CLONE_NEWUSER)` also
//! requires. In order:
//! 1. a user + mount namespace (plus an empty network namespace with `--network off`), so the
//!    protected paths (git's files, agent config) can be bind-mounted read-only (landlock only
//!    grants rights per hierarchy and cannot take write access to `<root>/.git` back from a
//!    writable root), and
//!    so a tool run by root holds its capabilities only inside that namespace;
//! 2. the hidden paths and the Unix sockets outside the sandbox covered (hide.rs);
//! 3. `PR_SET_NO_NEW_PRIVS`;
//! 4. landlock: every filesystem right the kernel knows is handled; `/` may be read and
//!    executed, the `--rw` paths may be changed; with network off, TCP bind/connect are handled
//!    with no port allowed (a second layer under the network namespace); signals and abstract
//!    Unix sockets of processes outside the sandbox (the runtime included) are scoped out where
//!    the kernel can, network on or off; connecting to pathname sockets outside the writable
//!    paths and the `--socket` ones is refused where the kernel has RESOLVE_UNIX;
//! 5. every capability dropped and a seccomp filter against setuid/setgid bits (privs.rs);
//! 6. every descriptor above stderr marked close-on-exec (fds.rs).
//!
//! Between 1 and 2 the call gets its lifetime boundary (boundary.rs): a PID namespace whose
//! init is this helper, with its own `/proc`. With `--sandbox off` only the boundary is set up.
//!
//! Strict mode refuses (one `corral sandbox:` line on stderr, exit 125) when any of it is not
//! enforced; best-effort runs anyway (the session reported the gap when it started).

use std::ffi::OsString;
use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus,
    PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::statvfs::{FsFlags, statvfs};
use nix::unistd::{Gid, Uid, getgid, getuid};

use super::spec::{HelperArgs, NetworkMode, SandboxMode, SandboxSpec};
use super::support::{SandboxSupport, right_names};

pub(crate) mod fds;
mod hide;
mod privs;

/// Exit code of a refusal: the program did not run.
pub(crate) const REFUSED_EXIT: i32 = 125;
/// First words of the helper's own stderr lines.
pub(crate) const REFUSAL_PREFIX: &str = "corral sandbox: ";
/// After the prefix, when the program could not be executed (exit 127 or 126).
pub(crate) const EXEC_FAILED: &str = "cannot run ";

/// Newest first: the first whose rights the kernel accepts is what it supports.
const ABIS: [ABI; 10] = [
    ABI::V10,
    ABI::V9,
    ABI::V8,
    ABI::V7,
    ABI::V6,
    ABI::V5,
    ABI::V4,
    ABI::V3,
    ABI::V2,
    ABI::V1,
];

/// The helper's entry point (`args`: everything after `__sandbox-exec`). Returns an exit code
/// only when the program was not run; otherwise the process becomes the program.
pub fn sandbox_exec_main(args: &[OsString]) -> i32 {
    let HelperArgs {
        spec,
        probe,
        command,
    } = match HelperArgs::parse(args) {
        Ok(parsed) => parsed,
        Err(e) => return refuse(&format!("bad arguments: {e}")),
    };
    let inherited = fds::close_inherited();
    if spec.mode == SandboxMode::Off && !probe {
        // Lifetime, not confinement: a call's background processes end with it here too.
        super::boundary::enter(false, getuid().is_root());
        return exec(&command);
    }
    let mut support = confine(&spec, probe);
    support.fds_error = inherited.err();
    if probe {
        let line = serde_json::to_string(&support).unwrap_or_default();
        let _ = writeln!(std::io::stdout().lock(), "{line}");
        return 0;
    }
    if spec.mode == SandboxMode::Strict
        && let Some(gap) = support.shortfall(&spec)
    {
        return refuse(&format!("cannot enforce the strict sandbox: {gap}"));
    }
    exec(&command)
}

fn refuse(message: &str) -> i32 {
    let _ = writeln!(std::io::stderr().lock(), "{REFUSAL_PREFIX}{message}");
    REFUSED_EXIT
}

fn exec(command: &[OsString]) -> i32 {
    let Some((program, args)) = command.split_first() else {
        return refuse("no program to run");
    };
    // Only returns on failure.
    let err = Command::new(program).args(args).exec();
    let _ = writeln!(
        std::io::stderr().lock(),
        "{REFUSAL_PREFIX}{EXEC_FAILED}{}: {err}",
        program.to_string_lossy()
    );
    if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}

/// Applies every step `spec` asks for (a probe tries them all) and says what worked.
fn confine(spec: &SandboxSpec, probe: bool) -> SandboxSupport {
    let mut support = SandboxSupport {
        runs_as_root: getuid().is_root(),
        ..SandboxSupport::default()
    };
    let want_net = probe || spec.network == NetworkMode::Off;
    let bound = hide::bound_sockets();
    // Always, not only for protected directories and network off: root's capabilities
    // (ptrace, module loading …) only stay out of a tool's reach in a user namespace.
    enter_namespaces(want_net, &mut support);
    // Before landlock, which forbids mounting the tool's own /proc.
    let boundary = super::boundary::enter(support.mountns_error.is_none(), false);
    (support.pidns_error, support.proc_error) = (boundary.pidns_error, boundary.proc_error);
    if support.mountns_error.is_none() {
        // Directories and files alike (a worktree's `.git` is a file); never a symlink, whose
        // mount would land on whatever it points to.
        let paths: Vec<&PathBuf> = spec
            .protected
            .iter()
            .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| !m.file_type().is_symlink()))
            .collect();
        if let Err(e) = protect(&paths) {
            support.protect_error = Some(e);
        }
        if let Err(e) = hide::hide(spec, &bound) {
            support.hide_error = Some(e);
        }
    }
    apply_landlock(spec, probe || want_net, &mut support);
    // Last: mounting and landlock need the namespace's capabilities; the filter needs
    // no_new_privs, which landlock set.
    if let Err(e) = privs::drop_privileges() {
        support.privs_error = Some(e);
    }
    support
}

fn errno(e: nix::Error) -> String {
    format!("{e}")
}

/// Why `unshare(CLONE_NEWUSER)` failed, in the terms a person can act on.
fn userns_reason(e: nix::Error) -> String {
    match e {
        nix::Error::ENOSPC => "ENOSPC: user.max_user_namespaces is 0 or used up".into(),
        nix::Error::EPERM => {
            "EPERM: unprivileged user namespaces are disabled (sysctl or security policy)".into()
        }
        nix::Error::EINVAL => "EINVAL: not possible from this process (chroot?)".into(),
        e => errno(e),
    }
}

/// A user namespace makes mounting possible without privileges; root can do without one, which
/// is the fallback where user namespaces are disabled.
fn enter_namespaces(want_net: bool, support: &mut SandboxSupport) {
    let (uid, gid) = (getuid(), getgid());
    let mut last_error = String::new();
    for base in [
        CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS,
        CloneFlags::CLONE_NEWNS,
    ] {
        let with_user = base.contains(CloneFlags::CLONE_NEWUSER);
        let mut net_error = None;
        if want_net {
            match unshare(base | CloneFlags::CLONE_NEWNET) {
                Ok(()) => {}
                Err(e) => net_error = Some(errno(e)),
            }
        }
        let attempted_net = want_net && net_error.is_none();
        if !attempted_net && let Err(e) = unshare(base) {
            if with_user {
                support.userns_error = Some(userns_reason(e));
            }
            last_error = errno(e);
            continue;
        }
        if with_user && let Err(e) = map_ids(uid, gid) {
            support.userns_error = Some(format!("cannot map user ids: {e}"));
        }
        support.netns_error = net_error;
        return;
    }
    support.mountns_error = Some(last_error.clone());
    if want_net {
        support.netns_error = Some(format!("{last_error} without a user namespace"));
    }
}

/// Inside the new user namespace we keep our own uid and gid (and nothing else is mapped).
fn map_ids(uid: Uid, gid: Gid) -> Result<(), String> {
    // gid_map may only be written once setgroups is denied; kernels before 3.19 lack the file.
    match std::fs::write("/proc/self/setgroups", "deny") {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("setgroups: {e}"));
        }
        _ => {}
    }
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))
        .map_err(|e| format!("uid_map: {e}"))?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))
        .map_err(|e| format!("gid_map: {e}"))
}

/// Bind-mounts each directory or file onto itself, read-only, in the private mount namespace.
/// A read-only mount point can be neither written, nor removed, nor renamed over (EBUSY).
fn protect(dirs: &[&PathBuf]) -> Result<(), String> {
    if dirs.is_empty() {
        return Ok(());
    }
    let none: Option<&str> = None;
    // Nothing done here may propagate back to the parent namespace.
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
        .map_err(|e| format!("making / private: {e}"))?;
    let result = dirs.iter().try_for_each(|dir| protect_one(dir));
    // A working directory inside a protected one was entered before the mount and would still
    // be the writable original; entering it again by path goes through the new mount.
    if let Ok(cwd) = std::env::current_dir() {
        let _ = std::env::set_current_dir(cwd);
    }
    result
}

fn protect_one(dir: &Path) -> Result<(), String> {
    let none: Option<&str> = None;
    let fail = |what: &str, e: nix::Error| format!("{what} {}: {e}", dir.display());
    let original = statvfs(dir).map_err(|e| fail("statvfs", e))?.flags();
    mount(
        Some(dir),
        dir,
        none,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        none,
    )
    .map_err(|e| fail("bind-mounting", e))?;
    // In a user namespace the mount's nosuid/nodev/noexec and atime flags are locked: the
    // remount must repeat them or it fails with EPERM.
    let mut flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
    for (has, add) in [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if original.contains(has) {
            flags |= add;
        }
    }
    if !original.intersects(FsFlags::ST_NOATIME | FsFlags::ST_RELATIME) {
        flags |= MsFlags::MS_STRICTATIME;
    }
    mount(none, dir, none, flags, none).map_err(|e| fail("remounting read-only", e))
}

/// The filesystem rights this kernel's landlock controls.
fn kernel_fs_rights() -> BitFlags<AccessFs> {
    ABIS.iter()
        .map(|abi| AccessFs::from_all(*abi))
        .find(|rights| {
            Ruleset::default()
                .set_compatibility(CompatLevel::HardRequirement)
                .handle_access(*rights)
                .is_ok()
        })
        .unwrap_or(BitFlags::EMPTY)
}

/// The network rights this kernel's landlock controls (TCP from ABI 4, UDP later).
fn kernel_net_rights() -> BitFlags<AccessNet> {
    ABIS.iter()
        .map(|abi| AccessNet::from_all(*abi))
        .filter(|rights| !rights.is_empty())
        .find(|rights| {
            Ruleset::default()
                .set_compatibility(CompatLevel::HardRequirement)
                .handle_access(*rights)
                .is_ok()
        })
        .unwrap_or(BitFlags::EMPTY)
}

/// Signals and abstract Unix sockets of processes outside the sandbox, where the kernel can
/// scope them (ABI 6).
fn kernel_scopes() -> BitFlags<Scope> {
    [Scope::Signal, Scope::AbstractUnixSocket]
        .into_iter()
        .filter(|scope| {
            Ruleset::default()
                .set_compatibility(CompatLevel::HardRequirement)
                .scope(*scope)
                .is_ok()
        })
        .collect()
}

fn apply_landlock(spec: &SandboxSpec, handle_net: bool, support: &mut SandboxSupport) {
    let fs = kernel_fs_rights();
    let net = kernel_net_rights();
    support.fs_rights = right_names(fs.iter());
    support.net_tcp = net.contains(AccessNet::ConnectTcp);
    support.net_udp = net.contains(AccessNet::ConnectSendUdp);
    let scopes = kernel_scopes();
    support.scope_signal = scopes.contains(Scope::Signal);
    support.scope_abstract_unix = scopes.contains(Scope::AbstractUnixSocket);
    if let Err(e) = nix::sys::prctl::set_no_new_privs() {
        support.landlock_error = Some(format!("cannot set no_new_privs: {e}"));
        return;
    }
    if fs.is_empty() {
        support.landlock_error =
            Some("landlock is unavailable: not built into this kernel or disabled".into());
        return;
    }
    let restricted = (|| -> Result<landlock::RestrictionStatus, String> {
        let text = |e: landlock::RulesetError| e.to_string();
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(fs)
            .map_err(text)?;
        if handle_net && !net.is_empty() {
            ruleset = ruleset.handle_access(net).map_err(text)?;
        }
        // Whether the network is on or off: with it on, abstract sockets are the host's.
        if !scopes.is_empty() {
            ruleset = ruleset.scope(scopes).map_err(text)?;
        }
        let mut created = ruleset.create().map_err(text)?;
        // Read and execute everywhere; connecting to a pathname socket (RESOLVE_UNIX, where
        // the kernel has it) only beneath the writable paths and to the allowed sockets.
        let read = AccessFs::from_read(ABI::V1) & fs;
        let root = PathFd::new("/").map_err(|e| e.to_string())?;
        created = created
            .add_rule(PathBeneath::new(root, read))
            .map_err(text)?;
        for path in &spec.writable {
            // A path that does not exist, or that now leads through a symlink, gets no rule.
            let Some(fd) = writable_fd(path) else {
                continue;
            };
            let rights = if path.is_dir() {
                fs
            } else {
                fs & AccessFs::from_file(ABI::V10)
            };
            created = created
                .add_rule(PathBeneath::new(fd, rights))
                .map_err(text)?;
        }
        let connect = fs & AccessFs::ResolveUnix;
        for socket in spec.sockets.iter().filter(|_| !connect.is_empty()) {
            let Ok(fd) = PathFd::new(socket) else {
                continue;
            };
            created = created
                .add_rule(PathBeneath::new(fd, connect))
                .map_err(text)?;
        }
        created.restrict_self().map_err(text)
    })();
    match restricted {
        Ok(status) => {
            support.landlock_abi = match status.landlock {
                LandlockStatus::Available {
                    effective_abi,
                    kernel_abi,
                } => kernel_abi.or_else(|| effective_abi.to_string().parse().ok()),
                _ => None,
            };
            if status.ruleset != RulesetStatus::FullyEnforced {
                support.landlock_error = Some(format!("ruleset {:?}", status.ruleset));
            } else if !status.no_new_privs {
                support.landlock_error = Some("no_new_privs is not set".into());
            }
        }
        Err(e) => support.landlock_error = Some(format!("cannot apply landlock: {e}")),
    }
}

/// An `O_PATH` descriptor of a writable path, refusing symlinks on the whole way: the paths
/// are canonical when the session starts, so a symlink found now was swapped in since (a
/// session whose root lies inside another session's writable directory), and following it
/// would grant writes wherever it points. Refused paths get no rule, which fails closed.
fn writable_fd(path: &Path) -> Option<std::os::fd::OwnedFd> {
    use rustix::fs::{CWD, Mode, OFlags, ResolveFlags};
    let flags = OFlags::PATH | OFlags::CLOEXEC;
    let resolve = ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    match rustix::fs::openat2(CWD, path, flags, Mode::empty(), resolve) {
        Ok(fd) => Some(fd),
        // Kernels with landlock all have openat2; a seccomp filter above us may hide it.
        Err(rustix::io::Errno::NOSYS) => rustix::fs::open(path, flags, Mode::empty()).ok(),
        Err(_) => None,
    }
}
