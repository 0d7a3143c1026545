use serde_json::json;

use super::*;
use crate::tool::ToolRegistry;

fn approver(preset: &str, root: &std::path::Path) -> Approver {
    let policy = Policy::load(preset, None, &Default::default()).unwrap();
    Approver::new(
        policy,
        ToolRegistry::builtin().unwrap(),
        root.to_path_buf(),
        false,
        None,
        Session::create(None).unwrap(),
    )
}

fn write_ask(path: &str, paths: &[&str]) -> ToolAsk {
    ToolAsk {
        tool_call_id: "t1".into(),
        agent_tool: "Write".into(),
        corral_tool: Some("write_file"),
        args: json!({"path": path, "content": "x"}),
        title: format!("Write {path}"),
        kind: "edit",
        raw_input: json!({"file_path": path}),
        paths: paths.iter().map(|p| p.to_string()).collect(),
    }
}

#[tokio::test]
async fn no_preset_lets_an_agent_write_outside_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let cancel = CancellationToken::new();
    let outside = root.join("../x.txt").display().to_string();
    let inside = root.join("x.txt").display().to_string();
    for preset in ["auto", "bypass"] {
        let approver = approver(preset, &root);
        let answer = write_ask(&outside, &[]).decide(&approver, &cancel).await;
        assert!(
            matches!(&answer, Approval::Deny { message } if message.contains("outside the session root")),
            "{preset}: {answer:?}"
        );
        // A second path the call names (a command's cwd, a move's target) counts too.
        let answer = write_ask(&inside, &["/etc"])
            .decide(&approver, &cancel)
            .await;
        assert!(
            matches!(answer, Approval::Deny { .. }),
            "{preset}: {answer:?}"
        );
        let answer = write_ask(&inside, &[]).decide(&approver, &cancel).await;
        assert_eq!(
            answer,
            Approval::Allow {
                by_person: false,
                always: false
            },
            "{preset}"
        );
    }
}
