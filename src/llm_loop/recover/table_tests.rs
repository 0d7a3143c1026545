//! The table as the loop uses it: which family a reply's calls came from, replies that mix
//! families, and the real registry as the catalog (namespaced names, real schemas).

#![allow(clippy::unwrap_used)] // a failed unwrap is a clear test failure

use serde_json::json;

use super::testing::tools;
use super::{Catalog, recover};
use crate::tool::ToolRegistry;

const HERMES: &str =
    "<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}</tool_call>";
const QWEN: &str = "<function=read_file>\n<parameter=path>\na\n</parameter>\n</function>";
const JSON: &str = "{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}";
const MISTRAL: &str = "[TOOL_CALLS]read_file[ARGS]{\"path\": \"a\"}";
const LLAMA: &str = "<|python_tag|>{\"name\": \"read_file\", \"parameters\": {\"path\": \"a\"}}";
const PATCH: &str = "*** Begin Patch\n*** Delete File: a\n*** End Patch";

#[test]
fn each_family_is_named_by_the_table() {
    for (text, family, tool) in [
        (HERMES, "hermes", "read_file"),
        (QWEN, "qwen3_xml", "read_file"),
        (JSON, "json", "read_file"),
        (MISTRAL, "mistral", "read_file"),
        (LLAMA, "llama3", "read_file"),
        (PATCH, "codex_patch", "apply_patch"),
    ] {
        let got = recover(text, &tools()).unwrap_or_else(|| panic!("{text}"));
        assert_eq!((got.family, got.calls.len()), (family, 1), "{text}");
        assert_eq!(got.calls[0].name, tool);
    }
    assert_eq!(recover("Just an answer.", &tools()), None);
}

#[test]
fn a_reply_mixing_families_runs_none() {
    for text in [
        format!("{HERMES}\n{QWEN}"),
        format!("{QWEN}\n{MISTRAL}"),
        format!("{HERMES}\n{LLAMA}"),
        format!("Both:\n{HERMES}\n{MISTRAL}"),
    ] {
        assert_eq!(recover(&text, &tools()), None, "{text}");
    }
    // A block of another family that is refused anyway is only text: the other one runs.
    let text = format!("{HERMES}\n<function=rm>\n<parameter=path>\n/\n</parameter>\n</function>");
    let got = recover(&text, &tools()).unwrap();
    assert_eq!(got.family, "hermes");
    assert!(got.text.starts_with("<function=rm>"));
}

#[test]
fn the_registry_is_a_catalog_that_knows_namespaced_names() {
    let registry = ToolRegistry::builtin().unwrap();
    assert!(registry.parameters("functions.read_file").is_some());
    assert_eq!(
        registry.accept(
            "default_api.read_file",
            json!({"path": "a", "startLine": "2"})
        ),
        Some(json!({"path": "a", "startLine": 2}))
    );
    assert_eq!(registry.accept("functions.nope", json!({})), None);
    assert_eq!(
        registry.accept("read_file", json!({"path": "a", "x": 1})),
        None
    );
    let text = "<tool_call>{\"name\": \"functions.read_file\", \"arguments\": {\"path\": \"a\"}}</tool_call>";
    let got = recover(text, &registry).unwrap();
    assert_eq!(got.calls[0].name, "functions.read_file");
    let qwen = "<function=tools.read_file>\n<parameter=path>\na\n</parameter>\n\
        <parameter=endLine>\n9\n</parameter>\n</function>";
    let got = recover(qwen, &registry).unwrap();
    assert_eq!(got.calls[0].arguments, json!({"path": "a", "endLine": 9}));
}
