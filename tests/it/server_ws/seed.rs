//! The seed's words taken literally, driven as its client would: `last_seq` reset to -1 on a
//! page load, 4004 for a closed session, `done.message_id` a UUID, `token.final`.

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{close_code, collect, connect, is, next, open, send, session_url, state_is, user};
use crate::support::server::Server;
use crate::support::{FakeModel, Harness, Reply};

/// A bare HTTP/1.1 DELETE with a bearer token; the status.
async fn delete(server: &Server, path: &str, token: &str) -> u16 {
    let addr = server.base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "DELETE {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response[9..12].parse().unwrap()
}

fn seqs(messages: &[Value]) -> Vec<u64> {
    messages
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect()
}

/// The seed's client keeps `last_seen_seq = -1` until it has seen something and sends it
/// on every connect: the first connect is served, and a reload (-1 again) gets everything
/// still buffered from the first message on, then the current state.
#[tokio::test]
async fn ws_last_seq_minus_one_is_from_the_start() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let id = open(&server, &h, &model, "alice", None).await;
    let url = format!(
        "{}&last_seq=-1",
        session_url(&server, &id, &server.token("alice", false))
    );
    let mut first = connect(&url).await;
    let hello = next(&mut first).await;
    assert!(state_is("idle")(&hello), "{hello}");
    model.push(Reply::new().text("one ").text("two").finish("stop"));
    send(&mut first, user("count")).await;
    let mut seen = vec![hello];
    seen.extend(collect(&mut first, is("done")).await);
    drop(first);

    let mut reloaded = connect(&url).await;
    let last = seen.last().unwrap()["seq"].clone();
    let replay = collect(&mut reloaded, |m| m["seq"] == last).await;
    assert_eq!(
        seqs(&replay),
        seqs(&seen),
        "the replay is everything, in order"
    );
    assert_eq!(replay[0]["seq"], 1);
    // Then the state now, as a new message.
    let now = next(&mut reloaded).await;
    assert!(state_is("idle")(&now), "{now}");
    assert!(now["seq"].as_u64() > seen.last().unwrap()["seq"].as_u64());
    // Any other negative is as far back, and not an HTTP refusal either.
    let url = format!(
        "{}&last_seq=-7",
        session_url(&server, &id, &server.token("alice", false))
    );
    let mut again = connect(&url).await;
    assert_eq!(next(&mut again).await["seq"], 1);
}

/// "4004 Session not found — session does not exist or was archived": a closed session
/// closes an attached connection with 4004 (after what it said last), and refuses new ones
/// with 4004, as an unknown id is refused.
#[tokio::test]
async fn ws_a_closed_session_answers_4004() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let token = server.token("alice", false);
    let id = open(&server, &h, &model, "alice", None).await;
    let mut ws = connect(&session_url(&server, &id, &token)).await;
    assert!(state_is("idle")(&next(&mut ws).await));
    model.push(Reply::new().text("bye").finish("stop"));
    send(&mut ws, user("hi")).await;
    collect(&mut ws, is("done")).await;
    assert_eq!(
        delete(&server, &format!("/api/v1/sessions/{id}"), &token).await,
        200
    );
    assert_eq!(close_code(&mut ws).await, 4004, "attached when it closed");
    // Still listed over REST (dead, kept for review), but not a session to stream.
    let mut ws = connect(&session_url(&server, &id, &token)).await;
    assert_eq!(
        close_code(&mut ws).await,
        4004,
        "connecting after the close"
    );
    let admin = server.token("root", true);
    let mut ws = connect(&session_url(&server, &id, &admin)).await;
    assert_eq!(close_code(&mut ws).await, 4004, "an admin too");
    let mut ws = connect(&session_url(&server, "a0a0a0a0", &token)).await;
    assert_eq!(close_code(&mut ws).await, 4004, "an unknown id");
}

fn is_uuid(text: &str) -> bool {
    let groups: Vec<usize> = text.split('-').map(str::len).collect();
    groups == [8, 4, 4, 4, 12] && text.chars().all(|c| c == '-' || c.is_ascii_hexdigit())
}

