use super::*;
use crate::event::{Envelope, Payload};

/// Envelopes as corral wrote them before the payload was typed (captured from the old code):
/// a write with its diff, a shell command with a scoped "always", an agent's own tool (no
/// preview), and resolutions with and without a note.
const WRITTEN: [&str; 6] = [
    r#"{"seq":5,"ts":"2026-12-01T18:40:48.361Z","agent":"9cc9f2c7","turn":1,"kind":"permission","data":{"toolCall":{"toolCallId":"t1","title":"Write a.txt","kind":"edit","status":"pending","rawInput":{"file_path":"a.txt"}},"tool":"write_file","agentTool":"Write","danger":"moderate","reason":"write_file is a moderate tool","always":{"offered":true,"scope":"always: write_file on any path in the session root, for this session"},"options":[{"optionId":"allow","name":"Allow once","kind":"allow_once"},{"optionId":"allow_all","name":"Allow always","kind":"allow_always"},{"optionId":"deny","name":"Deny","kind":"reject_once"},{"optionId":"disable","name":"Disable this tool","kind":"reject_always"},{"optionId":"forbid_all","name":"No more tools this turn","kind":"reject_always"},{"optionId":"cancel","name":"Cancel the turn","kind":"reject_once"}],"path":"a.txt","exists":true,"bytes":1,"diff":"--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1 @@\n-one\n-two\n+x\n\\ No newline at end of file\n","requestId":"perm_74957d52763f71797eeb31feb804e5c5"}}"#,
    r#"{"seq":6,"ts":"2026-12-01T18:40:48.363Z","agent":"9cc9f2c7","turn":1,"kind":"permission","data":{"requestId":"perm_74957d52763f71797eeb31feb804e5c5","resolved":true,"decision":"allow"}}"#,
    r#"{"seq":9,"ts":"2026-12-01T18:40:48.363Z","agent":"9cc9f2c7","turn":1,"kind":"permission","data":{"toolCall":{"toolCallId":"t2","title":"git status","kind":"execute","status":"pending","rawInput":{"command":"git status"}},"tool":"shell","agentTool":"Bash","danger":"dangerous","reason":"needs approval: `git status` (no rule allows it)","always":{"offered":true,"scope":"always: `git status` with any arguments, run as /usr/local/bin/git, for this session"},"options":[{"optionId":"allow","name":"Allow once","kind":"allow_once"},{"optionId":"allow_all","name":"Allow always","kind":"allow_always"},{"optionId":"deny","name":"Deny","kind":"reject_once"},{"optionId":"disable","name":"Disable this tool","kind":"reject_always"},{"optionId":"forbid_all","name":"No more tools this turn","kind":"reject_always"},{"optionId":"cancel","name":"Cancel the turn","kind":"reject_once"}],"command":"git status","requestId":"perm_6ceb6b0eda678a997536167f065bad6a"}}"#,
    r#"{"seq":10,"ts":"2026-12-01T18:40:48.363Z","agent":"9cc9f2c7","turn":1,"kind":"permission","data":{"requestId":"perm_6ceb6b0eda678a997536167f065bad6a","resolved":true,"decision":"allow_all","note":"`git status` commands allowed for this session"}}"#,
    r#"{"seq":13,"ts":"2026-12-01T18:40:48.364Z","agent":"9cc9f2c7","turn":1,"kind":"permission","data":{"toolCall":{"toolCallId":"t3","title":"weird","kind":"other","status":"pending","rawInput":{"x":1}},"tool":"Weird","agentTool":"Weird","danger":"dangerous","reason":"Weird is the agent's own tool; corral has no rule for it","always":{"offered":true,"scope":"always: Weird with any arguments, for this session"},"options":[{"optionId":"allow","name":"Allow once","kind":"allow_once"},{"optionId":"allow_all","name":"Allow always","kind":"allow_always"},{"optionId":"deny","name":"Deny","kind":"reject_once"},{"optionId":"disable","name":"Disable this tool","kind":"reject_always"},{"optionId":"forbid_all","name":"No more tools this turn","kind":"reject_always"},{"optionId":"cancel","name":"Cancel the turn","kind":"reject_once"}],"requestId":"perm_7082b6f04d58b84d675cb78eb55eb080"}}"#,
    r#"{"seq":14,"ts":"2026-12-01T18:40:48.364Z","agent":"9cc9f2c7","turn":1,"kind":"permission","data":{"requestId":"perm_7082b6f04d58b84d675cb78eb55eb080","resolved":true,"decision":"deny"}}"#,
];

