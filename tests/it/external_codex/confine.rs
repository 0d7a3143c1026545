//! codex meets the same root as corral's own tools (issue 12 §9): under `-p auto`, whose
//! preset runs edits unasked, a patch that leads out of the session root is refused before
//! the gate's auto-approval, and codex applies nothing. And settings planted in the project
//! are not loaded unless the person opts in (issue 13 §3).

use serde_json::json;

use super::*;
use crate::support::{FakeModel, Harness, Outcome, Reply};

/// codex's model sends `apply_patch` with `patch`; corral runs under `-p auto`, unattended.
async fn codex_patches(h: &Harness, patch: &str) -> Outcome {
    let program = codex_program();
    let server = FakeModel::start().await;
    let args = json!({"cmd": format!("apply_patch <<'EOF'\n{patch}EOF\n")}).to_string();
    server.push(Reply::new().tool_call("call_patch", "exec_command", &args));
    server.push(Reply::new().text("PATCH HANDLED"));
    let out = codex_run(h, &server, &program)
        .args(["-p", "auto", "patch it"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    out
}

fn add_file(path: &str) -> String {
    format!("*** Begin Patch\n*** Add File: {path}\n+ESCAPED\n*** End Patch\n")
}

#[tokio::test]
async fn a_patch_inside_the_root_is_applied_unasked_under_auto() {
    // The control for the refusals below: the same patch inside the root goes through.
    let h = Harness::new();
    let root = h.work().canonicalize().unwrap();
    let out = codex_patches(&h, &add_file(root.join("inside.txt").to_str().unwrap())).await;
    assert_eq!(
        std::fs::read_to_string(root.join("inside.txt")).unwrap(),
        "ESCAPED\n",
        "{out:?}"
    );
    assert!(out.of_kind("permission").is_empty(), "{out:?}");
}

#[tokio::test]
async fn patches_leading_out_of_the_root_are_refused() {
    let h = Harness::new();
    let outside = tempfile::tempdir().unwrap();
    let root = h.work().canonicalize().unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("link")).unwrap();
    for (path, lands) in [
        (
            outside.path().join("abs.txt").display().to_string(),
            outside.path().join("abs.txt"),
        ),
        (
            format!("{}/../dotdot.txt", root.display()),
            h.home_dir().join("dotdot.txt"),
        ),
        (
            root.join("link/linked.txt").display().to_string(),
            outside.path().join("linked.txt"),
        ),
    ] {
        let out = codex_patches(&h, &add_file(&path)).await;
        assert!(!lands.exists(), "codex wrote {}: {out:?}", lands.display());
        let results = out.of_kind("tool_result");
        let result = &results
            .iter()
            .find(|r| r["data"]["result"]["success"] == false)
            .unwrap_or_else(|| panic!("no refused call for {path}: {out:?}"))["data"]["result"];
        let error = result["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("refused by corral") && error.contains("outside the session root"),
            "{path}: {error}"
        );
    }
}

/// Issue 13 §3: an MCP server planted in the project's `.codex/config.toml` starts only when
/// the person opts in (codex trusts the directory a thread starts in, and a trusted project's
/// config is loaded). Returns whether its command ran.
async fn codex_in_planted_project(opt_in: bool) -> bool {
    let program = codex_program();
    let h = Harness::new();
    let outside = tempfile::tempdir().unwrap();
    let marker = outside.path().join("mcp-ran");
    let dir = h.work().join(".codex");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "[mcp_servers.planted]\ncommand = \"sh\"\nargs = [\"-c\", \"touch {}; sleep 1\"]\n",
            marker.display()
        ),
    )
    .unwrap();
    if opt_in {
        h.write_config("[agents]\nproject_settings = true\n");
    }
    let server = FakeModel::start().await;
    server.push(Reply::new().text("HELLO"));
    let out = codex_run(&h, &server, &program).arg("hello").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    if opt_in {
        appears(&marker).await
    } else {
        marker.exists()
    }
}

