//! Every tool a preset names must exist: a rule, an `offer` entry, a `[danger]` key or an
//! `always_ask` entry naming no tool would load and silently do nothing (`tool = "Write_File"`
//! with `deny = ["**"]` left `write_file` writing).
//!
//! Presets speak corral's tool names only, for every backend: external agents' own tools
//! (theirs and their MCP servers') are mapped onto corral's names before the gate sees them,
//! and an unmapped one never matches a rule, so naming one in a preset is refused too. The
//! tools of corral's own MCP servers are known only once they run: a name `SERVER__TOOL`
//! passes when its server part could name a server (or is `*`), and both parts may be globs
//! (`git__*`, `*__delete_*`).

use super::{OfferText, PresetFile};

/// `"*"` in a rule means every tool.
const ANY_TOOL: &str = "*";

pub(super) fn check(file: &PresetFile) -> Result<(), String> {
    for rule in &file.rules {
        if rule.tool != ANY_TOOL {
            known(&rule.tool, "a rule's tool")?;
        }
    }
    if let OfferText::List(list) = &file.offer {
        for tool in list {
            known(tool, "offer")?;
        }
    }
    for tool in file.danger.keys() {
        known(tool, "[danger]")?;
    }
    for tool in &file.always_ask {
        known(tool, "always_ask")?;
    }
    Ok(())
}

fn known(tool: &str, place: &str) -> Result<(), String> {
    if crate::tool::tool_names().any(|t| t == tool) {
        return Ok(());
    }
    if let Some((server, name)) = tool.split_once(crate::config::mcp::NAME_SEPARATOR) {
        let server_ok = server == ANY_TOOL || crate::config::mcp::check_name(server).is_ok();
        if server_ok && !name.is_empty() {
            return Ok(());
        }
        return Err(format!(
            "{place} names {tool:?}: an MCP tool is SERVER__TOOL with a server name of \
             letters, digits, '-' and '_' (or '*')"
        ));
    }
    let names: Vec<&str> = crate::tool::tool_names().collect();
    let hint = names
        .iter()
        .find(|t| t.eq_ignore_ascii_case(tool))
        .map(|t| format!(" (did you mean {t:?}?)"))
        .unwrap_or_default();
    Err(format!(
        "{place} names the unknown tool {tool:?}{hint}; known tools: {}",
        names.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use crate::policy::{Policy, PolicyOverrides};

    fn parse(text: &str) -> Result<Policy, String> {
        Policy::parse("t", text, &PolicyOverrides::default()).map_err(|e| e.to_string())
    }

    #[test]
    fn mcp_tool_names_and_globs_pass_and_malformed_ones_do_not() {
        let head = "description = \"t\"\n";
        for tool in ["git__status", "git__*", "*__delete_*"] {
            let text = format!("{head}[[rules]]\ntool = \"{tool}\"\ndeny = [\"*\"]\n");
            assert!(parse(&text).is_ok(), "{tool}");
        }
        for tool in ["a b__x", "git__", "_x__y"] {
            let text = format!("{head}[[rules]]\ntool = \"{tool}\"\ndeny = [\"*\"]\n");
            let err = parse(&text).unwrap_err();
            assert!(err.contains("SERVER__TOOL"), "{tool}: {err}");
        }
    }

    #[test]
    fn unknown_tools_anywhere_are_named_with_the_known_ones() {
        let head = "description = \"t\"\n";
        for body in [
            "[[rules]]\ntool = \"Write_File\"\ndeny = [\"**\"]\n",
            "offer = [\"read_file\", \"Write_File\"]\n",
            "always_ask = [\"Write_File\"]\n",
            "[danger]\nWrite_File = \"dangerous\"\n",
        ] {
            let e = parse(&format!("{head}{body}")).unwrap_err();
            assert!(e.contains("\"Write_File\""), "{e}");
            assert!(e.contains("did you mean \"write_file\""), "{e}");
            assert!(e.contains("known tools: read_file, "), "{e}");
        }
        let ok = "[[rules]]\ntool = \"*\"\ndeny = [\"/etc/**\"]\n[danger]\nshell = \"moderate\"\n";
        parse(&format!("{head}{ok}")).unwrap();
    }

    #[test]
    fn the_shipped_presets_name_only_real_tools() {
        for name in [
            "default",
            "readonly",
            "auto",
            "specialist",
            "bypass",
            "notebook",
            "lab",
        ] {
            Policy::load(name, None, &PolicyOverrides::default())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}
