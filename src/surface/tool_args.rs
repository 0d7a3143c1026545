//! A tool call's arguments as a person reads them: `key: value`, not JSON. Strings are shown
//! as they are (escaped for the terminal: they are model text), other values as compact
//! JSON; long values are cut and say how much was left out.

use serde_json::Value;

use super::safe_text;

/// One line for a tool line: `path: a.txt · limit: 20`, cut to `max_chars` characters.
pub fn one_line(args: &Value, max_chars: usize) -> String {
    let text = match args {
        Value::Object(map) => map
            .iter()
            .map(|(key, value)| format!("{key}: {}", plain(value)))
            .collect::<Vec<_>>()
            .join(" · "),
        Value::Null => String::new(),
        other => plain(other),
    };
    safe_text::escape_head(&text, max_chars)
}

/// One `key: value` line per argument, indented by `indent`. A value over `max_chars`
/// characters or `max_lines` lines is cut, with a note of what was left out; the lines of a
/// multi-line value follow its key, framed so none can pass for a line of corral's own.
pub fn lines(args: &Value, indent: &str, max_chars: usize, max_lines: usize) -> String {
    let Value::Object(map) = args else {
        return format!(
            "{indent}{}\n",
            safe_text::escape_head(&plain(args), max_chars)
        );
    };
    if map.is_empty() {
        return format!("{indent}(no arguments)\n");
    }
    let mut out = String::new();
    for (key, value) in map {
        let text = plain(value);
        let key = safe_text::escape_line(key);
        let total_chars = text.chars().count();
        let head: String = text.chars().take(max_chars).collect();
        let value_lines: Vec<&str> = head.split('\n').collect();
        let shown_lines = value_lines.len().min(max_lines);
        if value_lines.len() == 1 {
            out.push_str(&format!(
                "{indent}{key}: {}",
                safe_text::escape_line(value_lines[0])
            ));
        } else {
            out.push_str(&format!("{indent}{key}:"));
            for line in &value_lines[..shown_lines] {
                out.push_str(&format!("\n{indent}  │ {}", safe_text::escape_line(line)));
            }
        }
        let shown_chars: usize = value_lines[..shown_lines]
            .iter()
            .map(|l| l.chars().count() + 1)
            .sum::<usize>()
            .saturating_sub(1);
        if shown_chars < total_chars {
            let left = total_chars - shown_chars;
            out.push_str(&format!(
                "\n{indent}  … {left} more character{}",
                if left == 1 { "" } else { "s" }
            ));
        }
        out.push('\n');
    }
    out
}

/// A value's text: a string as it is, anything else as compact JSON.
fn plain(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_read_as_keys_and_values_escaped_and_cut() {
        let args = json!({"path": "a.txt", "limit": 20, "flags": ["x"]});
        assert_eq!(
            one_line(&args, 100),
            r#"path: a.txt · limit: 20 · flags: ["x"]"#
        );
        assert_eq!(one_line(&args, 10), "path: a.tx…");
        let args = json!({"command": "ls\x1b[2J", "body": "one\ntwo\nthree\nfour", "long": "x".repeat(50)});
        let text = lines(&args, "  ", 20, 2);
        assert!(!text.chars().any(safe_text::is_unsafe), "{text:?}");
        assert!(text.contains("  command: ls\\x1b[2J\n"), "{text}");
        assert!(
            text.contains("  body:\n    │ one\n    │ two\n    … 11 more characters\n"),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "  long: {}\n    … 30 more characters\n",
                "x".repeat(20)
            )),
            "{text}"
        );
        assert_eq!(lines(&json!({}), "  ", 20, 2), "  (no arguments)\n");
    }
}