#[tokio::test]
async fn codex_starts_no_mcp_server_planted_in_the_project() {
    assert!(!codex_in_planted_project(false).await);
}

#[tokio::test]
async fn codex_starts_the_projects_mcp_server_with_the_opt_in() {
    assert!(codex_in_planted_project(true).await);
}

#[tokio::test]
async fn a_command_whose_working_directory_is_outside_the_root_is_refused() {
    // `--allow shell` lets every command through the gate; the directory it runs in must
    // still be inside the root.
    let program = codex_program();
    let h = Harness::new();
    let outside = tempfile::tempdir().unwrap();
    let server = FakeModel::start().await;
    let args = json!({"cmd": "touch made-outside.txt", "workdir": outside.path()}).to_string();
    server.push(Reply::new().tool_call("call_touch", "exec_command", &args));
    server.push(Reply::new().text("ALL_DONE"));
    let out = codex_run(&h, &server, &program)
        .args(["-p", "auto", "--allow", "shell", "make the file"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        !outside.path().join("made-outside.txt").exists(),
        "codex ran the command outside the root: {out:?}"
    );
    let result = &out.of_kind("tool_result")[0]["data"]["result"];
    assert_eq!(result["success"], false, "{result}");
    let error = result["error"].as_str().unwrap_or_default();
    assert!(error.contains("outside the session root"), "{error}");
}

/// codex's own sandbox makes every writable root a mount (with `.git`, `.codex` and `.agents`
/// mounted read-only beneath it, made as empty mount points when missing and left behind
/// when codex is killed mid-command). `/tmp` used to be one: its commands could write all of
/// `/tmp`, and a killed codex left `/tmp/.git`, which then made every directory under `/tmp`
/// look like part of a repository. Its roots are now the session root and a private TMPDIR,
/// as for corral's own tools.
#[tokio::test]
async fn codex_writes_the_root_and_a_private_tmpdir_and_makes_nothing_in_tmp() {
    let program = codex_program();
    let h = Harness::new();
    let server = FakeModel::start().await;
    let cmd = "echo in > \"$TMPDIR/scratch.txt\" && cat \"$TMPDIR/scratch.txt\" && \
               echo \"TMP=$TMPDIR\" && cat /proc/self/mountinfo";
    server.push(Reply::new().tool_call(
        "call_tmp",
        "exec_command",
        &json!({"cmd": cmd}).to_string(),
    ));
    server.push(Reply::new().text("ALL_DONE"));
    let out = codex_run(&h, &server, &program)
        .args(["-p", "auto", "--allow", "shell", "use the temp dir"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let output = call_output(&server, 1, "call_tmp").replace("\\n", "\n");
    let tmpdir = output
        .lines()
        .find_map(|l| l.strip_prefix("TMP="))
        .unwrap_or_else(|| panic!("no TMPDIR in {output}"));
    assert!(tmpdir.starts_with("/tmp/corral-tmp-"), "{output}");
    assert!(output.contains("\nin\n"), "{output}");
    // mountinfo: `id parent dev root mountpoint options …`.
    let mounts: Vec<(&str, &str)> = output
        .lines()
        .filter_map(|l| {
            let fields: Vec<&str> = l.split(' ').collect();
            (fields.len() > 5 && fields[0].parse::<u32>().is_ok()).then(|| (fields[4], fields[5]))
        })
        .collect();
    let writable = |path: &str| {
        mounts
            .iter()
            .any(|(point, options)| *point == path && options.starts_with("rw"))
    };
    let root = h.work().canonicalize().unwrap();
    assert!(writable(root.to_str().unwrap()), "{output}");
    assert!(writable(tmpdir), "{output}");
    assert!(
        !mounts
            .iter()
            .any(|(point, _)| *point == "/tmp" || point.starts_with("/tmp/.")),
        "codex mounted /tmp: {output}"
    );
}
