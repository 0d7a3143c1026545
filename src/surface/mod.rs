//! Surfaces: the ways a person or program drives sessions.

pub mod acp;
mod approve;
pub mod doctor;
pub mod eval;
pub mod mcp;
pub mod mcp_servers;
pub mod policies;
pub mod run;
pub mod safe_text;
pub mod server;
pub mod top;
mod tty;
pub mod tui;
pub mod worktree_cli;
