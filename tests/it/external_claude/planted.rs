//! What outlives or precedes a claude session: settings planted in the project never run
//! unless the person opts in (issue 13 §3), and a `corral run` stopped by a signal stops
//! claude too (issue 13 §7).

use std::time::Duration;

use serde_json::json;

use super::*;
use crate::support::{FakeModel, Harness, Reply};

/// Plants `.claude/settings.json` (a `SessionStart` hook) and `.mcp.json` (a local MCP server)
/// in the session root, each touching a marker outside it, then runs one claude turn there.
/// Returns whether the hook ran and whether the MCP command ran.
async fn run_in_planted_project(opt_in: bool) -> (bool, bool) {
    let h = Harness::new();
    let outside = tempfile::tempdir().unwrap();
    let hook_marker = outside.path().join("hook-ran");
    let mcp_marker = outside.path().join("mcp-ran");
    let claude_dir = h.work().join(".claude");
    std::fs::create_dir_all(&claude_dir).unwrap();
    let hook = json!({"hooks": {"SessionStart": [{"hooks": [
        {"type": "command", "command": format!("touch {}", hook_marker.display())}]}]}});
    std::fs::write(claude_dir.join("settings.json"), hook.to_string()).unwrap();
    let mcp = json!({"mcpServers": {"planted": {"command": "sh",
        "args": ["-c", format!("touch {}; sleep 1", mcp_marker.display())]}}});
    std::fs::write(h.work().join(".mcp.json"), mcp.to_string()).unwrap();
    if opt_in {
        h.write_config("[agents]\nproject_settings = true\n");
    }
    let server = FakeModel::start().await;
    server.push(Reply::new().text("HELLO"));
    let out = claude_run(&h, &server, &["hello"]).run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(authoritative(&out, "assistant_text"), ["HELLO"]);
    // The MCP command is started in the background; a moment for it.
    let mcp_ran = if opt_in {
        appears(&mcp_marker).await
    } else {
        mcp_marker.exists()
    };
    (hook_marker.exists(), mcp_ran)
}

#[tokio::test]
async fn hooks_and_mcp_servers_planted_in_the_project_do_not_run() {
    assert_eq!(run_in_planted_project(false).await, (false, false));
}

#[tokio::test]
async fn with_the_opt_in_the_projects_own_settings_are_loaded() {
    // The same project with `[agents] project_settings = true`: claude runs them, so the
    // test above would see them if corral let it.
    assert_eq!(run_in_planted_project(true).await, (true, true));
}

/// The pid pids.json records for the claude process of this harness.
fn claude_pid(h: &Harness) -> u32 {
    let path = h.cache_dir().join("corral/agents/pids.json");
    let entries: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    entries
        .iter()
        .find(|e| e["kind"] == "claude")
        .and_then(|e| e["pid"].as_u64())
        .unwrap_or_else(|| panic!("no claude in {entries:?}")) as u32
}

/// Alive: there, and not a zombie waiting for a parent that is gone.
fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rfind(')')
        .and_then(|at| stat[at + 1..].split_whitespace().next())
        .unwrap_or("");
    state != "Z" && state != "X"
}

async fn stopped_mid_turn_stops_claude(signal: &str, code: i32) {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .text("working on it ")
            .stall(Duration::from_secs(60))
            .text("never sent"),
    );
    let running = claude_run(&h, &server, &["do some work"]).spawn().await;
    running
        .wait_for_event(0, |e| {
            e["kind"] == "assistant_text" && e["data"]["content"]["text"] == "working on it "
        })
        .await;
    let pid = claude_pid(&h);
    assert!(alive(pid), "claude {pid} runs mid-turn");
    running.signal(signal).await;
    let out = running.wait().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while alive(pid) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let left = alive(pid);
    if left {
        // Not left behind for the next test either.
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    assert!(
        !left,
        "claude {pid} outlived corral stopped by SIG{signal}: {out:?}"
    );
    assert_eq!(out.code, Some(code), "{out:?}");
    // The session was closed the orderly way: its log ends dead.
    assert_eq!(
        statuses(&out).last().map(String::as_str),
        Some("dead"),
        "{out:?}"
    );
}

#[tokio::test]
async fn sigterm_mid_turn_stops_claude_with_corral() {
    stopped_mid_turn_stops_claude("TERM", 143).await;
}

#[tokio::test]
async fn sighup_mid_turn_stops_claude_with_corral() {
    stopped_mid_turn_stops_claude("HUP", 129).await;
}
