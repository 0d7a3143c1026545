//! Tool calls a model wrote into its reply text because its server returned no native calls.
//!
//! Each family of local models writes calls in the shape its chat template taught it. Taking a
//! quoted example for a real call would run a tool the model never asked for, so every family
//! obeys the same rules, fail-closed:
//! - a call stands on its own lines outside code fences, inline code spans and quotes
//!   ([`lines::take_blocks`]), or is the whole reply;
//! - it parses whole, in its family's exact shape; anything else and it stays text;
//! - it names a tool the [`Catalog`] knows, with arguments valid for that tool's schema.
//!
//! [`FAMILIES`] holds one parser per family. A reply whose calls come from two families runs
//! none of them: which one the model meant cannot be known, and guessing runs a tool.

mod codex_patch;
mod fuzzing;
mod hermes;
mod json_call;
mod lines;
mod llama;
mod mistral;
mod qwen_xml;

#[cfg(test)]
mod mutation_tests;
#[cfg(test)]
mod table_tests;

use serde_json::{Map, Value};

use super::repair;
use crate::tool::ToolRegistry;

pub use fuzzing::fuzz_recover;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TextToolCall {
    pub(crate) name: String,
    pub(crate) arguments: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Extracted {
    /// The reply text with the accepted calls removed, trimmed.
    pub(crate) text: String,
    pub(crate) calls: Vec<TextToolCall>,
}

/// The calls of one reply and the family they were written in (its name in [`FAMILIES`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Recovered {
    pub(crate) family: &'static str,
    pub(crate) text: String,
    pub(crate) calls: Vec<TextToolCall>,
}

/// The tools a recovered call may name.
pub(crate) trait Catalog {
    /// The JSON schema of the parameters of the tool `name` names, if it is one.
    fn parameters(&self, name: &str) -> Option<&Value>;

    /// The arguments coerced to the tool's schema, when `name` is a tool and they are valid.
    fn accept(&self, name: &str, arguments: Value) -> Option<Value> {
        repair::coerce_and_validate(arguments, self.parameters(name)?).ok()
    }
}

impl Catalog for ToolRegistry {
    fn parameters(&self, name: &str) -> Option<&Value> {
        let tool = self.get(&self.canonical_name(name))?;
        Some(&tool.manifest.parameters)
    }
}

/// One family of text-written calls: its name (the `recoveredFrom` of its `tool_use` events)
/// and its parser, `None` when the text holds no call of that family that could be taken.
pub(crate) struct Family {
    pub(crate) name: &'static str,
    pub(crate) extract: fn(&str, &dyn Catalog) -> Option<Extracted>,
}

pub(crate) const FAMILIES: &[Family] = &[
    Family {
        name: "hermes",
        extract: hermes::extract,
    },
    Family {
        name: "qwen3_xml",
        extract: qwen_xml::extract,
    },
    Family {
        name: "json",
        extract: json_call::extract,
    },
    Family {
        name: "mistral",
        extract: mistral::extract,
    },
    Family {
        name: "llama3",
        extract: llama::extract,
    },
    Family {
        name: "codex_patch",
        extract: codex_patch::extract,
    },
];

/// The calls written in `text`, from exactly one family; `None` when there are none, or when
/// two families each found some.
pub(crate) fn recover(text: &str, catalog: &dyn Catalog) -> Option<Recovered> {
    let mut found = FAMILIES
        .iter()
        .filter_map(|family| Some((family.name, (family.extract)(text, catalog)?)));
    let (family, extracted) = found.next()?;
    if let Some((other, _)) = found.next() {
        tracing::warn!(
            family,
            other,
            "the reply writes tool calls in two shapes; running none of them"
        );
        return None;
    }
    Some(Recovered {
        family,
        text: extracted.text,
        calls: extracted.calls,
    })
}

/// How much a JSON call object `{"name": …, "arguments": {…}}` may carry besides its call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    /// Inside a family's own markers: other keys (an `id`, a `type`) are ignored and missing
    /// arguments mean none.
    Marked,
    /// A whole reply without any marker: only `name`, `arguments` or `parameters`, and an
    /// optional `"type": "function"`, so an ordinary JSON answer is never read as a call.
    Bare,
}

/// A call from a JSON call object, with `arguments` or `parameters` (Llama's name for them),
/// as an object or as JSON text encoding one (as the OpenAI wire format does).
pub(super) fn call_object(
    value: Value,
    shape: Shape,
    catalog: &dyn Catalog,
) -> Option<TextToolCall> {
    let Value::Object(mut call) = value else {
        return None;
    };
    let Some(Value::String(name)) = call.remove("name") else {
        return None;
    };
    let arguments = match (call.remove("arguments"), call.remove("parameters")) {
        (Some(_), Some(_)) => return None,
        (Some(given), None) | (None, Some(given)) => Some(given),
        (None, None) => None,
    };
    if shape == Shape::Bare {
        let typed = call.remove("type");
        if arguments.is_none()
            || !call.is_empty()
            || typed.is_some_and(|t| t.as_str() != Some("function"))
        {
            return None;
        }
    }
    let arguments = match arguments {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::Object(args)) => Value::Object(args),
        Some(Value::String(encoded)) => match serde_json::from_str(&encoded).ok()? {
            Value::Object(args) => Value::Object(args),
            _ => return None,
        },
        Some(_) => return None,
    };
    let arguments = catalog.accept(&name, arguments)?;
    Some(TextToolCall { name, arguments })
}

/// The JSON value at the start of `text` and how many bytes it takes; what follows it is the
/// caller's to judge.
pub(super) fn json_prefix(text: &str) -> Option<(Value, usize)> {
    if text.starts_with(['{', '[', '"']) {
        // Objects, arrays and strings end themselves, whatever character comes next.
        let mut values = serde_json::Deserializer::from_str(text).into_iter::<Value>();
        let value = values.next()?.ok()?;
        return Some((value, values.byte_offset()));
    }
    let len = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
        .unwrap_or(text.len());
    let value = serde_json::from_str(&text[..len]).ok()?;
    Some((value, len))
}

/// `at` moved past any whitespace.
pub(super) fn skip_space(text: &str, at: usize) -> usize {
    text.len() - text[at..].trim_start().len()
}

#[cfg(test)]
pub(super) mod testing {
    //! A catalog of a few tools with the argument types the parsers must handle.

    use serde_json::{Value, json};

    use super::Catalog;

    pub(crate) struct Tools(Vec<(&'static str, Value)>);

    impl Catalog for Tools {
        fn parameters(&self, name: &str) -> Option<&Value> {
            self.0.iter().find(|(n, _)| *n == name).map(|(_, s)| s)
        }
    }

    pub(crate) fn tools() -> Tools {
        Tools(vec![
            (
                "read_file",
                json!({"type": "object", "required": ["path"], "additionalProperties": false,
                "properties": {"path": {"type": "string"},
                    "startLine": {"type": "integer"}, "endLine": {"type": "integer"}}}),
            ),
            (
                "write_file",
                json!({"type": "object", "required": ["path", "content"],
                "additionalProperties": false,
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}),
            ),
            (
                "search_files",
                json!({"type": "object", "additionalProperties": false, "properties": {
                    "query": {"type": "string"}, "literal": {"type": "boolean"},
                    "limit": {"type": "integer"},
                    "globs": {"type": "array", "items": {"type": "string"}},
                    "options": {"type": "object"},
                    "depth": {"type": ["integer", "string"]}}}),
            ),
            (
                "apply_patch",
                json!({"type": "object", "required": ["patch"], "additionalProperties": false,
                "properties": {"patch": {"type": "string"}}}),
            ),
        ])
    }
}
