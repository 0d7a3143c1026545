//! Applying an update's hunks to a file's text, with codex's lenient matching: each hunk's
//! old lines are looked for from where the previous hunk ended (after its `@@` anchor line,
//! if it has one), exactly, then ignoring trailing whitespace, then ignoring whitespace at
//! both ends, then with typographic punctuation taken as ASCII; the first place found in the
//! first pass that finds one is used, as codex does: the hunk's context lines and anchor are
//! what pin it down.

use super::parse::Hunk;

/// `text` with `hunks` applied; Err names the hunk that does not apply. Lines the hunks do not
/// touch keep their own line breaks; added lines get the file's (its first break's); the
/// result ends with a line break, as codex writes it.
pub(crate) fn apply(text: &str, hunks: &[Hunk], path: &str) -> Result<String, String> {
    let newline = match text.find('\n') {
        Some(i) if text[..i].ends_with('\r') => "\r\n",
        _ => "\n",
    };
    // Each line as (what is matched, its break as the file has it).
    let split: Vec<(&str, &str)> = text
        .split_inclusive('\n')
        .map(|line| {
            let bare = line.strip_suffix('\n').unwrap_or(line);
            let bare = bare.strip_suffix('\r').unwrap_or(bare);
            (bare, &line[bare.len()..])
        })
        .collect();
    let lines: Vec<&str> = split.iter().map(|(bare, _)| *bare).collect();
    let mut replacements: Vec<(usize, usize, &[String])> = Vec::new();
    let mut cursor = 0;
    for (i, hunk) in hunks.iter().enumerate() {
        let which = || {
            if hunks.len() == 1 {
                format!("the hunk for {path}")
            } else {
                format!("hunk {} of {} for {path}", i + 1, hunks.len())
            }
        };
        if let Some(anchor) = &hunk.anchor {
            let found = seek(&lines, std::slice::from_ref(anchor), cursor, false);
            let Some(at) = found else {
                return Err(format!(
                    "{}: the line after @@ ({anchor:?}) is not in the file{}",
                    which(),
                    after(cursor)
                ));
            };
            cursor = at + 1;
        }
        if hunk.old.is_empty() {
            // Only added lines: after the anchor, or at the end of the file.
            let at = if hunk.anchor.is_some() && !hunk.at_end {
                cursor
            } else {
                lines.len()
            };
            replacements.push((at, 0, &hunk.new));
            continue;
        }
        let (mut old, mut new) = (hunk.old.as_slice(), hunk.new.as_slice());
        let mut found = seek(&lines, old, cursor, hunk.at_end);
        // A final empty line may stand for the file's last line break.
        if found.is_none() && old.last().is_some_and(String::is_empty) {
            old = &old[..old.len() - 1];
            if new.last().is_some_and(String::is_empty) {
                new = &new[..new.len() - 1];
            }
            found = seek(&lines, old, cursor, hunk.at_end);
        }
        let Some(at) = found else {
            let shown: Vec<&str> = hunk.old.iter().take(4).map(String::as_str).collect();
            return Err(format!(
                "{}: its context and removed lines were not found in the file{} (it starts \
                 {:?}); read the file again and make the ' ' and '-' lines match it",
                which(),
                after(cursor),
                shown.join("\n")
            ));
        };
        replacements.push((at, old.len(), new));
        cursor = at + old.len();
    }
    replacements.sort_by_key(|(at, _, _)| *at);
    let mut out = String::with_capacity(text.len());
    let kept = |from: usize, to: usize, out: &mut String| {
        for (bare, end) in &split[from.min(to)..to] {
            out.push_str(bare);
            out.push_str(if end.is_empty() { newline } else { end });
        }
    };
    let mut next = 0;
    for (at, removed, added) in replacements {
        kept(next, at, &mut out);
        for line in added {
            out.push_str(line);
            out.push_str(newline);
        }
        next = next.max(at + removed);
    }
    kept(next, split.len(), &mut out);
    Ok(out)
}

fn after(cursor: usize) -> String {
    if cursor == 0 {
        String::new()
    } else {
        format!(" after line {cursor}")
    }
}

