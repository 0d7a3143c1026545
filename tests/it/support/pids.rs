//! Which processes a tool call started, as pids of the test's own PID namespace. A tool runs in
//! a PID namespace of its own, where `$$` means nothing out here; so each process to be
//! counted connects to a Unix socket the test listens on, and the kernel gives the test the
//! peer's pid as the test sees it. The peer's pid is fixed at `connect`, so the test may look
//! after the call ended.

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub struct PidTally {
    listener: UnixListener,
    path: PathBuf,
}

impl PidTally {
    /// Listens on `dir/pids.sock` (`dir` inside the session root, where tools may connect).
    pub fn bind(dir: &Path) -> PidTally {
        let path = dir.join("pids.sock");
        let listener = UnixListener::bind(&path)
            .unwrap_or_else(|e| panic!("pids: bind {}: {e}", path.display()));
        listener
            .set_nonblocking(true)
            .unwrap_or_else(|e| panic!("pids: {e}"));
        PidTally { listener, path }
    }

    /// A shell command that runs one process which connects, then creates `<name>.held` in its
    /// working directory, then sleeps for 1000 s.
    pub fn hold(&self, name: &str) -> String {
        format!(
            "python3 -c 'import socket, time\ns = socket.socket(socket.AF_UNIX)\n\
             s.connect(\"{}\")\nopen(\"{name}.held\", \"w\").close()\ntime.sleep(1000)'",
            self.path.display()
        )
    }

    /// The pids of every process that connected so far, in the test's PID namespace.
    pub async fn pids(&self) -> Vec<u32> {
        let mut pids = Vec::new();
        loop {
            let stream = match self.listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return pids,
                Err(e) => panic!("pids: accept: {e}"),
            };
            stream
                .set_nonblocking(true)
                .unwrap_or_else(|e| panic!("pids: {e}"));
            let stream =
                tokio::net::UnixStream::from_std(stream).unwrap_or_else(|e| panic!("pids: {e}"));
            let cred = stream
                .peer_cred()
                .unwrap_or_else(|e| panic!("pids: SO_PEERCRED: {e}"));
            let pid = cred
                .pid()
                .and_then(|p| u32::try_from(p).ok())
                .unwrap_or_else(|| panic!("pids: the kernel gave no peer pid"));
            pids.push(pid);
        }
    }
}

/// No such process any more: no `/proc` entry, or a zombie its parent has yet to reap.
pub fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit(") ").next().is_some_and(|r| r.starts_with('Z')),
    }
}

/// Waits (up to 30 s: a killed namespace takes a moment to empty) until each of `pids` is
/// gone; otherwise kills those left, so a failure leaves nothing behind, and fails naming them.
pub async fn assert_all_gone(pids: &[u32], what: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !pids.iter().all(|p| gone(*p)) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left: Vec<u32> = pids.iter().copied().filter(|p| !gone(*p)).collect();
    for pid in &left {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    assert!(
        left.is_empty(),
        "{what}: {left:?} of {pids:?} are still alive"
    );
}
