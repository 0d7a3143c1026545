//! The agent runtimes corral drives directly (`-m claude`, `-m codex`, `-m gemini`, …), one
//! line each: the version the installed program prints for `--version`, or `missing` with how
//! to install it; then its lifecycle, steering mode and where its key comes from.

use std::process::Stdio;
use std::time::Duration;

use super::{Report, State};
use crate::surface::safe_text::escape_line;

/// `--version` is instant for a working CLI; one that takes longer is reported, not waited on.
const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) async fn agent_clis(report: &mut Report) {
    let clis = crate::backend::agent_clis();
    let versions = clis.iter().map(|cli| async move {
        match &cli.found {
            Ok(program) => Some(version(program).await),
            Err(_) => None,
        }
    });
    let versions = futures_util::future::join_all(versions).await;
    for (cli, version) in clis.into_iter().zip(versions) {
        let name = cli.name;
        let what = format!("agent cli {name} (-m {name})");
        match (cli.found, version) {
            (Ok(program), Some(Ok(version))) => report.line(
                State::Ok,
                &what,
                format!(
                    "{} ({}); {}",
                    escape_line(&version),
                    escape_line(&program.display().to_string()),
                    cli.how
                ),
            ),
            (Ok(program), outcome) => {
                let why = match outcome {
                    Some(Err(why)) => why,
                    _ => "was not asked for its version".to_string(),
                };
                report.line(
                    State::Warn,
                    &what,
                    format!(
                        "{} is installed but {}",
                        escape_line(&program.display().to_string()),
                        escape_line(&why)
                    ),
                );
            }
            (Err(install), _) => report.line(
                State::Missing,
                &what,
                format!("{}; {}", escape_line(&install), cli.how),
            ),
        }
    }
}

/// The first line the program prints for `--version`.
async fn version(program: &std::path::Path) -> Result<String, String> {
    let run = tokio::process::Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(VERSION_TIMEOUT, run).await {
        Err(_) => {
            return Err(format!(
                "did not answer --version within {} s",
                VERSION_TIMEOUT.as_secs()
            ));
        }
        Ok(Err(e)) => return Err(format!("cannot run it: {e}")),
        Ok(Ok(output)) => output,
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let first = text.lines().map(str::trim).find(|l| !l.is_empty());
    match (output.status.success(), first) {
        (true, Some(line)) => Ok(crate::model::excerpt(line, 120)),
        (true, None) => Err("printed no version".into()),
        (false, _) => Err(format!("--version failed ({})", output.status)),
    }
}
