use super::*;

#[test]
fn every_embedded_preset_parses() {
    for (name, _) in EMBEDDED {
        let policy = Policy::load(name, None, &PolicyOverrides::default()).unwrap();
        assert!(!policy.description.is_empty(), "{name}");
    }
}

#[test]
fn user_presets_override_and_unknown_names_list_the_known() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("auto.toml"),
        "description = \"mine\"\nauto_approve = \"none\"\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("team.toml"), "description = \"team\"\n").unwrap();
    let auto = Policy::load("auto", Some(dir.path()), &PolicyOverrides::default()).unwrap();
    assert_eq!(auto.description, "mine");
    assert_eq!(auto.auto_approve, None);
    assert!(preset_names(Some(dir.path())).contains(&"team".to_string()));
    let e = Policy::load("nope", Some(dir.path()), &PolicyOverrides::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("team") && e.contains("bypass"), "{e}");
}

#[test]
fn bad_patterns_and_dangerous_auto_approve_are_refused() {
    let e = Policy::parse(
        "x",
        "description = \"d\"\n[[rules]]\ntool = \"shell\"\nallow = [\"a[\"]\n",
        &PolicyOverrides::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("a["), "{e}");
    let overrides = PolicyOverrides {
        auto_approve: Some(Danger::Dangerous),
        ..PolicyOverrides::default()
    };
    assert!(Policy::parse("x", "description = \"d\"\n", &overrides).is_err());
}

#[test]
fn sandbox_keys_parse_and_are_described() {
    let text = "description = \"d\"\nsandbox = \"strict\"\nnetwork = \"off\"\n\
                writable = [\"~/.cache/pip\"]\nhidden = [\"~/vault\"]\n\
                sockets = [\"/run/user/1000/bus\"]\n";
    let policy = Policy::parse("x", text, &PolicyOverrides::default()).unwrap();
    assert_eq!(policy.sandbox, Some(SandboxMode::Strict));
    assert_eq!(policy.network, Some(NetworkMode::Off));
    let shown = policy.describe();
    assert!(shown.contains("sandbox: at least strict"), "{shown}");
    assert!(shown.contains("network: off") && shown.contains("~/.cache/pip"));
    assert_eq!(policy.hidden, ["~/vault"]);
    assert_eq!(policy.sockets, ["/run/user/1000/bus"]);
    assert!(shown.contains("also hidden from tools: ~/vault"), "{shown}");
    assert!(shown.contains("connect to: /run/user/1000/bus"), "{shown}");
    let bad = Policy::parse(
        "x",
        "description = \"d\"\nsandbox = \"lax\"\n",
        &PolicyOverrides::default(),
    );
    assert!(bad.unwrap_err().to_string().contains("lax"));
}

fn verdict_word(v: &crate::policy::Verdict) -> &'static str {
    match v {
        crate::policy::Verdict::Allow { .. } => "allow",
        crate::policy::Verdict::Ask { .. } => "ask",
        crate::policy::Verdict::Deny { .. } => "deny",
    }
}

#[test]
fn notebook_offers_mcp_tools_unasked_and_no_file_or_shell_tool() {
    let policy = Policy::load("notebook", None, &PolicyOverrides::default()).unwrap();
    for tool in [
        "read_file",
        "write_file",
        "edit_file",
        "apply_patch",
        "list_directory",
        "search_files",
        "shell",
        "python",
    ] {
        assert!(!policy.offers(tool), "{tool} offered");
    }
    for tool in ["notes__cell_read", "update_plan", "notify", "screenshot"] {
        assert!(policy.offers(tool), "{tool} not offered");
    }
    let gate = crate::policy::Gate::new(policy);
    let root = Path::new("/work/root");
    let mcp = |args| gate.check("notes__cell_read", Danger::Dangerous, &args, root);
    assert_eq!(verdict_word(&mcp(serde_json::json!({"cell": 3}))), "allow");
    assert_eq!(verdict_word(&mcp(serde_json::json!({}))), "allow");
    let shell = serde_json::json!({"command": "ls"});
    assert_eq!(
        verdict_word(&gate.check("shell", Danger::Dangerous, &shell, root)),
        "deny"
    );
    // The desktop tools ask as in default.
    let url = serde_json::json!({"url": "https://example.org"});
    assert_eq!(
        verdict_word(&gate.check("open_url", Danger::Moderate, &url, root)),
        "ask"
    );
}

#[test]
fn lab_is_default_plus_mcp_tools_and_acp_file_callbacks_unasked() {
    let lab =
        crate::policy::Gate::new(Policy::load("lab", None, &PolicyOverrides::default()).unwrap());
    let default = crate::policy::Gate::new(
        Policy::load("default", None, &PolicyOverrides::default()).unwrap(),
    );
    let root = Path::new("/work/root");
    let write = serde_json::json!({"path": "notes.md", "content": "x"});
    let git = serde_json::json!({"path": ".git/config", "content": "x"});
    let mcp = serde_json::json!({"path": "/etc/passwd"});
    let word = |gate: &crate::policy::Gate, tool: &str, args: &serde_json::Value, fs: bool| {
        let danger = if tool == "write_file" {
            Danger::Moderate
        } else {
            Danger::Dangerous
        };
        verdict_word(&if fs {
            gate.check_acp_fs(tool, danger, args, root)
        } else {
            gate.check(tool, danger, args, root)
        })
    };
    // corral's own write_file still asks; the same write as an ACP agent's fs/* call runs.
    assert_eq!(word(&lab, "write_file", &write, false), "ask");
    assert_eq!(word(&lab, "write_file", &write, true), "allow");
    assert_eq!(word(&default, "write_file", &write, true), "ask");
    // The .git rule holds for fs/* too.
    assert_eq!(word(&lab, "write_file", &git, true), "deny");
    assert_eq!(word(&lab, "srv__fetch", &mcp, false), "allow");
    assert_eq!(word(&default, "srv__fetch", &mcp, false), "ask");
    assert!(lab.offers("shell") && lab.offers("python"));
    let shown = lab.policy().describe();
    assert!(shown.contains("fs/* reads and writes"), "{shown}");
    assert!(shown.contains("recursion guard: on"), "{shown}");
}

#[test]
fn a_preset_of_ones_own_needs_no_description() {
    let policy = Policy::parse(
        "mine",
        "auto_approve = \"safe\"\n",
        &PolicyOverrides::default(),
    )
    .unwrap();
    assert_eq!(policy.description, "(no description)");
}
