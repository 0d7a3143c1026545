//! Test support: a scriptable fake model server and a harness for the corral binary.

// Shared by every test module; no single module uses every helper (or re-export), so unused
// items are expected.
#![allow(dead_code, unused_imports)]

pub mod cluster;
pub mod fake_anthropic;
pub mod fake_gemini;
pub mod fake_model;
pub mod harness;
pub mod host;
pub mod pids;
pub mod procs;
pub mod reply;
pub mod server;
pub mod tmux;

pub use fake_model::{FakeModel, ModelInfo, Recorded};
pub use harness::{Cmd, Harness, Outcome, Running};
pub use pids::{PidTally, assert_all_gone};
pub use reply::{Format, Reply};
pub use tmux::Tmux;
