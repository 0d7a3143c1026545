//! `corral policies`: the presets, and what one of them means in effect.

use crate::policy::{Policy, PolicyError, PolicyOverrides, preset_names};

use super::run::user_policy_dir;

/// One line per preset: name and description.
pub fn list_policies() -> String {
    let dir = user_policy_dir();
    let mut out = String::new();
    for name in preset_names(dir.as_deref()) {
        match Policy::load(&name, dir.as_deref(), &PolicyOverrides::default()) {
            Ok(policy) => out.push_str(&format!("{name:<12} {}\n", policy.description)),
            Err(e) => out.push_str(&format!("{name:<12} (invalid: {e})\n")),
        }
    }
    out
}

/// The effective rules of a preset (a name or a path).
pub fn show_policy(spec: &str) -> Result<String, PolicyError> {
    let dir = user_policy_dir();
    Policy::load(spec, dir.as_deref(), &PolicyOverrides::default()).map(|p| p.describe())
}
