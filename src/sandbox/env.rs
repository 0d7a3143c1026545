//! What tool processes may see of the runtime's environment, and keeping secrets out of what
//! tools print.
//!
//! Tool processes start from an empty environment plus an allow-list (locale, terminal, display
//! and bus addresses …) and whatever the policy passes through by name; API keys and tokens the
//! runtime holds never reach them. Values of secrets the runtime knows are still redacted from
//! tool output, in case a tool finds one on its own (a config file, a credentials helper),
//! also when it prints one in pieces ([`RedactStream`]).

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
    // sway's IPC socket: the desktop tools list and focus windows through it.
    "SWAYSOCK",
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
    /// Longest first, so a secret containing another is replaced whole.
    secrets: Vec<(String, String)>,
    /// The bytes secrets begin with: everywhere else a scan just steps on.
    firsts: Vec<u8>,
}

impl Redactor {
    /// Secrets of the runtime's environment, plus any the runtime holds itself (an API key
    /// from the config, the server's JWT secret).
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
        secrets.sort_by_key(|s| std::cmp::Reverse(s.1.len()));
        secrets.dedup_by(|a, b| a.1 == b.1);
        let mut firsts: Vec<u8> = secrets.iter().filter_map(|s| s.1.bytes().next()).collect();
        firsts.sort_unstable();
        firsts.dedup();
        Redactor { secrets, firsts }
    }

    /// This redactor with more secrets (name, value); values under 8 bytes are left out.
    pub fn with(&self, extra: impl IntoIterator<Item = (String, String)>) -> Redactor {
        Redactor::from_env(
            std::iter::empty(),
            self.secrets.iter().cloned().chain(extra),
        )
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// The names of the secrets, longest value first (for `doctor`: never the values).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.secrets.iter().map(|(name, _)| name.as_str())
    }

    /// `text` as a whole, every secret in it replaced.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = String::new();
        match self.scan(text, true, &mut out) {
            Scanned::Untouched => Cow::Borrowed(text),
            _ => Cow::Owned(out),
        }
    }

    /// A redactor for text that arrives in pieces: a secret split between two pieces is
    /// still replaced whole.
    pub fn stream(&self) -> RedactStream {
        RedactStream {
            redactor: self.clone(),
            held: String::new(),
        }
    }

    /// Appends `text` to `out` with secrets replaced. Unless `at_end`, stops where the rest
    /// of `text` could be the start of a secret the next piece completes, and says where.
    fn scan(&self, text: &str, at_end: bool, out: &mut String) -> Scanned {
        let mut replaced = false;
        let mut copied = 0;
        let mut at = 0;
        while at < text.len() {
            // A secret's first byte is never a UTF-8 continuation byte, so where one matches,
            // `at` is a character boundary.
            let rest = match text.get(at..) {
                Some(rest) if self.firsts.contains(&text.as_bytes()[at]) => rest,
                _ => {
                    at += 1;
                    continue;
                }
            };
            if let Some((name, value)) = self
                .secrets
                .iter()
                .find(|(_, v)| rest.starts_with(v.as_str()))
            {
                out.push_str(&text[copied..at]);
                out.push_str(&format!("[REDACTED:{name}]"));
                at += value.len();
                copied = at;
                replaced = true;
                continue;
            }
            if !at_end
                && self
                    .secrets
                    .iter()
                    .any(|(_, v)| v.len() > rest.len() && v.starts_with(rest))
            {
                out.push_str(&text[copied..at]);
                return Scanned::HeldFrom(at);
            }
            at += 1;
        }
        if !replaced {
            return Scanned::Untouched;
        }
        out.push_str(&text[copied..]);
        Scanned::Whole
    }
}

enum Scanned {
    /// No secret and nothing held: the text is fine as it is (and `out` has none of it).
    Untouched,
    /// All of it is in `out`, with replacements.
    Whole,
    /// `out` has the text up to here; the rest may begin a secret.
    HeldFrom(usize),
}

/// [`Redactor::stream`]: holds back the end of a piece only while it could be the first part
/// of a secret (never more than the longest secret less one byte), so streamed output stays
/// live and no secret gets out in two halves.
#[derive(Debug, Clone)]
pub struct RedactStream {
    redactor: Redactor,
    held: String,
}

impl RedactStream {
    /// The part of what arrived so far that is safe to pass on.
    pub fn push(&mut self, text: &str) -> String {
        if self.redactor.is_empty() {
            return text.to_string();
        }
        let mut data = std::mem::take(&mut self.held);
        data.push_str(text);
        let mut out = String::new();
        match self.redactor.scan(&data, false, &mut out) {
            Scanned::Untouched => data,
            Scanned::Whole => out,
            Scanned::HeldFrom(at) => {
                self.held = data.split_off(at);
                out
            }
        }
    }

    /// The end of the stream: what was held back, redacted.
    pub fn finish(&mut self) -> String {
        let held = std::mem::take(&mut self.held);
        self.redactor.redact(&held).into_owned()
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

    #[test]
    fn a_secret_split_between_pieces_is_redacted_whole() {
        let redactor = Redactor::from_env(
            vars(&[("API_TOKEN", "sk-abc123456789")]),
            vars(&[("jwt", "héllo-wörld-42")]),
        );
        let pieces = [
            "out: sk-ab",
            "c12",
            "3456789 and sk-",
            "x then héllo",
            "-wörld-42!",
        ];
        let mut stream = redactor.stream();
        let mut shown = Vec::new();
        for piece in pieces {
            shown.push(stream.push(piece));
        }
        shown.push(stream.finish());
        assert_eq!(
            shown.concat(),
            "out: [REDACTED:API_TOKEN] and sk-x then [REDACTED:jwt]!"
        );
        // Only what may begin a secret waits: the rest is passed on at once.
        assert_eq!(shown[0], "out: ");
        assert_eq!(shown[2], "[REDACTED:API_TOKEN] and ");
        assert_eq!(shown[3], "sk-x then ");
        // A prefix that never completes comes out at the end.
        let mut stream = redactor.stream();
        assert_eq!(stream.push("tail sk-abc"), "tail ");
        assert_eq!(stream.finish(), "sk-abc");
        let mut none = Redactor::default().stream();
        assert_eq!(none.push("sk-ab"), "sk-ab");
    }

    #[test]
    fn held_text_never_exceeds_the_longest_secret() {
        let redactor = Redactor::from_env([], vars(&[("k", "aaaaaaaaab")]));
        let mut stream = redactor.stream();
        let mut shown = String::new();
        for _ in 0..100 {
            shown.push_str(&stream.push("a"));
            assert!(stream.held.len() < 10, "{}", stream.held.len());
        }
        shown.push_str(&stream.push("b"));
        shown.push_str(&stream.finish());
        assert_eq!(shown, format!("{}[REDACTED:k]", "a".repeat(91)));
    }
}
