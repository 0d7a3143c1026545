//! `corral eval -m SPEC [--tasks DIR]`: small coding tasks, each run in a fresh repository of
//! its own, checked by the task's command; a table on stdout and the same figures as JSON.
//! The score is reported, never judged: the exit code says whether the eval ran, not how
//! well the model did.

mod app;
mod report;
mod run;
mod task;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::surface::run::Exit;
pub use run::TaskResult;

#[derive(Debug, Clone)]
pub struct EvalArgs {
    pub model: String,
    pub base_url: Option<String>,
    /// Default: `./evals`, else the `evals/` of the source tree corral was built from.
    pub tasks: Option<PathBuf>,
    /// Run only the tasks whose name contains one of these.
    pub only: Vec<String>,
    pub max_steps: Option<u32>,
    pub permission: String,
    pub config_path: Option<PathBuf>,
    /// Where the JSON goes.
    pub out: PathBuf,
    /// Keep each task's working copy.
    pub keep: bool,
}

fn tasks_dir(chosen: Option<PathBuf>) -> Result<PathBuf, Error> {
    if let Some(dir) = chosen {
        return Ok(dir);
    }
    let built_from = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("evals");
    [PathBuf::from("evals"), built_from]
        .into_iter()
        .find(|d| d.is_dir())
        .ok_or_else(|| Error::Usage("no evals/ here: name the tasks with --tasks DIR".into()))
}

/// Runs every task in turn; the table goes to stdout, progress to stderr.
pub async fn eval(args: EvalArgs) -> Result<Exit, Error> {
    // Absolute: the check runs in each copy and finds its files through $CORRAL_EVAL_TASK.
    let dir = tasks_dir(args.tasks.clone())?;
    let dir = dir
        .canonicalize()
        .map_err(|e| Error::Usage(format!("cannot read tasks in {}: {e}", dir.display())))?;
    let tasks = task::load(&dir, &args.only, args.max_steps)?;
    let corral = std::env::current_exe()
        .map_err(|e| Error::Runtime(format!("cannot find corral's own binary: {e}")))?;
    crate::host::open::clean_up_after_crashes(&crate::host::open::agents_dir()?);
    let stop = CancellationToken::new();
    let stopped_by = Arc::new(Mutex::new(None));
    watch_signals(stop.clone(), stopped_by.clone());
    let runner = run::Runner {
        corral,
        model: args.model.clone(),
        base_url: args.base_url.clone(),
        config: args.config_path.clone(),
        permission: args.permission.clone(),
        keep: args.keep,
        stop: stop.clone(),
    };
    let mut results = Vec::with_capacity(tasks.len());
    for (i, task) in tasks.iter().enumerate() {
        if stop.is_cancelled() {
            break;
        }
        let result = runner.run(task).await;
        report::progress(i + 1, tasks.len(), &result);
        results.push(result);
    }
    let summary = report::Summary::new(&args.model, &dir, results);
    report::print_table(&summary);
    summary.write_json(&args.out)?;
    report::say(&format!("results written to {}", args.out.display()));
    let stopped = *stopped_by.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(exit) = stopped {
        report::say(&format!(
            "stopped after {} of {} tasks",
            summary.results.len(),
            tasks.len()
        ));
        return Ok(exit);
    }
    Ok(
        if summary.results.iter().any(|r| r.stop_reason == "setup") {
            Exit::Failure
        } else {
            Exit::Ok
        },
    )
}

/// SIGINT, SIGTERM and SIGHUP stop the eval in order: the running turn is stopped (its tools
/// and model server with it), the results so far are written, and the exit code names the
/// signal.
fn watch_signals(stop: CancellationToken, stopped_by: Arc<Mutex<Option<Exit>>>) {
    for (kind, exit) in [
        (SignalKind::interrupt(), Exit::Cancelled),
        (SignalKind::terminate(), Exit::Terminated),
        (SignalKind::hangup(), Exit::HungUp),
    ] {
        let Ok(mut signals) = signal(kind) else {
            tracing::warn!(?exit, "cannot catch a stop signal");
            continue;
        };
        let (stop, stopped_by) = (stop.clone(), stopped_by.clone());
        tokio::spawn(async move {
            if signals.recv().await.is_some() {
                stopped_by
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert(exit);
                stop.cancel();
            }
        });
    }
}
