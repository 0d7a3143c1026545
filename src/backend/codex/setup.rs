//! What a codex session starts from: the program, its private home, the approval policy and
//! sandbox a corral preset amounts to, and the model a switch names.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::model::{ChoiceError, ExternalKind, ExternalSpec, ModelChoice};
use crate::policy::Policy;
use crate::sandbox::programs::{self, Program, Source};

/// `$CORRAL_CODEX`, else `codex` on PATH, else the copy scripts/install-agent-clis installs.
pub fn find_program() -> Result<PathBuf, Error> {
    let program = Program {
        name: "codex",
        package: "@openai/codex",
        override_var: Some("CORRAL_CODEX"),
        source: Source::Npm,
    };
    programs::find_installed(program).map_err(|e| Error::Runtime(e.to_string()))
}

/// The environment for a private HOME: codex keeps its config, logins and threads under
/// `CODEX_HOME`. The user's model-provider config is copied in, since without it codex could
/// not reach a model at all; logins are not.
pub fn private_home(home: &Path) -> Result<Vec<(String, String)>, Error> {
    let user_config = Some(codex_home(None).join("config.toml")).filter(|p| p.is_file());
    let codex_home = home.join(".codex");
    std::fs::create_dir_all(&codex_home)
        .map_err(|e| Error::Runtime(format!("cannot create {}: {e}", codex_home.display())))?;
    if let Some(config) = user_config
        && let Err(e) = std::fs::copy(&config, codex_home.join("config.toml"))
    {
        tracing::warn!(path = %config.display(), error = %e, "cannot copy codex's config");
    }
    Ok(vec![
        ("HOME".into(), home.display().to_string()),
        ("CODEX_HOME".into(), codex_home.display().to_string()),
    ])
}

/// The directory codex reads its `config.toml` from: the private HOME's copy, else
/// `CODEX_HOME`, else `~/.codex`.
pub fn codex_home(private: Option<&Path>) -> PathBuf {
    if let Some(home) = private {
        return home.join(".codex");
    }
    std::env::var_os("CODEX_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".codex")))
        .unwrap_or_default()
}

/// codex's `TMPDIR`: `tmp` in the session's temp dir, made private. Not the temp dir itself,
/// which holds the private HOME: a writable root there would let codex's commands rewrite
/// codex's own config.
pub fn private_tmp(session_tmp: &Path) -> Result<String, Error> {
    let dir = session_tmp.join("tmp");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .or_else(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists if dir.is_dir() && !dir.is_symlink() => Ok(()),
            _ => Err(e),
        })
        .map_err(|e| Error::Runtime(format!("cannot create {}: {e}", dir.display())))?;
    Ok(dir.display().to_string())
}

/// PATH for codex, starting with a directory (under `dir`) that holds `codex-linux-sandbox`,
/// a link to codex's native program. codex runs a command in its sandbox by starting itself
/// under that name inside bubblewrap; with a system bubblewrap older than 0.9 (no
/// `--argv0`: Debian 12's) it asks bubblewrap to run `codex-linux-sandbox` by name, which
/// fails unless PATH has it, and then every command codex runs fails. `None` when the native
/// program is not found (PATH is then left as it is).
pub fn sandbox_helper_path(dir: &Path, program: &Path) -> Option<String> {
    let native = native_program(program)?;
    let dir = dir.join("codex-bin");
    std::fs::create_dir_all(&dir).ok()?;
    let link = dir.join("codex-linux-sandbox");
    if std::fs::read_link(&link).ok().as_deref() != Some(native.as_path()) {
        // Made aside and renamed over, so corral processes starting at once never see the
        // link missing.
        let aside = dir.join(format!(".codex-linux-sandbox.{}", std::process::id()));
        let _ = std::fs::remove_file(&aside);
        let made = std::os::unix::fs::symlink(&native, &aside)
            .and_then(|()| std::fs::rename(&aside, &link));
        if let Err(e) = made {
            tracing::warn!(error = %e, "cannot link codex's sandbox helper");
            return None;
        }
    }
    let path = std::env::var("PATH")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    Some(format!("{}:{path}", dir.display()))
}

/// codex's native program: `program` itself when it is one, else the binary npm's platform
/// package holds beside the JavaScript launcher (`@openai/codex-linux-<arch>/vendor/<triple>/
/// bin/codex`, or `@openai/codex/vendor/<triple>/codex/codex` in older releases).
fn native_program(program: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(program).ok()?;
    if is_elf(&real) {
        return Some(real);
    }
    let node_modules = real
        .ancestors()
        .find(|dir| dir.file_name().is_some_and(|n| n == "node_modules"))?;
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        _ => return None,
    };
    let triples = [
        format!("{}-unknown-linux-musl", std::env::consts::ARCH),
        format!("{}-unknown-linux-gnu", std::env::consts::ARCH),
    ];
    let candidates = triples.iter().flat_map(|triple| {
        [
            node_modules.join(format!(
                "@openai/codex-linux-{arch}/vendor/{triple}/bin/codex"
            )),
            node_modules.join(format!("@openai/codex/vendor/{triple}/codex/codex")),
        ]
    });
    candidates.into_iter().find(|c| is_elf(c))
}

