//! Where a confined process's output chunks go as they arrive: the session turns them into
//! `tool_output` events. Defined here, beside the capture that feeds it, so the sandbox needs
//! nothing from the tools above it.

use std::fmt;
use std::sync::Arc;

use crate::event::OutputStream;

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
