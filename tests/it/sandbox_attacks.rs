//! Ways out of the sandbox that do not write anything: reading corral's own state and the
//! user's credentials, reaching a Unix socket outside the root (pathname or abstract). Each
//! attack fails under the sandbox, network on and off, and works with `--sandbox off` (so the
//! tests can fail).

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;
use crate::sandbox::{landlock_here, outside, records, run_calls, shell};
use crate::support::{FakeModel, Harness, Outcome, Reply};

/// The sandboxed variants every attack is tried under.
pub(crate) const CONFINED: [&[&str]; 3] = [
    &["--sandbox", "strict", "--network", "off"],
    &["--sandbox", "strict", "--network", "on"],
    &["--sandbox", "best-effort"],
];
pub(crate) const OFF: &[&str] = &["--sandbox", "off"];

/// The output of the run's only call, success or not (error text when it failed).
pub(crate) fn said(out: &Outcome) -> String {
    let record = &records(out)[0];
    let text = record["output"].as_str().unwrap_or_default().to_owned();
    format!("{text}{}", record["error"].as_str().unwrap_or_default())
}

/// Shown upper-cased by the tool, so no redaction of the value itself can hide a leak.
fn canary(name: &str) -> (String, String) {
    let text = format!("canary-{name}-{}", std::process::id());
    let shown = text.to_uppercase();
    (text, shown)
}

fn upper(path: &Path) -> String {
    format!("tr a-z A-Z < '{}'; echo", path.display())
}

#[tokio::test]
async fn corral_state_is_hidden_from_tools_but_the_root_is_not() {
    let h = Harness::new();
    if !landlock_here(&h).await {
        return;
    }
    let (secret, secret_shown) = canary("jwt");
    let config = h.config_dir().join("corral");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("jwt-secret"), &secret).unwrap();
    let (log, log_shown) = canary("log");
    let agents = h.cache_dir().join("corral/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(agents.join("other.events.jsonl"), &log).unwrap();
    let (tree, tree_shown) = canary("tree");
    let other = h.data_dir().join("corral/worktrees/other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("f"), &tree).unwrap();
    let command = [
        upper(&config.join("jwt-secret")),
        upper(&agents.join("other.events.jsonl")),
        upper(&other.join("f")),
        "echo config=$(ls -A ~/config/corral | wc -l) cache=$(ls -A ~/cache/corral | wc -l)"
            .to_owned(),
        "echo ok > in-root.txt && cat in-root.txt".to_owned(),
    ]
    .join("; ");
    for flags in CONFINED {
        let out = run_calls(&h, &[shell(&command)], flags).await;
        let text = said(&out);
        for shown in [&secret_shown, &log_shown, &tree_shown] {
            assert!(!text.contains(shown.as_str()), "{flags:?}: {text}");
        }
        assert!(text.contains("config=0 cache=0\n"), "{flags:?}: {text}");
        assert!(text.contains("No such file or directory"), "{text}");
        // The root lies inside the temp home, next to the hidden directories: still usable.
        assert!(text.contains("ok\n"), "{flags:?}: {text}");
    }
    let out = run_calls(&h, &[shell(&command)], OFF).await;
    let text = said(&out);
    for shown in [&secret_shown, &log_shown, &tree_shown] {
        assert!(text.contains(shown.as_str()), "{text}");
    }
    assert!(text.contains("config=1 cache=1\n"), "{text}");
}

#[tokio::test]
async fn credential_stores_are_hidden_from_tools() {
    let h = Harness::new();
    if !landlock_here(&h).await {
        return;
    }
    let home = h.home_dir();
    let mut files = Vec::new();
    for rel in [
        ".ssh/id_ed25519",
        ".aws/credentials",
        ".config/gcloud/credentials.db",
        ".git-credentials",
        ".netrc",
        ".local/share/keyrings/login.keyring",
        ".mozilla/firefox/profile/cookies.sqlite",
    ] {
        let path = home.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let (text, shown) = canary(&rel.replace(['/', '.'], "-"));
        std::fs::write(&path, text).unwrap();
        files.push((path, shown));
    }
    let mut command: Vec<String> = files.iter().map(|(p, _)| upper(p)).collect();
    // Hidden files read as empty, hidden directories list as empty and cannot be written.
    command.push("ls -A ~/.ssh | wc -l; touch ~/.ssh/authorized_keys".to_owned());
    let command = command.join("; ");
    for flags in CONFINED {
        let out = run_calls(&h, &[shell(&command)], flags).await;
        let text = said(&out);
        for (path, shown) in &files {
            assert!(
                !text.contains(shown.as_str()),
                "{flags:?} {}: {text}",
                path.display()
            );
        }
        assert!(text.contains("\n0\n"), "{flags:?}: {text}");
        assert!(!home.join(".ssh/authorized_keys").exists());
    }
    let out = run_calls(&h, &[shell(&command)], OFF).await;
    let text = said(&out);
    for (_, shown) in &files {
        assert!(text.contains(shown.as_str()), "{text}");
    }
}

/// A run with its own preset file (and so not `-p bypass`); the preset lets shell run.
async fn run_with_preset(h: &Harness, preset: &str, calls: &[(&str, Value)]) -> Outcome {
    run_with_preset_env(h, preset, calls, &[]).await
}

/// [`run_with_preset`], with `env` added to the runtime's environment.
pub(crate) async fn run_with_preset_env(
    h: &Harness,
    preset: &str,
    calls: &[(&str, Value)],
    env: &[(&str, &str)],
) -> Outcome {
    let path = h.home_dir().join("team.toml");
    std::fs::write(
        &path,
        format!("description = \"team\"\nbypass = true\n{preset}"),
    )
    .unwrap();
    let server = FakeModel::start().await;
    for (i, (name, args)) in calls.iter().enumerate() {
        server.push(Reply::new().tool_call(&format!("c{}", i + 1), name, &args.to_string()));
    }
    server.push(Reply::new().text("done"));
    let mut run = openai_run(h, &server, "try it")
        .args(["-p", &path.display().to_string(), "--sandbox", "strict"])
        .timeout(Duration::from_secs(60));
    for (name, value) in env {
        run = run.env(name, value);
    }
    let out = run.run().await;
    assert_well_formed(&out);
    out
}

#[tokio::test]
async fn a_preset_hides_more_and_a_worktree_under_the_data_dir_stays_usable() {
    let h = Harness::new();
    if !landlock_here(&h).await {
        return;
    }
    let vault = h.home_dir().join("vault");
    std::fs::create_dir_all(&vault).unwrap();
    let (text, shown) = canary("vault");
    std::fs::write(vault.join("key"), text).unwrap();
    let calls = [shell(&upper(&vault.join("key")))];
    let plain = run_with_preset(&h, "", &calls).await;
    assert!(said(&plain).contains(&shown), "{plain:?}");
    let hidden = run_with_preset(&h, "hidden = [\"~/vault\"]\n", &calls).await;
    let said_hidden = said(&hidden);
    assert!(!said_hidden.contains(&shown), "{said_hidden}");
    assert!(said_hidden.contains("No such file"), "{said_hidden}");

    // A worktree session's root is `<data>/corral/worktrees/<id>`: inside a hidden directory.
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(h.work())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "T")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "T")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(h.work().join("a.txt"), "a\n").unwrap();
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "first"]);
    let other = h.data_dir().join("corral/worktrees/someone-else");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("theirs.txt"), "theirs").unwrap();
    let server = FakeModel::start().await;
    let command = format!(
        "cat a.txt && echo made > made.txt && git status --short && ls {}",
        other.display()
    );
    server.push(Reply::new().tool_call("c1", "shell", &json!({ "command": command }).to_string()));
    server.push(Reply::new().text("done"));
    let out = openai_run(&h, &server, "work")
        .args(["-p", "bypass", "--worktree", "--sandbox", "strict"])
        .env("GIT_CEILING_DIRECTORIES", h.home_dir())
        .run()
        .await;
    let text = said(&out);
    assert!(text.starts_with("a\n?? made.txt\n"), "{text}");
    assert!(!text.contains("theirs.txt"), "{text}");
    let id = out.events()[0]["agent"].as_str().unwrap().to_owned();
    let made = h
        .data_dir()
        .join("corral/worktrees")
        .join(&id)
        .join("made.txt");
    assert_eq!(std::fs::read_to_string(made).unwrap(), "made\n");
}

