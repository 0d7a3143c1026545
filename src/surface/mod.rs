//! Surfaces: the ways a person or program drives sessions.

pub mod run;
mod tty;
