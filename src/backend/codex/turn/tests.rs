use super::*;

fn events(session: &Session) -> Vec<Value> {
    let mut tap = session.tap(0);
    let mut out = Vec::new();
    while let Ok(event) = tap.try_recv() {
        let value: Value = serde_json::from_str(&event.json).unwrap();
        if value["kind"] != "status" {
            out.push(value);
        }
    }
    out
}

#[test]
fn a_command_is_announced_streamed_and_reported() {
    let session = Session::create(None).unwrap();
    let mut turn = TurnState::new(&session, Path::new("/w"), Usage::default());
    let item = json!({"type": "commandExecution", "id": "c1", "status": "inProgress",
                      "command": "/bin/bash -lc 'false'", "cwd": "/w"});
    assert_eq!(
        turn.notification("item/started", &json!({"item": item})),
        None
    );
    turn.notification(
        "item/commandExecution/outputDelta",
        &json!({"itemId": "c1", "delta": "oops\n"}),
    );
    let mut done = item;
    done["status"] = json!("failed");
    done["exitCode"] = json!(1);
    done["aggregatedOutput"] = json!("oops\n");
    done["durationMs"] = json!(7);
    turn.notification("item/completed", &json!({"item": done}));
    let events = events(&session);
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["tool_use", "tool_output", "tool_result"]);
    assert_eq!(events[0]["data"]["call"]["rawInput"]["command"], "false");
    assert_eq!(events[0]["data"]["call"]["kind"], "execute");
    assert_eq!(events[1]["data"]["text"], "oops\n");
    let result = &events[2]["data"]["result"];
    assert_eq!(result["success"], false);
    assert_eq!(result["error"], "exit code 1\noops\n");
    assert_eq!(result["durationMs"], 7);
}

#[test]
fn a_declined_file_change_says_why() {
    let session = Session::create(None).unwrap();
    let mut turn = TurnState::new(&session, Path::new("/w"), Usage::default());
    let item = json!({"type": "fileChange", "id": "f1", "status": "inProgress",
        "changes": [{"path": "/w/a.txt", "kind": {"type": "add"}, "diff": "hi\n"}]});
    turn.notification("item/started", &json!({"item": item}));
    turn.denials
        .insert("f1".into(), "the user denied this call".into());
    let mut done = item;
    done["status"] = json!("declined");
    turn.notification("item/completed", &json!({"item": done}));
    let events = events(&session);
    assert_eq!(events[0]["data"]["call"]["kind"], "edit");
    assert_eq!(events[0]["data"]["call"]["title"], "edit a.txt");
    assert_eq!(
        events[0]["data"]["call"]["locations"][0]["path"],
        "/w/a.txt"
    );
    assert_eq!(
        events[1]["data"]["result"]["error"],
        "the user denied this call"
    );
    assert_eq!(events[1]["data"]["result"]["tool"], "write_file");
}

#[test]
fn usage_is_the_turns_share_of_the_thread_total() {
    let session = Session::create(None).unwrap();
    let base = Usage {
        input_tokens: 100,
        output_tokens: 10,
        ..Usage::default()
    };
    let mut turn = TurnState::new(&session, Path::new("/w"), base);
    let breakdown = |i: u64, o: u64| {
        json!({"inputTokens": i, "outputTokens": o,
        "cachedInputTokens": 0, "reasoningOutputTokens": 0, "totalTokens": i + o})
    };
    turn.notification(
        "thread/tokenUsage/updated",
        &json!({"tokenUsage": {"total": breakdown(130, 15), "last": breakdown(30, 5),
                               "modelContextWindow": 1000}}),
    );
    assert_eq!(turn.usage.input_tokens, 30);
    assert_eq!(turn.usage.output_tokens, 5);
    assert_eq!(turn.thread_total.input_tokens, 130);
    let events = events(&session);
    assert_eq!(events[0]["data"]["contextTokens"], 35);
    assert_eq!(events[0]["data"]["contextWindow"], 1000);
}

#[test]
fn the_turn_ends_with_its_own_completion() {
    let session = Session::create(None).unwrap();
    let mut turn = TurnState::new(&session, Path::new("/w"), Usage::default());
    turn.turn_id = Some("t2".into());
    let other = json!({"turn": {"id": "t1", "status": "completed"}});
    assert_eq!(turn.notification("turn/completed", &other), None);
    turn.notification(
        "error",
        &json!({"error": {"message": "model said no"}, "willRetry": false}),
    );
    let failed = json!({"turn": {"id": "t2", "status": "failed", "error": null}});
    assert_eq!(
        turn.notification("turn/completed", &failed),
        Some(TurnEnd::Error("model said no".into()))
    );
    let interrupted = json!({"turn": {"id": "t2", "status": "interrupted"}});
    assert_eq!(
        turn.notification("turn/completed", &interrupted),
        Some(TurnEnd::Stop(StopReason::Cancelled))
    );
}

#[test]
fn reasoning_and_messages_become_thoughts_and_text() {
    let session = Session::create(None).unwrap();
    let mut turn = TurnState::new(&session, Path::new("/w"), Usage::default());
    turn.notification(
        "item/reasoning/summaryTextDelta",
        &json!({"itemId": "r1", "delta": "hmm"}),
    );
    turn.notification(
        "item/completed",
        &json!({"item": {"type": "reasoning", "id": "r1", "summary": ["hmm"], "content": []}}),
    );
    turn.notification(
        "item/completed",
        &json!({"item": {"type": "agentMessage", "id": "m1", "text": "done"}}),
    );
    turn.notification("some/new/thing", &json!({}));
    let events = events(&session);
    let shape: Vec<(String, bool)> = events
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap().to_string(),
                e["data"]["delta"] == true,
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            ("thought".to_string(), true),
            ("thought".to_string(), false),
            ("assistant_text".to_string(), false)
        ]
    );
    assert_eq!(turn.text, "done");
}
