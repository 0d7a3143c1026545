//! Confinement of what tools can touch.

pub(crate) mod env;
pub(crate) mod paths;
pub(crate) mod process;
