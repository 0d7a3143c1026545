//! Surfaces: the ways a person or program drives sessions.

mod approve;
pub mod policies;
pub mod run;
mod tty;
