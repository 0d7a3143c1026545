//! Confinement of what tools can touch.
//!
//! Shell and python processes start through `corral __sandbox-exec` (confine.rs), which puts
//! them in namespaces and a landlock domain before `exec`; support.rs probes what the kernel
//! enforces; spec.rs is what a session asks for.

pub mod agent_process;
pub(crate) mod boundary;
pub(crate) mod confine;
pub(crate) mod env;
pub(crate) mod hidden;
pub(crate) mod paths;
pub(crate) mod process;
pub(crate) mod programs;
pub(crate) mod reaper;
pub(crate) mod spec;
pub(crate) mod support;

pub use confine::fds::close_inherited as close_inherited_fds;
pub use confine::sandbox_exec_main;
pub(crate) use hidden::default_hidden;
pub use process::OutputSink;
pub use spec::{HELPER_COMMAND, NetworkMode, SandboxMode, SandboxSpec};
pub use support::SandboxSupport;

/// Ends every child process this runtime started and still has (tool process groups, model
/// servers, agent CLIs): SIGTERM, two seconds' grace, SIGKILL, and blocks until the kernel
/// confirms each group gone (up to five seconds more). The last thing an exiting runtime does,
/// after its async work, so nothing that ends children can be dropped with a task. Returns how
/// many groups were still there.
pub fn end_own_children() -> usize {
    reaper::end_own_children(reaper::EXIT_GRACE)
}
