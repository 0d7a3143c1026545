//! What a node runs, and who may talk to the deployment: a node opens only what the control
//! plane assigned to it; NATS credentials are required when the server asks for them;
//! deployments sharing a NATS server do not see each other; a node's envelope too large for
//! one NATS message arrives whole.

use std::time::Duration;

use serde_json::{Value, json};

use super::{admin, conversation, open, serve, wait_for_nodes, wait_session};
use crate::support::cluster::{CLUSTER_CONFIG, Nats, Node};
use crate::support::{FakeModel, Harness, Reply};

/// A command sent straight to a node's subject, as anyone on the NATS server could.
async fn forged(nats: &Nats, subject: &str, body: Value) -> Value {
    let client = async_nats::connect(&nats.url).await.unwrap();
    let reply = tokio::time::timeout(
        Duration::from_secs(10),
        client.request(subject.to_string(), body.to_string().into()),
    )
    .await
    .expect("the node did not answer")
    .unwrap();
    serde_json::from_slice(&reply.payload).unwrap()
}

/// `corral node` with `config`, which NATS must refuse: how it ended.
async fn refused_node(nats: &Nats, config: &str) -> crate::support::Outcome {
    let host = Harness::new();
    host.write_config(config);
    let refused = host
        .corral()
        .args(["node", "--nats", &nats.url, "--name", "nope"])
        .timeout(Duration::from_secs(30))
        .run()
        .await;
    assert!(!refused.success(), "{refused:?}");
    refused
}

#[tokio::test]
async fn a_node_opens_only_sessions_the_control_plane_assigned_to_it() {
    let nats = Nats::start().await;
    let target = Node::start(&nats, "target", &[]).await;
    let _other = Node::start(&nats, "other", &[]).await;
    let h = Harness::new();
    let server = serve(&h, &nats).await;
    wait_for_nodes(&server, &["target", "other"]).await;
    let model = FakeModel::start().await;
    let open_request = |session: &str| {
        json!({"session": session, "call": {"open": {
            "owner": "mallory", "cwd": h.work(), "model": "llamacpp:fake-model",
            "base_url": model.openai_base(), "permission": "bypass"}}})
    };
    // No assignment at all.
    let reply = forged(&nats, "corral.node.target.cmd", open_request("f0rged01")).await;
    assert_eq!(reply["error"]["code"], "FORBIDDEN", "{reply}");
    // A real assignment, to another node: replayed at this one.
    let token = admin(&server);
    let (status, theirs) = open(&server, &token, &h, &model, json!({"node": "other"})).await;
    assert_eq!(status, 201, "{theirs}");
    let id = theirs["id"].as_str().unwrap();
    let reply = forged(&nats, "corral.node.target.cmd", open_request(id)).await;
    assert_eq!(reply["error"]["code"], "FORBIDDEN", "{reply}");
    // Its own assignment, with another owner than recorded: refused too.
    let (_, mine) = open(&server, &token, &h, &model, json!({"node": "target"})).await;
    let mine = mine["id"].as_str().unwrap();
    let reply = forged(&nats, "corral.node.target.cmd", open_request(mine)).await;
    assert_eq!(reply["error"]["code"], "FORBIDDEN", "{reply}");
    // Nothing of the forged ones ran on the target: only the assigned session has a log.
    let logs: Vec<String> = target
        .host
        .event_logs()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().to_string())
        .collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert!(logs[0].starts_with(mine), "{logs:?}");
    // Commands for a session the node does not run are refused the same way.
    let cancel = json!({"session": id, "call": {"session": {"op": "close"}}});
    let reply = forged(&nats, "corral.node.target.cmd", cancel).await;
    assert_eq!(reply["error"]["code"], "NOT_FOUND", "{reply}");
    let garbage = forged(&nats, "corral.node.target.cmd", json!({"session": 1})).await;
    assert_eq!(garbage["error"]["code"], "INVALID", "{garbage}");
}

