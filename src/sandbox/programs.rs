//! Finding the programs corral starts itself (agent CLIs, llama.cpp's server): one set of
//! rules for all of them, so none is found by a weaker test than another. A variable that
//! points at the program wins, and a wrong one is an error rather than skipped (the person
//! meant that file); then `PATH`; then the copy corral's install scripts put in place. Only
//! executable regular files count. When nothing is found, the error names the package to
//! install.

use std::path::{Path, PathBuf};

/// Where `scripts/install-agent-clis` puts the agent programs, under `$HOME`.
pub const AGENT_CLIS: &str = ".cache/corral-ci/agent-clis/node_modules/.bin";

/// Where `scripts/setup` puts llama.cpp's server, under the data directory.
const LLAMA_SERVER_BIN: &str = "corral/llama-server/bin";

/// A program to find: its command name, the package that has it, the variable that may point
/// at it, and which of corral's install scripts provides it.
#[derive(Debug, Clone, Copy)]
pub struct Program {
    pub name: &'static str,
    pub package: &'static str,
    pub override_var: Option<&'static str>,
    pub source: Source,
}

/// Where a program comes from when it is not on PATH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// An npm package; `scripts/install-agent-clis` installs it under `~/AGENT_CLIS`.
    Npm,
    /// llama.cpp; `scripts/setup` installs its server under `$XDG_DATA_HOME/corral`.
    LlamaCpp,
    /// Only from its vendor's own site: on PATH or nowhere.
    Vendor,
}

impl Source {
    /// The copy the install script put in place, if it is there.
    fn installed(self, name: &str, var: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
        let dir = match self {
            Source::Npm => PathBuf::from(var("HOME")?).join(AGENT_CLIS),
            Source::LlamaCpp => data_dir(var)?.join(LLAMA_SERVER_BIN),
            Source::Vendor => return None,
        };
        Some(dir.join(name)).filter(|candidate| is_executable(candidate))
    }

    fn place(self) -> &'static str {
        match self {
            Source::Npm => "~/.cache/corral-ci/agent-clis/node_modules/.bin",
            Source::LlamaCpp => "$XDG_DATA_HOME/corral/llama-server/bin",
            Source::Vendor => "any other place corral looks",
        }
    }

    fn how(self, package: &str) -> String {
        match self {
            Source::Npm => {
                format!("`npm install -g {package}` (or run scripts/install-agent-clis)")
            }
            Source::LlamaCpp => format!(
                "{package} (its llama-server), or run scripts/setup (it installs one), or set \
                 local.server_command in the config"
            ),
            Source::Vendor => package.to_string(),
        }
    }

    fn label(self, package: &str) -> String {
        match self {
            Source::Npm => format!("npm package {package}"),
            Source::LlamaCpp => format!("package {package}"),
            Source::Vendor => package.to_string(),
        }
    }
}

/// `$XDG_DATA_HOME` when it is absolute, else `~/.local/share`, as the XDG spec has it.
fn data_dir(var: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    var("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| var("HOME").map(|home| Path::new(&home).join(".local/share")))
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FindError {
    #[error("{var}={path} is not an executable file; point it at {name} ({package})")]
    BadOverride {
        var: &'static str,
        path: String,
        name: &'static str,
        package: String,
    },
    #[error(
        "{name} is not installed: it is neither on PATH nor in {place}; install it with \
         {how}{hint}"
    )]
    NotFound {
        name: &'static str,
        place: &'static str,
        how: String,
        hint: String,
    },
}

/// The override variable when set, else `name` on PATH, else the copy the program's install
/// script put in place. `var` reads the environment (tests pass their own).
pub fn find_program(
    program: Program,
    var: impl Fn(&str) -> Option<String>,
) -> Result<PathBuf, FindError> {
    if let Some(override_var) = program.override_var
        && let Some(path) = var(override_var).filter(|p| !p.is_empty())
    {
        let candidate = PathBuf::from(&path);
        return if is_executable(&candidate) {
            Ok(candidate)
        } else {
            Err(FindError::BadOverride {
                var: override_var,
                path,
                name: program.name,
                package: program.source.label(program.package),
            })
        };
    }
    on_path(program.name, &var)
        .or_else(|| program.source.installed(program.name, &var))
        .ok_or_else(|| FindError::NotFound {
            name: program.name,
            place: program.source.place(),
            how: program.source.how(program.package),
            hint: program
                .override_var
                .map(|v| format!(", or set {v} to its path"))
                .unwrap_or_default(),
        })
}

/// The program as the environment names it: [`find_program`] over the process's variables.
pub fn find_installed(program: Program) -> Result<PathBuf, FindError> {
    find_program(program, |name| std::env::var(name).ok())
}

/// The first executable `name` on `$PATH`.
pub fn on_path(name: &str, var: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let path = var("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const SERVER: Program = Program {
        name: "llama-server",
        package: "llama.cpp",
        override_var: None,
        source: Source::LlamaCpp,
    };

    fn write(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn only_executable_files_count_and_the_setup_copy_comes_after_path() {
        let dir = tempfile::tempdir().unwrap();
        let vars = |pairs: &[(&'static str, PathBuf)]| {
            let map: HashMap<&str, String> = pairs
                .iter()
                .map(|(k, v)| (*k, v.display().to_string()))
                .collect();
            move |k: &str| map.get(k).cloned()
        };
        let bin = dir.path().join("bin");
        write(&bin.join("llama-server"), 0o644);
        let data = dir.path().join("data");
        let installed = data.join(LLAMA_SERVER_BIN).join("llama-server");
        write(&installed, 0o755);
        let env = vars(&[("PATH", bin.clone()), ("XDG_DATA_HOME", data)]);
        // The file on PATH cannot be run: it is passed over.
        assert_eq!(find_program(SERVER, &env).unwrap(), installed);
        write(&bin.join("llama-server"), 0o755);
        assert_eq!(
            find_program(SERVER, &env).unwrap(),
            bin.join("llama-server")
        );
        let home = vars(&[("HOME", dir.path().to_path_buf())]);
        let e = find_program(SERVER, home).unwrap_err().to_string();
        assert!(e.contains("llama.cpp"), "{e}");
        assert!(e.ends_with("local.server_command in the config"), "{e}");
    }
}
