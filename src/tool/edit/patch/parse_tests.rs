use super::*;

fn lines(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn every_kind_of_file_change_parses() {
    let patch = "*** Begin Patch\n\
                 *** Add File: docs/new.md\n\
                 +# New\n\
                 +\n\
                 *** Delete File: old.txt\n\
                 *** Update File: src/lib.rs\n\
                 *** Move to: src/core.rs\n\
                 @@ fn main() {\n\
                 \x20    let a = 1;\n\
                 -    let b = 2;\n\
                 +    let b = 3;\n\
                 @@\n\
                 -tail\n\
                 +end\n\
                 *** End of File\n\
                 *** End Patch\n";
    let parsed = parse(patch).unwrap();
    assert_eq!(
        parsed.ops,
        vec![
            Op::Add {
                path: "docs/new.md".into(),
                content: "# New\n\n".into()
            },
            Op::Delete {
                path: "old.txt".into()
            },
            Op::Update {
                path: "src/lib.rs".into(),
                move_to: Some("src/core.rs".into()),
                hunks: vec![
                    Hunk {
                        anchor: Some("fn main() {".into()),
                        old: lines(&["    let a = 1;", "    let b = 2;"]),
                        new: lines(&["    let a = 1;", "    let b = 3;"]),
                        at_end: false,
                    },
                    Hunk {
                        anchor: None,
                        old: lines(&["tail"]),
                        new: lines(&["end"]),
                        at_end: true,
                    },
                ],
            },
        ]
    );
    assert_eq!(
        parsed.paths(),
        ["docs/new.md", "old.txt", "src/lib.rs", "src/core.rs"]
    );
}

#[test]
fn lenient_shapes_models_write_parse_too() {
    // Padded markers, CRLF, no @@ on the first hunk, blank lines between hunks, an empty
    // context line, a unified-diff header, inside a heredoc.
    let patch = "<<'EOF'\r\n  *** Begin Patch  \r\n*** Update File:  a.txt \r\n one\r\n-two\r\n\r\n\
                 @@ -4,2 +4,2 @@\r\n four\r\n\r\n-six\r\n+6\r\n*** End Patch \r\nEOF\r\n";
    let parsed = parse(patch).unwrap();
    let Op::Update { path, hunks, .. } = &parsed.ops[0] else {
        panic!("{parsed:?}")
    };
    assert_eq!(path, "a.txt");
    assert_eq!(hunks.len(), 2, "{hunks:?}");
    assert_eq!(
        (hunks[0].anchor.as_deref(), hunks[0].old.clone()),
        (None, lines(&["one", "two"]))
    );
    assert_eq!(hunks[1].anchor, None);
    assert_eq!(hunks[1].old, lines(&["four", "", "six"]));
    assert_eq!(hunks[1].new, lines(&["four", "", "6"]));
    let fenced = "```diff\n*** Begin Patch\n*** Delete File: x\n*** End Patch\n```";
    assert_eq!(parse(fenced).unwrap().paths(), ["x"]);
    // A pure rename needs no hunk.
    let rename = "*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** End Patch";
    assert_eq!(parse(rename).unwrap().paths(), ["a", "b"]);
    let anchored = "*** Begin Patch\n*** Update File: a\n@@ class A\n+x\n*** End Patch";
    let Op::Update { hunks, .. } = &parse(anchored).unwrap().ops[0] else {
        panic!()
    };
    assert_eq!(hunks[0].anchor.as_deref(), Some("class A"));
}

#[test]
fn malformed_patches_say_what_and_where() {
    let cases = [
        ("*** Add File: a\n+x\n*** End Patch", "must start with"),
        ("*** Begin Patch\n*** Add File: a\n+x", "must end with"),
        ("*** Begin Patch\n*** End Patch", "changes no file"),
        (
            "*** Begin Patch\nrm -rf /\n*** End Patch",
            "line 2: \"rm -rf /\" is not a file header",
        ),
        (
            "*** Begin Patch\n*** Add File:\n+x\n*** End Patch",
            "line 2: the file header names no path",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n*** End Patch",
            "line 2: the update of a has no hunk",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n@@\n*** End Patch",
            "the hunk has no lines",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n@@\nx\n*** End Patch",
            "line 4: \"x\" is not a hunk line",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n-a\nzzz\n*** End Patch",
            "line 4: \"zzz\" follows a hunk",
        ),
    ];
    for (patch, expected) in cases {
        let e = parse(patch).unwrap_err();
        assert!(e.contains(expected), "{patch:?}: {e}");
    }
}