fn is_elf(path: &Path) -> bool {
    use std::io::Read as _;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == b"\x7fELF"
}

/// codex's own approval policy and sandbox for a corral preset. codex asks about anything it
/// does not know to be safe (`untrusted`) and corral's gate answers, so the preset's rules
/// decide; only `bypass`, where nothing asks, lets codex run everything unasked.
pub fn codex_policy(policy: &Policy) -> (&'static str, &'static str) {
    if policy.bypass {
        ("never", "workspace-write")
    } else if !policy.offers("shell") && !policy.offers("write_file") {
        ("untrusted", "read-only")
    } else {
        ("untrusted", "workspace-write")
    }
}

/// The codex model a `set_model` names: `codex:<model>` or a bare model name. `None`: it
/// names another agent or a model of corral's own, which a codex thread cannot switch to.
pub fn codex_model(text: &str) -> Result<Option<String>, String> {
    let text = text.trim();
    let unnamed = || "name the model to switch to: codex:<model>".to_string();
    match text.parse::<ModelChoice>() {
        Ok(ModelChoice::External(ExternalSpec {
            kind: ExternalKind::Codex,
            model,
            ..
        })) => model.map(Some).ok_or_else(unnamed),
        // A bare name is codex's own model.
        Ok(ModelChoice::Native(spec)) if spec.provider_implied => Ok(Some(spec.model)),
        // Another agent, or a model corral would talk to itself (`ollama:…`, `openai:…`).
        Ok(_) => Ok(None),
        Err(ChoiceError::Agent(e)) => Err(e),
        Err(ChoiceError::Model(_)) if text.is_empty() => Err(unnamed()),
        // A bare name is codex's own model; anything else with a prefix is no model of codex.
        Err(ChoiceError::Model(_)) => Ok((!text.contains(':')).then(|| text.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_helper_links_to_the_native_program_beside_the_launcher() {
        let dir = tempfile::tempdir().unwrap();
        let modules = dir.path().join("node_modules");
        let launcher = modules.join("@openai/codex/bin/codex.js");
        std::fs::create_dir_all(launcher.parent().unwrap()).unwrap();
        std::fs::write(&launcher, "#!/usr/bin/env node\n").unwrap();
        let arch = match std::env::consts::ARCH {
            "x86_64" => "x64",
            _ => "arm64",
        };
        let native = modules.join(format!(
            "@openai/codex-linux-{arch}/vendor/{}-unknown-linux-musl/bin/codex",
            std::env::consts::ARCH
        ));
        std::fs::create_dir_all(native.parent().unwrap()).unwrap();
        std::fs::write(&native, b"\x7fELF rest").unwrap();
        let cache = dir.path().join("cache");
        let path = sandbox_helper_path(&cache, &launcher).unwrap();
        let helper_dir = cache.join("codex-bin");
        assert!(
            path.starts_with(&format!("{}:", helper_dir.display())),
            "{path}"
        );
        let link = std::fs::read_link(helper_dir.join("codex-linux-sandbox")).unwrap();
        assert_eq!(link, native.canonicalize().unwrap());
        // A launcher with no native program beside it changes nothing.
        std::fs::remove_file(&native).unwrap();
        assert_eq!(sandbox_helper_path(&cache, &launcher), None);
    }

    #[test]
    fn a_model_switch_names_a_codex_model() {
        assert_eq!(codex_model("codex:gpt-5"), Ok(Some("gpt-5".into())));
        assert_eq!(codex_model("o4-mini"), Ok(Some("o4-mini".into())));
        assert_eq!(codex_model("claude:sonnet"), Ok(None));
        assert_eq!(codex_model("ollama:qwen3"), Ok(None));
        assert!(codex_model("codex").is_err());
        assert!(codex_model(" ").is_err());
    }

    #[test]
    fn presets_map_to_codex_policies() {
        let load = |name: &str| {
            Policy::load(name, None, &Default::default()).unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        assert_eq!(
            codex_policy(&load("default")),
            ("untrusted", "workspace-write")
        );
        assert_eq!(codex_policy(&load("readonly")), ("untrusted", "read-only"));
        assert_eq!(codex_policy(&load("bypass")), ("never", "workspace-write"));
    }
}
