use super::*;

fn ok(text: &str, old: &str, new: &str) -> Replaced {
    replace(text, old, new, false).unwrap()
}

fn err(text: &str, old: &str, new: &str) -> String {
    replace(text, old, new, false).unwrap_err()
}

#[test]
fn exact_matches_a_substring_and_wins_over_looser_passes() {
    let text = "let a = 1;\nlet b = 2;\n";
    let done = ok(text, "b = 2", "b = 3");
    assert_eq!(done.text, "let a = 1;\nlet b = 3;\n");
    assert_eq!(
        (done.count, done.pass, done.unnumbered),
        (1, Pass::Exact, false)
    );
    // Exactly one place has the trailing spaces; ignoring them there would be two.
    let text = "x  \nx\n";
    let done = ok(text, "x  \n", "y\n");
    assert_eq!((done.text.as_str(), done.pass), ("y\nx\n", Pass::Exact));
}

#[test]
fn several_exact_places_are_an_error_naming_their_lines() {
    let text = "fn a() {\n    go();\n}\nfn b() {\n    go();\n}\n";
    let e = err(text, "    go();\n", "    stop();\n");
    assert!(
        e.starts_with("old_text matches 2 places exactly (starting at lines 2, 5)"),
        "{e}"
    );
    assert!(e.contains("   1│ fn a() {\n   2│     go();\n"), "{e}");
    assert!(e.contains("   4│ fn b() {\n   5│     go();\n"), "{e}");
    assert!(e.contains("replace_all"), "{e}");
    // Overlapping occurrences count too.
    assert!(err("aaa", "aa", "b").contains("matches 2 places"));
    // replace_all changes each.
    let all = replace(text, "go()", "stop()", true).unwrap();
    assert_eq!(all.count, 2);
    assert_eq!(all.text.matches("stop();").count(), 2);
}

#[test]
fn line_endings_follow_the_file() {
    let text = "one\r\ntwo\r\nthree\r\n";
    let done = ok(text, "one\ntwo\n", "1\n2\n");
    assert_eq!(done.text, "1\r\n2\r\nthree\r\n");
    assert_eq!(done.pass, Pass::LineEndings);
    // new_text takes the file's line endings whichever pass matched.
    let done = ok(text, "three", "3\n3b");
    assert_eq!(done.text, "one\r\ntwo\r\n3\r\n3b\r\n");
    let lf = ok("a\nb\n", "a\r\nb\r\n", "c\r\n");
    assert_eq!((lf.text.as_str(), lf.pass), ("c\n", Pass::LineEndings));
}

#[test]
fn trailing_whitespace_is_ignored_line_by_line() {
    let text = "if x {   \n    y();\t\n}\nrest\n";
    let done = ok(text, "if x {\n    y();\n}\n", "if x {\n    z();\n}\n");
    assert_eq!(done.text, "if x {\n    z();\n}\nrest\n");
    assert_eq!(done.pass, Pass::TrailingWhitespace);
    // Without a final break the last line's own break stays.
    let done = ok(text, "    y();  ", "    w();");
    assert_eq!(done.text, "if x {   \n    w();\n}\nrest\n");
    // Two places alike but for trailing whitespace: an error naming the pass.
    let e = err("a \nb\na\t\nb\n", "a\nb\n", "c\n");
    assert!(
        e.starts_with(
            "old_text matches 2 places ignoring trailing whitespace (starting at lines 1, 3)"
        ),
        "{e}"
    );
}

#[test]
fn a_uniform_indentation_shift_is_matched_and_new_text_reindented() {
    let text = "impl A {\n        fn f() {\n            g();\n        }\n}\n";
    let old = "fn f() {\n    g();\n}\n";
    let new = "fn f() {\n    h();\n\n    i();\n}\n";
    let done = ok(text, old, new);
    assert_eq!(
        done.text,
        "impl A {\n        fn f() {\n            h();\n\n            i();\n        }\n}\n"
    );
    assert_eq!(done.pass, Pass::Indentation);
    // Less indented in the file than in old_text: new_text loses the same amount.
    let text = "fn f() {\n  g();\n}\n";
    let done = ok(
        text,
        "    fn f() {\n      g();\n    }\n",
        "    fn f() {\n      k();\n    }\n",
    );
    assert_eq!(done.text, "fn f() {\n  k();\n}\n");
    // A shift that differs from line to line is no match.
    let e = err("  a\n      b\n", "a\nb\n", "c\n");
    assert!(e.starts_with("old_text was not found"), "{e}");
}

#[test]
fn line_number_prefixes_copied_from_read_file_or_cat_n_are_taken_off() {
    let text = "alpha\nbeta\ngamma\n";
    let done = ok(
        text,
        "   2│ beta\n   3│ gamma\n",
        "   2│ BETA\n   3│ gamma\n",
    );
    assert_eq!(done.text, "alpha\nBETA\ngamma\n");
    assert_eq!((done.pass, done.unnumbered), (Pass::Exact, true));
    let done = ok(text, "     2\tbeta\n", "BETA\n");
    assert_eq!(
        (done.text.as_str(), done.unnumbered),
        ("alpha\nBETA\ngamma\n", true)
    );
    let e = err(text, "   2│ beta\n   3│ gamma\n", "   2│ BETA\nGAMMA\n");
    assert!(e.contains("some lines but not all"), "{e}");
    // Prefixes that strip to new_text itself would change nothing.
    assert!(err(text, "   2│ beta", "beta").contains("nothing would change"));
}

#[test]
fn typographic_quotes_and_dashes_match_plain_ones() {
    let text = "say(\u{201c}hi\u{201d}); // it\u{2019}s \u{2014} fine\n";
    let done = ok(text, "say(\"hi\"); // it's - fine", "say(\"bye\");");
    assert_eq!(done.text, "say(\"bye\");\n");
    assert_eq!(done.pass, Pass::Typography);
}

#[test]
fn nothing_found_names_the_closest_lines() {
    let text = "fn main() {\n    println!(\"hello\");\n}\n";
    let e = err(text, "    println!(\"helo\");\n", "x");
    assert!(
        e.starts_with("old_text was not found (compared exactly"),
        "{e}"
    );
    assert!(e.contains("most like its first line are at 2:\n"), "{e}");
    assert!(e.contains("   2│     println!(\"hello\");\n"), "{e}");
    let e = err(text, "completely different", "x");
    assert!(e.contains("Read the file again"), "{e}");
}

#[test]
fn empty_or_unchanged_old_text_is_refused() {
    assert!(err("a", "", "b").contains("old_text is empty"));
    assert!(err("a", "a", "a").contains("nothing would change"));
}

#[test]
fn a_final_break_in_old_text_on_a_last_line_without_one_adds_none() {
    let done = ok("a\nb  ", "b\n", "c\n");
    assert_eq!(done.text, "a\nc");
}
