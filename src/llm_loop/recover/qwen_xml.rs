//! Qwen3-Coder's XML calls, as its chat template writes them (and llama.cpp's and vLLM's
//! `qwen3_coder` parsers read them):
//!
//! ```text
//! <tool_call>
//! <function=write_file>
//! <parameter=path>
//! notes.md
//! </parameter>
//! <parameter=content>
//! any text, < and > included
//! </parameter>
//! </function>
//! </tool_call>
//! ```
//!
//! The `<tool_call>` wrapper is optional (the model sometimes leaves it out). Values are text:
//! one newline after the opening tag and one before the closing tag are the template's, the
//! rest is the value. A parameter whose schema does not take a string is read as JSON (an
//! integer, a boolean, an array or object as JSON text) and then coerced like any argument.
//! Each block holds one function; a block that cannot be taken stays text, whole.

use serde_json::{Map, Value};

use super::lines::{self, Verdict};
use super::{Catalog, Extracted, TextToolCall, repair, skip_space};

const WRAP_OPEN: &str = "<tool_call>";
const WRAP_CLOSE: &str = "</tool_call>";
const FUNCTION: &str = "<function=";
const FUNCTION_CLOSE: &str = "</function>";
const PARAMETER: &str = "<parameter=";
const PARAMETER_CLOSE: &str = "</parameter>";

pub(super) fn extract(text: &str, catalog: &dyn Catalog) -> Option<Extracted> {
    if !text.contains(FUNCTION) {
        return None;
    }
    lines::take_blocks(text, &|at| block_at(text, at, catalog))
}

fn block_at(text: &str, at: usize, catalog: &dyn Catalog) -> Verdict {
    let wrapped = text[at..].starts_with(WRAP_OPEN);
    let function_at = if wrapped {
        skip_space(text, at + WRAP_OPEN.len())
    } else {
        at
    };
    // An unwrapped function right after a `<tool_call>` is the inside of a wrapper that
    // opened in prose, not a call of its own.
    if !text[function_at..].starts_with(FUNCTION)
        || (!wrapped && text[..at].trim_end().ends_with(WRAP_OPEN))
    {
        return Verdict::NotHere;
    }
    match parse_block(text, function_at, wrapped, catalog) {
        Some((call, end)) => Verdict::Take {
            calls: vec![call],
            end,
        },
        // The lines of a refused wrapped block stay text together, so its inner
        // `<function=…>` line is not taken on its own as an unwrapped call.
        None if wrapped => match text[function_at..].find(WRAP_CLOSE) {
            Some(close) => Verdict::Refused {
                end: function_at + close + WRAP_CLOSE.len(),
            },
            None => Verdict::Stop,
        },
        None => Verdict::NotHere,
    }
}

/// The call of the function opening at `at` and the end of its block's last line.
fn parse_block(
    text: &str,
    at: usize,
    wrapped: bool,
    catalog: &dyn Catalog,
) -> Option<(TextToolCall, usize)> {
    let (name, mut at) = tag_name(text, at + FUNCTION.len())?;
    let mut raw = Vec::new();
    loop {
        at = skip_space(text, at);
        if !text[at..].starts_with(PARAMETER) {
            break;
        }
        let (parameter, value_at) = tag_name(text, at + PARAMETER.len())?;
        let value_end = value_at + text[value_at..].find(PARAMETER_CLOSE)?;
        if raw.iter().any(|(seen, _)| *seen == parameter) {
            return None;
        }
        raw.push((parameter, template_trimmed(&text[value_at..value_end])));
        at = value_end + PARAMETER_CLOSE.len();
    }
    at = text[at..].starts_with(FUNCTION_CLOSE).then_some(at)? + FUNCTION_CLOSE.len();
    let closes_wrapper = text[skip_space(text, at)..].starts_with(WRAP_CLOSE);
    if closes_wrapper != wrapped {
        return None;
    }
    if wrapped {
        at = skip_space(text, at) + WRAP_CLOSE.len();
    }
    let end = lines::rest_of_line_blank(text, at)?;
    let schema = catalog.parameters(name);
    let arguments: Map<String, Value> = raw
        .into_iter()
        .map(|(parameter, value)| {
            let property = schema.and_then(|s| s.get("properties")?.get(parameter));
            (parameter.to_owned(), typed(value, property))
        })
        .collect();
    let arguments = catalog.accept(name, Value::Object(arguments))?;
    let call = TextToolCall {
        name: name.to_owned(),
        arguments,
    };
    Some((call, end))
}

