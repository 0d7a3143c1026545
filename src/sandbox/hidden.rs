//! What tool processes must not see, whatever the preset: corral's own state (the server's JWT
//! secret, other sessions' logs and worktrees, pids.json), the usual credential stores, and the
//! places where the desktop's and the system's Unix sockets live.
//!
//! The list is the request; the helper (confine/hide.rs) hides what of it exists when a tool
//! starts, keeps the session's writable paths visible inside it, and adds the pathname sockets
//! the kernel lists at that moment.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Under the home directory. Files and directories alike: the helper looks at what is there.
const HOME_SECRETS: &[&str] = &[
    // Keys and agents.
    ".ssh",
    ".gnupg",
    ".password-store",
    ".local/share/keyrings",
    ".local/share/kwalletd",
    // Cloud and cluster credentials.
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".config/containers/auth.json",
    ".terraform.d/credentials.tfrc.json",
    ".vault-token",
    // Tokens that push code or packages.
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".config/gh",
    ".config/hub",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    // Agent CLIs corral drives: their login tokens.
    ".claude/.credentials.json",
    ".codex/auth.json",
    ".gemini/oauth_creds.json",
    // Browser and mail profiles (cookies, saved passwords).
    ".mozilla",
    ".thunderbird",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    // corral's own, where the XDG variables do not point elsewhere.
    ".config/corral",
    ".cache/corral",
    ".local/share/corral",
];

/// Sockets and socket directories of the system and the desktop: a tool that reaches one can
/// have something run outside the sandbox (docker, systemd, the session bus, X11, ssh-agent).
/// The helper adds every pathname socket the kernel lists when the tool starts.
const SYSTEM_SOCKETS: &[&str] = &[
    "/run/user",
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/podman",
    "/run/containerd",
    "/run/dbus",
    "/var/run/dbus",
    "/run/systemd/private",
    "/run/systemd/userdb",
    "/run/snapd.socket",
    "/run/snapd-snap.socket",
    "/run/libvirt",
    "/run/screen",
    "/tmp/.X11-unix",
    "/tmp/.ICE-unix",
];

/// The default list for this process's user: corral's config, cache and data directories, the
/// credential stores under the home directory, `$XDG_RUNTIME_DIR`, `$SSH_AUTH_SOCK`, the
/// desktop's control sockets where they live elsewhere (an absolute `$WAYLAND_DISPLAY`,
/// `$SWAYSOCK`: input injection and sway's `exec` would be a way out) and the system's socket
/// paths.
pub(crate) fn default_hidden() -> Vec<PathBuf> {
    let corral = [dirs::config_dir(), dirs::cache_dir(), dirs::data_dir()]
        .into_iter()
        .flatten()
        .map(|dir| dir.join("corral"))
        .collect::<Vec<_>>();
    hidden_for(dirs::home_dir().as_deref(), &corral, |name| {
        std::env::var_os(name)
    })
}

fn hidden_for(
    home: Option<&Path>,
    corral_dirs: &[PathBuf],
    env: impl Fn(&str) -> Option<OsString>,
) -> Vec<PathBuf> {
    let mut list: Vec<PathBuf> = corral_dirs.to_vec();
    if let Some(home) = home {
        list.extend(HOME_SECRETS.iter().map(|rel| home.join(rel)));
    }
    // Only absolute values: a relative one would be taken against the tool's directory.
    for name in [
        "XDG_RUNTIME_DIR",
        "SSH_AUTH_SOCK",
        "GNUPGHOME",
        "WAYLAND_DISPLAY",
        "SWAYSOCK",
    ] {
        if let Some(value) = env(name).map(PathBuf::from).filter(|p| p.is_absolute()) {
            list.push(value);
        }
    }
    list.extend(SYSTEM_SOCKETS.iter().map(PathBuf::from));
    let mut seen = std::collections::HashSet::new();
    list.retain(|p| seen.insert(p.clone()));
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_covers_corral_the_stores_and_the_sockets() {
        let env = |name: &str| match name {
            "XDG_RUNTIME_DIR" => Some("/run/user/1000".into()),
            "SSH_AUTH_SOCK" => Some("relative/agent.sock".into()),
            "GNUPGHOME" => Some("/h/.gnupg".into()),
            "SWAYSOCK" => Some("/tmp/sway-ipc.1000.42.sock".into()),
            "WAYLAND_DISPLAY" => Some("wayland-1".into()),
            _ => None,
        };
        let corral = [PathBuf::from("/x/config/corral")];
        let list = hidden_for(Some(Path::new("/h")), &corral, env);
        for path in [
            "/x/config/corral",
            "/h/.ssh",
            "/h/.config/gcloud",
            "/h/.git-credentials",
            "/h/.local/share/keyrings",
            "/run/user/1000",
            "/run/user",
            "/tmp/.X11-unix",
            "/var/run/docker.sock",
            "/tmp/sway-ipc.1000.42.sock",
        ] {
            assert!(list.contains(&PathBuf::from(path)), "{path}: {list:?}");
        }
        assert!(!list.iter().any(|p| p.ends_with("agent.sock")), "{list:?}");
        // A socket name relative to XDG_RUNTIME_DIR is hidden with it.
        assert!(!list.iter().any(|p| p.ends_with("wayland-1")), "{list:?}");
        // GNUPGHOME equal to the default is listed once.
        assert_eq!(list.iter().filter(|p| p.ends_with(".gnupg")).count(), 1);
        let no_home = hidden_for(None, &[], |_| None);
        assert!(no_home.iter().all(|p| !p.starts_with("/h")));
        assert!(no_home.contains(&PathBuf::from("/run/user")));
    }
}
