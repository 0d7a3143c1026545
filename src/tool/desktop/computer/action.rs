//! A `computer` call's arguments, checked into one action: the vocabulary and argument names
//! computer-use models are trained on (`action`, `coordinate`, `start_coordinate`, `text`,
//! `scroll_direction`, `scroll_amount`, `duration`).

use serde::Deserialize;
use serde_json::Value;

use super::super::backend::{Button, ScrollDirection};
use super::super::keys::{KeyCombo, parse_keys};
use crate::tool::ToolError;

/// Characters one `type` call may enter, at most.
pub const MAX_TYPE_CHARS: usize = 4096;
/// Seconds one `wait` may last, at most.
pub const MAX_WAIT_SECS: f64 = 30.0;
const DEFAULT_SCROLL: u32 = 3;

/// A point in the screenshot the model saw (not yet mapped to the screen).
pub type Shown = [i64; 2];

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Screenshot,
    /// Moves (no button) to the point.
    Move(Shown),
    /// `count` clicks of a button, at the point or where the pointer is.
    Click {
        button: Button,
        count: u8,
        at: Option<Shown>,
    },
    Drag {
        from: Shown,
        to: Shown,
    },
    Scroll {
        at: Option<Shown>,
        direction: ScrollDirection,
        amount: u32,
    },
    Type(String),
    Key {
        text: String,
        combos: Vec<KeyCombo>,
    },
    CursorPosition,
    Wait(f64),
}

impl Action {
    /// The name the model used, for messages, events and rules (`action:left_click`).
    pub fn name(&self) -> &'static str {
        match self {
            Action::Screenshot => "screenshot",
            Action::Move(_) => "mouse_move",
            Action::Click {
                button: Button::Left,
                count: 2,
                ..
            } => "double_click",
            Action::Click {
                button: Button::Left,
                ..
            } => "left_click",
            Action::Click {
                button: Button::Right,
                ..
            } => "right_click",
            Action::Click {
                button: Button::Middle,
                ..
            } => "middle_click",
            Action::Drag { .. } => "drag",
            Action::Scroll { .. } => "scroll",
            Action::Type(_) => "type",
            Action::Key { .. } => "key",
            Action::CursorPosition => "cursor_position",
            Action::Wait(_) => "wait",
        }
    }

    /// Whether it changes anything on the desktop (moves, clicks, types), as against looking
    /// or waiting.
    pub fn acts(&self) -> bool {
        !matches!(
            self,
            Action::Screenshot | Action::CursorPosition | Action::Wait(_)
        )
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    action: String,
    coordinate: Option<Vec<i64>>,
    start_coordinate: Option<Vec<i64>>,
    text: Option<String>,
    scroll_direction: Option<String>,
    scroll_amount: Option<i64>,
    duration: Option<f64>,
    screenshot_after: Option<bool>,
}

/// The action, and whether a screenshot should follow it.
pub fn parse(args: Value) -> Result<(Action, bool), ToolError> {
    let args: Args =
        serde_json::from_value(args).map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
    let coordinate = point(args.coordinate.as_deref(), "coordinate")?;
    let start = point(args.start_coordinate.as_deref(), "start_coordinate")?;
    let needs = |what: Option<Shown>, name: &str| {
        what.ok_or_else(|| {
            invalid(format!(
                "{} needs {name}: [x, y] in the last screenshot",
                args.action
            ))
        })
    };
    let click = |button, count| Action::Click {
        button,
        count,
        at: coordinate,
    };
    let action = match args.action.as_str() {
        "screenshot" => Action::Screenshot,
        "mouse_move" => Action::Move(needs(coordinate, "coordinate")?),
        "left_click" => click(Button::Left, 1),
        "right_click" => click(Button::Right, 1),
        "middle_click" => click(Button::Middle, 1),
        "double_click" => click(Button::Left, 2),
        "drag" | "left_click_drag" => Action::Drag {
            from: needs(start, "start_coordinate")?,
            to: needs(coordinate, "coordinate")?,
        },
        "scroll" => Action::Scroll {
            at: coordinate,
            direction: match args.scroll_direction.as_deref() {
                Some("up") => ScrollDirection::Up,
                Some("down") | None => ScrollDirection::Down,
                Some("left") => ScrollDirection::Left,
                Some("right") => ScrollDirection::Right,
                Some(other) => {
                    return Err(invalid(format!(
                        "scroll_direction is up, down, left or right (got {other:?})"
                    )));
                }
            },
            amount: match args.scroll_amount {
                None => DEFAULT_SCROLL,
                Some(n @ 1..=50) => n as u32,
                Some(n) => return Err(invalid(format!("scroll_amount is 1 to 50 (got {n})"))),
            },
        },
        "type" => {
            let text = args
                .text
                .filter(|t| !t.is_empty())
                .ok_or_else(|| invalid("type needs text: what to type".into()))?;
            let count = text.chars().count();
            if count > MAX_TYPE_CHARS {
                return Err(invalid(format!(
                    "type takes at most {MAX_TYPE_CHARS} characters at once (got {count}); \
                     split it, or put long text on the clipboard"
                )));
            }
            if let Some(c) = text
                .chars()
                .find(|c| c.is_control() && !matches!(c, '\n' | '\t'))
            {
                return Err(invalid(format!(
                    "type enters printable text, newlines and tabs only (got U+{:04X}); \
                     press other keys with action key",
                    u32::from(c)
                )));
            }
            Action::Type(text)
        }
        "key" => {
            let text = args
                .text
                .ok_or_else(|| invalid("key needs text: the keys, such as ctrl+s".into()))?;
            let combos = parse_keys(&text).map_err(|e| invalid(e.to_string()))?;
            Action::Key { text, combos }
        }
        "cursor_position" => Action::CursorPosition,
        "wait" => {
            let secs = args.duration.unwrap_or(1.0);
            if !(0.0..=MAX_WAIT_SECS).contains(&secs) {
                return Err(invalid(format!(
                    "duration is 0 to {MAX_WAIT_SECS} seconds (got {secs})"
                )));
            }
            Action::Wait(secs)
        }
        other => {
            return Err(invalid(format!(
                "unknown action {other:?}: screenshot, mouse_move, left_click, right_click, \
                 middle_click, double_click, drag, scroll, type, key, cursor_position, wait"
            )));
        }
    };
    let screenshot_after = args.screenshot_after.unwrap_or(true);
    Ok((action, screenshot_after))
}

