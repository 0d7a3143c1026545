//! What runs a session's turns, parsed once where the text comes in (a flag, a request, the
//! config, a session's metadata): a model corral talks to itself, or an external agent
//! program (`claude[:<model>]`, `acp:<agent>[:<model>]`, `acp:cmd=<command line>`,
//! `codex[:<model>]`, and the per-turn runtimes `gemini[:<model>]`, `qwen[:<model>]`,
//! `copilot[:<model>]`, `opencode[:<model>]`, `cursor[:<model>]`, `antigravity`). Everything after the edge carries the [`ModelChoice`], never the text.

use std::fmt;
use std::str::FromStr;

use super::spec::{ModelSpec, SpecError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelChoice {
    Native(ModelSpec),
    External(ExternalSpec),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExternalKind {
    Claude,
    Acp,
    Codex,
    /// A process per turn (`backend::per_turn`); `acp:gemini` and `acp:opencode` stay ACP.
    Gemini,
    Qwen,
    Copilot,
    Opencode,
    Cursor,
    Antigravity,
    /// pi in its RPC mode: persistent, like claude.
    Pi,
    /// Kimi CLI over ACP (`kimi acp`): `acp:kimi` by another name.
    Kimi,
}

impl ExternalKind {
    /// The spec's first word, which is also the backend's name in listings.
    pub fn name(self) -> &'static str {
        match self {
            ExternalKind::Claude => "claude",
            ExternalKind::Acp => "acp",
            ExternalKind::Codex => "codex",
            ExternalKind::Gemini => "gemini",
            ExternalKind::Qwen => "qwen",
            ExternalKind::Copilot => "copilot",
            ExternalKind::Opencode => "opencode",
            ExternalKind::Cursor => "cursor",
            ExternalKind::Antigravity => "antigravity",
            ExternalKind::Pi => "pi",
            ExternalKind::Kimi => "kimi",
        }
    }

    pub const ALL: [ExternalKind; 11] = [
        ExternalKind::Claude,
        ExternalKind::Acp,
        ExternalKind::Codex,
        ExternalKind::Gemini,
        ExternalKind::Qwen,
        ExternalKind::Copilot,
        ExternalKind::Opencode,
        ExternalKind::Cursor,
        ExternalKind::Antigravity,
        ExternalKind::Pi,
        ExternalKind::Kimi,
    ];

    /// Runs a process per turn (`backend::per_turn`).
    pub fn per_turn(self) -> bool {
        !matches!(
            self,
            ExternalKind::Claude
                | ExternalKind::Acp
                | ExternalKind::Codex
                | ExternalKind::Pi
                | ExternalKind::Kimi
        )
    }

    fn from_head(head: &str) -> Option<ExternalKind> {
        ExternalKind::ALL
            .into_iter()
            .find(|kind| kind.name() == head)
    }
}

/// A parsed external agent spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalSpec {
    pub kind: ExternalKind,
    /// For `acp:`: `opencode`, `gemini`, `claude` (claude-agent-acp), or `cmd=<command line>`.
    pub agent: Option<String>,
    pub model: Option<String>,
}

/// A spec that does not parse. Which half it failed in matters to a bounded caller: text that
/// names an agent is refused as an agent, whatever follows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChoiceError {
    #[error("{0}")]
    Agent(String),
    #[error(transparent)]
    Model(#[from] SpecError),
}

impl FromStr for ModelChoice {
    type Err = ChoiceError;

    fn from_str(text: &str) -> Result<Self, ChoiceError> {
        let head = text.split(':').next().unwrap_or_default();
        if ExternalKind::from_head(head).is_some() {
            text.parse()
                .map(ModelChoice::External)
                .map_err(ChoiceError::Agent)
        } else {
            Ok(ModelChoice::Native(text.parse()?))
        }
    }
}

/// The backend a recorded model text runs on, as listings name it: `native`, `claude`, `acp`,
/// `codex`. Text that names an agent corral no longer knows still reads as `acp` (it was
/// recorded as an agent); text that parses as nothing reads as `native`.
pub fn backend_of(model: &str) -> &'static str {
    match model.parse::<ModelChoice>() {
        Ok(ModelChoice::External(spec)) => spec.kind.name(),
        Err(ChoiceError::Agent(_)) => "acp",
        Ok(ModelChoice::Native(_)) | Err(ChoiceError::Model(_)) => "native",
    }
}

impl fmt::Display for ModelChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelChoice::Native(spec) => spec.fmt(f),
            ModelChoice::External(spec) => spec.fmt(f),
        }
    }
}

impl fmt::Display for ExternalSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind.name())?;
        if let Some(agent) = &self.agent {
            write!(f, ":{agent}")?;
        }
        if let Some(model) = &self.model {
            write!(f, ":{model}")?;
        }
        Ok(())
    }
}

