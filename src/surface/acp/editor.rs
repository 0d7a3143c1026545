//! The ACP client as the tools' editor: `read_file` and `write_file` go through its
//! `fs/read_text_file` / `fs/write_text_file` when it offers them, so the agent sees unsaved
//! buffers and its writes land in them. Tools run outside the SDK's dispatch loop, so waiting
//! for the client's answer here cannot block the connection.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use agent_client_protocol::v1::schema::{ReadTextFileRequest, WriteTextFileRequest};
use serde_json::json;

use super::{Connection, typed};
use crate::tool::{Editor, EditorFuture, EditorLink};

pub struct AcpEditor {
    cx: Connection,
    /// The session's id, known once it is open (tools run only after that).
    session: OnceLock<String>,
    reads: bool,
    writes: bool,
}

impl AcpEditor {
    pub fn new(cx: Connection, reads: bool, writes: bool) -> Arc<AcpEditor> {
        Arc::new(AcpEditor {
            cx,
            session: OnceLock::new(),
            reads,
            writes,
        })
    }

    pub fn link(self: &Arc<Self>) -> EditorLink {
        EditorLink(self.clone())
    }

    pub fn bind(&self, session: &str) {
        let _ = self.session.set(session.to_string());
    }

    fn session(&self) -> Result<String, String> {
        self.session
            .get()
            .cloned()
            .ok_or_else(|| "the session is not open yet".to_string())
    }
}

impl Editor for AcpEditor {
    fn reads(&self) -> bool {
        self.reads
    }

    fn writes(&self) -> bool {
        self.writes
    }

    fn read_text(
        &self,
        path: PathBuf,
        line: Option<u64>,
        limit: Option<u64>,
    ) -> EditorFuture<String> {
        let (cx, session) = (self.cx.clone(), self.session());
        Box::pin(async move {
            let request = read_request(&session?, &path, line, limit)?;
            let answer = cx
                .send_request(request)
                .block_task()
                .await
                .map_err(|e| e.to_string())?;
            Ok(answer.content)
        })
    }

    fn write_text(&self, path: PathBuf, content: String) -> EditorFuture<()> {
        let (cx, session) = (self.cx.clone(), self.session());
        Box::pin(async move {
            let request = write_request(&session?, &path, content)?;
            cx.send_request(request)
                .block_task()
                .await
                .map_err(|e| e.to_string())?;
            Ok(())
        })
    }
}

/// `fs/read_text_file` for `path` (absolute): `line` 1-based and `limit` in lines, each left
/// out when not asked for, so the client sends the whole buffer.
fn read_request(
    session: &str,
    path: &Path,
    line: Option<u64>,
    limit: Option<u64>,
) -> Result<ReadTextFileRequest, String> {
    let mut request = json!({"sessionId": session, "path": path});
    if let Some(line) = line {
        request["line"] = json!(line);
    }
    if let Some(limit) = limit {
        request["limit"] = json!(limit);
    }
    typed(request).map_err(|e| format!("reading {}: {}", path.display(), e.message))
}

fn write_request(
    session: &str,
    path: &Path,
    content: String,
) -> Result<WriteTextFileRequest, String> {
    typed(json!({"sessionId": session, "path": path, "content": content}))
        .map_err(|e| format!("writing {}: {}", path.display(), e.message))
}

#[cfg(test)]
#[path = "editor_tests.rs"]
mod tests;
