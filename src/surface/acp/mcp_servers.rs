//! The `mcpServers` an ACP client sends in `session/new` and `session/load`, as corral's own
//! server definitions. The client is the editor the person runs, so it may define servers
//! (stdio ones are started inside the session's sandbox like the config's).

use agent_client_protocol::v1::schema::{EnvVariable, HttpHeader, McpServer as AcpServer};

use crate::config::mcp::{McpServer, McpServers, McpTransport, check_servers};

/// The client's list as a map by name, every definition checked; the error names the server
/// and what is wrong with it. Editors name servers freely ("GitHub Issues", "context7.com"):
/// a name the model's tool names cannot carry is made into one (`GitHub-Issues`,
/// `context7-com`) rather than refusing the session.
pub fn from_client(list: &[AcpServer]) -> Result<McpServers, String> {
    let mut servers = McpServers::new();
    for server in list {
        let (given, converted) = convert(server)?;
        let name = usable_name(&given);
        if name != given {
            tracing::info!(given = %given, name = %name, "an ACP client's MCP server renamed");
        }
        if servers.insert(name.clone(), converted).is_some() {
            return Err(format!(
                "MCP server {given:?} is given twice (as {name:?} in tool names)"
            ));
        }
    }
    check_servers(&servers).map_err(|e| e.to_string())?;
    Ok(servers)
}

/// `name` as a server name (see `config::mcp::check_name`): other characters become `-`, runs
/// of `_` one `_`, no `_` or `-` at either end, at most 32 characters; nothing left: `server`.
fn usable_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
            c
        } else {
            '-'
        };
        if c == '_' && out.ends_with('_') {
            continue;
        }
        out.push(c);
    }
    let mut out: String = out
        .trim_matches(|c| c == '_' || c == '-')
        .chars()
        .take(32)
        .collect();
    while out.ends_with('_') || out.ends_with('-') {
        out.pop();
    }
    if out.is_empty() {
        "server".to_string()
    } else {
        out
    }
}

fn convert(server: &AcpServer) -> Result<(String, McpServer), String> {
    Ok(match server {
        AcpServer::Stdio(stdio) => {
            let command = stdio.command.to_str().ok_or_else(|| {
                format!(
                    "MCP server {:?}: its command is not valid UTF-8",
                    stdio.name
                )
            })?;
            let server = McpServer {
                command: Some(command.to_string()),
                args: stdio.args.clone(),
                env: pairs(&stdio.name, "environment variable", env_pairs(&stdio.env))?,
                transport: Some(McpTransport::Stdio),
                ..McpServer::default()
            };
            (stdio.name.clone(), server)
        }
        AcpServer::Http(http) => (
            http.name.clone(),
            remote(&http.name, &http.url, &http.headers, McpTransport::Http)?,
        ),
        AcpServer::Sse(sse) => (
            sse.name.clone(),
            remote(&sse.name, &sse.url, &sse.headers, McpTransport::Sse)?,
        ),
        // The schema is non-exhaustive: a transport corral does not advertise.
        _ => return Err("an MCP server of a transport corral does not support".into()),
    })
}

fn remote(
    name: &str,
    url: &str,
    headers: &[HttpHeader],
    transport: McpTransport,
) -> Result<McpServer, String> {
    let headers = headers.iter().map(|h| (h.name.as_str(), h.value.as_str()));
    Ok(McpServer {
        url: Some(url.to_string()),
        headers: pairs(name, "header", headers)?,
        transport: Some(transport),
        ..McpServer::default()
    })
}

fn env_pairs(env: &[EnvVariable]) -> impl Iterator<Item = (&str, &str)> {
    env.iter().map(|v| (v.name.as_str(), v.value.as_str()))
}

/// `[{name, value}]` as a map; a name given twice is the client's mistake, not silently the
/// last one.
fn pairs<'a>(
    server: &str,
    what: &str,
    items: impl Iterator<Item = (&'a str, &'a str)>,
) -> Result<std::collections::BTreeMap<String, String>, String> {
    let mut map = std::collections::BTreeMap::new();
    for (key, value) in items {
        if map.insert(key.to_string(), value.to_string()).is_some() {
            return Err(format!(
                "MCP server {server:?}: the {what} {key:?} is given twice"
            ));
        }
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(list: serde_json::Value) -> Result<McpServers, String> {
        let list: Vec<AcpServer> = serde_json::from_value(list).unwrap();
        from_client(&list)
    }

    #[test]
    fn every_transport_of_the_schema_becomes_a_corral_server() {
        let servers = parse(json!([
            {"name": "everything", "command": "/usr/bin/srv", "args": ["stdio"],
             "env": [{"name": "A", "value": "1"}]},
            {"type": "http", "name": "docs", "url": "http://127.0.0.1:9/mcp",
             "headers": [{"name": "X-Team", "value": "core"}]},
            {"type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse", "headers": []},
        ]))
        .unwrap();
        let stdio = &servers["everything"];
        assert_eq!(stdio.transport(), McpTransport::Stdio);
        assert_eq!(stdio.command.as_deref(), Some("/usr/bin/srv"));
        assert_eq!(stdio.args, ["stdio"]);
        assert_eq!(stdio.env["A"], "1");
        assert_eq!(servers["docs"].transport(), McpTransport::Http);
        assert_eq!(servers["docs"].headers["X-Team"], "core");
        assert_eq!(servers["old"].transport(), McpTransport::Sse);
        assert_eq!(
            servers["old"].url.as_deref(),
            Some("http://127.0.0.1:9/sse")
        );
    }

    #[test]
    fn free_form_names_become_server_names() {
        for (given, name) in [
            ("GitHub Issues", "GitHub-Issues"),
            ("context7.com", "context7-com"),
            ("a__b", "a_b"),
            ("__x__", "x"),
            ("...", "server"),
            ("git", "git"),
        ] {
            assert_eq!(usable_name(given), name, "{given}");
            assert!(crate::config::mcp::check_name(&usable_name(given)).is_ok());
        }
        assert_eq!(usable_name(&"y".repeat(50)).len(), 32);
    }

    #[test]
    fn a_bad_definition_is_refused_naming_the_server() {
        let bad = |list| parse(list).unwrap_err();
        let e = bad(json!([
            {"name": "a__b", "command": "x", "args": [], "env": []},
            {"name": "a_b", "command": "y", "args": [], "env": []},
        ]));
        assert!(e.contains("\"a_b\" is given twice"), "{e}");
        let e = bad(json!([{"type": "http", "name": "web", "url": "file:///etc", "headers": []}]));
        assert!(e.contains("\"web\"") && e.contains("http://"), "{e}");
        let e = bad(json!([
            {"name": "a", "command": "x", "args": [], "env": []},
            {"name": "a", "command": "y", "args": [], "env": []},
        ]));
        assert!(e.contains("\"a\" is given twice"), "{e}");
        let e = bad(json!([{"name": "a", "command": "x", "args": [],
                            "env": [{"name": "K", "value": "1"}, {"name": "K", "value": "2"}]}]));
        assert!(e.contains("\"K\" is given twice"), "{e}");
        let e = bad(json!([{"name": "a", "command": " ", "args": [], "env": []}]));
        assert!(e.contains("empty"), "{e}");
    }
}