/// The name in `<function=NAME>` or `<parameter=NAME>` starting at `at`, and the offset past
/// its `>`. Names are identifiers (a namespace's dots allowed), nothing that could hide a tag.
fn tag_name(text: &str, at: usize) -> Option<(&str, usize)> {
    let len = text[at..].find('>')?;
    let name = &text[at..at + len];
    let fine = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    (!name.is_empty() && name.chars().all(fine)).then_some((name, at + len + 1))
}

/// The value without the one newline the template puts after the opening tag and the one
/// before the closing tag.
fn template_trimmed(value: &str) -> &str {
    let value = value
        .strip_prefix("\r\n")
        .or_else(|| value.strip_prefix('\n'))
        .unwrap_or(value);
    value
        .strip_suffix("\r\n")
        .or_else(|| value.strip_suffix('\n'))
        .unwrap_or(value)
}

/// A text value typed for its parameter: text where the schema takes a string (unless it is
/// JSON of another type the schema also takes), JSON where it does not; text that is not JSON
/// stays text for the schema coercion to judge.
fn typed(value: &str, property: Option<&Value>) -> Value {
    let types = property.map(repair::types_of).unwrap_or_default();
    let takes_string = types.is_empty() || types.contains(&"string");
    let json = || serde_json::from_str::<Value>(value.trim()).ok();
    match json() {
        Some(parsed) if !takes_string => parsed,
        Some(parsed) if types.iter().any(|t| *t != "string" && is_type(&parsed, t)) => parsed,
        _ => Value::String(value.to_owned()),
    }
}

