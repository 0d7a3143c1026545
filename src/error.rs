//! The crate's one error for a request that could not be carried out, at every layer that
//! opens, starts or runs something for a caller: a backend starting its program, a session
//! being opened, `corral run` reading its prompt. Each kind maps to one exit code on the
//! command line and one HTTP status on the network, in one place (`surface`).

/// Why something asked of corral could not be done: the request (exit 2 on the command line,
/// 4xx on the network), something the caller's limits do not allow (403), a session another
/// process (or this one) runs already (exit 1, 409), or the world (exit 1, 5xx).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    InUse(String),
    #[error("{0}")]
    Runtime(String),
}

/// The request was wrong.
pub(crate) fn usage(e: impl ToString) -> Error {
    Error::Usage(e.to_string())
}

/// The world was: a program missing, a file unwritable, a server unreachable.
pub(crate) fn runtime(e: impl ToString) -> Error {
    Error::Runtime(e.to_string())
}
