//! What the confinement helper (`corral __sandbox-exec`) gives the program it runs, seen from
//! inside the tool: no signals out of the sandbox, `no_new_privs` and the seccomp filter, no
//! UDP with the network off, a preset's writable paths and variables, a private TMPDIR that
//! goes with the session, and, without user namespaces, best-effort saying so and strict
//! refusing: at the start, or for a call when confinement is lost mid-session.
//! Each is also tried where the protection is absent (`--sandbox off`, network on, a path not
//! listed), so the tests can fail.

use serde_json::json;

use crate::common::*;
use crate::sandbox::{
    assert_blocked, assert_turn_blocked, landlock_here, outside, records, run_calls, shell,
};
use crate::sandbox_attacks::{CONFINED, OFF, run_with_preset_env, said};
use crate::support::{FakeModel, Harness, Outcome, Reply};

#[tokio::test]
async fn a_tool_cannot_signal_processes_outside_its_sandbox() {
    let h = Harness::new();
    if !landlock_here(&h).await {
        return;
    }
    let mut sibling = std::process::Command::new("sleep")
        .arg("1000")
        .spawn()
        .unwrap();
    // Pid 1 is the call's init: in the tool's PID namespace, but outside its landlock domain.
    let command = format!(
        "kill -0 1; echo init=$?; kill -KILL {}; echo sibling=$?; kill -0 $$; echo self=$?",
        sibling.id()
    );
    // stdout and stderr are two pipes with no common order.
    let lines = |text: &str| {
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        lines.sort_unstable();
        lines
    };
    let expected = |init: &str| {
        let mut expected = vec![
            format!("init={init}"),
            "sibling=1".to_owned(),
            "self=0".to_owned(),
            format!("bash: line 1: kill: ({}) - No such process", sibling.id()),
        ];
        if init != "0" {
            expected.push("bash: line 1: kill: (1) - Operation not permitted".to_owned());
        }
        expected.sort_unstable();
        expected
    };
    // best-effort first: strict would refuse to start on a kernel without signal scoping.
    for flags in CONFINED.iter().rev() {
        let out = run_calls(&h, &[shell(&command)], flags).await;
        assert_eq!(lines(&said(&out)), expected("1"), "{flags:?}");
    }
    let out = run_calls(&h, &[shell(&command)], OFF).await;
    assert_eq!(lines(&said(&out)), expected("0"));
    assert_eq!(sibling.try_wait().unwrap(), None, "the sibling was killed");
    let _ = sibling.kill();
    let _ = sibling.wait();
}

/// The `NoNewPrivs` and `Seccomp` lines of a process's status.
fn privs_lines(status: &str) -> String {
    status
        .lines()
        .filter(|l| l.starts_with("NoNewPrivs:") || l.starts_with("Seccomp:"))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[tokio::test]
async fn a_tool_runs_with_no_new_privs_under_the_seccomp_filter() {
    let h = Harness::new();
    if !landlock_here(&h).await {
        return;
    }
    let command = "grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status";
    // best-effort first: strict would refuse to start where either is missing.
    for flags in CONFINED.iter().rev() {
        let out = run_calls(&h, &[shell(command)], flags).await;
        assert_eq!(said(&out), "NoNewPrivs:\t1\nSeccomp:\t2\n", "{flags:?}");
    }
    // Unconfined, a tool has what the runtime has (what the tests were started with).
    let out = run_calls(&h, &[shell(command)], OFF).await;
    let ours = privs_lines(&std::fs::read_to_string("/proc/self/status").unwrap());
    assert_eq!(said(&out), ours);
}

#[tokio::test]
async fn a_udp_datagram_is_refused_with_network_off_and_sent_with_it_on() {
    let h = Harness::new();
    if !landlock_here(&h).await {
        return;
    }
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = socket.local_addr().unwrap().port();
    let code = format!(
        "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         s.sendto(b'hello', ('127.0.0.1', {port}))\nprint('sent')"
    );
    let call = ("python", json!({ "code": code }));
    let off = run_calls(&h, std::slice::from_ref(&call), &["--network", "off"]).await;
    let error = assert_blocked(&records(&off)[0], "Network is unreachable");
    assert!(error.ends_with("network is off]"), "{error}");
    // A datagram over loopback is queued before sendto returns: none came.
    socket.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 16];
    let nothing = socket.recv(&mut buf).unwrap_err();
    assert_eq!(nothing.kind(), std::io::ErrorKind::WouldBlock, "{nothing}");
    let on = run_calls(&h, &[call], &["--network", "on"]).await;
    assert_eq!(records(&on)[0]["output"], "sent\n", "{on:?}");
    let n = socket.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"hello");
}

