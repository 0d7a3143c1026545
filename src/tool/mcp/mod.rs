//! Tools from MCP servers: corral as an MCP client (rmcp's client side). Each server's tools
//! are offered as `SERVER__TOOL` and go through the same gate, output caps and events as the
//! built-in ones; stdio servers run inside the session's sandbox.

mod call;
mod connect;
mod handler;
mod hub;
mod naming;
mod result;
mod sse;

pub use connect::{McpEnvironment, find_program};
pub use hub::{McpHub, Notice, ServerReport};
