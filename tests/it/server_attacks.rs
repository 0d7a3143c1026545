//! Attacks on `corral serve` by a holder of a plain `user` token (and by a web page in the
//! browser of someone holding one): each test drives the real server over real sockets and
//! fails on a server that lets the attack through. A `user` token is not the host's owner.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::server::Server;
use crate::support::{FakeModel, Harness, Reply};

mod streams;
pub(crate) mod wire;

use wire::{call, close_frame, create, session_body, without, ws_connect};

const LONG: Duration = Duration::from_secs(3600);

#[tokio::test]
async fn a_user_token_cannot_run_a_program_name_a_preset_file_or_bypass_the_gate() {
    let h = Harness::new();
    // An admin may offer one harmless command line to users; nothing else external.
    h.write_config("[server]\nuser_backends = [\"acp:cmd=true\"]\n");
    let policies = h.config_dir().join("corral/policies");
    std::fs::create_dir_all(&policies).unwrap();
    let bypass = include_str!("../../policies/bypass.toml");
    std::fs::write(policies.join("everything.toml"), bypass).unwrap();
    let secret = h.home_dir().join("credentials");
    std::fs::write(&secret, "[default]\ntoken = CANARY-3f9a1c\n").unwrap();
    let model = FakeModel::start().await;
    let base = model.openai_base();
    let server = Server::start(&h, &[]).await;
    let user = wire::token_for("mallory", false, LONG);
    let marker = h.home_dir().join("pwned");

    let run_it = format!("acp:cmd=touch {}", marker.display());
    for spec in [
        run_it.as_str(),
        "claude",
        "codex",
        "acp:opencode",
        "claude:sonnet",
    ] {
        let body = json!({"cwd": h.work(), "model": spec});
        let (status, answer) = create(&server, &user, body).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{spec}: {answer}");
        assert_eq!(answer["error"]["code"], "FORBIDDEN");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("admin"),
            "{answer}"
        );
    }
    // A backend the config lists passes this gate (and fails later: `true` is no agent).
    let (status, answer) = create(
        &server,
        &user,
        json!({"cwd": h.work(), "model": "acp:cmd=true"}),
    )
    .await;
    // Opening runs the backend within the request: the answer comes after `true` ran and
    // failed the handshake, so no wait is needed to see what the refused requests ran.
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{answer}");
    assert_eq!(answer["error"]["code"], "MODEL_UNAVAILABLE", "{answer}");
    assert!(!marker.exists(), "a user token ran a program on the server");

    // Preset files, and any preset that approves everything, whatever its name.
    let path = secret.display().to_string();
    for preset in [path.as_str(), "credentials.toml", "bypass", "everything"] {
        let body = session_body(&h.work(), &base, json!({ "permission": preset }));
        let (status, answer) = create(&server, &user, body).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{preset}: {answer}");
        assert!(!answer.to_string().contains("CANARY"), "{answer}");
    }

    // The host's owner may do all of it.
    let admin = wire::token_for("root", true, LONG);
    let body = session_body(&h.work(), &base, json!({"permission": "bypass"}));
    let (status, answer) = create(&server, &admin, body).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
}

