//! What tool processes may see of the runtime's environment, and keeping secrets out of what
//! tools print.
//!
//! Tool processes start from an empty environment plus an allow-list (locale, terminal, display
//! and bus addresses …) and whatever the policy passes through by name; API keys and tokens the
//! runtime holds never reach them. Values of secrets the runtime knows are still redacted from
//! tool output, in case a tool finds one on its own (a config file, a credentials helper).

use std::borrow::Cow;
use std::path::Path;

/// Names passed through as they are.
const ALLOWED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "TZ",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
    "XDG_RUNTIME_DIR",
    "XDG_CURRENT_DESKTOP",
    "XDG_SESSION_TYPE",
    "DBUS_SESSION_BUS_ADDRESS",
    "BROWSER",
];

/// Name fragments that mark a variable as a secret (case-insensitive).
const SECRET_MARKS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "SESSION",
];

/// Shorter values are too likely to occur by accident to redact.
const MIN_SECRET_LEN: usize = 8;

fn allowed(name: &str) -> bool {
    ALLOWED.contains(&name) || name.starts_with("LC_")
}

/// The curated allow-list wins: `DBUS_SESSION_BUS_ADDRESS` and `XAUTHORITY` are addresses, not
/// secrets, whatever their names contain.
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    !allowed(name) && SECRET_MARKS.iter().any(|mark| upper.contains(mark))
}

/// The environment a tool process starts with. `passthrough` names come from the policy; a
/// secret-looking name passes only if the policy names it explicitly.
pub fn tool_env(
    runtime: impl IntoIterator<Item = (String, String)>,
    passthrough: &[String],
    tmpdir: Option<&Path>,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = runtime
        .into_iter()
        .filter(|(name, _)| passthrough.iter().any(|p| p == name) || allowed(name))
        .collect();
    if !env.iter().any(|(name, _)| name == "PATH") {
        env.push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
    }
    if let Some(dir) = tmpdir {
        env.retain(|(name, _)| !matches!(name.as_str(), "TMPDIR" | "TMP" | "TEMP"));
        for name in ["TMPDIR", "TMP", "TEMP"] {
            env.push((name.into(), dir.display().to_string()));
        }
    }
    env.sort();
    env
}

/// Replaces known secret values with `[REDACTED:NAME]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Redactor {
    secrets: Vec<(String, String)>,
}

impl Redactor {
    /// Secrets of the runtime's environment, plus any the runtime holds itself (an API key
    /// from the config).
    pub fn from_env(
        runtime: impl IntoIterator<Item = (String, String)>,
        extra: impl IntoIterator<Item = (String, String)>,
    ) -> Redactor {
        let mut secrets: Vec<(String, String)> = runtime
            .into_iter()
            .filter(|(name, _)| looks_secret(name))
            .chain(extra)
            .filter(|(_, value)| value.len() >= MIN_SECRET_LEN)
            .collect();
        // Longest first, so a secret containing another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.1.len()));
        secrets.dedup_by(|a, b| a.1 == b.1);
        Redactor { secrets }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for (name, value) in &self.secrets {
            if out.contains(value.as_str()) {
                out = Cow::Owned(out.replace(value.as_str(), &format!("[REDACTED:{name}]")));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn only_the_allow_list_and_named_passthrough_reach_tools() {
        let runtime = vars(&[
            ("PATH", "/bin"),
            ("LC_ALL", "C"),
            ("OPENAI_API_KEY", "sk-very-secret"),
            ("GITHUB_TOKEN", "ghp_abcdefgh"),
            ("CARGO_HOME", "/c"),
            ("RANDOM_THING", "x"),
            ("DISPLAY", ":1"),
            ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/bus"),
        ]);
        let env = tool_env(runtime.clone(), &[], Some(Path::new("/t")));
        let names: Vec<&str> = env.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "DBUS_SESSION_BUS_ADDRESS",
                "DISPLAY",
                "LC_ALL",
                "PATH",
                "TEMP",
                "TMP",
                "TMPDIR"
            ]
        );
        assert!(!looks_secret("DBUS_SESSION_BUS_ADDRESS") && looks_secret("AWS_SESSION_TOKEN"));
        let env = tool_env(runtime, &["CARGO_HOME".into(), "GITHUB_TOKEN".into()], None);
        assert!(env.iter().any(|(n, _)| n == "CARGO_HOME"));
        assert!(
            env.iter().any(|(n, _)| n == "GITHUB_TOKEN"),
            "named explicitly"
        );
        assert!(!env.iter().any(|(n, _)| n == "OPENAI_API_KEY"));
    }

    #[test]
    fn secrets_are_redacted_whole_and_short_values_left_alone() {
        let redactor = Redactor::from_env(
            vars(&[
                ("OPENAI_API_KEY", "sk-abc123456789"),
                ("MY_TOKEN", "short"),
                ("HOME", "/root"),
            ]),
            vars(&[("config api key", "sk-abc123456789-longer")]),
        );
        assert_eq!(
            redactor.redact("key=sk-abc123456789-longer and sk-abc123456789"),
            "key=[REDACTED:config api key] and [REDACTED:OPENAI_API_KEY]"
        );
        assert_eq!(redactor.redact("short /root"), "short /root");
        assert!(matches!(redactor.redact("nothing"), Cow::Borrowed(_)));
    }
}
