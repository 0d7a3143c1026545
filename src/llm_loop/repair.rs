//! Lenient tool-call arguments: small local models emit almost-JSON and loosely typed values,
//! and a precise complaint lets them fix a call instead of giving up.

use serde_json::{Map, Number, Value};

#[derive(Debug, thiserror::Error, PartialEq)]
pub(crate) enum RepairError {
    #[error("arguments are not JSON even after repair: {0}")]
    Unparseable(String),
    #[error("arguments must be a JSON object, got {0}")]
    NotAnObject(&'static str),
}

/// Parse tool-call arguments leniently: strict JSON first, then after repairing trailing commas,
/// single quotes, raw control characters in strings, Python literals, a ```json fence, and an
/// object encoded as a JSON string. Blank text is `{}`; anything but an object is an error.
pub(crate) fn parse_arguments(text: &str) -> Result<Value, RepairError> {
    let text = strip_fences(text.trim());
    if text.is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    let value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(_) => serde_json::from_str(&repair(text))
            .map_err(|e| RepairError::Unparseable(e.to_string()))?,
    };
    match unwrap_encoded(value) {
        Value::Object(map) => Ok(Value::Object(map)),
        other => Err(RepairError::NotAnObject(kind(&other))),
    }
}

fn strip_fences(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    // The info string (`json`) runs to the end of the opening line.
    let body = rest.split_once('\n').map_or("", |(_, body)| body);
    body.trim_end().strip_suffix("```").unwrap_or(body).trim()
}

/// Some models JSON-encode the arguments object as a string, sometimes more than once; the
/// recursion ends because each level strips one layer of quoting.
fn unwrap_encoded(value: Value) -> Value {
    match &value {
        Value::String(s) if !s.trim().is_empty() => parse_arguments(s).unwrap_or(value),
        _ => value,
    }
}

/// Rewrite almost-JSON into JSON in one pass, tracking whether we are inside a string.
fn repair(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let mut chars = text.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => match c {
                '\\' => match chars.next() {
                    Some('\'') => out.push('\''),
                    Some(e) if "\"\\/bfnrtu".contains(e) => {
                        out.push('\\');
                        out.push(e);
                    }
                    // An invalid escape such as a Windows path `C:\dir` meant a backslash.
                    Some(e) => {
                        out.push_str("\\\\");
                        push_escaped(&mut out, e);
                    }
                    None => {}
                },
                c if c == q => {
                    out.push('"');
                    quote = None;
                }
                '"' => out.push_str("\\\""),
                c => push_escaped(&mut out, c),
            },
            None => match c {
                '"' | '\'' => {
                    out.push('"');
                    quote = Some(c);
                }
                ',' => {
                    let next = chars.clone().find(|w| !w.is_whitespace());
                    if !matches!(next, Some('}' | ']') | None) {
                        out.push(',');
                    }
                }
                c if c.is_alphabetic() || c == '_' => {
                    let mut word = String::from(c);
                    while let Some(n) = chars.next_if(|n| n.is_alphanumeric() || *n == '_') {
                        word.push(n);
                    }
                    out.push_str(match word.as_str() {
                        "True" => "true",
                        "False" => "false",
                        "None" => "null",
                        _ => &word,
                    });
                }
                c => out.push(c),
            },
        }
    }
    out
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
        c => out.push(c),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Coerce `args` toward `schema` and validate; the error is one sentence naming every problem.
pub(crate) fn coerce_and_validate(args: Value, schema: &Value) -> Result<Value, String> {
    let Value::Object(map) = args else {
        return Err(RepairError::NotAnObject(kind(&args)).to_string());
    };
    let mut errors = Vec::new();
    let value = coerce_object(map, schema, "", &mut errors);
    errors
        .is_empty()
        .then_some(value)
        .ok_or_else(|| errors.join("; "))
}

