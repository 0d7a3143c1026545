//! The README's main job with the real local model (issue 17): a `gguf:` turn corral runs its
//! own llama-server for. Figures: the turn's seconds, the first request's prompt tokens in
//! each prompt style, and per step the prompt tokens the server evaluated against the ideal of
//! only the new ones (from the `usage` events: llama.cpp reports its cache hits).

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::Value;

use super::{CORRAL, Row};

fn model() -> Option<PathBuf> {
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))?;
    let path = data.join("corral/models/SmolLM2-135M-Instruct.Q4_1.gguf");
    path.is_file().then_some(path)
}

struct Turn {
    seconds: f64,
    /// Per request, cumulative as the events carry them: (input, output, cached).
    usage: Vec<(u64, u64, u64)>,
}

async fn main_job(model: &Path, extra: &[&str]) -> Turn {
    let work = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    // Greedy sampling, so runs repeat: the model's own default samples, and one rambling
    // reply would swamp every figure.
    std::fs::create_dir(config.path().join("corral")).unwrap();
    std::fs::write(
        config.path().join("corral/config.toml"),
        "temperature = 0.0\n",
    )
    .unwrap();
    for name in ["README.md", "main.rs", "notes.txt"] {
        std::fs::write(work.path().join(name), "hello\n").unwrap();
    }
    let started = Instant::now();
    let out = tokio::process::Command::new(CORRAL)
        .args(["run", "--json", "--tool-choice", "first-required"])
        .args(extra)
        .arg("-m")
        .arg(format!("gguf:{}", model.display()))
        .arg("list the files here")
        .current_dir(work.path())
        .env("XDG_CONFIG_HOME", config.path())
        .output()
        .await
        .unwrap();
    let seconds = started.elapsed().as_secs_f64();
    let count = |u: &Value, key: &str| u[key].as_u64().unwrap_or(0);
    let usage = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["kind"] == "usage")
        .map(|e| {
            let u = &e["data"]["usage"];
            (
                count(u, "inputTokens"),
                count(u, "outputTokens"),
                count(u, "cacheReadTokens"),
            )
        })
        .collect();
    Turn { seconds, usage }
}

/// Per step after the first: "evaluated / ideal" prompt tokens. Evaluated is the step's prompt
/// less what the cache served; ideal is the step's prompt less everything the server already
/// held (the previous prompt and the reply it generated).
fn per_step(usage: &[(u64, u64, u64)]) -> String {
    let steps: Vec<(u64, u64, u64)> = usage
        .iter()
        .scan((0, 0, 0), |before, &now| {
            let step = (now.0 - before.0, now.1 - before.1, now.2 - before.2);
            *before = now;
            Some(step)
        })
        .collect();
    let figures: Vec<String> = steps
        .windows(2)
        .map(|pair| {
            let (previous, step) = (pair[0], pair[1]);
            let evaluated = step.0.saturating_sub(step.2);
            let ideal = step.0.saturating_sub(previous.0 + previous.1);
            format!("{evaluated} / {ideal}")
        })
        .collect();
    if figures.is_empty() {
        "one step only".into()
    } else {
        figures.join(", ")
    }
}

pub async fn local(rows: &mut Vec<Row>) {
    let Some(model) = model() else {
        rows.push(Row {
            name: "local: README main job (gguf: SmolLM2-135M)",
            figure: "skipped: scripts/install-local-model has not run".into(),
            goal: "—",
        });
        return;
    };
    let job = main_job(&model, &[]).await;
    rows.push(Row {
        name: "local: README main job (gguf: SmolLM2-135M, prompt auto, temperature 0), seconds",
        figure: format!("{:.1} s, {} requests", job.seconds, job.usage.len()),
        goal: "—",
    });
    rows.push(Row {
        name: "local: prompt tokens evaluated / ideal (new only), per step after the first",
        figure: per_step(&job.usage),
        goal: "evaluated ≈ ideal",
    });
    let compact = job.usage.first().map_or(0, |u| u.0);
    let full = main_job(&model, &["--prompt", "full", "--max-steps", "1"]).await;
    rows.push(Row {
        name: "local: first request's prompt tokens, compact / full",
        figure: format!(
            "{compact} / {} (SmolLM2's tokenizer, every tool offered)",
            full.usage.first().map_or(0, |u| u.0)
        ),
        goal: "compact ≤ 1,500",
    });
}
