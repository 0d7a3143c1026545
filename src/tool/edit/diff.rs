//! What an edit did, for the model and the person approving it: a unified diff and the lines
//! of the new text that changed.

use similar::{DiffTag, TextDiff};

/// Lines of context around each change, as `diff -u` and git show.
const CONTEXT: usize = 3;

/// A unified diff of `old` → `new`, headed `a/<path>` → `b/<path>`; a side that does not
/// exist (a file created or deleted) is `/dev/null`.
pub(crate) fn unified(path: &str, old: Option<&str>, new: Option<&str>) -> String {
    // A path is one header line: a newline in it must not start a line of the diff.
    let path = path.replace('\n', "\\n").replace('\r', "\\r");
    let name = |exists: bool, side: &str| {
        if exists {
            format!("{side}/{path}")
        } else {
            "/dev/null".to_owned()
        }
    };
    let (before, after) = (old.unwrap_or(""), new.unwrap_or(""));
    TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(CONTEXT)
        .header(&name(old.is_some(), "a"), &name(new.is_some(), "b"))
        .to_string()
}

/// The changed lines of `new`, 1-based and inclusive, in words: "lines 3-7 changed", "line 3
/// changed", or where lines were only removed, "lines removed before line 3"; `None` when
/// nothing changed.
pub(crate) fn changed_lines(old: &str, new: &str) -> Option<String> {
    let diff = TextDiff::from_lines(old, new);
    let changed = diff.ops().iter().filter(|op| op.tag() != DiffTag::Equal);
    let (mut first, mut last) = (usize::MAX, 0);
    let mut anything = false;
    for op in changed {
        anything = true;
        let range = op.new_range();
        first = first.min(range.start);
        last = last.max(range.end);
    }
    if !anything {
        return None;
    }
    Some(match last.saturating_sub(first) {
        0 => format!("lines removed before line {}", first + 1),
        1 => format!("line {} changed", first + 1),
        _ => format!("lines {}-{} changed", first + 1, last),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diffs_name_both_sides_and_dev_null_for_a_missing_one() {
        let diff = unified("src/a.rs", Some("one\ntwo\n"), Some("one\n2\n"));
        assert!(diff.starts_with("--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1,2 +1,2 @@\n"));
        assert!(diff.contains("-two\n+2\n"), "{diff}");
        let created = unified("n.txt", None, Some("x\n"));
        assert!(
            created.starts_with("--- /dev/null\n+++ b/n.txt\n"),
            "{created}"
        );
        let deleted = unified("n.txt", Some("x\n"), None);
        assert!(
            deleted.starts_with("--- a/n.txt\n+++ /dev/null\n"),
            "{deleted}"
        );
    }

    #[test]
    fn the_changed_range_is_in_new_lines() {
        let old = "a\nb\nc\nd\n";
        let changed = |new: &str| changed_lines(old, new).unwrap();
        assert_eq!(changed("a\nB\nc\nd\n"), "line 2 changed");
        assert_eq!(changed("a\nB\nC\nx\nd\n"), "lines 2-4 changed");
        assert_eq!(changed("A\nb\nc\nD\n"), "lines 1-4 changed");
        assert_eq!(
            changed_lines(old, "a\nd\n").unwrap(),
            "lines removed before line 2"
        );
        assert_eq!(changed_lines(old, old), None);
    }
}
