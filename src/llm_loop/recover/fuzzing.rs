//! The parsers' door for fuzzing: the cargo-fuzz targets in `fuzz/` (one per family) and the
//! stable mutation test call [`fuzz_recover`], which runs one family's parser, or the whole
//! table, against a fixed catalog and checks what the loop relies on.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::{Value, json};

use super::{Catalog, FAMILIES, TextToolCall, recover};
use crate::tool::manifests;

/// The built-in tools' schemas, and `apply_patch` so the codex patch family has its tool.
struct Schemas(BTreeMap<String, Value>);

impl Catalog for Schemas {
    fn parameters(&self, name: &str) -> Option<&Value> {
        self.0.get(name)
    }
}

fn catalog() -> &'static Schemas {
    static CATALOG: OnceLock<Schemas> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let mut schemas: BTreeMap<String, Value> = manifests()
            .map(|all| {
                all.iter()
                    .map(|m| (m.name.clone(), m.parameters.clone()))
                    .collect()
            })
            .unwrap_or_default();
        schemas.entry("apply_patch".to_owned()).or_insert_with(|| {
            json!({"type": "object", "required": ["patch"], "additionalProperties": false,
                "properties": {"patch": {"type": "string"}}})
        });
        Schemas(schemas)
    })
}

/// Runs the parser of `family` (a family's name, or `"all"` for the table's choice) on
/// `text`. `Ok` is how many calls it took; `Err` says the family is unknown or the parser
/// broke its promise: it took no call, or a call naming no tool of the catalog, or arguments
/// that tool refuses. A fuzz target treats `Err` as a crash.
#[doc(hidden)]
pub fn fuzz_recover(family: &str, text: &str) -> Result<usize, String> {
    let calls: Option<Vec<TextToolCall>> = if family == "all" {
        recover(text, catalog()).map(|r| r.calls)
    } else {
        let parser = FAMILIES
            .iter()
            .find(|f| f.name == family)
            .ok_or_else(|| format!("no recovery family {family:?}"))?;
        (parser.extract)(text, catalog()).map(|e| e.calls)
    };
    let Some(calls) = calls else { return Ok(0) };
    if calls.is_empty() {
        return Err(format!("{family} found calls but returned none"));
    }
    for call in &calls {
        if catalog()
            .accept(&call.name, call.arguments.clone())
            .is_none()
        {
            return Err(format!(
                "{family} took a call its catalog refuses: {call:?}"
            ));
        }
    }
    Ok(calls.len())
}
