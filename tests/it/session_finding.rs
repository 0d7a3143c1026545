//! Finding a session again: `--resume` by a unique start of its id, `--continue`/`--last` for
//! the most recent one of a directory, and runs that never reached a model leaving nothing
//! behind. All against the fake model server, through the real binary.

use std::path::{Path, PathBuf};

use crate::common::openai_run;
use crate::support::{FakeModel, Harness, Reply};

fn agents(h: &Harness) -> PathBuf {
    h.cache_dir().join("corral").join("agents")
}

/// The files of the agents directory, by name, sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name != "pids.json")
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// One run answered "ok" in `cwd`; its session id.
async fn one_run(h: &Harness, server: &FakeModel, cwd: &Path, prompt: &str) -> String {
    server.push(Reply::new().text("ok"));
    let out = openai_run(h, server, prompt)
        .args(["-C", cwd.to_str().unwrap()])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    out.events()[0]["agent"].as_str().unwrap().to_owned()
}

/// `corral run --json` continuing a session (`how` is `--resume ID`, `--continue` …).
async fn continued(
    h: &Harness,
    server: &FakeModel,
    how: &[&str],
    prompt: &str,
) -> crate::support::Outcome {
    server.push(Reply::new().text("again"));
    h.corral()
        .args(["run", "--json", "--base-url", &server.openai_base()])
        .args(how.iter().copied())
        .arg(prompt)
        .run()
        .await
}

#[tokio::test]
async fn resume_takes_a_unique_start_of_the_id_and_names_the_candidates_otherwise() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let id = one_run(&h, &server, &h.work(), "first").await;
    let out = continued(&h, &server, &["--resume", &id[..3]], "second").await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.events()[0]["agent"], id.as_str());
    assert_eq!(out.of_kind("turn_started")[0]["turn"], 2);

    // Two ids sharing a start: the start alone is refused, naming both.
    let dir = agents(&h);
    for other in ["abcd0001", "abcd0002"] {
        std::fs::copy(
            dir.join(format!("{id}.events.jsonl")),
            dir.join(format!("{other}.events.jsonl")),
        )
        .unwrap();
    }
    let out = continued(&h, &server, &["--resume", "abcd"], "third").await;
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr.contains("abcd0001") && out.stderr.contains("abcd0002"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn continue_and_last_resume_the_latest_session_of_this_directory_only() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let here = h.work().join("here");
    let elsewhere = h.work().join("elsewhere");
    std::fs::create_dir_all(&here).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();

    let none = continued(
        &h,
        &server,
        &["--continue", "-C", here.to_str().unwrap()],
        "x",
    )
    .await;
    assert_eq!(none.code, Some(2), "{none:?}");
    assert!(
        none.stderr.contains("no session to continue"),
        "{}",
        none.stderr
    );

    let older = one_run(&h, &server, &here, "older").await;
    let newer = one_run(&h, &server, &here, "newer").await;
    // Most recent of all, but in another directory: never picked from `here`.
    let other = one_run(&h, &server, &elsewhere, "other").await;
    assert_ne!(older, newer);

    for flag in ["--continue", "--last"] {
        let out = continued(&h, &server, &[flag, "-C", here.to_str().unwrap()], "go on").await;
        assert_eq!(out.code, Some(0), "{flag}: {out:?}");
        assert_eq!(out.events()[0]["agent"], newer.as_str(), "{flag}");
    }
    let out = continued(
        &h,
        &server,
        &["--continue", "-C", elsewhere.to_str().unwrap()],
        "go on",
    )
    .await;
    assert_eq!(out.events()[0]["agent"], other.as_str());

    let both = continued(&h, &server, &["--continue", "--resume", &older], "x").await;
    assert_eq!(both.code, Some(2), "{both:?}");
}

#[tokio::test]
async fn a_run_that_never_reached_a_model_leaves_no_session() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    // A refusal the loop does not retry: the model was never heard from.
    server.push(Reply::new().status(400, r#"{"error":{"message":"bad request"}}"#));
    let out = openai_run(&h, &server, "hello").run().await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(files(&agents(&h)), Vec::<String>::new(), "{out:?}");
    // In text mode, no line offers to continue what is not there.
    server.push(Reply::new().status(400, r#"{"error":{"message":"bad request"}}"#));
    let out = h
        .corral()
        .args([
            "run",
            "-m",
            "llamacpp:fake-model",
            "--base-url",
            &server.openai_base(),
        ])
        .arg("hello")
        .run()
        .await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("bad request"), "{}", out.stderr);
    assert!(
        !out.stderr.contains("--resume"),
        "no session to continue: {}",
        out.stderr
    );
    assert_eq!(files(&agents(&h)), Vec::<String>::new(), "{out:?}");

    // One that was answered is kept, with its metadata.
    let id = one_run(&h, &server, &h.work(), "hello").await;
    let kept = files(&agents(&h));
    assert!(kept.contains(&format!("{id}.events.jsonl")), "{kept:?}");
    assert!(kept.contains(&format!("{id}.meta.json")), "{kept:?}");

    // A resumed session is kept whatever its new turn met.
    server.push(Reply::new().status(400, r#"{"error":{"message":"bad request"}}"#));
    let out = continued(&h, &server, &["--resume", &id], "again").await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(files(&agents(&h)), kept);
}
