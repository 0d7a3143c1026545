//! What tools share across a session: limits, the environment their processes get, desktop
//! options, and the sink that streams process output as events (`sandbox::OutputSink`).

use std::time::Duration;

use crate::sandbox::SandboxSpec;
use crate::sandbox::env::Redactor;

#[derive(Debug, Clone, PartialEq)]
pub struct ToolSettings {
    /// shell/python timeout when a call names none.
    pub default_timeout: Duration,
    /// The most a call may ask for (policy may lower it).
    pub max_timeout: Duration,
    /// The environment tool processes start with (`env_clear` first, then exactly these).
    pub env: Vec<(String, String)>,
    pub shell: String,
    pub python: String,
    /// Screenshots are downsampled so the long edge is at most this many pixels.
    pub screenshot_max_long_edge: u32,
    /// Command that opens a URL; `None`: `xdg-open` (which honours `$BROWSER`).
    pub open_url_command: Option<String>,
    /// URL schemes open_url accepts.
    pub url_schemes: Vec<String>,
    /// Secret values the runtime knows, cut out of everything tools return.
    pub redactor: Redactor,
    /// How shell and python processes are confined; `None`: not at all.
    pub sandbox: Option<SandboxSpec>,
    /// An editor that serves file reads/writes (an ACP client), else the disk directly.
    pub editor: Option<super::editor::EditorLink>,
    /// Where agent config a shell or python call made without a person's yes is moved (outside
    /// the root, hidden from tools); `None`: the system temp dir's `corral-quarantine`.
    pub quarantine: Option<std::path::PathBuf>,
    /// Runs `delegate`'s sub-sessions; none: the session cannot delegate.
    pub delegator: super::DelegateLink,
    /// The desktop as this session's `computer` calls left it (the last screenshot's view).
    pub desktop: std::sync::Arc<super::desktop::computer::DesktopState>,
}

impl Default for ToolSettings {
    fn default() -> Self {
        ToolSettings {
            default_timeout: Duration::from_secs(120),
            max_timeout: Duration::from_secs(600),
            env: crate::sandbox::env::tool_env(std::env::vars(), &[], None),
            shell: "bash".into(),
            python: "python3".into(),
            screenshot_max_long_edge: 1568,
            open_url_command: None,
            url_schemes: vec!["http".into(), "https".into()],
            redactor: Redactor::default(),
            sandbox: None,
            editor: None,
            quarantine: None,
            delegator: super::DelegateLink::default(),
            desktop: std::sync::Arc::default(),
        }
    }
}
