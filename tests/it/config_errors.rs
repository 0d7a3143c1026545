//! Config and presets that say when they are wrong: a named config file that is missing, a
//! rule naming an unknown tool, a preset of one's own without a description, a preset that
//! leaves the model no tools. Through the real binary, against the fake model server.

use crate::support::{FakeModel, Harness, Reply};

fn run(h: &Harness, server: &FakeModel) -> crate::support::Cmd {
    h.corral().args([
        "run",
        "-m",
        "llamacpp:fake-model",
        "--base-url",
        &server.openai_base(),
    ])
}

#[tokio::test]
async fn a_config_file_named_with_config_must_exist() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let missing = h.work().join("nope.toml");
    let out = run(&h, &server)
        .args(["--config", missing.to_str().unwrap(), "hi"])
        .run()
        .await;
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr.contains("does not exist") && out.stderr.contains("nope.toml"),
        "{}",
        out.stderr
    );
    assert_eq!(out.stderr.matches("does not exist").count(), 1, "said once");
    assert_eq!(server.requests().len(), 0, "nothing was started");
}

#[tokio::test]
async fn presets_name_their_mistakes_and_need_no_description() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let bad = h.work().join("bad.toml");
    std::fs::write(
        &bad,
        "description = \"mine\"\n[[rules]]\ntool = \"bash\"\nallow = [\"ls *\"]\n",
    )
    .unwrap();
    let out = run(&h, &server)
        .args(["-p", bad.to_str().unwrap(), "hi"])
        .run()
        .await;
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr.contains("\"bash\"") && out.stderr.contains("known tools: read_file"),
        "{}",
        out.stderr
    );

    let plain = h.work().join("plain.toml");
    std::fs::write(&plain, "auto_approve = \"safe\"\n").unwrap();
    server.push(Reply::new().text("fine"));
    let out = run(&h, &server)
        .args(["-p", plain.to_str().unwrap(), "hi"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("fine"), "{out:?}");
}

#[tokio::test]
async fn specialist_with_nothing_allowed_warns_that_the_model_gets_no_tools() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("no tools here"));
    let out = run(&h, &server)
        .args(["-p", "specialist", "hi"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains("warning:") && out.stderr.contains("the model gets no tools"),
        "{}",
        out.stderr
    );
    server.push(Reply::new().text("with a tool"));
    let out = run(&h, &server)
        .args(["-p", "specialist", "--allow", "read_file", "hi"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(!out.stderr.contains("no tools"), "{}", out.stderr);
}

#[tokio::test]
async fn doctor_says_a_named_config_file_is_missing() {
    let h = Harness::new();
    let missing = h.work().join("nope.toml");
    let out = h
        .corral()
        .args(["doctor", "--config", missing.to_str().unwrap()])
        .run()
        .await;
    let line = out
        .stdout
        .lines()
        .find(|l| l.contains("config file"))
        .unwrap_or_else(|| panic!("{out:?}"));
    assert!(line.contains("does not exist"), "{line}");
}
