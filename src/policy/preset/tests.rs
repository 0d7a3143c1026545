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
