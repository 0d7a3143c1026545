//! The eval's output: one progress line per task (stderr), the table (stdout), the JSON file.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::run::TaskResult;
use crate::error::Error;
use crate::surface::safe_text::escape;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub model: String,
    pub tasks_dir: PathBuf,
    pub passed: usize,
    pub total: usize,
    pub seconds: f64,
    pub results: Vec<TaskResult>,
}

impl Summary {
    pub fn new(model: &str, dir: &Path, results: Vec<TaskResult>) -> Summary {
        Summary {
            model: model.to_string(),
            tasks_dir: dir.to_path_buf(),
            passed: results.iter().filter(|r| r.passed).count(),
            total: results.len(),
            seconds: results.iter().map(|r| r.seconds).sum(),
            results,
        }
    }

    pub fn write_json(&self, path: &Path) -> Result<(), Error> {
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| Error::Runtime(format!("cannot encode the results: {e}")))?;
        std::fs::write(path, text + "\n")
            .map_err(|e| Error::Runtime(format!("cannot write {}: {e}", path.display())))
    }
}

pub fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{}", escape(line));
}

pub fn progress(done: usize, total: usize, result: &TaskResult) {
    let verdict = if result.passed { "pass" } else { "FAIL" };
    let why = match &result.error {
        Some(error) if !result.passed => format!(" — {}", first_line(error)),
        _ => String::new(),
    };
    say(&format!(
        "[{done}/{total}] {}: {verdict} ({:.1} s, {}){why}",
        result.task, result.seconds, result.stop_reason
    ));
}

fn first_line(text: &str) -> &str {
    let line = text.lines().next().unwrap_or("");
    match line.char_indices().nth(120) {
        Some((cut, _)) => &line[..cut],
        None => line,
    }
}

pub fn table(summary: &Summary) -> String {
    let mut out = String::from(
        "| task | pass | steps | tool calls | recovered | malformed | tokens | seconds |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for r in &summary.results {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.1} |\n",
            escape(&r.task),
            if r.passed { "yes" } else { "no" },
            r.steps,
            r.tool_calls,
            r.recovered_calls,
            r.malformed_calls,
            r.input_tokens + r.output_tokens,
            r.seconds,
        ));
    }
    out.push_str(&format!(
        "\n{}: {}/{} passed in {:.0} s\n",
        escape(&summary.model),
        summary.passed,
        summary.total,
        summary.seconds
    ));
    out
}

pub fn print_table(summary: &Summary) {
    let _ = std::io::stdout().write_all(table(summary).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_a_row_per_task_and_the_score() {
        let results = vec![
            TaskResult {
                task: "fix-test".into(),
                passed: true,
                steps: 3,
                tool_calls: 2,
                input_tokens: 100,
                output_tokens: 20,
                seconds: 1.25,
                ..TaskResult::default()
            },
            TaskResult {
                task: "rename\u{1b}[2J".into(),
                ..TaskResult::default()
            },
        ];
        let text = table(&Summary::new("m", Path::new("evals"), results));
        assert!(
            text.contains("| fix-test | yes | 3 | 2 | 0 | 0 | 120 | 1.2 |"),
            "{text}"
        );
        assert!(
            !text.contains('\u{1b}'),
            "a task name reaches the terminal escaped: {text}"
        );
        assert!(text.contains("m: 1/2 passed"), "{text}");
    }
}
