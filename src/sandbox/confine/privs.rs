//! No root powers for tools: every capability dropped (bounding, ambient, effective, permitted,
//! inheritable), and a seccomp filter that refuses the mode bits and file capabilities a tool
//! could leave behind for later, outside the sandbox.
//!
//! A corral run by root maps uid 0 to 0 in the tools' user namespace: what they create is owned
//! by the real root. Without capabilities a tool still owns its files and may `chmod u+s` them
//! (no capability needed), so the filter refuses `S_ISUID`/`S_ISGID` in every call that sets a
//! mode (chmod family, open/creat with `O_CREAT`, mknod). `security.capability` needs
//! CAP_SETFCAP, which is gone; the filter cannot read an attribute's name (a pointer), so it does
//! not try. Filters cannot look into io_uring submissions or `openat2`'s mode (in a struct): both
//! are refused (ENOSYS, callers fall back to the plain calls). A foreign-ABI call (x32, i386
//! `int 0x80`) is refused too, since its numbers differ.

use std::mem::size_of;

/// The mode bits no tool may set.
const SET_ID_BITS: u32 = libc::S_ISUID | libc::S_ISGID;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
/// Matches no call: the filter is never installed there (see [`drop_privileges`]).
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const AUDIT_ARCH: u32 = 0;
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
const SYS_FCHMODAT2: libc::c_long = 452;

/// Each call that sets a mode, with the index of its mode argument.
fn mode_calls() -> Vec<(libc::c_long, u32)> {
    let mut calls = vec![
        (libc::SYS_fchmod, 1),
        (libc::SYS_fchmodat, 2),
        (SYS_FCHMODAT2, 2),
        (libc::SYS_openat, 3),
        (libc::SYS_mknodat, 2),
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        (libc::SYS_chmod, 1),
        (libc::SYS_open, 2),
        (libc::SYS_creat, 1),
        (libc::SYS_mknod, 1),
    ]);
    calls
}

/// Calls refused outright: their arguments cannot be judged.
fn refused_calls() -> Vec<libc::c_long> {
    vec![
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_openat2,
    ]
}

/// Drops every capability and installs the filter (no_new_privs must already be set).
pub(super) fn drop_privileges() -> Result<(), String> {
    drop_capabilities()?;
    if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        install_filter(&filter())
    } else {
        Err("no seccomp filter for this architecture".into())
    }
}

fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

/// Offsets in `struct seccomp_data`: nr (u32), arch (u32), instruction pointer (u64), args.
const NR: u32 = 0;
const ARCH: u32 = 4;
fn arg_low(index: u32) -> u32 {
    // Little-endian: the low half of a 64-bit argument comes first; modes fit in it.
    16 + 8 * index
}

fn filter() -> Vec<libc::sock_filter> {
    use libc::{
        BPF_ABS, BPF_ALU, BPF_AND, BPF_JEQ, BPF_JMP, BPF_JSET, BPF_K, BPF_LD, BPF_RET, BPF_W,
    };
    let allow = stmt(BPF_RET | BPF_K, libc::SECCOMP_RET_ALLOW);
    let errno = |e: i32| stmt(BPF_RET | BPF_K, libc::SECCOMP_RET_ERRNO | e as u32);
    let load = |offset: u32| stmt(BPF_LD | BPF_W | BPF_ABS, offset);
    let mut prog = vec![
        load(ARCH),
        jump(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH, 1, 0),
        errno(libc::ENOSYS),
        load(NR),
    ];
    #[cfg(target_arch = "x86_64")]
    prog.extend([
        jump(BPF_JMP | BPF_JSET | BPF_K, X32_SYSCALL_BIT, 0, 1),
        errno(libc::ENOSYS),
    ]);
    for nr in refused_calls() {
        prog.extend([
            jump(BPF_JMP | BPF_JEQ | BPF_K, nr as u32, 0, 1),
            errno(libc::ENOSYS),
        ]);
    }
    for (nr, arg) in mode_calls() {
        // Not this call: skip the five that follow. This call: its mode decides.
        prog.extend([
            jump(BPF_JMP | BPF_JEQ | BPF_K, nr as u32, 0, 5),
            load(arg_low(arg)),
            stmt(BPF_ALU | BPF_AND | BPF_K, SET_ID_BITS),
            jump(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1),
            allow,
            errno(libc::EPERM),
        ]);
    }
    prog.push(allow);
    prog
}

