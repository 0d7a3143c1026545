use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{assert_well_formed, offered_tools, openai_run, tool_results};
use crate::support::{FakeModel, Harness, Outcome, Reply};

/// Where scripts/install-mcp-servers put the servers (CORRAL_MCP_SERVERS overrides).
pub fn servers_dir() -> PathBuf {
    std::env::var_os("CORRAL_MCP_SERVERS").map_or_else(
        || {
            PathBuf::from(std::env::var_os("HOME").expect("HOME"))
                .join(".cache/corral-ci/mcp-servers")
        },
        PathBuf::from,
    )
}

/// An installed server's executable; fails the test, saying how to install, when missing.
pub fn server_bin(name: &str) -> String {
    let dir = servers_dir();
    let path = [
        dir.join("npm/node_modules/.bin").join(name),
        dir.join("venv/bin").join(name),
    ]
    .into_iter()
    .find(|p| p.exists())
    .unwrap_or_else(|| {
        panic!(
            "{name} is not in {}: run scripts/install-mcp-servers",
            dir.display()
        )
    });
    path.display().to_string()
}

/// Writes an `--mcp-config` file into the harness home and returns its path.
pub fn mcp_config(h: &Harness, servers: Value) -> String {
    let path = h.home_dir().join("mcp.json");
    std::fs::write(&path, json!({"mcpServers": servers}).to_string()).unwrap();
    path.display().to_string()
}

/// Everything the run's calls streamed as `tool_output` (an MCP call's progress lines).
pub fn streamed(out: &Outcome) -> String {
    out.of_kind("tool_output")
        .iter()
        .map(|e| e["data"]["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Whether an `error` event of the run says `text`.
pub fn said_error(out: &Outcome, text: &str) -> bool {
    out.of_kind("error")
        .iter()
        .any(|e| e["data"]["message"].to_string().contains(text))
}

/// A run whose model makes `calls`, one per step, then answers "done".
pub async fn run_with(
    h: &Harness,
    config: &str,
    preset: &str,
    calls: &[(&str, Value)],
) -> (Outcome, FakeModel) {
    let server = FakeModel::start().await;
    for (i, (name, args)) in calls.iter().enumerate() {
        server.push(Reply::new().tool_call(&format!("c{i}"), name, &args.to_string()));
    }
    server.push(Reply::new().text("done"));
    std::fs::create_dir_all(h.work()).unwrap();
    let out = openai_run(h, &server, "go")
        .args(["-p", preset, "--mcp-config", config])
        .timeout(Duration::from_secs(90))
        .run()
        .await;
    assert_well_formed(&out);
    (out, server)
}

#[tokio::test]
async fn everything_server_tools_are_offered_and_called() {
    let h = Harness::new();
    let config = mcp_config(
        &h,
        json!({"everything": {"command": server_bin("mcp-server-everything")}}),
    );
    let (out, model) = run_with(
        &h,
        &config,
        "bypass",
        &[
            ("everything__echo", json!({"message": "hi from the model"})),
            ("everything__get-sum", json!({"a": 2, "b": 3})),
        ],
    )
    .await;
    let offered = offered_tools(&model, 0);
    assert!(
        offered.iter().any(|t| t == "everything__echo"),
        "{offered:?}"
    );
    assert!(offered.iter().any(|t| t == "read_file"), "{offered:?}");
    let results = tool_results(&out);
    assert_eq!(results.len(), 2, "{}", out.stdout);
    assert!(
        results[0].to_string().contains("hi from the model"),
        "{results:?}"
    );
    assert!(results[1].to_string().contains('5'), "{results:?}");
}
