//! What tools share across a session: limits, the environment their processes get, desktop
//! options, and the sink that streams process output as events.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::event::OutputStream;
use crate::sandbox::SandboxSpec;
use crate::sandbox::env::Redactor;

/// Where a running tool's output chunks go (the session turns them into `tool_output`).
type SinkFn = dyn Fn(OutputStream, &str) + Send + Sync;

#[derive(Clone, Default)]
pub struct OutputSink(Option<Arc<SinkFn>>);

impl OutputSink {
    pub fn none() -> Self {
        OutputSink(None)
    }

    pub fn new(sink: impl Fn(OutputStream, &str) + Send + Sync + 'static) -> Self {
        OutputSink(Some(Arc::new(sink)))
    }

    pub fn emit(&self, stream: OutputStream, text: &str) {
        if let Some(sink) = &self.0
            && !text.is_empty()
        {
            sink(stream, text);
        }
    }
}

impl fmt::Debug for OutputSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "OutputSink(..)"
        } else {
            "OutputSink(none)"
        })
    }
}

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
        }
    }
}
