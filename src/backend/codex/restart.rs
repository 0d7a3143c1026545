//! codex started again after it died, on its own thread (`thread/resume`): codex keeps its
//! threads on disk, so the conversation goes on where the dead process left it.

use serde_json::Value;

use super::CodexBackend;
use super::rpc::{Rpc, RpcError};
use crate::backend::agent_process::AgentProcess;

impl CodexBackend {
    /// codex died (`what` says how, `data` carries its exit status and stderr): the session
    /// stays, and codex is started again on its thread before the next turn.
    pub(super) fn note_crash(&mut self, what: String, data: Value) {
        self.session.emit_error(
            format!("{what}; it is started again on its thread when the next message comes"),
            data,
        );
        self.crashed = true;
        self.crash_untold = true;
    }

    /// Starts codex again after a crash and resumes its thread.
    pub(super) async fn start_again(&mut self) -> Result<(), String> {
        if !self.crashed {
            return Ok(());
        }
        self.rpc.close();
        self.process.stop(None).await;
        let (process, pipes) = AgentProcess::spawn(&self.launch).map_err(|e| e.to_string())?;
        self.process = process;
        self.rpc = Rpc::new(pipes.stdin, pipes.stdout);
        let thread = self.thread_id.clone();
        match self.handshake(Some(&thread)).await {
            Ok(thread_id) => {
                self.thread_id = thread_id;
                // The new process starts at codex's defaults: the next turn sends them anew.
                self.sent_effort = None;
                self.crashed = false;
                tracing::info!(thread = %self.thread_id, "codex started again on its thread");
                Ok(())
            }
            Err(e) => {
                let why = match e {
                    RpcError::Closed => self.process.crash_report().await,
                    other => other.to_string(),
                };
                self.rpc.close();
                self.process.stop(None).await;
                Err(why)
            }
        }
    }
}