/// Python that connects to `address` (a path, or `\0name` for an abstract socket).
fn connect_unix(address: &str) -> (&'static str, Value) {
    let code = format!(
        "import socket\ns = socket.socket(socket.AF_UNIX)\ns.settimeout(5)\n\
         s.connect({address:?})\nprint('connected')"
    );
    ("python", json!({ "code": code }))
}

/// A listening socket outside the root, in a directory of its own.
fn outside_listener() -> (tempfile::TempDir, PathBuf, UnixListener) {
    let dir = outside();
    let path = dir.path().join("daemon.sock");
    let listener = UnixListener::bind(&path).unwrap();
    (dir, path, listener)
}

#[tokio::test]
async fn a_pathname_socket_outside_the_root_is_unreachable() {
    let h = Harness::new();
    if !landlock_here(&h).await {
        return;
    }
    let (_dir, path, _listener) = outside_listener();
    let call = connect_unix(&path.display().to_string());
    for flags in CONFINED {
        let out = run_calls(&h, std::slice::from_ref(&call), flags).await;
        let text = said(&out);
        assert!(!text.contains("connected"), "{flags:?}: {text}");
        assert!(text.contains("ConnectionRefusedError"), "{flags:?}: {text}");
    }
    let out = run_calls(&h, &[call], OFF).await;
    assert_eq!(said(&out), "connected\n");
}

