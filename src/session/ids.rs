//! Identifiers and secrets, from the operating system's RNG only.
//!
//! A seeded PRNG (fastrand) is predictable from its seed, and its seed from the time: a JWT
//! secret made that way was recovered from the secret file's mtime in seconds. Everything here
//! that grants something — the JWT secret, permission request ids — comes from `getrandom`.
//! Session ids (8 hex digits, one form on every surface: CLI, server, MCP, ACP) grant nothing
//! on their own: every surface checks the owner; they are random only so they do not collide,
//! and a new one is never one a log in the directory already has.

/// `N` bytes from the operating system's RNG.
///
/// The kernel's RNG does not fail on any Linux corral runs on (getrandom(2) blocks only until
/// the pool is first seeded). If it ever does, nothing secret can be made; going on with a
/// weaker source is exactly the bug this module exists to prevent, so the process stops.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    if let Err(e) = getrandom::fill(&mut bytes) {
        tracing::error!(error = %e, "the operating system's RNG failed; stopping");
        std::process::abort();
    }
    bytes
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// A 256-bit secret as 64 hex digits (the JWT secret file's content).
pub fn secret_hex() -> String {
    hex(&random_bytes::<32>())
}

/// A session's short id: 8 hex digits.
pub fn short_id() -> String {
    hex(&random_bytes::<4>())
}

/// A permission request id: `perm_` and 128 random bits, so answering a request needs its
/// id, not a guess.
pub fn request_id() -> String {
    format!("perm_{}", hex(&random_bytes::<16>()))
}

/// A random (version 4) UUID: 122 random bits.
pub fn uuid_v4() -> String {
    let mut b = random_bytes::<16>();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex = hex(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_their_shapes_and_differ() {
        let id = uuid_v4();
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");
        assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"));
        assert_ne!(id, uuid_v4());
        let secret = secret_hex();
        assert_eq!(secret.len(), 64);
        assert!(secret.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(secret, secret_hex());
        let request = request_id();
        assert_eq!(request.len(), "perm_".len() + 32);
        assert_ne!(request, request_id());
        assert_eq!(short_id().len(), 8);
    }
}