#[tokio::test]
async fn no_error_shows_the_content_of_a_file() {
    let h = Harness::new();
    let secret = h.home_dir().join("credentials");
    std::fs::write(&secret, "[default]\ntoken = CANARY-3f9a1c\n").unwrap();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let permission = json!({ "permission": secret });
    let body = session_body(&h.work(), &model.openai_base(), permission);
    // Even an admin, who may name the file, is told where it is wrong, not what it says.
    let admin = wire::token_for("root", true, LONG);
    let (status, answer) = create(&server, &admin, body.clone()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(!message.contains("CANARY"), "the file leaked: {message}");
    assert!(message.contains("line 2"), "{message}");
    let user = wire::token_for("mallory", false, LONG);
    let (status, answer) = create(&server, &user, body).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
    assert!(!answer.to_string().contains("CANARY"), "{answer}");
}

#[tokio::test]
async fn user_sessions_stay_inside_the_roots() {
    let h = Harness::new();
    let work = h.work();
    std::fs::create_dir(work.join("project")).unwrap();
    std::os::unix::fs::symlink("/", work.join("escape")).unwrap();
    std::os::unix::fs::symlink(h.home_dir(), work.join("home-link")).unwrap();
    let model = FakeModel::start().await;
    let base = model.openai_base();
    // Started in `work`: that is the one root.
    let server = Server::start(&h, &[]).await;
    let user = wire::token_for("mallory", false, LONG);
    // The refusal, with the directory it names taken out.
    let refused = |cwd: std::path::PathBuf| {
        let body = session_body(&cwd, &base, json!({}));
        let (server, user) = (&server, &user);
        async move {
            let (status, answer) = create(server, user, body).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{}: {answer}", cwd.display());
            let message = answer["error"]["message"].as_str().unwrap();
            message.replacen(&cwd.display().to_string(), "<CWD>", 1)
        }
    };
    let outside = refused("/".into()).await;
    for cwd in [
        h.home_dir(),
        work.join("escape"),
        work.join("escape/etc"),
        work.join("home-link"),
        "/etc".into(),
    ] {
        assert_eq!(refused(cwd).await, outside);
    }
    // A missing directory is refused in the same words: no probing of the file system.
    assert_eq!(refused(work.join("missing")).await, outside);
    assert_eq!(refused("/no/such/dir".into()).await, outside);

    let body = session_body(&work.join("project"), &base, json!({}));
    let (status, session) = create(&server, &user, body).await;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    let project = work.join("project").canonicalize().unwrap();
    assert_eq!(session["cwd"], project.display().to_string());
    // A worktree of a repository that starts above the roots (a home kept in git) would
    // add a branch and a worktree entry to that repository.
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(h.home_dir())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.com")
            .env("GIT_COMMITTER_NAME", "Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.com")
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    std::fs::write(h.home_dir().join(".profile"), "export A=1\n").unwrap();
    git(&["init", "-q", "-b", "main"]);
    git(&["add", ".profile"]);
    git(&["commit", "-q", "-m", "dotfiles"]);
    let worktree = json!({"worktree": true});
    let body = session_body(&work.join("project"), &base, worktree);
    let (status, answer) = create(&server, &user, body).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
    // Admins may use any directory.
    let admin = wire::token_for("root", true, LONG);
    let body = session_body(&h.home_dir(), &base, json!({}));
    let (status, session) = create(&server, &admin, body).await;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    drop(server);

    // Listed roots replace the default; a listed root is a root even when it is home.
    let other = h.home_dir().join("other");
    std::fs::create_dir(&other).unwrap();
    h.write_config(&format!(
        "[server]\nroots = [{:?}]\n",
        other.display().to_string()
    ));
    let server = Server::start(&h, &[]).await;
    let (status, answer) = create(&server, &user, session_body(&work, &base, json!({}))).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
    let (status, answer) = create(&server, &user, session_body(&other, &base, json!({}))).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
}

#[tokio::test]
async fn the_servers_api_key_goes_only_to_the_base_url_it_was_configured_for() {
    const KEY: &str = "sk-server-secret-5b2e";
    let h = Harness::new();
    let own = FakeModel::start().await;
    let thief = FakeModel::start().await;
    h.write_config(&format!(
        "[providers.openai]\nbase_url = {:?}\n",
        own.openai_base()
    ));
    let server = Server::start(&h, &[("OPENAI_API_KEY", KEY)]).await;
    let user = wire::token_for("mallory", false, LONG);
    let turn = |base: Option<String>, model: &FakeModel| {
        model.push(Reply::new().text("hello"));
        let mut body = json!({"cwd": h.work(), "model": "openai:fake-model"});
        if let Some(base) = base {
            body["base_url"] = json!(base);
        }
        let (server, user) = (&server, &user);
        async move {
            let (status, session) = create(server, user, body).await;
            assert_eq!(status, StatusCode::CREATED, "{session}");
            let path = format!(
                "/api/v1/sessions/{}/messages",
                session["id"].as_str().unwrap()
            );
            let (status, _) = call(
                server,
                user,
                Method::POST,
                &path,
                Some(json!({"text": "hi"})),
            )
            .await;
            assert_eq!(status, StatusCode::ACCEPTED);
        }
    };
    turn(Some(thief.openai_base()), &thief).await;
    assert!(
        thief
            .wait_for_chat_requests(1, Duration::from_secs(20))
            .await
    );
    let sent_key = |model: &FakeModel| {
        model
            .requests()
            .iter()
            .any(|r| r.headers.iter().any(|(_, value)| value.contains(KEY)))
    };
    assert!(
        !sent_key(&thief),
        "the key went to a base URL the client chose"
    );
    // Where it was configured, the key is sent: the check above is not vacuous.
    turn(None, &own).await;
    assert!(own.wait_for_chat_requests(1, Duration::from_secs(20)).await);
    assert!(sent_key(&own), "the configured server got no key");
}

#[tokio::test]
async fn sessions_of_others_answer_exactly_like_missing_ones_and_owners_are_limited() {
    let h = Harness::new();
    h.write_config("[server]\nmax_sessions_per_owner = 2\n");
    let model = FakeModel::start().await;
    let base = model.openai_base();
    let server = Server::start(&h, &[]).await;
    let alice = wire::token_for("alice", false, LONG);
    let bob = wire::token_for("bob", false, LONG);
    let (status, session) =
        create(&server, &alice, session_body(&h.work(), &base, json!({}))).await;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    let id = session["id"].as_str().unwrap().to_string();
    let missing = "0b9c7a52-55a1-4f7e-9a51-3c1e2f4d6a8b";

    let confirm = json!({"confirmation_id": "perm_0", "action": "allow"});
    let routes: Vec<(Method, &str, Option<serde_json::Value>)> = vec![
        (Method::GET, "", None),
        (Method::GET, "/messages", None),
        (Method::POST, "/messages", Some(json!({"text": "hi"}))),
        (Method::POST, "/cancel", None),
        (Method::POST, "/confirmations", Some(confirm)),
        (Method::GET, "/permissions", None),
        (Method::GET, "/worktree", None),
        (Method::DELETE, "", None),
    ];
    for (method, tail, body) in routes {
        let theirs = format!("/api/v1/sessions/{id}{tail}");
        let nobodys = format!("/api/v1/sessions/{missing}{tail}");
        let (s1, b1) = call(&server, &bob, method.clone(), &theirs, body.clone()).await;
        let (s2, b2) = call(&server, &bob, method.clone(), &nobodys, body).await;
        assert_eq!(s1, StatusCode::NOT_FOUND, "{method} {tail}: {b1}");
        assert_eq!(
            (s1, without(&b1, &id)),
            (s2, without(&b2, missing)),
            "{method} {tail}"
        );
    }
    let events = |sid: &str| format!("/api/v1/events?channel=agent:{sid}");
    let (s1, b1) = call(&server, &bob, Method::GET, &events(&id), None).await;
    assert_eq!(s1, StatusCode::NOT_FOUND, "{b1}");
    let (s2, b2) = call(&server, &bob, Method::GET, &events(missing), None).await;
    assert_eq!((s1, without(&b1, &id)), (s2, without(&b2, missing)));
    let ws = |sid: &str| format!("{}/ws/v1/sessions/{sid}?token={bob}", server.ws_base);
    let mut theirs = ws_connect(&ws(&id), &[]).await.unwrap();
    let mut nobodys = ws_connect(&ws(missing), &[]).await.unwrap();
    let (c1, r1) = close_frame(&mut theirs, Duration::from_secs(10)).await;
    let (c2, r2) = close_frame(&mut nobodys, Duration::from_secs(10)).await;
    assert_eq!(c1, 4004);
    assert_eq!(
        (c1, r1.replace(&id, "<ID>")),
        (c2, r2.replace(missing, "<ID>"))
    );
    // Alice still has her session: bob's DELETE did nothing.
    let (status, _) = call(
        &server,
        &alice,
        Method::GET,
        &format!("/api/v1/sessions/{id}"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);

    // Two live sessions per owner here; a third is refused until one closes.
    let (status, second) = create(&server, &alice, session_body(&h.work(), &base, json!({}))).await;
    assert_eq!(status, StatusCode::CREATED, "{second}");
    let (status, answer) = create(&server, &alice, session_body(&h.work(), &base, json!({}))).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{answer}");
    assert_eq!(answer["error"]["code"], "TOO_MANY_SESSIONS");
    let (status, answer) = create(&server, &bob, session_body(&h.work(), &base, json!({}))).await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "another owner has a limit of their own: {answer}"
    );
    let path = format!("/api/v1/sessions/{id}");
    let (status, _) = call(&server, &alice, Method::DELETE, &path, None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, answer) = create(&server, &alice, session_body(&h.work(), &base, json!({}))).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
}

/// A `user` token may not name a `gguf:` model (each would start a model server on the
/// host), so a session naming no model does not get the installed one either; the host's
/// owner does.
#[tokio::test]
async fn a_user_session_naming_no_model_does_not_start_the_installed_one() {
    let h = Harness::new();
    let upstream = FakeModel::start().await;
    let started = crate::first_run::install_small_model(&h, &upstream);
    let ports = crate::first_run::closed_probe_ports();
    let server = Server::start(&h, &[("CORRAL_TEST_PROBE_PORTS", &ports)]).await;
    let user = wire::token_for("mallory", false, LONG);
    let (status, answer) = create(&server, &user, json!({"cwd": h.work()})).await;
    assert!(status.is_client_error(), "{status}: {answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no model given"),
        "{answer}"
    );
    assert!(!started.exists(), "a user token started a model server");

    let admin = wire::token_for("root", true, LONG);
    let (status, answer) = create(&server, &admin, json!({"cwd": h.work()})).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    assert!(
        started.exists(),
        "the owner's session uses the installed model"
    );
}