fn point(value: Option<&[i64]>, name: &str) -> Result<Option<Shown>, ToolError> {
    match value {
        None => Ok(None),
        Some(&[x, y]) if x >= 0 && y >= 0 => Ok(Some([x, y])),
        Some(&[x, y]) => Err(invalid(format!(
            "{name} [{x}, {y}] is off the screenshot: both must be 0 or more"
        ))),
        Some(other) => Err(invalid(format!(
            "{name} is [x, y], two integers (got {} numbers)",
            other.len()
        ))),
    }
}

fn invalid(message: String) -> ToolError {
    ToolError::InvalidArguments(message)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parsed(args: Value) -> Result<Action, String> {
        parse(args).map(|(a, _)| a).map_err(|e| e.to_string())
    }

    #[test]
    fn the_trained_vocabulary_parses() {
        assert_eq!(
            parsed(json!({"action": "left_click", "coordinate": [10, 20]})).unwrap(),
            Action::Click {
                button: Button::Left,
                count: 1,
                at: Some([10, 20])
            }
        );
        assert_eq!(
            parsed(json!({"action": "double_click", "coordinate": [1, 2]}))
                .unwrap()
                .name(),
            "double_click"
        );
        assert_eq!(
            parsed(json!({"action": "drag", "start_coordinate": [1, 2], "coordinate": [3, 4]}))
                .unwrap(),
            Action::Drag {
                from: [1, 2],
                to: [3, 4]
            }
        );
        let scroll = parsed(json!({"action": "scroll", "coordinate": [5, 5],
            "scroll_direction": "up", "scroll_amount": 7}))
        .unwrap();
        assert_eq!(
            scroll,
            Action::Scroll {
                at: Some([5, 5]),
                direction: ScrollDirection::Up,
                amount: 7
            }
        );
        let (key, after) = parse(json!({"action": "key", "text": "ctrl+s",
            "screenshot_after": false}))
        .unwrap();
        assert_eq!(key.name(), "key");
        assert!(!after);
        assert_eq!(
            parsed(json!({"action": "wait", "duration": 0.5})).unwrap(),
            Action::Wait(0.5)
        );
    }

    #[test]
    fn bad_arguments_say_what_is_expected() {
        let error = |args| parsed(args).unwrap_err();
        assert!(error(json!({"action": "mouse_move"})).contains("needs coordinate"));
        assert!(
            error(json!({"action": "drag", "coordinate": [1, 1]})).contains("start_coordinate")
        );
        assert!(
            error(json!({"action": "left_click", "coordinate": [-1, 3]}))
                .contains("off the screenshot")
        );
        assert!(error(json!({"action": "left_click", "coordinate": [1]})).contains("two integers"));
        assert!(error(json!({"action": "type"})).contains("needs text"));
        assert!(error(json!({"action": "type", "text": "a\u{1b}[2J"})).contains("U+001B"));
        assert!(
            error(json!({"action": "type", "text": "x".repeat(5000)})).contains("at most 4096")
        );
        assert!(error(json!({"action": "key", "text": "ctrl+nope"})).contains("unknown key"));
        assert!(error(json!({"action": "wait", "duration": 99})).contains("0 to 30"));
        assert!(error(json!({"action": "fly"})).contains("unknown action"));
        assert!(error(json!({"action": "scroll", "scroll_amount": 0})).contains("1 to 50"));
        assert!(error(json!({"action": "screenshot", "bogus": 1})).contains("unknown field"));
    }
}
