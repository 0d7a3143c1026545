//! How hard a model reasons before it answers: `low | medium | high`, one word for every
//! backend. Each backend maps it onto its own knob: Ollama's `think` (a level for models that
//! take one, on or off for the rest), `reasoning_effort` on OpenAI-compatible servers (and
//! llama.cpp's template switch), claude's `--effort`, codex's per-turn `effort`, an ACP
//! agent's `effort` config option. Where a backend or model has no such knob, the session says
//! so in a note instead of pretending.
//!
//! It comes from `--effort`, a request's `effort` field, or a suffix on a model spec
//! (`claude:sonnet/high`, as Kaimon writes it); an explicit field wins over the suffix.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effort {
    Low,
    Medium,
    High,
}

impl Effort {
    pub const ALL: [Effort; 3] = [Effort::Low, Effort::Medium, Effort::High];

    pub fn as_str(self) -> &'static str {
        match self {
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
        }
    }
}

impl std::fmt::Display for Effort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Effort {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Effort::ALL
            .into_iter()
            .find(|e| e.as_str().eq_ignore_ascii_case(text.trim()))
            .ok_or_else(|| format!("effort must be low, medium or high, got {text:?}"))
    }
}

/// Splits an effort suffix off a model spec: `claude:sonnet/high` → (`claude:sonnet`, High).
/// Only a last path segment that is exactly a level counts, so model names with slashes
/// (`acp:opencode:ollama/qwen2.5`, `ollama:hf.co/org/model`) are left alone; a GGUF path is
/// never split (a file may be called anything).
pub fn split_effort_suffix(text: &str) -> (&str, Option<Effort>) {
    let lower = text.trim_start().to_ascii_lowercase();
    // A file path or a command line may end in anything.
    if lower.starts_with("gguf:") || lower.starts_with("acp:cmd=") {
        return (text, None);
    }
    match text.rsplit_once('/') {
        Some((head, tail)) if !head.is_empty() && !head.ends_with(':') => {
            match Effort::ALL.into_iter().find(|e| e.as_str() == tail) {
                Some(effort) => (head, Some(effort)),
                None => (text, None),
            }
        }
        _ => (text, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_and_print() {
        for effort in Effort::ALL {
            assert_eq!(effort.as_str().parse::<Effort>(), Ok(effort));
            assert_eq!(
                serde_json::to_value(effort).unwrap(),
                serde_json::json!(effort.as_str())
            );
        }
        assert_eq!("HIGH".parse::<Effort>(), Ok(Effort::High));
        let err = "max".parse::<Effort>().unwrap_err();
        assert!(err.contains("low, medium or high"), "{err}");
    }

    #[test]
    fn suffixes_split_only_when_they_are_a_level() {
        assert_eq!(
            split_effort_suffix("claude:sonnet/high"),
            ("claude:sonnet", Some(Effort::High))
        );
        assert_eq!(
            split_effort_suffix("claude:claude-sonnet-5/low"),
            ("claude:claude-sonnet-5", Some(Effort::Low))
        );
        assert_eq!(
            split_effort_suffix("ollama:qwen3:8b/medium"),
            ("ollama:qwen3:8b", Some(Effort::Medium))
        );
        for unchanged in [
            "acp:opencode:ollama/qwen2.5:14b",
            "ollama:hf.co/org/model",
            "gguf:/models/high",
            "acp:cmd=/opt/bin/high",
            "claude:/high",
            "claude",
            "claude:sonnet/highest",
        ] {
            assert_eq!(
                split_effort_suffix(unchanged),
                (unchanged, None),
                "{unchanged}"
            );
        }
    }
}
