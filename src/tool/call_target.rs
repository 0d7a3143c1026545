//! What a call acts on that its arguments alone do not say (see [`CallTarget`]).

use super::Danger;

/// What a call acts on that its arguments alone do not say: for a desktop action, the window
/// under the point and the screen marked where it lands. Rules match its subjects, "allow
/// always" grants its `grant` key, and the person sees its preview.
#[derive(Debug, Clone, PartialEq)]
pub struct CallTarget {
    /// `action:left_click`, `window:Gnome-calculator`, `title:Calculator`, `key:ctrl+s`,
    /// `text:…`: a deny or ask rule matching any of them holds, as does an allow rule.
    pub subjects: Vec<String>,
    /// The key "allow always" grants: only a later call with the same key runs unasked.
    pub grant: String,
    /// What "always" would cover (`Ok`), or why it is not offered (`Err`).
    pub always: Result<String, String>,
    /// The danger of this action where it differs from the tool's (looking, not acting).
    pub danger: Option<Danger>,
    pub preview: crate::event::DesktopPreview,
}
