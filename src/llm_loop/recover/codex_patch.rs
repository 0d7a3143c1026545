//! A reply that is only a codex patch (`*** Begin Patch` … `*** End Patch`, the format codex
//! models are trained to write) is an `apply_patch` call with the patch as its `patch`. Only
//! the whole reply counts: a patch shown in prose, in a fence, or beside another patch is an
//! example, not an edit.

use serde_json::json;

use super::{Catalog, Extracted, TextToolCall};

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const TOOL: &str = "apply_patch";

pub(super) fn extract(text: &str, catalog: &dyn Catalog) -> Option<Extracted> {
    let patch = text.trim();
    let lines: Vec<&str> = patch.lines().map(str::trim_end).collect();
    let (first, rest) = lines.split_first()?;
    let (last, inner) = rest.split_last()?;
    if *first != BEGIN || *last != END || inner.iter().any(|l| *l == BEGIN || *l == END) {
        return None;
    }
    let arguments = catalog.accept(TOOL, json!({ "patch": patch }))?;
    Some(Extracted {
        text: String::new(),
        calls: vec![TextToolCall {
            name: TOOL.to_owned(),
            arguments,
        }],
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a clear test failure
mod tests {
    use serde_json::Value;

    use super::super::testing::tools;
    use super::*;

    const PATCH: &str = "*** Begin Patch\n*** Update File: a.txt\n@@\n-old\n+new\n*** End Patch";

    #[test]
    fn takes_a_reply_that_is_only_a_patch() {
        for text in [PATCH.to_owned(), format!("\n\n  {PATCH}  \n\n")] {
            let got = extract(&text, &tools()).unwrap();
            assert_eq!(got.text, "");
            assert_eq!(got.calls.len(), 1);
            assert_eq!(got.calls[0].name, "apply_patch");
            assert_eq!(got.calls[0].arguments, json!({ "patch": PATCH }));
        }
    }

    #[test]
    fn refuses_a_patch_with_anything_else() {
        for text in [
            format!("Here is the patch:\n{PATCH}"),
            format!("{PATCH}\nApply it with care."),
            format!("```\n{PATCH}\n```"),
            format!("> {}", PATCH.replace('\n', "\n> ")),
            format!("{PATCH}\n{PATCH}"),
            "*** Begin Patch\n*** Add File: a\n+x\n".to_owned(),
            "*** Begin Patch".to_owned(),
            format!("`{PATCH}`"),
        ] {
            assert_eq!(extract(&text, &tools()), None, "{text}");
        }
    }

    #[test]
    fn needs_an_apply_patch_tool() {
        struct NoPatchTool;
        impl Catalog for NoPatchTool {
            fn parameters(&self, _: &str) -> Option<&Value> {
                None
            }
        }
        assert_eq!(extract(PATCH, &NoPatchTool), None);
    }
}
