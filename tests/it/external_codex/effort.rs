//! codex takes the effort on `turn/start`; it reaches the model as the Responses API's
//! `reasoning.effort`.

use super::*;

#[tokio::test]
async fn the_effort_reaches_the_model_as_reasoning_effort() {
    let program = codex_program();
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("ONE"));
    server.push(Reply::new().text("TWO"));
    let out = codex_run(&h, &server, &program)
        .args(["--effort", "low", "-i"])
        .stdin_text("first\nsecond\n")
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.of_kind("error").is_empty(), "{out:?}");
    let requests = server.responses_requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    for request in &requests {
        // Sent once with the first turn, kept by codex for the next.
        assert_eq!(request["reasoning"]["effort"], "low", "{request}");
    }
}
