//! `corral mcp-servers list|check NAME` and doctor's MCP lines, against a real PyPI server
//! (`mcp-server-time`, from scripts/install-mcp-servers) and a hostile one written here
//! (`mcp_client/fixtures/hostile_server.py`, plain python3): escape sequences in what a server
//! says never reach the terminal raw, a server that does not start makes `check` fail with its
//! stderr, and servers start inside the sandbox of the session root `-C` names.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Harness, Outcome};

/// The raw OSC title change the hostile server puts in its tool description and stderr.
const RAW_OSC: &str = "\u{1b}]0;pwned\u{7}";

fn hostile_server() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/mcp_client/fixtures/hostile_server.py")
        .display()
        .to_string()
}

fn hostile(args: &[&str]) -> Value {
    let mut all = vec![hostile_server()];
    all.extend(args.iter().map(|a| a.to_string()));
    json!({"command": "python3", "args": all})
}

/// `mcp-server-time` from the PyPI venv; fails saying how to install when missing.
fn time_server() -> String {
    let home = std::env::var_os("CORRAL_MCP_SERVERS").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/corral-ci/mcp-servers"),
        PathBuf::from,
    );
    let bin = home.join("venv/bin/mcp-server-time");
    assert!(
        bin.exists(),
        "{} is missing: run scripts/install-mcp-servers",
        bin.display()
    );
    bin.display().to_string()
}

fn write_mcp_config(h: &Harness, servers: Value) -> String {
    let path = h.home_dir().join("mcp.json");
    std::fs::write(&path, json!({"mcpServers": servers}).to_string()).unwrap();
    path.display().to_string()
}

async fn mcp_servers(h: &Harness, args: &[&str]) -> Outcome {
    h.corral()
        .arg("mcp-servers")
        .args(args)
        .timeout(Duration::from_secs(60))
        .run()
        .await
}

#[tokio::test]
async fn list_shows_each_server_its_status_and_tools_with_server_text_escaped() {
    let h = Harness::new();
    h.write_config(&format!(
        "[mcp_servers.time]\ncommand = {:?}\ndanger = \"safe\"\n\
         [mcp_servers.later]\ncommand = \"no-such-server\"\nenabled = false\n",
        time_server()
    ));
    let config = write_mcp_config(&h, json!({"evil": hostile(&["describe"])}));
    let out = mcp_servers(&h, &["list", "--mcp-config", &config]).await;
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    let text = &out.stdout;
    assert!(text.contains("time  stdio: "), "{text}");
    assert!(
        text.contains("time__get_current_time") && text.contains("time__convert_time"),
        "{text}"
    );
    assert!(text.contains("safe"), "{text}");
    assert!(
        text.contains("later  stdio: no-such-server\n  status: disabled"),
        "{text}"
    );
    // The attack: a description holding an OSC sequence is shown escaped, never raw.
    assert!(text.contains("evil__peek"), "{text}");
    assert!(!text.contains(RAW_OSC), "{text:?}");
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{202e}'),
        "{text:?}"
    );
    assert!(text.contains("Looks around \\x1b]0;pwned\\x07"), "{text}");
    // Only the first line of a description.
    assert!(!text.contains("second line"), "{text}");
    assert!(!out.stderr.contains('\u{1b}'), "{:?}", out.stderr);
}

#[tokio::test]
async fn list_json_is_one_array_with_no_raw_escape_sequence() {
    let h = Harness::new();
    let config = write_mcp_config(&h, json!({"evil": hostile(&["describe"])}));
    let out = mcp_servers(&h, &["list", "--json", "--mcp-config", &config]).await;
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    assert!(!out.stdout.contains('\u{1b}'), "{:?}", out.stdout);
    assert!(!out.stdout.contains('\u{202e}'), "{:?}", out.stdout);
    let servers: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(servers[0]["name"], "evil");
    assert_eq!(servers[0]["status"], "up");
    assert_eq!(servers[0]["transport"], "stdio");
    let tool = &servers[0]["tools"][0];
    assert_eq!(tool["name"], "evil__peek");
    // readOnlyHint cannot lower the level without min_danger in the config.
    assert_eq!(tool["danger"], "dangerous");
    assert!(
        tool["description"].as_str().unwrap().contains(RAW_OSC),
        "the JSON still says what the server said: {tool}"
    );
}

