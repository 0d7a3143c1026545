//! What a tool could inherit from corral and use later: a descriptor corral was started with,
//! and root's powers when corral runs as root (setuid bits, file capabilities). Each attack
//! fails under the sandbox, network on and off; root's powers are there with `--sandbox off`.

use std::path::Path;

use serde_json::json;

use crate::common::{root_here, run_through};
use crate::sandbox::{landlock_here, outside, run_calls};
use crate::sandbox_attacks::{CONFINED, OFF, said};
use crate::support::{FakeModel, Harness, Outcome, Reply};

/// `corral run` started the way a launcher would: with descriptor 7 open for writing on
/// `file` (and not close-on-exec).
async fn run_with_fd_7(h: &Harness, file: &Path, command: &str, flags: &[&str]) -> Outcome {
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "shell", &json!({ "command": command }).to_string()));
    server.push(Reply::new().text("done"));
    let mut wrapper = tokio::process::Command::new("bash");
    wrapper
        .arg("-c")
        .arg("exec 7>>\"$0\"; exec \"$@\"")
        .arg(file);
    let exe = Path::new(env!("CARGO_BIN_EXE_corral"));
    run_through(h, wrapper, exe, &server, flags).await
}

#[tokio::test]
async fn a_descriptor_corral_inherited_never_reaches_a_tool() {
    let h = Harness::new();
    let dir = outside();
    let file = dir.path().join("launcher.log");
    // The wrapper itself can write through it: the descriptor is real.
    let check = std::process::Command::new("bash")
        .args(["-c", "exec 7>>\"$0\"; echo wrapper >&7"])
        .arg(&file)
        .status()
        .unwrap();
    assert!(check.success());
    let command = "echo escaped >&7; ls /proc/self/fd";
    let mut variants: Vec<&[&str]> = vec![&["--sandbox", "off"]];
    // Without landlock (and CORRAL_TEST_SKIP=landlock) only --sandbox off is tried.
    if landlock_here(&h).await {
        variants.extend(CONFINED);
    }
    for flags in variants {
        let out = run_with_fd_7(&h, &file, command, flags).await;
        let text = said(&out);
        assert!(text.contains("Bad file descriptor"), "{flags:?}: {text}");
        let fds: Vec<&str> = text.lines().filter(|l| l.parse::<u32>().is_ok()).collect();
        // 0-2, and the directory `ls` is listing.
        assert_eq!(fds, ["0", "1", "2", "3"], "{flags:?}: {text}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "wrapper\n");
    }
}

/// A file capability (v2: CAP_NET_RAW permitted and effective), as `setcap` writes it.
const FILE_CAP: &str = "b'\\x01\\x00\\x00\\x02\\x00\\x20\\x00\\x00' + bytes(12)";

#[tokio::test]
async fn a_root_run_corral_gives_tools_no_root_powers() {
    let h = Harness::new();
    if !landlock_here(&h).await {
        return;
    }
    if !root_here("root powers") {
        return;
    }
    let code = format!(
        "import os, shutil, stat\n\
         for f in ('suid', 'made', 'capped'):\n    \
             if os.path.exists(f): os.remove(f)\n\
         shutil.copy('/bin/sh', 'suid')\n\
         shutil.copy('/bin/sh', 'capped')\n\
         for name, act in (\n    \
             ('chmod', lambda: os.chmod('suid', 0o4755)),\n    \
             ('setgid', lambda: os.chmod('suid', 0o2755)),\n    \
             ('open', lambda: os.close(os.open('made', os.O_CREAT | os.O_WRONLY, 0o4755))),\n    \
             ('xattr', lambda: os.setxattr('capped', 'security.capability', {FILE_CAP})),\n\
         ):\n    \
             try:\n        act(); print(name, 'done')\n    \
             except OSError as e:\n        print(name, 'refused', e.errno)\n\
         print([l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0])\n"
    );
    let call = ("python", json!({ "code": code }));
    let root = h.work();
    let set_id = |name: &str| {
        std::fs::metadata(root.join(name))
            .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o6000)
            .unwrap_or(0)
    };
    let capped = || xattr_of(&root.join("capped"), "security.capability");
    for flags in CONFINED {
        let out = run_calls(&h, std::slice::from_ref(&call), flags).await;
        let text = said(&out);
        for name in ["chmod", "setgid", "open", "xattr"] {
            assert!(
                text.contains(&format!("{name} refused 1")),
                "{flags:?}: {text}"
            );
        }
        assert!(text.contains("0000000000000000"), "{flags:?}: {text}");
        assert_eq!((set_id("suid"), set_id("made")), (0, 0), "{flags:?}");
        assert!(!capped(), "{flags:?}");
    }
    let out = run_calls(&h, &[call], OFF).await;
    let text = said(&out);
    assert!(
        text.contains("chmod done") && text.contains("xattr done"),
        "{text}"
    );
    assert_eq!((set_id("suid"), set_id("made")), (0o2000, 0o4000));
    assert!(capped());
}

/// Whether `path` carries the extended attribute `name` (read by `getfattr`-free python).
fn xattr_of(path: &Path, name: &str) -> bool {
    let script = format!(
        "import os, sys\ntry:\n    os.getxattr({:?}, {name:?})\nexcept OSError:\n    sys.exit(1)",
        path.display().to_string()
    );
    std::process::Command::new("python3")
        .args(["-c", &script])
        .status()
        .unwrap()
        .success()
}
