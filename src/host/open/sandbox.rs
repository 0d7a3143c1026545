//! The session's sandbox: modes from flags, config and preset; what it
//! protects and may write; one probe of the kernel at start, and what it cannot enforce said
//! once (best-effort) or refused (strict).

use std::path::{Path, PathBuf};

use super::settings::Chosen;
use crate::policy::Policy;
use crate::sandbox::{NetworkMode, SandboxMode, SandboxSpec, SandboxSupport};
use crate::session::Session;

use crate::error::Error;

/// Mode and network for the session. A preset's `sandbox` is a floor and its `network = "off"`
/// is final: the config's choice is raised to them, a request asking for less is an error.
pub(crate) fn modes(
    mode: Chosen<SandboxMode>,
    network: Chosen<NetworkMode>,
    policy: &Policy,
) -> Result<(SandboxMode, NetworkMode), Error> {
    let usage = |text: String| Error::Usage(text);
    let floor = policy.sandbox.unwrap_or(SandboxMode::Off);
    let mode = match mode {
        Chosen::Requested(mode) if mode < floor => {
            return Err(usage(format!(
                "the {} preset requires --sandbox {floor} (got --sandbox {mode})",
                policy.name
            )));
        }
        Chosen::Requested(mode) => mode,
        Chosen::Configured(mode) => mode.max(floor),
    };
    let network = match (network, policy.network) {
        (Chosen::Requested(NetworkMode::On), Some(NetworkMode::Off)) => {
            return Err(usage(format!(
                "the {} preset turns the network off for tools: --network on is not allowed",
                policy.name
            )));
        }
        (Chosen::Requested(network), _) => network,
        (Chosen::Configured(_), Some(NetworkMode::Off)) => NetworkMode::Off,
        (Chosen::Configured(network), _) => network,
    };
    if mode == SandboxMode::Off && network == NetworkMode::Off {
        return Err(usage(
            "network off is enforced by the sandbox: it needs --sandbox best-effort or strict"
                .into(),
        ));
    }
    Ok((mode, network))
}

/// Builds the spec for `root`, probes the kernel once and reports: best-effort gaps become one
/// `error` event, strict gaps a usage error (exit 2) before any tool runs.
pub(crate) async fn start(
    (mode, network): (SandboxMode, NetworkMode),
    policy: &Policy,
    root: &Path,
    tmpdir: &Path,
    session: &Session,
) -> Result<Option<SandboxSpec>, Error> {
    if mode == SandboxMode::Off {
        // No confinement, but still the helper: a call's background processes end with it.
        // The protected list is still taken: it tells the repositories that were there from
        // those a call plants (which are taken apart after it).
        let mut spec = SandboxSpec::new(mode, network);
        spec.protected = crate::sandbox::paths::scan::protected_paths(root).paths;
        return Ok(Some(spec));
    }
    let spec = spec_for(mode, network, policy, root, tmpdir);
    let support = SandboxSupport::probe(&spec).await;
    for limit in support.limits(&spec) {
        tracing::info!(%limit, "sandbox limit");
    }
    if let Some(gap) = support.shortfall(&spec) {
        let message = match mode {
            SandboxMode::Strict => format!("sandbox strict: cannot enforce: {gap}"),
            _ => format!("sandbox {mode}: {gap}"),
        };
        let data = serde_json::json!({ "sandbox": support, "mode": mode });
        if mode == SandboxMode::Strict {
            session.emit_error(message.clone(), data);
            return Err(Error::Usage(message));
        }
        session.emit_error(message, data);
    }
    Ok(Some(spec))
}

/// Writable: the root, its private temp dir, /dev/null and the preset's paths. Protected:
/// git's files and agent config in and around the root (`paths::scan::protected_paths`): the
/// root's `.git` directory or file and the git dirs it points to, nested ones, and an
/// enclosing repository's `.git`. Hidden: corral's state, the credential stores and socket
/// places, plus the preset's; sockets: the preset's.
fn spec_for(
    mode: SandboxMode,
    network: NetworkMode,
    policy: &Policy,
    root: &Path,
    tmpdir: &Path,
) -> SandboxSpec {
    let mut spec = SandboxSpec::new(mode, network);
    spec.writable = vec![
        root.to_path_buf(),
        tmpdir.to_path_buf(),
        PathBuf::from("/dev/null"),
    ];
    let home = dirs::home_dir();
    spec.writable.extend(
        policy
            .writable
            .iter()
            .map(|p| expand(p, root, home.as_deref())),
    );
    // Resolved once, now, where the person chose them: the helper then refuses any symlink on
    // these paths, which can only have been swapped in since.
    for path in &mut spec.writable {
        if let Ok(real) = path.canonicalize() {
            *path = real;
        }
    }
    let protected = crate::sandbox::paths::scan::protected_paths(root);
    if protected.incomplete {
        tracing::warn!(
            root = %root.display(),
            "the tree is too big to find every nested .git and agent config; protecting {} paths",
            protected.paths.len()
        );
    }
    spec.protected = protected.paths;
    spec.hidden = crate::sandbox::default_hidden();
    let preset_paths = |paths: &[String]| -> Vec<PathBuf> {
        paths
            .iter()
            .map(|p| expand(p, root, home.as_deref()))
            .collect()
    };
    spec.hidden.extend(preset_paths(&policy.hidden));
    spec.sockets = preset_paths(&policy.sockets);
    spec
}