#[tokio::test]
async fn check_fails_with_the_servers_error_and_stderr_tail_when_it_does_not_start() {
    let h = Harness::new();
    let config = write_mcp_config(
        &h,
        json!({"crash": hostile(&["crash"]), "evil": hostile(&["describe"])}),
    );
    let out = mcp_servers(&h, &["check", "crash", "--mcp-config", &config]).await;
    assert_eq!(out.code, Some(1), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("status: down:"), "{}", out.stdout);
    assert!(
        out.stdout.contains("fatal: cannot open the database"),
        "the stderr tail: {}",
        out.stdout
    );
    assert!(out.stdout.contains("exit status: 3"), "{}", out.stdout);
    assert!(!out.stdout.contains('\u{1b}'), "{:?}", out.stdout);
    assert!(
        out.stderr.contains("MCP server crash did not start"),
        "{}",
        out.stderr
    );
    // Only the named server was started.
    assert!(!out.stdout.contains("evil"), "{}", out.stdout);

    let out = mcp_servers(&h, &["check", "evil", "--mcp-config", &config]).await;
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("status: up"), "{}", out.stdout);
}

#[tokio::test]
async fn check_of_an_unknown_name_is_a_usage_error_listing_the_known_names() {
    let h = Harness::new();
    let config = write_mcp_config(
        &h,
        json!({"crash": hostile(&["crash"]), "evil": hostile(&["describe"])}),
    );
    let out = mcp_servers(&h, &["check", "nope", "--mcp-config", &config]).await;
    assert_eq!(out.code, Some(2), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("unknown MCP server \"nope\"; configured: crash, evil"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn list_with_no_servers_says_so_and_how_to_add_one() {
    let h = Harness::new();
    let out = mcp_servers(&h, &["list"]).await;
    assert!(out.success(), "{}", out.stderr);
    assert!(
        out.stdout.contains("No MCP servers are configured"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("[mcp_servers."), "{}", out.stdout);
    assert!(out.stdout.contains("--mcp-config"), "{}", out.stdout);
}

/// The servers start confined as a session in `-C DIR` would be: the root is writable, the
/// directory beside it is not.
#[tokio::test]
async fn servers_start_inside_the_sandbox_of_the_session_root() {
    let h = Harness::new();
    let root = h.work().join("project");
    std::fs::create_dir_all(&root).unwrap();
    let inside = root.join("inside.txt");
    let outside = h.home_dir().join("outside.txt");
    let config = write_mcp_config(
        &h,
        json!({"probe": hostile(&["write", outside.to_str().unwrap(), inside.to_str().unwrap()])}),
    );
    let out = mcp_servers(
        &h,
        &[
            "list",
            "--json",
            "-C",
            root.to_str().unwrap(),
            "--mcp-config",
            &config,
        ],
    )
    .await;
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    let servers: Value = serde_json::from_str(&out.stdout).unwrap();
    let names: Vec<&str> = servers[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["probe__refused_0", "probe__wrote_1"],
        "{}",
        out.stdout
    );
    assert!(
        !outside.exists(),
        "the server wrote outside the session root"
    );
    assert!(inside.exists());
}

#[tokio::test]
async fn doctor_lists_configured_servers_started_away_from_the_project() {
    let h = Harness::new();
    // The scratch root is enforced by landlock.
    if !crate::sandbox::landlock_here(&h).await {
        return;
    }
    // Inside the directory doctor runs in: doctor starts servers (for their versions) rooted
    // in a scratch directory, so their sandbox keeps them from writing it.
    let marker = h.work().join("started");
    h.write_config(&format!(
        "[mcp_servers.time]\ncommand = {:?}\n\
         [mcp_servers.gone]\ncommand = \"no-such-mcp-server\"\n\
         [mcp_servers.docs]\nurl = \"http://127.0.0.1:9/mcp\"\n\
         [mcp_servers.probe]\ncommand = \"python3\"\nargs = [{:?}, \"write\", {:?}]\n",
        time_server(),
        hostile_server(),
        marker.display().to_string()
    ));
    let out = h
        .corral()
        .arg("doctor")
        .timeout(Duration::from_secs(60))
        .run()
        .await;
    assert!(out.success(), "{}", out.stderr);
    let line = |name: &str| {
        out.stdout
            .lines()
            .find(|l| l.contains(&format!("MCP server {name}:")))
            .unwrap_or_else(|| panic!("no line for {name}:\n{}", out.stdout))
            .to_string()
    };
    assert!(line("time").starts_with("ok "), "{}", line("time"));
    assert!(line("time").contains("found: "), "{}", line("time"));
    assert!(line("time").contains("mcp-server-time"), "{}", line("time"));
    assert!(line("gone").starts_with("missing "), "{}", line("gone"));
    assert!(
        line("gone").contains("not found on PATH"),
        "{}",
        line("gone")
    );
    assert!(
        line("docs").contains("http: http://127.0.0.1:9/mcp"),
        "{}",
        line("docs")
    );
    assert!(
        !marker.exists(),
        "a server doctor started wrote into its directory"
    );
}