/// `done.message_id` is a UUID for every turn (the seed's example shape), a new one each
/// turn, and a replay repeats it.
#[tokio::test]
async fn ws_done_message_id_is_a_uuid_per_turn() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let id = open(&server, &h, &model, "alice", None).await;
    let url = session_url(&server, &id, &server.token("alice", false));
    let mut ws = connect(&url).await;
    next(&mut ws).await;
    let mut ids = Vec::new();
    let mut dones = Vec::new();
    for _ in 0..2 {
        model.push(Reply::new().text("ok").finish("stop"));
        send(&mut ws, user("go")).await;
        let done = collect(&mut ws, is("done")).await.pop().unwrap();
        let message_id = done["payload"]["message_id"].as_str().unwrap().to_string();
        assert!(is_uuid(&message_id), "{done}");
        ids.push(message_id);
        dones.push(done);
    }
    assert_ne!(ids[0], ids[1]);
    drop(ws);
    let mut again = connect(&format!("{url}&last_seq=-1")).await;
    let replayed = collect(&mut again, |m| m["seq"] == dones[1]["seq"]).await;
    assert_eq!(replayed.last().unwrap()["payload"], dones[1]["payload"]);
}

/// `token.final`: false for preamble before the tool calls, true for the answer after them;
/// a turn without tool calls never reports `true` ("false until the first tool call is
/// seen").
#[tokio::test]
async fn ws_token_final_is_the_answer_after_the_tools() {
    let h = Harness::new();
    std::fs::write(h.work().join("a.txt"), "hello").unwrap();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let id = open(&server, &h, &model, "alice", Some("bypass")).await;
    let mut ws = connect(&session_url(&server, &id, &server.token("alice", false))).await;
    next(&mut ws).await;
    let tokens = |turn: &[Value], wanted: bool| -> String {
        turn.iter()
            .filter(|m| m["type"] == "token" && m["payload"]["final"] == json!(wanted))
            .map(|m| m["payload"]["text"].as_str().unwrap())
            .collect()
    };

    model.push(Reply::new().text("Just").text(" this.").finish("stop"));
    send(&mut ws, user("no tools")).await;
    let turn = collect(&mut ws, is("done")).await;
    assert_eq!(tokens(&turn, false), "Just this.");
    assert_eq!(tokens(&turn, true), "");

    model.push(
        Reply::new()
            .text("Let me")
            .text(" look.")
            .tool_call("c1", "read_file", r#"{"path":"a.txt"}"#)
            .tool_call("c2", "read_file", r#"{"path":"a.txt"}"#)
            .finish("tool_calls"),
    );
    model.push(Reply::new().text("It says").text(" hello.").finish("stop"));
    send(&mut ws, user("what is in a.txt?")).await;
    let turn = collect(&mut ws, is("done")).await;
    assert_eq!(tokens(&turn, false), "Let me look.");
    assert_eq!(tokens(&turn, true), "It says hello.");
    assert_eq!(turn.last().unwrap()["payload"]["tool_calls"], 2);
}

/// An ACP agent renames its call between announce and result (as agents do: "Read a.txt",
/// then "Read a.txt (1 line)"): `tool_start.tool` and `tool_end.tool` still agree, and are
/// the `tool_use` event's `tool`, and the answer after the call is `final`.
#[tokio::test]
async fn ws_tool_start_and_end_name_the_same_tool_for_an_external_agent() {
    let h = Harness::new();
    let server = Server::start(&h, &[]).await;
    let agent = h.home_dir().join("renaming_agent.py");
    std::fs::write(&agent, include_str!("renaming_agent.py")).unwrap();
    let admin = server.token("root", true);
    let body = json!({"cwd": h.work(), "model": format!("acp:cmd=python3 {}", agent.display())});
    let (status, opened) = server.post("/api/v1/sessions", &admin, &body).await;
    assert_eq!(status, 201, "{opened}");
    let id = opened["id"].as_str().unwrap();
    let mut ws = connect(&session_url(&server, id, &admin)).await;
    assert!(state_is("idle")(&next(&mut ws).await));
    send(&mut ws, user("read a.txt")).await;
    let turn = collect(&mut ws, is("done")).await;
    let start = turn.iter().find(|m| m["type"] == "tool_start").unwrap();
    let end = turn.iter().find(|m| m["type"] == "tool_end").unwrap();
    assert_eq!(start["payload"]["tool_call_id"], "r1");
    assert_eq!(start["payload"]["input"], json!({"path": "a.txt"}));
    assert_eq!(end["payload"]["tool_call_id"], "r1");
    assert_eq!(
        end["payload"]["tool"], start["payload"]["tool"],
        "{start}\n{end}"
    );
    assert_ne!(end["payload"]["tool"], "Read a.txt (1 line)");
    let finals: Vec<(&str, bool)> = turn
        .iter()
        .filter(|m| m["type"] == "token")
        .map(|m| {
            let p = &m["payload"];
            (p["text"].as_str().unwrap(), p["final"].as_bool().unwrap())
        })
        .collect();
    assert_eq!(finals, [("Looking.", false), ("It says hello.", true)]);
    assert_eq!(turn.last().unwrap()["payload"]["tool_calls"], 1);
}