impl FromStr for ExternalSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (head, rest) = text.split_once(':').unwrap_or((text, ""));
        let model = |s: &str| (!s.is_empty()).then(|| s.to_string());
        match ExternalKind::from_head(head) {
            Some(ExternalKind::Antigravity) if !rest.is_empty() => Err(
                "antigravity takes no model: it uses the one chosen in Antigravity itself".into(),
            ),
            Some(ExternalKind::Acp) => acp(rest),
            Some(kind) => Ok(ExternalSpec {
                kind,
                agent: None,
                model: model(rest),
            }),
            None => Err(format!("{head:?} is not an external agent")),
        }
    }
}

/// `acp:<agent>[:<model>]` or `acp:cmd=<command line>`, after `acp:`.
fn acp(rest: &str) -> Result<ExternalSpec, String> {
    let model = |s: &str| (!s.is_empty()).then(|| s.to_string());
    if let Some(command) = rest.strip_prefix("cmd=") {
        if command.trim().is_empty() {
            return Err("acp:cmd= needs a command line".into());
        }
        return Ok(ExternalSpec {
            kind: ExternalKind::Acp,
            agent: Some(format!("cmd={command}")),
            model: None,
        });
    }
    let (agent, model_name) = rest.split_once(':').unwrap_or((rest, ""));
    match agent {
        "opencode" | "gemini" | "claude" | "kimi" => Ok(ExternalSpec {
            kind: ExternalKind::Acp,
            agent: Some(agent.to_string()),
            model: model(model_name),
        }),
        "" => Err(
            "acp: needs an agent: acp:opencode, acp:gemini, acp:claude, acp:kimi or \
                       acp:cmd=<command line>"
                .into(),
        ),
        other => Err(format!(
            "unknown ACP agent {other:?}: use opencode, gemini, claude, kimi or \
                 cmd=<command line>"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_print_back() {
        for text in [
            "claude",
            "claude:sonnet",
            "codex",
            "codex:gpt-5",
            "acp:opencode",
            "acp:gemini:gemini-2.5-flash",
            "acp:claude",
            "acp:cmd=corral acp -m openai:x",
            "gemini",
            "gemini:gemini-2.5-flash",
            "qwen:qwen3-coder-plus",
            "copilot:gpt-5",
            "opencode:ollama/qwen2.5:14b",
            "cursor",
            "antigravity",
            "pi:fake/fake-model",
            "kimi:kimi-k2",
            "acp:kimi",
        ] {
            let spec: ExternalSpec = text.parse().unwrap();
            assert_eq!(spec.to_string(), text);
            assert!(matches!(text.parse(), Ok(ModelChoice::External(s)) if s == spec));
        }
        assert!("acp:".parse::<ExternalSpec>().is_err());
        assert!("acp:zed".parse::<ExternalSpec>().is_err());
        assert!("acp:cmd=".parse::<ExternalSpec>().is_err());
        assert!(matches!(
            "ollama:qwen3".parse(),
            Ok(ModelChoice::Native(ModelSpec { model, .. })) if model == "qwen3"
        ));
    }

    #[test]
    fn a_bare_name_is_a_native_model_and_an_agent_name_stays_an_agent() {
        assert!(matches!(
            "qwen3:8b".parse(),
            Ok(ModelChoice::Native(ModelSpec { model, provider_implied: true, .. })) if model == "qwen3:8b"
        ));
        assert!(matches!("claude".parse(), Ok(ModelChoice::External(_))));
        assert!(matches!("codex".parse(), Ok(ModelChoice::External(_))));
        // The per-turn runtimes' names are agents too: Ollama's old `qwen:<size>` models need
        // their provider written out.
        assert!(matches!(
            "qwen:7b".parse(),
            Ok(ModelChoice::External(ExternalSpec {
                kind: ExternalKind::Qwen,
                ..
            }))
        ));
        assert!(matches!(
            "ollama:qwen:7b".parse(),
            Ok(ModelChoice::Native(ModelSpec { model, .. })) if model == "qwen:7b"
        ));
        assert!("antigravity:x".parse::<ExternalSpec>().is_err());
    }

    #[test]
    fn a_failed_parse_says_whether_the_text_named_an_agent() {
        for text in ["acp:zed", "acp:", "acp:cmd= "] {
            let e = text.parse::<ModelChoice>().unwrap_err();
            assert!(matches!(e, ChoiceError::Agent(_)), "{text}: {e:?}");
        }
        for text in ["a:b:c", "http://x", "ollama:", "claude x"] {
            let e = text.parse::<ModelChoice>().unwrap_err();
            assert!(matches!(e, ChoiceError::Model(_)), "{text}: {e:?}");
        }
    }
}
