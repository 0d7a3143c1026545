use super::*;

#[test]
fn a_settings_file_planted_in_the_project_stops_the_turn_unless_the_person_opted_in() {
    let root = tempfile::tempdir().unwrap();
    assert!(planted_settings("gemini", root.path(), false).is_ok());
    std::fs::create_dir(root.path().join(".gemini")).unwrap();
    // A dangling symlink counts: gemini would follow it once it points somewhere.
    std::os::unix::fs::symlink("/nowhere", root.path().join(".gemini/settings.json")).unwrap();
    let refused = planted_settings("gemini", root.path(), false).unwrap_err();
    assert!(refused.contains(".gemini/settings.json"), "{refused}");
    assert!(refused.contains("project_settings = true"), "{refused}");
    assert!(planted_settings("gemini", root.path(), true).is_ok());
    // Other runtimes do not read gemini's file.
    assert!(planted_settings("opencode", root.path(), false).is_ok());
}

#[test]
fn the_session_is_told_what_a_per_turn_agent_does_unasked() {
    let mut policy =
        Policy::load("default", None, &crate::policy::PolicyOverrides::default()).unwrap();
    assert_eq!(advisory(&policy, Unasked::of(&policy), "gemini"), None);
    policy.allowed.push("shell".into());
    let said = advisory(&policy, Unasked::of(&policy), "gemini").unwrap();
    assert!(said.contains("commands without asking"), "{said}");
    let bypass = Policy::load("bypass", None, &crate::policy::PolicyOverrides::default()).unwrap();
    let unasked = Unasked::of(&bypass);
    assert!(
        unasked.edits && unasked.shell && unasked.fetch,
        "{unasked:?}"
    );
    let readonly =
        Policy::load("readonly", None, &crate::policy::PolicyOverrides::default()).unwrap();
    let unasked = Unasked::of(&readonly);
    assert!(
        !unasked.edits && !unasked.shell && unasked.no_edits,
        "{unasked:?}"
    );
}
