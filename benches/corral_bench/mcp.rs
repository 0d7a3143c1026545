//! Tools from MCP servers (issue 18): how much configured stdio servers delay a session's
//! first model request (they start in parallel, inside the sandbox), and what one call of an
//! MCP tool costs against a built-in tool, both as the fake model server sees them.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::support::{FakeModel, Harness, Reply};
use super::{Row, corral_cmd, median, percentile};

/// Where scripts/install-mcp-servers put the servers (CORRAL_MCP_SERVERS overrides).
fn server(name: &str) -> Option<String> {
    let dir = std::env::var_os("CORRAL_MCP_SERVERS").map_or_else(
        || {
            PathBuf::from(std::env::var_os("HOME")?)
                .join(".cache/corral-ci/mcp-servers")
                .into()
        },
        |d| Some(PathBuf::from(d)),
    )?;
    [
        dir.join("npm/node_modules/.bin").join(name),
        dir.join("venv/bin").join(name),
    ]
    .into_iter()
    .find(|p| p.exists())
    .map(|p| p.display().to_string())
}

fn write_config(h: &Harness, servers: &Value) -> String {
    let path = h.home_dir().join("mcp.json");
    std::fs::write(&path, json!({ "mcpServers": servers }).to_string()).unwrap();
    path.display().to_string()
}

/// Spawn → first byte of the first model request, `runs` times, with `servers` configured.
async fn to_first_request(servers: &Value, runs: usize) -> Vec<f64> {
    let h = Harness::new();
    let config = write_config(&h, servers);
    let model = FakeModel::start().await;
    let mut times = Vec::new();
    for _ in 0..runs {
        model.push(Reply::new().text("hi"));
        let started = Instant::now();
        let out = corral_cmd(&h, &model, &["--mcp-config", &config, "go"])
            .output()
            .await
            .unwrap();
        assert!(out.status.success(), "corral failed: {}", out.status);
        let first = model.first_byte_after(started).unwrap();
        times.push(first.as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    times
}

/// The client's time between consecutive model requests (reply's end → next request, the
/// tool call in between) over a run of `calls` calls of `tool`.
async fn per_call(servers: &Value, tool: &str, args: &Value, calls: usize) -> Vec<f64> {
    let h = Harness::new();
    std::fs::write(h.work().join("small.txt"), "hello\n".repeat(10)).unwrap();
    let config = write_config(&h, servers);
    let model = FakeModel::start().await;
    for i in 0..calls {
        model.push(Reply::new().tool_call(&format!("c{i}"), tool, &args.to_string()));
    }
    model.push(Reply::new().text("done"));
    let out = corral_cmd(
        &h,
        &model,
        &["--mcp-config", &config, "--max-steps", "100", "go"],
    )
    .output()
    .await
    .unwrap();
    assert!(out.status.success(), "corral failed: {}", out.status);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let completed = stdout
        .lines()
        .filter(|l| l.contains("\"kind\":\"tool_result\"") && l.contains("\"completed\""))
        .count();
    assert_eq!(completed, calls, "not every {tool} call completed");
    model
        .turnarounds()
        .into_iter()
        .map(|d: Duration| d.as_secs_f64() * 1e3)
        .collect()
}

pub async fn mcp(rows: &mut Vec<Row>) {
    let (Some(everything), Some(time)) =
        (server("mcp-server-everything"), server("mcp-server-time"))
    else {
        rows.push(Row {
            name: "mcp: session start and per-call overhead",
            figure: "skipped: scripts/install-mcp-servers has not run".into(),
            goal: "—",
        });
        return;
    };
    let runs = 10;
    let one = json!({ "everything": { "command": everything } });
    let three = json!({
        "everything": { "command": everything },
        "time": { "command": time },
        "clock": { "command": time },
    });
    for (name, servers) in [
        (
            "mcp: spawn → first model request, 0 stdio servers",
            json!({}),
        ),
        (
            "mcp: spawn → first model request, 1 stdio server (everything)",
            one.clone(),
        ),
        (
            "mcp: spawn → first model request, 3 stdio servers (everything, time ×2)",
            three,
        ),
    ] {
        let times = to_first_request(&servers, runs).await;
        rows.push(Row {
            name,
            figure: format!(
                "p50 {:.0} ms, max {:.0} ms ({runs} runs)",
                percentile(&times, 50.0),
                times.last().copied().unwrap_or(f64::NAN)
            ),
            goal: "servers start in parallel: 3 ≈ the slowest 1",
        });
    }
    let calls = 20;
    let builtin = per_call(&one, "read_file", &json!({ "path": "small.txt" }), calls).await;
    let echo = per_call(&one, "everything__echo", &json!({ "message": "hi" }), calls).await;
    let (builtin, echo) = (median(builtin), median(echo));
    rows.push(Row {
        name: "mcp: time between model requests, read_file (built-in) / everything__echo (MCP)",
        figure: format!(
            "median {builtin:.1} ms / {echo:.1} ms over {calls} calls: {:+.1} ms per MCP call",
            echo - builtin
        ),
        goal: "—",
    });
}