#[tokio::test]
async fn a_socket_the_preset_names_stays_reachable_and_sockets_in_the_root_too() {
    let h = Harness::new();
    if !landlock_here(&h).await {
        return;
    }
    let (_dir, path, _listener) = outside_listener();
    let (_other_dir, other, _other_listener) = outside_listener();
    let inside = h.work().join("own.sock");
    let _inside_listener = UnixListener::bind(&inside).unwrap();
    let calls = [
        connect_unix(&path.display().to_string()),
        connect_unix(&other.display().to_string()),
        connect_unix("own.sock"),
    ];
    let preset = format!("sockets = [{:?}]\n", path.display().to_string());
    let out = run_with_preset(&h, &preset, &calls).await;
    let results = records(&out);
    assert_eq!(results[0]["output"], "connected\n", "{out:?}");
    let refused = results[1]["error"].as_str().unwrap_or_default();
    assert!(refused.contains("ConnectionRefusedError"), "{out:?}");
    assert_eq!(results[2]["output"], "connected\n", "{out:?}");
}

#[tokio::test]
async fn an_abstract_socket_outside_the_sandbox_is_unreachable_network_on_or_off() {
    use std::os::linux::net::SocketAddrExt;
    let h = Harness::new();
    if !landlock_here(&h).await {
        return;
    }
    let name = format!("corral-test-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let _listener = UnixListener::bind_addr(&addr).unwrap();
    let call = connect_unix(&format!("\0{name}"));
    for flags in CONFINED {
        let out = run_calls(&h, std::slice::from_ref(&call), flags).await;
        let text = said(&out);
        assert!(!text.contains("connected"), "{flags:?}: {text}");
        // Scoped by landlock (EPERM) with the network on; another namespace with it off.
        assert!(
            text.contains("PermissionError") || text.contains("ConnectionRefusedError"),
            "{flags:?}: {text}"
        );
    }
    let out = run_calls(&h, &[call], OFF).await;
    assert_eq!(said(&out), "connected\n");
}

#[tokio::test]
async fn doctor_names_each_protection() {
    let h = Harness::new();
    let out = h.corral().arg("doctor").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    for item in [
        "hidden from tools:",
        "pathname unix sockets:",
        "abstract unix sockets:",
        "signals:",
        "device ioctls:",
        "inherited descriptors:",
        "root powers:",
        "sandbox strict:",
    ] {
        assert!(out.stdout.contains(item), "{item}: {}", out.stdout);
    }
    if !landlock_here(&h).await {
        return;
    }
    let probe = h
        .corral()
        .args(["__sandbox-exec", "--probe", "--"])
        .run()
        .await;
    let probe: Value = serde_json::from_str(probe.stdout.trim()).unwrap();
    let resolve_unix = probe["fs_rights"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r == "resolve_unix");
    if !resolve_unix {
        // Not "everything enforced": the kernel's part that is missing is named.
        assert!(
            out.stdout.contains(
                "warn     pathname unix sockets: hidden by mount (kernel lacks landlock \
                 RESOLVE_UNIX)"
            ),
            "{}",
            out.stdout
        );
        assert!(
            out.stdout
                .contains("sandbox strict: runs, with limits: pathname unix sockets"),
            "{}",
            out.stdout
        );
    }
    if probe["landlock_abi"].as_i64().unwrap_or(0) >= 6 {
        assert!(
            out.stdout.contains("ok       abstract unix sockets: "),
            "{}",
            out.stdout
        );
    }
    let uid = std::process::Command::new("id").arg("-u").output().unwrap();
    if String::from_utf8_lossy(&uid.stdout).trim() == "0" {
        assert!(
            out.stdout.contains("warn     corral runs as root: "),
            "{}",
            out.stdout
        );
    }
}

/// A session whose root lies inside another session's writable directory: that session swaps
/// a component of the root's path for a symlink between two shell calls. The second call must
/// not be granted writes wherever the symlink points (landlock's rule was taken by path).
#[tokio::test]
async fn a_shell_call_cannot_write_where_a_swapped_root_path_now_points() {
    let h = Harness::new();
    if !landlock_here(&h).await {
        return;
    }
    let root = h.work().join("x/etc");
    std::fs::create_dir_all(&root).unwrap();
    let decoy = h.home_dir().join("decoy");
    std::fs::create_dir_all(decoy.join("etc")).unwrap();
    let server = FakeModel::start().await;
    let call = |id: &str, command: &str| {
        Reply::new().tool_call(id, "shell", &json!({ "command": command }).to_string())
    };
    server.push(call("c0", "echo first > first.txt"));
    // Gives the test time to swap the path once the first call is done.
    server.push(call("c1", "echo second > second.txt").stall(Duration::from_secs(2)));
    server.push(Reply::new().text("done"));
    let run = openai_run(&h, &server, "go")
        .args(["-p", "bypass", "--sandbox", "best-effort"])
        .current_dir(&root)
        .spawn()
        .await;
    assert!(
        server
            .wait_for_chat_requests(2, Duration::from_secs(30))
            .await
    );
    std::fs::rename(h.work().join("x"), h.work().join("x-moved")).unwrap();
    std::os::unix::fs::symlink(&decoy, h.work().join("x")).unwrap();
    let out = run.wait().await;
    assert!(h.work().join("x-moved/etc/first.txt").exists(), "{out:?}");
    assert!(
        !decoy.join("etc/second.txt").exists(),
        "the swapped root path granted writes in the other directory: {out:?}"
    );
}
