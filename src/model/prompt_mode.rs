//! Which system prompt and tool descriptions a request carries: the full ones, or the compact
//! ones that leave a small context window for the work. Chosen per session, applied by the
//! native loop (`llm_loop::prompt`).

use serde::Deserialize;

/// Windows this small or smaller get the compact prompt under [`PromptMode::Auto`].
pub const COMPACT_WINDOW: u64 = 8192;

/// `prompt = "compact" | "full" | "auto"` (config and `--prompt`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptMode {
    Compact,
    Full,
    /// Compact when the model's window is [`COMPACT_WINDOW`] tokens or less.
    #[default]
    Auto,
}

impl PromptMode {
    pub fn is_compact(self, context_window: u64) -> bool {
        match self {
            PromptMode::Compact => true,
            PromptMode::Full => false,
            PromptMode::Auto => context_window <= COMPACT_WINDOW,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PromptMode::Compact => "compact",
            PromptMode::Full => "full",
            PromptMode::Auto => "auto",
        }
    }
}

impl std::str::FromStr for PromptMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "compact" => Ok(PromptMode::Compact),
            "full" => Ok(PromptMode::Full),
            "auto" => Ok(PromptMode::Auto),
            other => Err(format!(
                "prompt must be compact, full or auto, got {other:?}"
            )),
        }
    }
}
