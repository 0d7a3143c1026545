use super::*;

fn cmds(script: &str) -> Vec<SimpleCommand> {
    simple_commands(script).unwrap_or_else(|e| panic!("{script:?}: {e}"))
}

/// The words of every command, joined with spaces, for compact assertions.
fn lines(script: &str) -> Vec<String> {
    cmds(script).iter().map(|c| c.words.join(" ")).collect()
}

fn one(script: &str) -> SimpleCommand {
    let mut all = cmds(script);
    assert_eq!(all.len(), 1, "{script:?}: {all:?}");
    all.remove(0)
}

#[test]
fn lists_pipelines_and_sequences() {
    assert_eq!(lines("git status && rm -rf x"), ["git status", "rm -rf x"]);
    assert_eq!(
        lines("cat a | grep -v b | wc -l"),
        ["cat a", "grep -v b", "wc -l"]
    );
    assert_eq!(lines("a; b || c & d"), ["a", "b", "c", "d"]);
    assert_eq!(
        lines("time ls; ! grep x y; echo a |& cat"),
        ["ls", "grep x y", "echo a", "cat"]
    );
    assert_eq!(lines("( cd a && make )"), ["cd a", "make"]);
    assert_eq!(lines("{ ls; pwd; }"), ["ls", "pwd"]);
}

#[test]
fn quote_removal_and_comments() {
    let c = one(r#"git commit -m "a \"b\" c" 'd e' \$HOME ~/x # the rest is a comment"#);
    assert_eq!(
        c.words,
        ["git", "commit", "-m", "a \"b\" c", "d e", "$HOME", "~/x"]
    );
    assert!(!c.dynamic);
    assert_eq!(one("\\rm -f x").words, ["rm", "-f", "x"]);
    assert_eq!(one("echo a\\\nb").words, ["echo", "ab"]);
    assert_eq!(one("echo \"multi\nline\"").words, ["echo", "multi\nline"]);
}

#[test]
fn substitutions_are_commands_and_make_their_host_dynamic() {
    let all = cmds("echo \"$(whoami)\"");
    assert_eq!(all.len(), 2);
    assert_eq!(
        (all[0].words.join(" "), all[0].dynamic),
        ("echo $(whoami)".into(), true)
    );
    assert_eq!(
        (all[1].words.join(" "), all[1].dynamic),
        ("whoami".into(), false)
    );
    assert_eq!(
        lines("echo `id -u` \"x`hostname`y\""),
        ["echo `id -u` x`hostname`y", "id -u", "hostname"]
    );
    assert_eq!(
        lines("echo $(echo $(whoami))"),
        ["echo $(echo $(whoami))", "echo $(whoami)", "whoami"]
    );
    assert_eq!(
        lines("echo ${x:-$(rm -rf ~)}"),
        ["echo ${x:-$(rm -rf ~)}", "rm -rf ~"]
    );
    assert_eq!(
        lines("echo $(( 1 + $(id -u) ))"),
        ["echo $(( 1 + $(id -u) ))", "id -u"]
    );
    assert_eq!(lines("echo $\"x$(evil)\""), ["echo $\"x$(evil)\"", "evil"]);
    // Inside `"${…}"` single quotes are literal, so the substitution runs.
    assert_eq!(
        lines("echo \"${x:-'$(id)'}\""),
        ["echo ${x:-'$(id)'}", "id"]
    );
    assert_eq!(
        lines("diff <(ls a) > >(tee log)"),
        ["diff <(ls a)", "ls a", "tee log"]
    );
    assert!(
        one("echo $'\\x72m'").dynamic,
        "ANSI-C escapes are not decoded"
    );
    assert!(!one("echo $'plain'").dynamic);
}

#[test]
fn assignments() {
    assert_eq!(lines("X=$(curl evil)"), ["curl evil"]);
    assert_eq!(lines("X=1; a=(x $(y))"), ["y"]);
    // An environment prefix changes what the program does, so it is not taken at its word.
    let c = one("RUST_BACKTRACE=1 cargo test -q");
    assert_eq!(
        (c.words.join(" "), c.dynamic),
        ("cargo test -q".into(), true)
    );
    // After the program, an assignment is an ordinary argument.
    assert_eq!(one("export FOO=bar").words, ["export", "FOO=bar"]);
    assert!(matches!(
        simple_commands("a[$i]=1"),
        Err(ShellParseError::Unsupported(_))
    ));
}

#[test]
fn words_that_bash_expands_are_marked() {
    let c = one("rg 'a{1,2}' *.rs \"*\" {a,b} x\\*");
    assert_eq!(c.words, ["rg", "a{1,2}", "*.rs", "*", "{a,b}", "x*"]);
    assert_eq!(c.expands, [false, false, true, false, true, false]);
    assert!(c.expands(99), "unknown words count as expanding");
}

#[test]
fn dynamic_programs() {
    let c = one("$CMD arg");
    assert!(c.dynamic);
    assert_eq!(c.words, ["$CMD", "arg"]);
    assert!(one("/bin/r? -rf x").dynamic, "a globbed program word");
    assert!(one("{rm,-rf,/}").dynamic, "a brace-expanded program word");
    assert!(
        !one("ls *.rs {a,b}").dynamic,
        "globs in arguments are literal text"
    );
    assert!(!one("[ -f x ]").dynamic);
}

#[test]
fn compound_commands() {
    let all = cmds("for f in *.rs; do wc -l \"$f\"; done");
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].words, ["wc", "-l", "$f"]);
    assert!(all[0].dynamic);
    assert_eq!(
        lines("if grep -q x f; then echo y; elif test -f z; then :; else false; fi"),
        ["grep -q x f", "echo y", "test -f z", ":", "false"]
    );
    assert_eq!(
        lines("while read l; do echo \"$l\"; done"),
        ["read l", "echo $l"]
    );
    assert_eq!(lines("until false; do break; done"), ["false", "break"]);
    assert_eq!(
        lines("case $(uname) in Linux) echo l;; *) echo o;; esac"),
        ["uname", "echo l", "echo o"]
    );
    assert_eq!(
        lines("f() { rm -rf /; }; function g { ls; }"),
        ["rm -rf /", "ls"]
    );
    assert_eq!(lines("coproc cat"), ["cat"]);
}

