//! Confinement of what tools can touch.

pub(crate) mod paths;
