//! Steering: a message sent (over MCP) while a claude turn runs is taken into that turn,
//! written to claude at a safe boundary, and answered before the turn ends.

use super::*;
use crate::common::steer_mid_turn;
use crate::support::{FakeModel, Harness};

#[tokio::test]
async fn a_message_sent_mid_turn_is_steered_into_it_and_answered_before_it_ends() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let mut running = claude_mcp(&h, &server).await;
    steer_mid_turn(&h, &mut running, &server, "claude:fake-model", || {
        !message_requests(&server).is_empty()
    })
    .await;
    // claude got the steered message after the first answer, in one conversation.
    let requests = message_requests(&server);
    assert_eq!(requests.len(), 2, "{requests:?}");
    let second = requests[1]["messages"].to_string();
    assert!(
        second.contains("also this") && second.contains("FIRST"),
        "{second}"
    );
    running.close_stdin();
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
}
