//! Desktop actions at the gate: rules per window and per key, and what "always" covers.

use serde_json::json;

use super::*;
use crate::event::DesktopPreview;
use crate::policy::preset::PolicyOverrides;

fn root() -> &'static Path {
    Path::new("/work/root")
}

/// A preset file with the given rules for `computer`, on top of the default's settings.
fn gate_with_rules(rules: &str) -> (Gate, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("desk.toml");
    std::fs::write(
        &path,
        format!(
            "description = \"desk\"\nauto_approve = \"safe\"\noffer = \"all\"\n\
             always_ask = [\"computer\"]\n\n[[rules]]\ntool = \"computer\"\n{rules}\n"
        ),
    )
    .unwrap();
    let policy = Policy::load(path.to_str().unwrap(), None, &PolicyOverrides::default()).unwrap();
    (Gate::new(policy), dir)
}

/// The target a `computer` call in `app`'s window would have (as `computer::target` builds
/// it).
fn target(action: &str, app: &str, title: &str, extra: &[&str], grant: &str) -> CallTarget {
    let mut subjects = vec![
        format!("action:{action}"),
        format!("window:{app}"),
        format!("title:{title}"),
    ];
    subjects.extend(extra.iter().map(|s| (*s).to_string()));
    CallTarget {
        subjects,
        grant: grant.into(),
        always: if action == "type" {
            Ok(format!("typing exactly this text into {app} windows"))
        } else {
            Ok(format!("{action} in {app} windows"))
        },
        danger: None,
        preview: DesktopPreview::default(),
    }
}

fn judge(g: &Gate, t: &CallTarget) -> Verdict {
    g.check_target("computer", Danger::Dangerous, &json!({}), root(), Some(t))
}

#[test]
fn an_allow_rule_for_a_window_lets_its_clicks_run_and_no_other_windows() {
    let (g, _dir) = gate_with_rules(r#"allow = ["window:Gnome-calculator*"]"#);
    let calc = target("left_click", "Gnome-calculator", "Calculator", &[], "c1");
    assert!(matches!(judge(&g, &calc), Verdict::Allow { .. }));
    // The title is the window's own text: a title naming the calculator is not its class.
    let impostor = target("left_click", "Firefox", "Gnome-calculator", &[], "c2");
    assert!(matches!(judge(&g, &impostor), Verdict::Ask { .. }));
}

#[test]
fn a_deny_rule_on_keys_beats_an_allow_rule_on_the_window() {
    let (g, _dir) = gate_with_rules(
        r#"allow = ["window:XTerm"]
deny = ["key:ctrl+alt+*"]"#,
    );
    let kill = target("key", "XTerm", "bash", &["key:ctrl+alt+delete"], "k1");
    assert!(matches!(judge(&g, &kill), Verdict::Deny { .. }));
    let save = target("key", "XTerm", "bash", &["key:ctrl+s"], "k2");
    assert!(matches!(judge(&g, &save), Verdict::Allow { .. }));
}

#[test]
fn always_covers_the_same_target_only_and_typing_only_the_text_seen() {
    let (mut g, _dir) = gate_with_rules("");
    let typed = target(
        "type",
        "XTerm",
        "bash",
        &["text:ls"],
        "computer:type:XTerm:ls",
    );
    assert!(matches!(judge(&g, &typed), Verdict::Ask { .. }));
    let note = g.record(
        "computer",
        &json!({}),
        root(),
        Some(&typed),
        Decision::AllowAll,
    );
    assert_eq!(
        note.as_deref(),
        Some("always: typing exactly this text into XTerm windows")
    );
    assert!(matches!(judge(&g, &typed), Verdict::Allow { .. }));
    let other = target(
        "type",
        "XTerm",
        "bash",
        &["text:rm -rf ~"],
        "computer:type:XTerm:rm -rf ~",
    );
    assert!(matches!(judge(&g, &other), Verdict::Ask { .. }));
    // Nor does a grant for one target make the tool as a whole allowed.
    let click = target(
        "left_click",
        "XTerm",
        "bash",
        &[],
        "computer:left_click:XTerm",
    );
    assert!(matches!(judge(&g, &click), Verdict::Ask { .. }));
}

#[test]
fn a_computer_call_without_a_target_is_never_granted_as_a_whole() {
    let (mut g, _dir) = gate_with_rules("");
    let always = g.always("computer", &json!({"action": "left_click"}), root(), None);
    assert!(!always.offered, "{}", always.text);
    g.record("computer", &json!({}), root(), None, Decision::AllowAll);
    let click = target(
        "left_click",
        "XTerm",
        "bash",
        &[],
        "computer:left_click:XTerm",
    );
    assert!(matches!(judge(&g, &click), Verdict::Ask { .. }));
}