#[tokio::test]
async fn nodes_need_the_nats_token_when_the_server_asks_for_one() {
    let nats = Nats::start_with(&["--auth", "s3cret-token"]).await;
    // Without it: refused at once, with the server's reason.
    let refused = refused_node(&nats, CLUSTER_CONFIG).await;
    assert!(
        refused.stderr.to_lowercase().contains("authorization"),
        "{}",
        refused.stderr
    );
    // With it (from the config), the node and the control plane work.
    let config = format!("{CLUSTER_CONFIG}token = \"s3cret-token\"\n");
    let host = Harness::new();
    host.write_config(&config);
    let _node = Node::start_on(&nats, "authed", host, &[]).await;
    let h = Harness::new();
    h.write_config(&config);
    let server = crate::support::server::Server::start_with(&h, &[], &["--nats", &nats.url]).await;
    wait_for_nodes(&server, &["authed"]).await;
}

#[tokio::test]
async fn deployments_sharing_a_nats_server_do_not_see_each_other() {
    let nats = Nats::start().await;
    let _ours = Node::start(&nats, "ours", &[]).await;
    let h = Harness::new();
    h.write_config(&format!("{CLUSTER_CONFIG}prefix = \"team-b\"\n"));
    let other = crate::support::server::Server::start_with(&h, &[], &["--nats", &nats.url]).await;
    let token = admin(&other);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (_, nodes) = other.get("/api/v1/nodes", &token).await;
    assert_eq!(nodes["nodes"], json!([]), "{nodes}");
    let model = FakeModel::start().await;
    let (status, refused) = open(&other, &token, &h, &model, json!({"node": "ours"})).await;
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (503, Some("NO_NODE")),
        "{refused}"
    );
}

#[tokio::test]
async fn an_answer_larger_than_one_nats_message_arrives_whole() {
    let nats = Nats::start().await;
    let _node = Node::start(&nats, "n1", &[]).await;
    let h = Harness::new();
    let server = serve(&h, &nats).await;
    wait_for_nodes(&server, &["n1"]).await;
    let token = admin(&server);
    let model = FakeModel::start().await;
    // 3 MB in one block: NATS takes 1 MiB per message.
    let big: String = (0..300_000).map(|i| format!("{i:09} ")).collect();
    model.push(Reply::new().text(&big).finish("stop"));
    let (_, opened) = open(&server, &token, &h, &model, json!({})).await;
    let id = opened["id"].as_str().unwrap();
    let (status, _) = server
        .post(
            &format!("/api/v1/sessions/{id}/messages"),
            &token,
            &json!({"text": "a lot"}),
        )
        .await;
    assert_eq!(status, 202);
    wait_session(&server, &token, id, |s| {
        s["status"] == "idle" && s["turn"] == 1
    })
    .await;
    let history = conversation(&server, &token, id).await;
    assert_eq!(history[1].1.len(), big.len());
    assert!(history[1].1 == big);
}

#[tokio::test]
async fn nodes_authenticate_with_an_nkey_from_the_config() {
    let pair = nkeys::KeyPair::new_user();
    let keys = tempfile::tempdir().unwrap();
    let conf = keys.path().join("nats.conf");
    std::fs::write(
        &conf,
        format!(
            "authorization {{ users = [ {{ nkey: {} }} ] }}\n",
            pair.public_key()
        ),
    )
    .unwrap();
    let seed = keys.path().join("corral.nk");
    std::fs::write(&seed, pair.seed().unwrap()).unwrap();
    let nats = Nats::start_with(&["-c", conf.to_str().unwrap()]).await;
    let config = format!(
        "{CLUSTER_CONFIG}nkey_seed_file = {:?}\n",
        seed.to_str().unwrap()
    );
    // A token is not the nkey the server asks for.
    refused_node(&nats, &format!("{CLUSTER_CONFIG}token = \"guess\"\n")).await;
    // The seed file, from the config.
    let host = Harness::new();
    host.write_config(&config);
    let _node = Node::start_on(&nats, "signed", host, &[]).await;
    let h = Harness::new();
    h.write_config(&config);
    let server = crate::support::server::Server::start_with(&h, &[], &["--nats", &nats.url]).await;
    wait_for_nodes(&server, &["signed"]).await;
}
