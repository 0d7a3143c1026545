//! Surfaces: the ways a person or program drives sessions.

pub mod acp;
mod approve;
pub mod cli_docs;
mod desktop_preview;
pub mod doctor;
pub mod eval;
pub mod init;
pub mod logs_cli;
pub mod mcp;
pub mod mcp_servers;
pub mod node;
pub mod policies;
pub mod run;
pub mod safe_text;
pub mod server;
pub mod sessions_cli;
mod tool_args;
pub mod top;
mod tty;
pub mod tui;
pub mod worktree_cli;
