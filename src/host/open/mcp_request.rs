//! `mcp_servers` of `POST /api/v1/sessions` (judged where the session opens: `serve`, or the
//! `corral node` that runs it): a list of names picks among the servers the
//! server's config.toml `[mcp_servers]` defines (`OpenSpec::mcp_select`); an object defines
//! servers (`OpenSpec::mcp_servers`), which only admin tokens may (a definition is a command
//! line the server would start). User tokens are refused by `Limits::check_request` before
//! anything starts; a definition a user sends that does not even parse gets the same 403, so
//! the answer never depends on what the user wrote.

use serde_json::Value;

use crate::config::McpServers;
use crate::config::mcp::servers_from_json;
use crate::error::Error;

fn invalid(message: impl Into<String>) -> Error {
    Error::Usage(message.into())
}

/// What the field asks for.
#[derive(Debug, Default, PartialEq)]
pub struct Requested {
    pub defined: McpServers,
    pub select: Option<Vec<String>>,
}

/// Reads the field. `bounded`: the caller holds a user token. `configured`: the names the
/// server's config defines (an admin naming another is told which exist).
pub fn parse(
    value: Option<Value>,
    bounded: bool,
    configured: &McpServers,
) -> Result<Requested, Error> {
    match value {
        None | Some(Value::Null) => Ok(Requested::default()),
        Some(Value::Array(items)) => {
            let names = items
                .into_iter()
                .map(|item| match item {
                    Value::String(name) => Ok(name),
                    other => Err(invalid(format!(
                        "mcp_servers lists names of configured servers (strings), got {other}"
                    ))),
                })
                .collect::<Result<Vec<String>, Error>>()?;
            // A user's unknown name is Limits' 403, which names the configured servers too.
            if !bounded && let Some(unknown) = names.iter().find(|n| !configured.contains_key(*n)) {
                let known: Vec<&str> = configured.keys().map(String::as_str).collect();
                return Err(invalid(format!(
                    "MCP server {unknown:?} is not in the server's config (it names: {})",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                )));
            }
            Ok(Requested {
                defined: McpServers::new(),
                select: Some(names),
            })
        }
        Some(value @ Value::Object(_)) => match servers_from_json(&value) {
            Ok(defined) => Ok(Requested {
                defined,
                select: None,
            }),
            Err(_) if bounded => Err(Error::Forbidden(
                "defining MCP servers is for admin tokens; name servers from the server's \
                 config instead"
                    .to_string(),
            )),
            Err(e) => Err(invalid(format!("mcp_servers: {e}"))),
        },
        Some(other) => Err(invalid(format!(
            "mcp_servers is a list of configured server names or an object of definitions, \
             got {other}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn configured() -> McpServers {
        serde_json::from_value(json!({"git": {"command": "uvx"}})).unwrap()
    }

    #[test]
    fn names_select_and_objects_define() {
        let names = parse(Some(json!(["git"])), true, &configured()).unwrap();
        assert_eq!(names.select, Some(vec!["git".to_string()]));
        assert!(names.defined.is_empty());
        let none = parse(Some(json!([])), false, &configured()).unwrap();
        assert_eq!(none.select, Some(vec![]));
        let defined = parse(
            Some(json!({"docs": {"url": "http://127.0.0.1:9/mcp"}})),
            false,
            &configured(),
        )
        .unwrap();
        assert!(defined.defined.contains_key("docs"));
        assert_eq!(defined.select, None);
        assert_eq!(
            parse(None, true, &configured()).unwrap(),
            Requested::default()
        );
    }

    #[test]
    fn mistakes_are_invalid_for_admins_and_definitions_forbidden_for_users() {
        let forbidden =
            |value: Value, bounded: bool| match parse(Some(value), bounded, &configured())
                .unwrap_err()
            {
                Error::Usage(_) => false,
                Error::Forbidden(_) => true,
                other => panic!("{other:?}"),
            };
        assert!(!forbidden(json!(["nope"]), false));
        assert!(!forbidden(json!([1]), false));
        assert!(!forbidden(json!("git"), false));
        let bad = json!({"a__b": {"command": "x"}});
        assert!(!forbidden(bad.clone(), false));
        assert!(forbidden(bad, true));
    }
}
