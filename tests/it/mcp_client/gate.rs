//! An MCP server's tools go through the gate like built-in ones: the config's danger level,
//! annotations moving it only as far as the config allows, preset rules on `SERVER__TOOL`
//! names (globs too) and on their arguments, approvals that show the arguments, and the
//! output cap.

use serde_json::json;

use super::basics::{mcp_config, run_with, server_bin};
use crate::common::tool_results;
use crate::support::Harness;

fn time_server() -> serde_json::Value {
    json!({"command": server_bin("mcp-server-time"), "args": ["--local-timezone", "UTC"]})
}

#[tokio::test]
async fn preset_rules_allow_one_tool_and_deny_another() {
    let h = Harness::new();
    let preset = h.home_dir().join("mcp-rules.toml");
    std::fs::write(
        &preset,
        r#"description = "rules for the time server"
auto_approve = "none"

[[rules]]
tool = "time__get_current_time"
allow = ["*"]

[[rules]]
tool = "time__*"
deny = ["target_timezone=Europe/*"]
"#,
    )
    .unwrap();
    let config = mcp_config(&h, json!({"time": time_server()}));
    let (out, _) = run_with(
        &h,
        &config,
        preset.to_str().unwrap(),
        &[
            ("time__get_current_time", json!({"timezone": "UTC"})),
            (
                "time__convert_time",
                json!({"source_timezone": "UTC", "time": "12:00",
                                          "target_timezone": "Europe/Paris"}),
            ),
            (
                "time__convert_time",
                json!({"source_timezone": "UTC", "time": "12:00",
                                          "target_timezone": "Asia/Tokyo"}),
            ),
        ],
    )
    .await;
    let results = tool_results(&out);
    assert_eq!(results.len(), 3, "{}", out.stdout);
    assert_eq!(
        results[0]["success"], true,
        "allowed by its rule: {results:?}"
    );
    assert_eq!(results[1]["success"], false);
    assert!(
        results[1]["error"]
            .to_string()
            .contains("denied by the preset rule"),
        "{results:?}"
    );
    // No rule allows it and the preset auto-approves nothing: unattended, it is refused.
    assert_eq!(results[2]["success"], false);
    assert!(
        !results[2]["error"]
            .to_string()
            .contains("denied by the preset rule")
    );
}

#[tokio::test]
async fn the_configs_level_holds_and_annotations_lower_it_only_to_min_danger() {
    let h = Harness::new();
    // server-everything marks echo readOnlyHint: with the default config that counts for
    // nothing (dangerous: the default preset asks, and nobody is there to answer).
    let strict = mcp_config(
        &h,
        json!({"e": {"command": server_bin("mcp-server-everything")}}),
    );
    let (out, _) = run_with(
        &h,
        &strict,
        "default",
        &[("e__echo", json!({"message": "x"}))],
    )
    .await;
    assert_eq!(tool_results(&out)[0]["success"], false, "{}", out.stdout);
    let permission = out.of_kind("permission");
    assert!(
        permission.is_empty(),
        "unattended: refused without a prompt"
    );
    // The config lets annotations bring it to safe: the default preset runs safe tools.
    let trusting = mcp_config(
        &h,
        json!({"e": {"command": server_bin("mcp-server-everything"), "min_danger": "safe"}}),
    );
    let (out, _) = run_with(
        &h,
        &trusting,
        "default",
        &[("e__echo", json!({"message": "x"}))],
    )
    .await;
    assert_eq!(tool_results(&out)[0]["success"], true, "{}", out.stdout);
}

#[tokio::test]
async fn an_approval_shows_the_calls_arguments() {
    let h = Harness::new();
    let config = mcp_config(&h, json!({"time": time_server()}));
    let model = crate::support::FakeModel::start().await;
    model.push(crate::support::Reply::new().tool_call(
        "c0",
        "time__get_current_time",
        &json!({"timezone": "Asia/Tokyo"}).to_string(),
    ));
    model.push(crate::support::Reply::new().text("done"));
    std::fs::create_dir_all(h.work()).unwrap();
    let mut running = crate::common::openai_run(&h, &model, "go")
        .args(["--mcp-config", &config, "--approve-stdin"])
        .live_stdin()
        .spawn()
        .await;
    let request = running
        .wait_for_event(0, |e| {
            e["kind"] == "permission" && e["data"].get("resolved").is_none()
        })
        .await;
    let id = request["data"]["requestId"].as_str().unwrap().to_owned();
    running
        .send_line(&json!({"requestId": id, "decision": "allow"}).to_string())
        .await;
    assert!(request.to_string().contains("Asia/Tokyo"), "{request}");
    assert!(request.to_string().contains("dangerous"), "{request}");
    running.close_stdin();
    let out = running.wait().await;
    assert_eq!(tool_results(&out)[0]["success"], true, "{}", out.stdout);
}

#[tokio::test]
async fn a_huge_result_is_cut_like_a_built_in_tools() {
    let h = Harness::new();
    let config = mcp_config(
        &h,
        json!({"e": {"command": server_bin("mcp-server-everything")}}),
    );
    let big = "y".repeat(200 * 1024);
    let (out, _) = run_with(
        &h,
        &config,
        "bypass",
        &[("e__echo", json!({"message": big}))],
    )
    .await;
    let output = tool_results(&out)[0]["output"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!output.is_empty(), "{}", out.stdout);
    assert!(
        output.len() < 40 * 1024,
        "{} bytes reached the model",
        output.len()
    );
}

#[tokio::test]
async fn the_configs_allow_list_picks_a_servers_tools_and_a_flood_is_capped() {
    let h = Harness::new();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/it/mcp_client/fixtures/scripted_server.py"
    );
    let config = mcp_config(
        &h,
        json!({
            "time": {"command": server_bin("mcp-server-time"), "tools": ["get_*"]},
            "flood": {"command": "python3", "args": [script, "--many-tools", "5000"]},
            "fat": {"command": "python3", "args": [script, "--fat-tools", "20"]},
        }),
    );
    let (out, model) = run_with(
        &h,
        &config,
        "bypass",
        &[(
            "time__convert_time",
            json!({"source_timezone": "UTC", "time": "12:00",
                                        "target_timezone": "UTC"}),
        )],
    )
    .await;
    let offered = crate::common::offered_tools(&model, 0);
    assert!(
        offered.iter().any(|t| t == "time__get_current_time"),
        "{offered:?}"
    );
    assert!(
        !offered.iter().any(|t| t == "time__convert_time"),
        "{offered:?}"
    );
    // Not offered means not callable either.
    assert_eq!(tool_results(&out)[0]["success"], false);
    let flood = offered.iter().filter(|t| t.starts_with("flood__")).count();
    assert_eq!(flood, 128, "a server's tools are capped");
    assert!(
        super::basics::said_error(&out, "only the first 128"),
        "the cap is said"
    );
    // Twenty tools of 34 KB each would add 680 KB to every request: a budget holds them.
    let fat = offered.iter().filter(|t| t.starts_with("fat__fat")).count();
    assert!((1..20).contains(&fat), "{fat} of the fat tools offered");
    assert!(
        super::basics::said_error(&out, "KiB of every request"),
        "the budget is said"
    );
}