fn is_type(value: &Value, ty: &str) -> bool {
    match ty {
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "null" => value.is_null(),
        _ => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a clear test failure
mod tests {
    use serde_json::json;

    use super::super::testing::tools;
    use super::*;

    fn calls(text: &str) -> Vec<TextToolCall> {
        extract(text, &tools()).map(|e| e.calls).unwrap_or_default()
    }

    const WRITE: &str = "<tool_call>\n<function=write_file>\n<parameter=path>\nnotes.md\n\
        </parameter>\n<parameter=content>\n<b>bold</b> </function> and\n\n  indented\n\
        </parameter>\n</function>\n</tool_call>";

    #[test]
    fn takes_a_block_with_several_parameters_and_keeps_the_text() {
        let text = format!("I'll write it.\n{WRITE}\nDone soon.\n");
        let got = extract(&text, &tools()).unwrap();
        assert_eq!(got.text, "I'll write it.\nDone soon.");
        assert_eq!(got.calls.len(), 1);
        assert_eq!(got.calls[0].name, "write_file");
        assert_eq!(
            got.calls[0].arguments,
            json!({"path": "notes.md", "content": "<b>bold</b> </function> and\n\n  indented"})
        );
    }

    #[test]
    fn values_are_typed_by_the_schema() {
        let text = "<function=search_files>\n<parameter=query>\n42\n</parameter>\n\
            <parameter=literal>\ntrue\n</parameter>\n<parameter=limit>\n7\n</parameter>\n\
            <parameter=globs>\n[\"*.rs\", \"*.md\"]\n</parameter>\n\
            <parameter=options>\n{\"hidden\": false}\n</parameter>\n\
            <parameter=depth>\n3\n</parameter>\n</function>";
        assert_eq!(
            calls(text),
            vec![TextToolCall {
                name: "search_files".into(),
                arguments: json!({"query": "42", "literal": true, "limit": 7,
                    "globs": ["*.rs", "*.md"], "options": {"hidden": false}, "depth": 3}),
            }]
        );
        // A string-typed value that looks like JSON stays the text it is.
        let text = "<function=write_file>\n<parameter=path>\na.json\n</parameter>\n\
            <parameter=content>\n{\"a\": 1}\n</parameter>\n</function>";
        assert_eq!(calls(text)[0].arguments["content"], json!("{\"a\": 1}"));
        // Loosely written scalars still go through the schema's coercion.
        let text = "<function=read_file><parameter=path>a</parameter>\
            <parameter=startLine> 3 </parameter></function>";
        assert_eq!(
            calls(text)[0].arguments,
            json!({"path": "a", "startLine": 3})
        );
    }

    #[test]
    fn takes_unwrapped_and_several_blocks_in_order() {
        let text = "<function=read_file>\n<parameter=path>\na\n</parameter>\n</function>\n\
            <tool_call><function=read_file><parameter=path>b</parameter></function></tool_call>";
        let got = extract(text, &tools()).unwrap();
        assert_eq!(got.text, "");
        let paths: Vec<&Value> = got.calls.iter().map(|c| &c.arguments["path"]).collect();
        assert_eq!(paths, [&json!("a"), &json!("b")]);
    }

    #[test]
    fn refuses_quoted_blocks() {
        let fenced = format!("Like this:\n```xml\n{WRITE}\n```\n");
        let inline = format!("Write `{WRITE}` to call.");
        let span = format!("Write `\n{WRITE}\n` to call.");
        let prose = format!("Example: {WRITE}");
        let trailing = format!("{WRITE} is how you call it.");
        let quoted = WRITE
            .lines()
            .map(|l| format!("> {l}\n"))
            .collect::<String>();
        for text in [fenced, inline, span, prose, trailing, quoted] {
            assert_eq!(extract(&text, &tools()), None, "{text}");
        }
    }

    #[test]
    fn refuses_unknown_tools_bad_arguments_and_broken_shapes() {
        for text in [
            "<function=rm>\n<parameter=path>\n/\n</parameter>\n</function>",
            "<function=functions.rm><parameter=path>a</parameter></function>",
            "<function=read_file>\n<parameter=line>\n3\n</parameter>\n</function>",
            "<function=read_file>\n<parameter=startLine>\nx\n</parameter>\n</function>",
            "<function=read_file>\n<parameter=path>\na\n</parameter>\n",
            "<function=read_file>\n<parameter=path>\na\n</function>",
            "<function=read_file><parameter=path>a</parameter>junk</function>",
            "<function=read_file><parameter=path>a</parameter><parameter=path>b</parameter></function>",
            "<function=read file><parameter=path>a</parameter></function>",
            "<function=><parameter=path>a</parameter></function>",
            "<function=read_file><parameter=>a</parameter></function>",
            "<tool_call><function=read_file><parameter=path>a</parameter></function>",
            "<tool_call><function=read_file><parameter=path>a</parameter></function></tool_call> x",
            "<function=read_file><parameter=path>a</parameter></function><function=read_file>",
        ] {
            assert_eq!(extract(text, &tools()), None, "{text}");
        }
    }

    #[test]
    fn a_refused_wrapped_block_stays_text_whole() {
        // The wrapper's closing line has prose after it, so the block is not taken, and its
        // inner function line is not taken on its own either.
        let text = "<tool_call>\n<function=read_file>\n<parameter=path>\na\n</parameter>\n\
            </function>\n</tool_call> (an example)\n\
            <function=read_file><parameter=path>b</parameter></function>\n";
        let got = extract(text, &tools()).unwrap();
        assert_eq!(got.calls.len(), 1);
        assert_eq!(got.calls[0].arguments["path"], "b");
        assert!(got.text.starts_with("<tool_call>\n<function=read_file>"));
    }
}