/// `~/x` under the home directory, a relative path under the root, an absolute one as it is.
fn expand(path: &str, root: &Path, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ if path == "~" => home.map_or_else(|| root.join(path), Path::to_path_buf),
        _ => root.join(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::host::open::OpenSpec;
    use crate::host::open::settings::Settings;
    use crate::policy::PolicyOverrides;

    /// The modes for a request's flags and a config, resolved as `plan` resolves them.
    fn modes_for(
        sandbox: Option<SandboxMode>,
        network: Option<NetworkMode>,
        config: &Config,
        policy: &Policy,
    ) -> Result<(SandboxMode, NetworkMode), Error> {
        let spec = OpenSpec {
            sandbox,
            network,
            ..OpenSpec::default()
        };
        let settings = Settings::resolve(&spec, config);
        modes(settings.sandbox, settings.network, policy)
    }

    fn policy(extra: &str) -> Policy {
        let text = format!("description = \"d\"\n{extra}");
        Policy::parse("team", &text, &PolicyOverrides::default()).unwrap()
    }

    #[test]
    fn the_preset_sets_a_floor_and_flags_may_not_go_below_it() {
        let config = Config::default();
        let plain = policy("");
        assert_eq!(
            modes_for(None, None, &config, &plain).unwrap(),
            (SandboxMode::BestEffort, NetworkMode::On)
        );
        let strict = policy("sandbox = \"strict\"\nnetwork = \"off\"\n");
        assert_eq!(
            modes_for(None, None, &config, &strict).unwrap(),
            (SandboxMode::Strict, NetworkMode::Off)
        );
        let below = modes_for(Some(SandboxMode::BestEffort), None, &config, &strict).unwrap_err();
        assert!(
            below.to_string().contains("requires --sandbox strict"),
            "{below}"
        );
        let net = modes_for(None, Some(NetworkMode::On), &config, &strict).unwrap_err();
        assert!(net.to_string().contains("--network on"), "{net}");
        let off = modes_for(
            Some(SandboxMode::Off),
            Some(NetworkMode::Off),
            &config,
            &plain,
        );
        assert!(off.is_err());
        let config = Config {
            sandbox: Some(SandboxMode::Off),
            ..Config::default()
        };
        assert_eq!(
            modes_for(None, None, &config, &plain).unwrap().0,
            SandboxMode::Off
        );
    }

    #[test]
    fn the_spec_protects_git_and_expands_preset_paths() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join(".git")).unwrap();
        let preset = policy(
            "writable = [\"~/.cache/pip\", \"build\", \"/dev/shm\"]\nhidden = [\"secrets\"]\n\
             sockets = [\"/run/user/1000/bus\"]\n",
        );
        let spec = spec_for(
            SandboxMode::Strict,
            NetworkMode::On,
            &preset,
            root,
            Path::new("/t"),
        );
        assert_eq!(spec.protected, [root.join(".git")]);
        assert_eq!(
            spec.writable[..3],
            [root.to_path_buf(), "/t".into(), "/dev/null".into()]
        );
        assert_eq!(spec.writable[4], root.join("build"));
        assert_eq!(spec.writable[5], PathBuf::from("/dev/shm"));
        assert!(
            spec.hidden.contains(&root.join("secrets")),
            "{:?}",
            spec.hidden
        );
        assert!(spec.hidden.contains(&PathBuf::from("/run/user")));
        assert_eq!(spec.sockets, [PathBuf::from("/run/user/1000/bus")]);
        assert_eq!(
            expand("~/.cache", root, Some(Path::new("/h"))),
            PathBuf::from("/h/.cache")
        );
    }
}