fn coerce(value: Value, schema: &Value, path: &str, errors: &mut Vec<String>) -> Value {
    let types = types_of(schema);
    let value = if types.is_empty() || types.iter().any(|t| matches_type(&value, t)) {
        value
    } else if let Some(coerced) = types.iter().find_map(|t| convert(&value, t)) {
        coerced
    } else {
        let wanted: Vec<String> = types.iter().map(|t| article(t)).collect();
        errors.push(must_be(path, wanted.join(" or "), &value));
        return value;
    };
    let value = match (value, schema.get("items")) {
        (Value::Object(map), _) => coerce_object(map, schema, path, errors),
        (Value::Array(items), Some(item_schema)) => Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, v)| coerce(v, item_schema, &format!("{path}[{i}]"), errors))
                .collect(),
        ),
        (other, _) => other,
    };
    check_bounds(&value, schema, path, errors);
    value
}

fn coerce_object(
    map: Map<String, Value>,
    schema: &Value,
    prefix: &str,
    errors: &mut Vec<String>,
) -> Value {
    let props = schema.get("properties").and_then(Value::as_object);
    let required = required_of(schema);
    let extra = schema.get("additionalProperties");
    let mut out = Map::new();
    for (key, value) in map {
        let path = join(prefix, &key);
        let prop = props.and_then(|p| p.get(&key));
        let null_allowed = prop.is_some_and(|p| types_of(p).contains(&"null"));
        // Models send null to mean "not given"; that is only safe for optional arguments.
        if value.is_null() && !required.contains(&key.as_str()) && !null_allowed {
            continue;
        }
        let coerced = match (prop, extra) {
            (Some(p), _) => coerce(value, p, &path, errors),
            (None, Some(Value::Bool(false))) => {
                let names = props.into_iter().flat_map(Map::keys);
                let allowed: Vec<String> = names.map(|k| format!("\"{k}\"")).collect();
                let allowed = allowed.join(", ");
                errors.push(format!("unknown argument \"{path}\" (allowed: {allowed})"));
                continue;
            }
            (None, Some(extra @ Value::Object(_))) => coerce(value, extra, &path, errors),
            (None, _) => value,
        };
        out.insert(key, coerced);
    }
    for name in required {
        if !out.contains_key(name) {
            let path = join(prefix, name);
            errors.push(format!("missing required argument \"{path}\""));
        }
    }
    Value::Object(out)
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}.{name}")
    }
}

fn required_of(schema: &Value) -> Vec<&str> {
    let list = schema.get("required").and_then(Value::as_array);
    list.map_or_else(Vec::new, |r| r.iter().filter_map(Value::as_str).collect())
}

pub(super) fn types_of(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn matches_type(value: &Value, ty: &str) -> bool {
    match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => true,
    }
}

fn whole(f: f64) -> Option<i64> {
    // The bound keeps the cast exact; beyond 2^53 floats are not trustworthy integers anyway.
    (f.fract() == 0.0 && f.abs() < 9.0e15).then_some(f as i64)
}

fn convert(value: &Value, ty: &str) -> Option<Value> {
    match (ty, value) {
        ("integer", Value::String(_)) => convert(&convert(value, "number")?, "integer"),
        // A float with no fraction is what an integer looks like after a lossy round trip.
        ("integer", Value::Number(n)) => n.as_f64().and_then(whole).map(Value::from),
        // JSON number syntax, so "NaN" or "inf" stay strings and get reported.
        ("number", Value::String(s)) => s.trim().parse::<Number>().ok().map(Value::Number),
        ("boolean", Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        ("string", Value::Number(_) | Value::Bool(_)) => Some(Value::String(value.to_string())),
        ("array", v) if !v.is_null() => Some(Value::Array(vec![v.clone()])),
        _ => None,
    }
}

fn check_bounds(value: &Value, schema: &Value, path: &str, errors: &mut Vec<String>) {
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
        errors.push(must_be(path, format!("one of {}", list.join(", ")), value));
    }
    let Some(n) = value.as_f64() else { return };
    let limit = |key| schema.get(key).and_then(Value::as_f64);
    if let Some(min) = limit("minimum").filter(|&min| n < min) {
        errors.push(must_be(path, format!("at least {min}"), value));
    }
    if let Some(max) = limit("maximum").filter(|&max| n > max) {
        errors.push(must_be(path, format!("at most {max}"), value));
    }
}

/// Quotes the offending value as the model wrote it, cut short so one bad blob cannot flood
/// the reply.
fn must_be(path: &str, wanted: String, value: &Value) -> String {
    let text = value.to_string();
    let shown = match text.char_indices().nth(60) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    };
    format!("argument \"{path}\" must be {wanted}, got {shown}")
}