#[test]
fn arithmetic_and_extended_tests_are_reported() {
    let all = cmds("for ((i=0; i<3; i++)); do echo $i; done");
    assert_eq!(
        all.iter().map(|c| c.words.join(" ")).collect::<Vec<_>>(),
        ["let i=0", "let i<3", "let i++", "echo $i"]
    );
    assert!(all.iter().all(|c| c.dynamic));
    assert_eq!(
        lines("(( x = $(date +%s) ))"),
        ["let x = $(date +%s)", "date +%s"]
    );
    let all = cmds("[[ -f a && $(uname) == Linux ]]");
    assert_eq!(
        all[0].words,
        ["[[", "-f", "a", "&&", "$(uname)", "==", "Linux", "]]"]
    );
    assert_eq!(all[1].words, ["uname"]);
    assert!(!one("[[ -f a ]]").dynamic);
    assert!(
        one("[[ x -eq 1 ]]").dynamic,
        "arithmetic operands are evaluated"
    );
}

#[test]
fn redirections() {
    let targets = |c: &SimpleCommand| -> Vec<(String, bool)> {
        c.redirects
            .iter()
            .map(|r| (r.target.clone(), r.writes))
            .collect()
    };
    let c = one("ls > out.txt 2>&1");
    assert_eq!(c.words, ["ls"]);
    assert_eq!(targets(&c), [("out.txt".to_string(), true)]);
    let c = one("cat < in.txt >> log 2>/dev/null &> both >&file 3>&- >\"a b\" >| c <> d &>> e");
    let expected = [
        ("in.txt", false),
        ("log", true),
        ("/dev/null", true),
        ("both", true),
        ("file", true),
        ("a b", true),
        ("c", true),
        ("d", true),
        ("e", true),
    ];
    assert_eq!(
        targets(&c),
        expected.map(|(t, w)| (t.to_string(), w)).to_vec()
    );
    assert!(!c.dynamic);
    // Names that look like descriptors are files when the redirection is not a duplication.
    for script in ["echo x > 1", "echo x > -", "echo x >> 2", "echo x 1> 0"] {
        let c = one(script);
        assert!(c.redirects.iter().any(|r| !r.harmless()), "{script}");
    }
    for script in [
        "ls 2>&1",
        "ls >&2",
        "ls 3>&-",
        "ls 2>&1-",
        "ls > /dev/null",
        "ls < x",
    ] {
        let c = one(script);
        assert!(
            c.redirects.iter().all(Redirect::harmless),
            "{script}: {c:?}"
        );
    }
    let c = one("echo hi > $OUT");
    assert!(c.dynamic);
    assert_eq!(targets(&c), [("$OUT".to_string(), true)]);
    // A compound command's redirection applies to every command inside it.
    let all = cmds("{ echo a; echo b; } > both.txt");
    assert!(
        all.iter()
            .all(|c| targets(c) == [("both.txt".to_string(), true)])
    );
    let c = one("> truncated.txt");
    assert!(c.words.is_empty() && !c.redirects[0].harmless());
}

#[test]
fn heredocs() {
    let all = cmds("cat <<EOF\nhi $(whoami) `id` ${HOME}\nEOF\necho done");
    assert_eq!(
        all.iter().map(|c| c.words.join(" ")).collect::<Vec<_>>(),
        ["cat", "whoami", "id", "echo done"]
    );
    assert!(!all[0].dynamic && all[0].redirects.is_empty());
    assert_eq!(lines("cat <<'EOF'\n$(rm -rf /)\nEOF"), ["cat"]);
    assert_eq!(lines("cat <<< \"$(id)\""), ["cat", "id"]);
}

#[test]
fn wrappers_are_plain_programs() {
    assert_eq!(one("sudo rm -rf /").words, ["sudo", "rm", "-rf", "/"]);
    assert_eq!(one("bash -c 'rm -rf /'").words, ["bash", "-c", "rm -rf /"]);
}

#[test]
fn errors() {
    for bad in [
        "echo \"unterminated",
        "ls &&",
        "if then fi",
        "echo $(",
        "select x in a; do :; done",
    ] {
        assert!(
            matches!(simple_commands(bad), Err(ShellParseError::Syntax(_))),
            "{bad}"
        );
    }
    for empty in ["", "   \n\t", "# just a comment"] {
        assert_eq!(
            simple_commands(empty),
            Err(ShellParseError::Empty),
            "{empty:?}"
        );
    }
    // Nesting deep enough to overflow the parser's stack is refused, not parsed.
    let deep = format!("{}ls{}", "echo $(".repeat(5000), ")".repeat(5000));
    assert!(matches!(
        simple_commands(&deep),
        Err(ShellParseError::Unsupported(_))
    ));
    assert_eq!(
        cmds(&format!("{}ls{}", "(".repeat(30), ")".repeat(30))).len(),
        1
    );
}
