//! Hosting sessions, above the backends: opening one (which backend, the sandbox, the
//! worktree, resuming from its log) and keeping many running for the server, MCP and ACP.
//! `session` below holds what a session is; this layer builds and runs them.

pub(crate) mod delegate;
pub mod lifecycle;
pub mod manager;
pub mod open;
