//! Test support: a scriptable fake model server and a harness for the corral binary.

// Shared by every test module; no single module uses every helper (or re-export), so unused
// items are expected.
#![allow(dead_code, unused_imports)]

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

/// `$CARGO_TARGET_DIR/ci-artifacts` (else the crate's `target/ci-artifacts`), made if
/// missing: screenshots and screens CI keeps.
pub fn artifacts_dir() -> std::path::PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    let dir = target.join("ci-artifacts");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    dir
}
