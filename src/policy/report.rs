//! What `corral doctor` says about the gate: whether programs can be resolved for grants and
//! read-only commands here, and what the auto preset checks.

use super::preset::{Policy, PolicyOverrides};
use super::program;

/// One line: whether it holds, what it is about, and the detail.
pub struct GateLine {
    pub ok: bool,
    pub what: &'static str,
    pub detail: String,
}

pub fn doctor_lines() -> Vec<GateLine> {
    let mut lines = Vec::new();
    let path = program::search_path().unwrap_or_default();
    let relative: Vec<String> = std::env::split_paths(&path)
        .filter(|d| d.is_relative() || d.as_os_str().is_empty())
        .map(|d| format!("{:?}", d.display().to_string()))
        .collect();
    lines.push(if relative.is_empty() {
        GateLine {
            ok: true,
            what: "gate: programs",
            detail: "PATH has only absolute entries: \"always\" grants and read-only commands \
                     name the file that runs (./ls is not ls)"
                .into(),
        }
    } else {
        GateLine {
            ok: false,
            what: "gate: programs",
            detail: format!(
                "PATH has relative entries ({}): a bare command name may run a file from the \
                 project, so \"always\" is not offered and read-only commands ask",
                relative.join(", ")
            ),
        }
    });
    lines.push(match Policy::load("auto", None, &PolicyOverrides::default()) {
        Ok(auto) => GateLine {
            ok: true,
            what: "gate: read-only commands",
            detail: format!(
                "auto runs {} programs and subcommands without asking, each option checked against its list, \
                 paths inside the root, redirections only to /dev/null; open_url, clipboard \
                 and screenshot ask; open_url is refused with --network off",
                auto.commands.len()
            ),
        },
        Err(e) => GateLine {
            ok: false,
            what: "gate: read-only commands",
            detail: e.to_string(),
        },
    });
    lines
}