#[allow(unsafe_code)]
fn install_filter(prog: &[libc::sock_filter]) -> Result<(), String> {
    let len = u16::try_from(prog.len()).map_err(|_| "seccomp filter too long".to_owned())?;
    let fprog = libc::sock_fprog {
        len,
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: `fprog` points at `prog`, which outlives the call; the kernel copies the filter.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER as libc::c_ulong,
            &fprog as *const libc::sock_fprog,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!(
            "cannot install the seccomp filter: {}",
            std::io::Error::last_os_error()
        ))
    }
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[allow(unsafe_code)]
fn drop_capabilities() -> Result<(), String> {
    let last = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|t| t.trim().parse::<libc::c_ulong>().ok())
        .unwrap_or(63);
    let os_error = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
    for cap in 0..=last {
        // SAFETY: integer arguments only. Needs CAP_SETPCAP, which goes last with the rest.
        let rc = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
        // EINVAL: a capability this kernel does not know. EPERM: no CAP_SETPCAP, as for an
        // ordinary user without a user namespace; with no capabilities and no_new_privs set,
        // no exec can raise any, bounding set or not.
        let errno = std::io::Error::last_os_error().raw_os_error();
        if rc != 0 && !matches!(errno, Some(libc::EINVAL | libc::EPERM)) {
            return Err(os_error("dropping the bounding set"));
        }
    }
    // SAFETY: integer arguments only.
    let rc = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    if rc != 0 {
        return Err(os_error("clearing ambient capabilities"));
    }
    let header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    debug_assert_eq!(size_of::<CapData>(), 12);
    // SAFETY: version 3 takes two data structs; both pointers are valid for the call.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()) };
    if rc != 0 {
        return Err(os_error("capset"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_check_jumps_to_the_next_call_and_the_filter_ends_allowing() {
        let prog = filter();
        let last = prog.last().unwrap();
        assert_eq!(u32::from(last.code), libc::BPF_RET | libc::BPF_K);
        assert_eq!(last.k, libc::SECCOMP_RET_ALLOW);
        // Walk the program for each call number: where does it end?
        let run = |nr: u32, args: [u32; 6]| -> u32 {
            let mut pc = 0usize;
            let mut acc = 0u32;
            loop {
                let ins = prog[pc];
                let code = u32::from(ins.code);
                match code {
                    c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => {
                        acc = match ins.k {
                            NR => nr,
                            ARCH => AUDIT_ARCH,
                            k => args[((k - 16) / 8) as usize],
                        };
                        pc += 1;
                    }
                    c if c == libc::BPF_ALU | libc::BPF_AND | libc::BPF_K => {
                        acc &= ins.k;
                        pc += 1;
                    }
                    c if c == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K => {
                        pc += 1 + usize::from(if acc == ins.k { ins.jt } else { ins.jf });
                    }
                    c if c == libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K => {
                        pc += 1 + usize::from(if acc & ins.k != 0 { ins.jt } else { ins.jf });
                    }
                    _ => return ins.k,
                }
            }
        };
        let eperm = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
        let fchmodat = libc::SYS_fchmodat as u32;
        assert_eq!(run(fchmodat, [0, 0, 0o4755, 0, 0, 0]), eperm);
        assert_eq!(run(fchmodat, [0, 0, 0o2755, 0, 0, 0]), eperm);
        assert_eq!(
            run(fchmodat, [0, 0, 0o755, 0, 0, 0]),
            libc::SECCOMP_RET_ALLOW
        );
        let openat = libc::SYS_openat as u32;
        assert_eq!(run(openat, [0, 0, 0, 0o4755, 0, 0]), eperm);
        assert_eq!(
            run(openat, [0, 0, 0o4755, 0o644, 0, 0]),
            libc::SECCOMP_RET_ALLOW
        );
        let fchmod = libc::SYS_fchmod as u32;
        assert_eq!(run(fchmod, [3, 0o6755, 0, 0, 0, 0]), eperm);
        let io_uring = libc::SYS_io_uring_setup as u32;
        let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
        assert_eq!(run(io_uring, [0; 6]), enosys);
        // Anything else, with any arguments, passes.
        let write = libc::SYS_write as u32;
        assert_eq!(
            run(write, [1, 0, 0o4755, 0o4755, 0, 0]),
            libc::SECCOMP_RET_ALLOW
        );
    }
}
