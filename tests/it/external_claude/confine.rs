//! claude meets the same root as corral's own tools (issue 12 §9): under `-p auto`, whose
//! preset runs moderate tools unasked, a Write that leads out of the session root — an
//! absolute path elsewhere, `<root>/../x`, a symlink in the root pointing out — is refused
//! before the gate's auto-approval, and claude writes nothing.

use std::path::Path;

use serde_json::json;

use super::*;
use crate::support::fake_anthropic::message_requests;
use crate::support::{FakeModel, Harness, Outcome, Reply};

/// claude asks to Write `file_path`; returns the run and the `tool_result` claude sent back.
async fn claude_writes(h: &Harness, file_path: &str) -> (Outcome, Value) {
    let server = FakeModel::start().await;
    let input = json!({"file_path": file_path, "content": "ESCAPED\n"}).to_string();
    server.push(Reply::new().tool_call("toolu_write", "Write", &input));
    server.push(Reply::new().text("The write was handled."));
    let out = claude_run(h, &server, &["-p", "auto", "write the file"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let requests = message_requests(&server);
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let sent = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == "toolu_write")
        .unwrap_or_else(|| panic!("no tool_result in {:#?}", requests[1]));
    (out, sent)
}

fn assert_refused(out: &Outcome, sent: &Value, target: &Path) {
    assert!(
        !target.exists(),
        "claude wrote {} outside the root: {out:?}",
        target.display()
    );
    let result = &out.of_kind("tool_result")[0]["data"]["result"];
    assert_eq!(result["success"], false, "{result}");
    let error = result["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("refused by corral") && error.contains("outside the session root"),
        "{error}"
    );
    // claude was told why, so its model can adapt.
    assert_eq!(sent["is_error"], true, "{sent}");
    assert!(
        sent.to_string().contains("outside the session root"),
        "{sent}"
    );
    assert_eq!(result_of(out)["stopReason"], "end_turn");
}

#[tokio::test]
async fn a_write_inside_the_root_runs_unasked_under_auto() {
    // The control: the same call inside the root is auto-approved and written, so the
    // refusals below are corral's, not claude's.
    let h = Harness::new();
    let target = h.work().canonicalize().unwrap().join("inside.txt");
    let (out, sent) = claude_writes(&h, target.to_str().unwrap()).await;
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "ESCAPED\n");
    assert_ne!(sent["is_error"], true, "{sent}");
    assert!(out.of_kind("permission").is_empty(), "{out:?}");
}

#[tokio::test]
async fn a_write_to_an_absolute_path_outside_the_root_is_refused() {
    let h = Harness::new();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("outside.txt");
    let (out, sent) = claude_writes(&h, target.to_str().unwrap()).await;
    assert_refused(&out, &sent, &target);
}

#[tokio::test]
async fn a_write_through_dot_dot_is_refused() {
    // The path starts with the root, so a check on the string alone lets it through.
    let h = Harness::new();
    let root = h.work().canonicalize().unwrap();
    let path = format!("{}/../outside.txt", root.display());
    let (out, sent) = claude_writes(&h, &path).await;
    assert_refused(&out, &sent, &h.home_dir().join("outside.txt"));
}

#[tokio::test]
async fn a_write_through_a_symlink_in_the_root_pointing_out_is_refused() {
    let h = Harness::new();
    let outside = tempfile::tempdir().unwrap();
    let root = h.work().canonicalize().unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("link")).unwrap();
    let path = root.join("link/outside.txt");
    let (out, sent) = claude_writes(&h, path.to_str().unwrap()).await;
    assert_refused(&out, &sent, &outside.path().join("outside.txt"));
}
