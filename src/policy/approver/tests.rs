use std::sync::Mutex;

use serde_json::json;

use super::*;

/// A desk that records what it is asked and answers with `answer` (none: never).
#[derive(Default)]
struct Desk {
    answer: Option<Decision>,
    /// Given with `answer`.
    reason: Option<String>,
    opened: Mutex<Vec<PermissionRequest>>,
    resolved: Mutex<Vec<(String, Decision, Option<String>)>>,
    /// Kept open, so an unanswered request stays unanswered.
    waiting: Mutex<Vec<oneshot::Sender<Answer>>>,
}

impl PermissionDesk for Desk {
    fn open(
        &self,
        mut request: PermissionRequest,
    ) -> Result<(String, oneshot::Receiver<Answer>), String> {
        let mut opened = self.opened.lock().unwrap();
        request.request_id = format!("perm_{}", opened.len());
        let id = request.request_id.clone();
        opened.push(request);
        let (reply, receiver) = oneshot::channel();
        match self.answer {
            Some(decision) => reply
                .send(Answer {
                    decision,
                    reason: self.reason.clone(),
                })
                .unwrap(),
            None => self.waiting.lock().unwrap().push(reply),
        }
        Ok((id, receiver))
    }

    fn resolve(&self, request_id: &str, decision: Decision, note: Option<String>) {
        self.resolved
            .lock()
            .unwrap()
            .push((request_id.to_string(), decision, note));
    }
}

fn approver(preset: &str, attended: bool, timeout: Option<Duration>, desk: &Arc<Desk>) -> Approver {
    let root = std::env::temp_dir().canonicalize().unwrap();
    Approver::new(
        Policy::load(preset, None, &Default::default()).unwrap(),
        ToolRegistry::builtin().unwrap(),
        root,
        attended,
        timeout,
        desk.clone(),
    )
}

fn write<'a>(caller: Caller<'a>, args: &'a Value) -> Call<'a> {
    Call {
        caller,
        tool: Some("write_file"),
        args,
        tool_call: PermissionToolCall::pending("c1", "Write", "edit", args.clone()),
        target: None,
    }
}

const AGENT: Caller<'static> = Caller::Agent { tool: "Write" };