/// Requests of corral's own loop (no `agentTool`), one of a write the preview cannot diff, and
/// one from before requests said what "always" covers.
const DATA: [&str; 3] = [
    r#"{"toolCall":{"toolCallId":"c1","title":"Run a shell command","kind":"execute","status":"pending","rawInput":{"command":"rm -rf x"}},"tool":"shell","danger":"dangerous","reason":"shell is a dangerous tool","always":{"offered":false,"scope":"always is not offered: rm can delete anything"},"options":[{"optionId":"allow","name":"Allow once","kind":"allow_once"},{"optionId":"deny","name":"Deny","kind":"reject_once"}],"command":"rm -rf x","requestId":"perm_1"}"#,
    r#"{"toolCall":{"toolCallId":"c2","title":"Write a file","kind":"edit","status":"pending","rawInput":{"path":"../x","content":"y"}},"tool":"write_file","danger":"moderate","reason":"write_file is a moderate tool","always":{"offered":true,"scope":"always: write_file"},"options":[],"path":"../x","note":"the path is outside the session root","requestId":"perm_2"}"#,
    r#"{"toolCall":{"toolCallId":"c3","title":"Run Python code","kind":"execute","status":"pending","rawInput":{"code":"1"}},"tool":"python","danger":"dangerous","reason":"python is a dangerous tool","options":[],"code":"1","requestId":"perm_3"}"#,
];

#[test]
fn permission_envelopes_read_and_write_back_byte_for_byte() {
    for line in WRITTEN {
        let envelope: Envelope = serde_json::from_str(line).unwrap();
        assert!(matches!(envelope.payload, Payload::Permission(_)), "{line}");
        assert_eq!(serde_json::to_string(&envelope).unwrap(), line);
    }
    for data in DATA {
        let permission: PermissionData = serde_json::from_str(data).unwrap();
        assert!(matches!(permission, PermissionData::Request(_)), "{data}");
        assert_eq!(serde_json::to_string(&permission).unwrap(), data);
    }
}

#[test]
fn requests_and_resolutions_are_told_apart_by_their_fields() {
    let read = |line: &str| match serde_json::from_str::<Envelope>(line).unwrap().payload {
        Payload::Permission(permission) => permission,
        other => panic!("{other:?}"),
    };
    let PermissionData::Request(write) = read(WRITTEN[0]) else {
        panic!("a request");
    };
    assert_eq!(write.request_id, "perm_74957d52763f71797eeb31feb804e5c5");
    assert_eq!(write.agent_tool.as_deref(), Some("Write"));
    assert_eq!(write.preview.exists, Some(true));
    assert!(write.preview.diff.as_deref().unwrap().contains("-two"));
    assert!(write.always_offered());
    let PermissionData::Resolution(granted) = read(WRITTEN[3]) else {
        panic!("a resolution");
    };
    assert_eq!(granted.decision, "allow_all");
    assert_eq!(
        granted.note.as_deref(),
        Some("`git status` commands allowed for this session")
    );
    let old: PermissionData = serde_json::from_str(DATA[2]).unwrap();
    assert!(matches!(&old, PermissionData::Request(r) if r.always.is_none() && r.always_offered()));
    // "resolved": false is nothing corral writes: neither a request nor a resolution.
    assert!(
        serde_json::from_str::<PermissionData>(
            r#"{"requestId":"perm_1","resolved":false,"decision":"allow"}"#
        )
        .is_err()
    );
}

#[test]
fn a_resolution_is_written_as_before() {
    let resolution = PermissionResolution::new("perm_9", "cancel", Some("gone".into()));
    assert_eq!(
        serde_json::to_string(&PermissionData::Resolution(resolution)).unwrap(),
        r#"{"requestId":"perm_9","resolved":true,"decision":"cancel","note":"gone"}"#
    );
}
