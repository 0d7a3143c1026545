use super::*;
use crate::policy::shell::simple_commands;

fn specs(toml_text: &str) -> BTreeMap<String, CommandSpec> {
    let files: BTreeMap<String, CommandFile> = toml::from_str(toml_text).unwrap();
    files
        .into_iter()
        .map(|(name, file)| {
            let spec = CommandSpec::compile(&name, file).unwrap();
            (name, spec)
        })
        .collect()
}

fn verdict(specs: &BTreeMap<String, CommandSpec>, script: &str) -> Result<(), String> {
    let cmds = simple_commands(script).unwrap();
    let root = Path::new("/nonexistent/root");
    cmds.iter().try_for_each(|c| {
        check(
            specs,
            c,
            Dirs::at_root(root),
            Some(OsStr::new("/usr/bin:/bin")),
        )
    })
}

#[test]
fn options_are_read_like_getopt() {
    let s = specs(
        r#"
        [head]
        flags = ["-q", "--quiet"]
        values = ["-n", "--lines"]
        numbers = true
        "#,
    );
    for ok in [
        "head",
        "head -q x",
        "head -qn5 x",
        "head -n 5 x",
        "head --lines=5 x",
        "head --lines 5",
        "head -5 x",
        "head -- -x",
    ] {
        assert_eq!(verdict(&s, ok), Ok(()), "{ok}");
    }
    for (bad, why) in [
        ("head -c 5 x", "`head -c` is not an option known to be safe"),
        (
            "head --lin=5",
            "`head --lin` is not an option known to be safe",
        ),
        (
            "head --quiet=1",
            "`head --quiet` is not an option known to be safe",
        ),
        ("head -n", "`head -n` lacks its value"),
        (
            "head -n -c",
            "`head -n -c`: a value that looks like an option",
        ),
        ("head -qz", "`head -z` is not an option known to be safe"),
        ("head ../x", "../x leads outside the session root"),
        ("head -n../x", "../x leads outside the session root"),
        (
            "./head x",
            "`./head` is not a program name the preset lists",
        ),
        ("tail x", "tail is not a read-only command the preset lists"),
        ("head x > y", "it writes to \"y\""),
    ] {
        assert_eq!(verdict(&s, bad), Err(why.to_string()), "{bad}");
    }
}

#[test]
fn operand_kinds_and_subcommands() {
    let s = specs(
        r#"
        [echo]
        operands = "any"
        [date]
        operands = ["+*"]
        [uname]
        operands = "none"
        [which]
        operands = "text"
        "#,
    );
    let s2 = specs("[git]\nsubcommands = true\n[\"git status\"]\nflags = [\"-s\"]\n");
    assert_eq!(verdict(&s2, "git status -s"), Ok(()));
    assert!(verdict(&s2, "git log").is_err());
    assert!(verdict(&s2, "git -- status").is_err());
    assert_eq!(verdict(&s, "echo --pre x ../../y"), Ok(()));
    assert_eq!(verdict(&s, "date +%F"), Ok(()));
    assert!(verdict(&s, "date 01010000").is_err());
    assert!(verdict(&s, "uname x").is_err());
    assert_eq!(verdict(&s, "which ../../x"), Ok(()));
    assert!(verdict(&s, "echo $(id)").is_err(), "dynamic");
}