#[tokio::test]
async fn allow_always_is_recorded_in_the_gate_and_resolved_with_what_it_grants() {
    let desk = Arc::new(Desk {
        answer: Some(Decision::AllowAll),
        ..Desk::default()
    });
    let approver = approver("default", true, None, &desk);
    let args = json!({"path": "corral-approver-test.txt", "content": "x"});
    let cancel = CancellationToken::new();
    let first = approver.decide(write(Caller::Model, &args), &cancel).await;
    assert_eq!(
        first,
        Approval::Allow {
            by_person: true,
            always: true
        }
    );
    let request = desk.opened.lock().unwrap()[0].clone();
    assert_eq!(request.tool, "write_file");
    assert_eq!(request.agent_tool, None);
    assert_eq!(request.danger, "moderate");
    assert!(request.always_offered());
    assert_eq!(
        request.preview.path.as_deref(),
        Some("corral-approver-test.txt")
    );
    assert_eq!(
        desk.resolved.lock().unwrap()[0],
        (
            "perm_0".to_string(),
            Decision::AllowAll,
            Some("write_file allowed for this session".to_string())
        )
    );
    // The grant holds: the next write runs without a question.
    let second = approver.decide(write(Caller::Model, &args), &cancel).await;
    assert_eq!(
        second,
        Approval::Allow {
            by_person: false,
            always: false
        }
    );
    assert_eq!(desk.opened.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_denial_carries_the_persons_reason_to_the_model_on_one_line() {
    let desk = Arc::new(Desk {
        answer: Some(Decision::Deny),
        reason: Some("  use the\nstaging copy  ".into()),
        ..Desk::default()
    });
    let approver = approver("default", true, None, &desk);
    let args = json!({"path": "a.txt", "content": "x"});
    let answer = approver
        .decide(write(Caller::Model, &args), &CancellationToken::new())
        .await;
    assert_eq!(
        answer,
        Approval::Deny {
            message: "the user denied this call: use the staging copy".into()
        }
    );
    assert_eq!(
        desk.resolved.lock().unwrap()[0],
        (
            "perm_0".to_string(),
            Decision::Deny,
            Some("reason: use the staging copy".to_string())
        )
    );
}

#[tokio::test]
async fn nobody_answering_in_time_is_a_denial_that_says_so() {
    let desk = Arc::new(Desk::default());
    let approver = approver("default", true, Some(Duration::from_millis(20)), &desk);
    let args = json!({"path": "a.txt", "content": "x"});
    let answer = approver
        .decide(write(AGENT, &args), &CancellationToken::new())
        .await;
    let note = "nobody answered within 0 s; denied";
    assert_eq!(
        answer,
        Approval::Deny {
            message: format!("denied: {note}")
        }
    );
    assert_eq!(
        desk.resolved.lock().unwrap()[0],
        ("perm_0".to_string(), Decision::Deny, Some(note.to_string()))
    );
    assert_eq!(
        desk.opened.lock().unwrap()[0].agent_tool.as_deref(),
        Some("Write")
    );
}

#[tokio::test]
async fn a_cancel_while_waiting_cancels_the_turn_and_closes_the_request() {
    let desk = Arc::new(Desk::default());
    let approver = approver("default", true, None, &desk);
    let args = json!({"path": "a.txt", "content": "x"});
    let cancel = CancellationToken::new();
    cancel.cancel();
    let answer = approver.decide(write(Caller::Model, &args), &cancel).await;
    assert_eq!(answer, Approval::Cancel);
    assert_eq!(desk.resolved.lock().unwrap()[0].1, Decision::Cancel);
}

#[tokio::test]
async fn refusals_speak_to_whoever_called() {
    let desk = Arc::new(Desk::default());
    let cancel = CancellationToken::new();
    let args = json!({"path": "a.txt", "content": "x"});
    let message = |approval: Approval| match approval {
        Approval::Deny { message } => message,
        other => panic!("{other:?}"),
    };
    let unattended = approver("default", false, None, &desk);
    let model = message(
        unattended
            .decide(write(Caller::Model, &args), &cancel)
            .await,
    );
    assert_eq!(
        model,
        "refused: this call needs a person's approval (write_file is a moderate tool) and \
         nobody can answer here. Allow it with a policy rule, `--allow write_file`, another \
         preset (-p), or answer requests with --approve-stdin"
    );
    let agent = message(unattended.decide(write(AGENT, &args), &cancel).await);
    assert_eq!(
        agent,
        "refused: this call needs a person's approval (write_file is a moderate tool) and \
         nobody can answer here"
    );
    // An agent calls tools corral did not offer; corral's model is refused by the preset.
    let readonly = approver("readonly", true, None, &desk);
    let model = message(readonly.decide(write(Caller::Model, &args), &cancel).await);
    assert_eq!(
        model,
        "refused: write_file is not available under the 'readonly' permission preset"
    );
    let agent = message(readonly.decide(write(AGENT, &args), &cancel).await);
    assert_eq!(
        agent,
        "refused by corral's policy: write_file is not available in this session"
    );
    assert!(desk.opened.lock().unwrap().is_empty());
}

#[tokio::test]
async fn git_files_are_refused_even_under_bypass_and_an_agents_own_tool_asks() {
    let desk = Arc::new(Desk {
        answer: Some(Decision::Allow),
        ..Desk::default()
    });
    let approver = approver("bypass", true, None, &desk);
    let cancel = CancellationToken::new();
    let args = json!({"path": ".git/config", "content": "x"});
    let refused = approver.decide(write(Caller::Model, &args), &cancel).await;
    assert!(
        matches!(&refused, Approval::Deny { message } if message.starts_with("refused: .git/config")),
        "{refused:?}"
    );
    assert!(desk.opened.lock().unwrap().is_empty());
    let own = Call {
        caller: Caller::Agent { tool: "Teleport" },
        tool: None,
        args: &Value::Null,
        tool_call: PermissionToolCall::pending("c2", "Teleport", "other", json!({})),
        target: None,
    };
    let answer = approver.decide(own, &cancel).await;
    assert_eq!(
        answer,
        Approval::Allow {
            by_person: true,
            always: false
        }
    );
    let request = &desk.opened.lock().unwrap()[0];
    assert_eq!(
        (request.tool.as_str(), request.danger.as_str()),
        ("Teleport", "dangerous")
    );
    assert_eq!(
        request.reason,
        "Teleport is the agent's own tool; corral has no rule for it"
    );
}

#[tokio::test]
async fn an_agents_deadline_ends_the_wait_before_the_sessions_timeout() {
    let desk = Arc::new(Desk::default());
    let approver = approver("default", true, Some(Duration::from_secs(600)), &desk);
    let args = json!({"path": "a.txt", "content": "x"});
    let until = Instant::now() + Duration::from_millis(30);
    let answer = approver
        .decide_until(write(AGENT, &args), &CancellationToken::new(), Some(until))
        .await;
    let note = "nobody answered within 0 s, as long as the agent waits; denied";
    assert_eq!(
        answer,
        Approval::Deny {
            message: format!("denied: {note}")
        }
    );
    assert_eq!(
        desk.resolved.lock().unwrap()[0],
        ("perm_0".to_string(), Decision::Deny, Some(note.to_string()))
    );
}

#[tokio::test]
async fn only_asking_waits_for_an_open_question() {
    let desk = Arc::new(Desk::default());
    let approver = Arc::new(approver("default", true, None, &desk));
    let asking = approver.clone();
    let open = tokio::spawn(async move {
        let args = json!({"path": "a.txt", "content": "x"});
        asking
            .decide(write(AGENT, &args), &CancellationToken::new())
            .await
    });
    while desk.opened.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // A call the gate allows by itself is answered while the question is open.
    let args = json!({"path": "a.txt"});
    let read = Call {
        caller: Caller::Agent { tool: "Read" },
        tool: Some("read_file"),
        args: &args,
        tool_call: PermissionToolCall::pending("c2", "Read", "read", args.clone()),
        target: None,
    };
    let allowed = tokio::time::timeout(
        Duration::from_secs(5),
        approver.decide(read, &CancellationToken::new()),
    )
    .await
    .expect("not held behind the open question");
    assert_eq!(
        allowed,
        Approval::Allow {
            by_person: false,
            always: false
        }
    );
    // A call that needs a person waits its turn, and only until its deadline.
    let args = json!({"path": "b.txt", "content": "y"});
    let until = Instant::now() + Duration::from_millis(30);
    let refused = approver
        .decide_until(write(AGENT, &args), &CancellationToken::new(), Some(until))
        .await;
    let Approval::Deny { message } = refused else {
        panic!("{refused:?}");
    };
    assert!(
        message.contains("nobody could be asked in time"),
        "{message}"
    );
    assert_eq!(
        desk.opened.lock().unwrap().len(),
        1,
        "never shown to anyone"
    );
    open.abort();
}
