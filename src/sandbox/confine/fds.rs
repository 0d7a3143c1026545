//! No descriptor crosses into a tool except stdin, stdout and stderr: whatever corral itself
//! inherited (a launcher's log, make's jobserver, an activation socket) is marked close-on-exec.
//!
//! Marking instead of closing keeps every descriptor valid until `exec`, so nothing that owns
//! one (std, a library) is left holding a closed or reused number.

use std::os::fd::RawFd;

/// Marks every descriptor above stderr close-on-exec: `close_range(CLOSE_RANGE_CLOEXEC)` where
/// the kernel has it (5.11), else each one listed in `/proc/self/fd`.
pub fn close_inherited() -> Result<(), String> {
    if close_range_cloexec() {
        return Ok(());
    }
    let entries = std::fs::read_dir("/proc/self/fd")
        .map_err(|e| format!("cannot list /proc/self/fd: {e}"))?;
    // Collected first: the listing's own descriptor is among them (already close-on-exec).
    let fds: Vec<RawFd> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in fds {
        set_cloexec(fd);
    }
    Ok(())
}

#[allow(unsafe_code)]
fn close_range_cloexec() -> bool {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC takes plain integers and only sets a flag
    // on descriptors; none is closed, so no Rust owner of one is invalidated.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    rc == 0
}

#[allow(unsafe_code)]
fn set_cloexec(fd: RawFd) {
    // SAFETY: F_SETFD on a number that may or may not be open: at worst EBADF. Only the
    // close-on-exec flag changes; the descriptor stays open for whoever owns it.
    let _ = unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inherited_descriptor_becomes_close_on_exec() {
        use nix::fcntl::{FcntlArg, fcntl};
        let file = tempfile::tempfile().unwrap();
        // A plain dup has no close-on-exec flag, like a descriptor inherited from a launcher.
        let fd = nix::unistd::dup(&file).unwrap();
        let cloexec = |fd| fcntl(fd, FcntlArg::F_GETFD).unwrap() & libc::FD_CLOEXEC;
        assert_eq!(cloexec(&fd), 0);
        close_inherited().unwrap();
        assert_eq!(cloexec(&fd), libc::FD_CLOEXEC);
    }
}