#[tokio::test]
async fn a_presets_writable_paths_and_variables_reach_the_tool() {
    let h = Harness::new();
    if !landlock_here(&h).await {
        return;
    }
    let (listed, other) = (outside(), outside());
    let preset = format!(
        "writable = [{:?}]\nenv = [\"CORRAL_TEST_PASSED\"]\n",
        listed.path().display().to_string()
    );
    let calls = [
        shell(&format!(
            "echo made > {}/f && echo passed=$CORRAL_TEST_PASSED other=$CORRAL_TEST_OTHER",
            listed.path().display()
        )),
        shell(&format!("echo made > {}/f", other.path().display())),
    ];
    let env = [
        ("CORRAL_TEST_PASSED", "through"),
        ("CORRAL_TEST_OTHER", "kept-out"),
    ];
    let out = run_with_preset_env(&h, &preset, &calls, &env).await;
    let results = records(&out);
    assert_eq!(results[0]["success"], true, "{}", results[0]);
    assert_eq!(results[0]["output"], "passed=through other=\n");
    assert_eq!(
        std::fs::read_to_string(listed.path().join("f")).unwrap(),
        "made\n"
    );
    // Only where the preset says: a path it does not list stays read-only.
    assert_blocked(&results[1], "Permission denied");
    assert!(!other.path().join("f").exists());
}

/// The session temp dirs under `tmp` (the `TMPDIR` the runs get).
fn session_tmps(tmp: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect()
}

#[tokio::test]
async fn the_sessions_tmpdir_is_the_tools_and_goes_with_the_session() {
    let h = Harness::new();
    let tmp = h.home_dir().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let server = FakeModel::start().await;
    let command = "echo kept > \"$TMPDIR/scratch\" && echo \"$TMPDIR\"";
    server.push(Reply::new().tool_call("c1", "shell", &json!({ "command": command }).to_string()));
    server.push(Reply::new().text("done"));
    let out = openai_run(&h, &server, "scratch")
        .args(["-p", "bypass"])
        .env("TMPDIR", &tmp)
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let record = &records(&out)[0];
    assert_eq!(record["success"], true, "{record}");
    let id = out.events()[0]["agent"].as_str().unwrap().to_owned();
    let used = record["output"].as_str().unwrap().trim_end();
    let prefix = format!("{}/corral-tmp-{id}-", tmp.display());
    assert!(used.starts_with(&prefix), "{used} is not under {prefix}");
    assert_eq!(session_tmps(&tmp), [] as [std::path::PathBuf; 0]);
}

/// A strict session whose first call takes user namespaces away (through the namespace's root,
/// as an administrator's sysctl would): the second call is refused by the helper at run time,
/// saying why, and never runs.
#[tokio::test]
async fn strict_refuses_a_call_once_confinement_cannot_be_had() {
    let h = Harness::new();
    if !landlock_here(&h).await || !root_here("taking user namespaces away mid-session") {
        return;
    }
    let trigger = h.work().join("no-more-userns");
    let first = format!(
        "touch {0} && until [ -e {0}.done ]; do sleep 0.02; done; echo taken",
        trigger.display()
    );
    let server = FakeModel::start().await;
    for (i, command) in [first.as_str(), "echo ran > second.txt"].iter().enumerate() {
        let args = json!({ "command": command }).to_string();
        server.push(Reply::new().tool_call(&format!("c{i}"), "shell", &args));
    }
    server.push(Reply::new().text("done"));
    let when = trigger.display().to_string();
    let out = run_without_userns(&h, &server, &when, &["--sandbox", "strict"]).await;
    let results = records(&out);
    assert_eq!(results[0]["success"], true, "{out:?}");
    assert_eq!(results[0]["output"], "taken\n");
    assert_eq!(results[1]["success"], false, "{out:?}");
    let error = results[1]["error"].as_str().unwrap();
    assert!(
        error.starts_with(
            "the sandbox refused to run it: cannot enforce the strict sandbox: corral's state, \
             credential stores and Unix sockets outside the sandbox are not hidden (user \
             namespaces unavailable: ENOSPC"
        ),
        "{error}"
    );
    assert!(!h.work().join("second.txt").exists());
}