/// The first index at or after `from` where `pattern` is, pass by pass; `at_end`: the place
/// ending at the file's end is tried first.
fn seek(lines: &[&str], pattern: &[String], from: usize, at_end: bool) -> Option<usize> {
    if pattern.len() > lines.len() {
        return None;
    }
    let last = lines.len() - pattern.len();
    let passes: [fn(&str) -> String; 4] = [
        |s| s.to_owned(),
        |s| s.trim_end().to_owned(),
        |s| s.trim().to_owned(),
        |s| super::super::matching::plain(s.trim()),
    ];
    let fits = |at: usize, norm: &fn(&str) -> String| {
        pattern
            .iter()
            .zip(&lines[at..])
            .all(|(want, have)| norm(have) == norm(want))
    };
    passes.iter().find_map(|norm| {
        if at_end && last >= from && fits(last, norm) {
            return Some(last);
        }
        (from..=last).find(|&at| fits(at, norm))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hunk(anchor: Option<&str>, old: &[&str], new: &[&str]) -> Hunk {
        Hunk {
            anchor: anchor.map(str::to_owned),
            old: old.iter().map(|s| s.to_string()).collect(),
            new: new.iter().map(|s| s.to_string()).collect(),
            at_end: false,
        }
    }

    #[test]
    fn hunks_apply_in_order_after_their_anchor() {
        let text = "fn a() {\n    x();\n}\nfn b() {\n    x();\n}\n";
        let change = hunk(Some("fn b() {"), &["    x();"], &["    y();"]);
        let out = apply(text, &[change], "f.rs").unwrap();
        assert_eq!(out, "fn a() {\n    x();\n}\nfn b() {\n    y();\n}\n");
        // Without the anchor the first place is taken, as codex does.
        let change = hunk(None, &["    x();"], &["    y();"]);
        let out = apply(text, &[change.clone(), change], "f.rs").unwrap();
        assert_eq!(out, "fn a() {\n    y();\n}\nfn b() {\n    y();\n}\n");
    }

    #[test]
    fn context_matches_ever_more_leniently() {
        let text = "a = 1  \n    b = \u{201c}2\u{201d}\nc\n";
        for (old, new) in [
            (&["a = 1  "][..], &["a = 9"][..]),
            (&["a = 1"], &["a = 9"]),
            (&["b = \u{201c}2\u{201d}"], &["b = 3"]),
            (&["  b = \"2\"  "], &["b = 3"]),
        ] {
            let out = apply(text, &[hunk(None, old, new)], "t").unwrap();
            assert_ne!(out, text, "{old:?}");
        }
        let out = apply(text, &[hunk(None, &["  b = \"2\""], &["b = 3"])], "t").unwrap();
        assert_eq!(out, "a = 1  \nb = 3\nc\n");
    }

    #[test]
    fn additions_go_after_the_anchor_or_at_the_end_and_crlf_stays() {
        let text = "one\r\ntwo\r\n";
        let out = apply(text, &[hunk(Some("one"), &[], &["1.5"])], "t").unwrap();
        assert_eq!(out, "one\r\n1.5\r\ntwo\r\n");
        let out = apply("one\ntwo", &[hunk(None, &[], &["three"])], "t").unwrap();
        assert_eq!(out, "one\ntwo\nthree\n");
        // Lines no hunk touches keep their own breaks, even odd ones.
        let mixed = "a\r\nb\nc\r\n";
        let out = apply(mixed, &[hunk(None, &["b"], &["B"])], "t").unwrap();
        assert_eq!(out, "a\r\nB\r\nc\r\n");
        let out = apply("a\nb\r\nc\n", &[hunk(None, &["c"], &["C"])], "t").unwrap();
        assert_eq!(out, "a\nb\r\nC\n");
        // A last empty context line standing for the final line break.
        let out = apply("x\ny\n", &[hunk(None, &["y", ""], &["z", ""])], "t").unwrap();
        assert_eq!(out, "x\nz\n");
        let mut eof = hunk(None, &["x"], &["X"]);
        eof.at_end = true;
        assert_eq!(apply("x\ny\nx\n", &[eof], "t").unwrap(), "x\ny\nX\n");
    }

    #[test]
    fn a_hunk_that_does_not_apply_is_named() {
        let text = "a\nb\n";
        let two = [hunk(None, &["a"], &["A"]), hunk(None, &["zzz"], &["y"])];
        let e = apply(text, &two, "f.txt").unwrap_err();
        assert!(e.starts_with("hunk 2 of 2 for f.txt: its context and removed lines were not found in the file after line 1"), "{e}");
        let e = apply(text, &[hunk(Some("fn nope"), &["a"], &["A"])], "f.txt").unwrap_err();
        assert!(
            e.contains("the line after @@ (\"fn nope\") is not in the file"),
            "{e}"
        );
        // Hunks are searched from where the last one ended: a place above it is not found.
        let back = [hunk(None, &["b"], &["B"]), hunk(None, &["a"], &["A"])];
        assert!(apply(text, &back, "f.txt").is_err());
    }
}