fn article(ty: &str) -> String {
    match ty {
        "null" => "null".to_owned(),
        t if t.starts_with(['a', 'e', 'i', 'o', 'u']) => format!("an {t}"),
        t => format!("a {t}"),
    }
}

/// A one-line signature for error messages, e.g. `read_file(path: string, startLine?: integer)`.
pub(crate) fn signature(tool_name: &str, schema: &Value) -> String {
    let required = required_of(schema);
    let props = schema.get("properties").and_then(Value::as_object);
    let mut params = Vec::new();
    for (name, prop) in props.into_iter().flatten() {
        let opt = if required.contains(&name.as_str()) {
            ""
        } else {
            "?"
        };
        params.push(format!("{name}{opt}: {}", type_name(prop)));
    }
    format!("{tool_name}({})", params.join(", "))
}

fn type_name(schema: &Value) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let list: Vec<String> = values.iter().map(Value::to_string).collect();
        return list.join("|");
    }
    let types = types_of(schema);
    if types.is_empty() {
        return "any".to_owned();
    }
    let names: Vec<String> = types
        .iter()
        .map(|&t| match (t, schema.get("items")) {
            ("array", Some(items)) => format!("{}[]", type_name(items)),
            (t, _) => t.to_owned(),
        })
        .collect();
    names.join("|")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a clear test failure
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn valid_json_is_untouched_and_blank_is_empty() {
        let text = r#"{"a": "it's, ok }", "b": [1, 2.5, null, "True"], "c": {"d": true}}"#;
        let strict: Value = serde_json::from_str(text).unwrap();
        assert_eq!(parse_arguments(text).unwrap(), strict);
        assert_eq!(parse_arguments(" \n\t").unwrap(), json!({}));
    }

    #[test]
    fn repairs_almost_json() {
        let cases = json!([
            [r#"{"a": [1, 2,], "b": {"c": 1 ,} , }"#, {"a": [1, 2], "b": {"c": 1}}],
            [r#"{"a": "x,}",}"#, {"a": "x,}"}],
            [r#"{'p': 'say "hi"', 'b': 'it\'s'}"#, {"p": "say \"hi\"", "b": "it's"}],
            [r#"{"a": "it\'s", "p": "C:\dir"}"#, {"a": "it's", "p": "C:\\dir"}],
            ["{\"c\": \"1\n2\t3\r4\u{1}\"}", {"c": "1\n2\t3\r4\u{1}"}],
            [r#"{"a": True, "b": False, "c": None, "d": "None"}"#,
             {"a": true, "b": false, "c": null, "d": "None"}],
            [r#""{\"a\": 1}""#, {"a": 1}],
            [r#""\"{\\\"a\\\": 1}\"""#, {"a": 1}],
            ["```json\n{\"a\": 1}\n```", {"a": 1}],
            ["  ```\n{'a': 1,}\n```  ", {"a": 1}]
        ]);
        for case in cases.as_array().unwrap() {
            let text = case[0].as_str().unwrap();
            assert_eq!(parse_arguments(text).as_ref(), Ok(&case[1]), "{text}");
        }
    }

    #[test]
    fn parse_errors() {
        for (text, kind) in [("[1]", "array"), ("\"hi\"", "string"), ("3", "number")] {
            assert_eq!(parse_arguments(text), Err(RepairError::NotAnObject(kind)));
        }
        let err = parse_arguments("{\"a\": ").unwrap_err().to_string();
        assert!(err.starts_with("arguments are not JSON even after repair: "));
    }

    fn read_file() -> Value {
        json!({"type": "object", "required": ["path"], "additionalProperties": false,
        "properties": {
            "path": {"type": "string"},
            "startLine": {"type": "integer", "minimum": 1},
            "endLine": {"type": "integer", "maximum": 100}
        }})
    }

    #[test]
    fn coerces_toward_the_schema() {
        let schema = json!({"properties": {
            "i": {"type": "integer"}, "j": {"type": "integer"}, "f": {"type": "integer"},
            "n": {"type": "number"}, "m": {"type": "number"}, "b": {"type": "boolean"},
            "c": {"type": "boolean"}, "s": {"type": "string"}, "t": {"type": "string"},
            "l": {"type": "array", "items": {"type": "string"}}, "o": {"type": "string"},
            "x": {"type": ["integer", "boolean"]}, "z": {"type": ["string", "null"]}
        }});
        let args = json!({"i": "3", "j": " 3 ", "f": 3.0, "n": "3.5", "m": 3, "b": "TRUE",
            "c": "false", "s": 12, "t": true, "l": "a.txt", "o": null, "x": "True", "z": null});
        let want = json!({"i": 3, "j": 3, "f": 3, "n": 3.5, "m": 3, "b": true, "c": false,
            "s": "12", "t": "true", "l": ["a.txt"], "x": true, "z": null});
        let got = coerce_and_validate(args, &schema).unwrap();
        assert_eq!(got, want);
        assert!(got["f"].is_i64());
        let valid = json!({"path": "a.txt", "startLine": 2, "endLine": 9});
        assert_eq!(coerce_and_validate(valid.clone(), &read_file()), Ok(valid));
    }

    #[test]
    fn reports_every_problem_in_one_sentence() {
        let cases = json!([
            [{"startLine": "abc"},
             "argument \"startLine\" must be an integer, got \"abc\"; missing required argument \"path\""],
            [{"path": "a", "mode": 1},
             "unknown argument \"mode\" (allowed: \"path\", \"startLine\", \"endLine\")"],
            [{"path": null}, "argument \"path\" must be a string, got null"],
            [{"path": "a", "startLine": 0, "endLine": "101"},
             "argument \"startLine\" must be at least 1, got 0; argument \"endLine\" must be at most 100, got 101"],
            [{"path": "a", "endLine": 2.5}, "argument \"endLine\" must be an integer, got 2.5"],
            [[1], "arguments must be a JSON object, got array"]
        ]);
        for case in cases.as_array().unwrap() {
            let got = coerce_and_validate(case[0].clone(), &read_file()).unwrap_err();
            assert_eq!(got, case[1].as_str().unwrap());
        }
        let schema = json!({"properties": {
            "mode": {"enum": ["fast", "slow"]}, "x": {"type": ["integer", "boolean"]}
        }});
        let args = json!({"mode": "medium", "x": "y".repeat(99)});
        let want = format!(
            "argument \"mode\" must be one of \"fast\", \"slow\", got \"medium\"; \
             argument \"x\" must be an integer or a boolean, got \"{}…",
            "y".repeat(59)
        );
        assert_eq!(coerce_and_validate(args, &schema), Err(want));
    }

    #[test]
    fn coerces_and_reports_nested_values() {
        let schema = json!({"properties": {
            "edits": {"type": "array", "items": {"type": "object", "required": ["line"],
                "properties": {"line": {"type": "integer"}, "text": {"type": "string"}}}},
            "opts": {"type": "object", "properties": {"depth": {"type": "integer"}},
                     "additionalProperties": false}
        }});
        let args = json!({"edits": {"line": "4", "text": 5}, "opts": {"depth": 2.0}});
        let want = json!({"edits": [{"line": 4, "text": "5"}], "opts": {"depth": 2}});
        assert_eq!(coerce_and_validate(args, &schema), Ok(want));
        let args = json!({"edits": [{"line": "x"}, {}], "opts": {"deep": 1}});
        let want = "argument \"edits[0].line\" must be an integer, got \"x\"; \
                    missing required argument \"edits[1].line\"; \
                    unknown argument \"opts.deep\" (allowed: \"depth\")";
        assert_eq!(coerce_and_validate(args, &schema).unwrap_err(), want);
    }

    #[test]
    fn signature_marks_optional_arguments() {
        let want = "read_file(path: string, startLine?: integer, endLine?: integer)";
        assert_eq!(signature("read_file", &read_file()), want);
        let schema = json!({"required": ["mode"], "properties": {
            "globs": {"type": "array", "items": {"type": "string"}},
            "mode": {"enum": ["a", "b"]}, "any": {}, "v": {"type": ["string", "null"]}
        }});
        let want = r#"t(globs?: string[], mode: "a"|"b", any?: any, v?: string|null)"#;
        assert_eq!(signature("t", &schema), want);
        assert_eq!(signature("noop", &json!({"type": "object"})), "noop()");
    }
}