/// `no_userns.py WHEN PROGRAM ARGS…` runs the program as uid 1000 in a user namespace that may
/// create no further ones: what an ordinary user sees where unprivileged user namespaces are
/// disabled. WHEN is `now`, or a path: user namespaces are then taken away once that file
/// appears (by the namespace's root, from outside the program), and `<path>.done` says so.
/// Needs root.
const NO_USERNS: &str = r#"
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
when, command = sys.argv[1], sys.argv[2:]
def no_more_userns():
    open("/proc/sys/user/max_user_namespaces", "w").write("0")
def run_as_user():
    os.setgroups([])
    os.setresgid(1000, 1000, 1000)
    os.setresuid(1000, 1000, 1000)
    os.execvp(command[0], command)
def exit_as(pid):
    sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
ready, go = os.pipe(), os.pipe()
pid = os.fork()
if pid == 0:
    if libc.unshare(0x10000000) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
    os.write(ready[1], b"x")
    os.read(go[0], 1)
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)
    if when == "now":
        no_more_userns()
        run_as_user()
    program = os.fork()
    if program == 0:
        run_as_user()
    while not os.path.exists(when):
        ended, status = os.waitpid(program, os.WNOHANG)
        if ended:
            sys.exit(os.waitstatus_to_exitcode(status))
        time.sleep(0.02)
    no_more_userns()
    open(when + ".done", "w").close()
    exit_as(program)
os.read(ready[0], 1)
for name, text in (("uid_map", "0 0 65536\n"), ("setgroups", "allow"), ("gid_map", "0 0 65536\n")):
    open(f"/proc/{pid}/{name}", "w").write(text)
os.write(go[1], b"x")
exit_as(pid)
"#;

/// `corral run` through [`NO_USERNS`] with `when`, in the harness's environment.
async fn run_without_userns(
    h: &Harness,
    server: &FakeModel,
    when: &str,
    flags: &[&str],
) -> Outcome {
    let exe = h.home_dir().join("corral");
    if !exe.exists() {
        // uid 1000 cannot reach the build directory; a link in the temp home it can.
        let built = std::path::Path::new(env!("CARGO_BIN_EXE_corral"));
        if std::fs::hard_link(built, &exe).is_err() {
            std::fs::copy(built, &exe).unwrap();
        }
        std::fs::write(h.home_dir().join("no_userns.py"), NO_USERNS).unwrap();
        let chown = std::process::Command::new("chown")
            .args(["-R", "1000:1000"])
            .arg(h.home_dir())
            .status()
            .unwrap();
        assert!(chown.success());
    }
    let mut wrapper = tokio::process::Command::new("python3");
    wrapper.arg(h.home_dir().join("no_userns.py")).arg(when);
    run_through(h, wrapper, &exe, server, flags).await
}

#[tokio::test]
async fn without_user_namespaces_best_effort_says_so_and_strict_refuses() {
    let h = Harness::new();
    if !landlock_here(&h).await {
        return;
    }
    if !root_here("building a user namespace without nested ones") {
        return;
    }
    let init = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(h.work())
        .status()
        .unwrap();
    assert!(init.success());
    let server = FakeModel::start().await;
    let args = json!({"command": "touch .git/hooks/unprotected && touch /tmp/../etc/x"});
    server.push(Reply::new().tool_call("c1", "shell", &args.to_string()));
    server.push(Reply::new().text("done"));
    let out = run_without_userns(&h, &server, "now", &[]).await;
    assert_turn_blocked(&out);
    let errors = out.of_kind("error");
    assert_eq!(
        errors.len(),
        2,
        "the start-up gap, then the blocked turn: {out:?}"
    );
    let message = errors[0]["data"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "sandbox best-effort: .git is not protected (user namespaces unavailable: ENOSPC"
        ),
        "{message}"
    );
    // The gap is real and said; landlock still holds everywhere else.
    assert!(h.work().join(".git/hooks/unprotected").exists());
    assert_blocked(&records(&out)[0], "Permission denied");
    let strict = run_without_userns(&h, &server, "now", &["--sandbox", "strict"]).await;
    assert_eq!(strict.code, Some(2), "{strict:?}");
    let said = "corral: sandbox strict: cannot enforce: .git is not protected";
    assert!(strict.stderr.contains(said), "{strict:?}");
    // Nothing can be hidden without a mount namespace either: said, and refused by strict.
    let hidden = "corral's state, credential stores and Unix sockets outside the sandbox are not \
                  hidden (user namespaces unavailable: ENOSPC";
    assert!(message.contains(hidden), "{message}");
    // An ordinary user has no capabilities to drop: no gap there.
    assert!(!message.contains("capabilities"), "{message}");
    assert!(strict.stderr.contains(hidden), "{strict:?}");
    assert_eq!(server.chat_requests().len(), 2, "strict ran no turn");
}
