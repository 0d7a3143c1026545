//! The reference servers: what their tools return reaches the model as corral's content,
//! progress streams as `tool_output`, and the sandbox holds for a server like for a shell.

use serde_json::json;

use super::basics::{mcp_config, run_with, server_bin};
use crate::common::tool_results;
use crate::support::Harness;

#[tokio::test]
async fn results_map_images_structured_content_resources_and_errors() {
    let h = Harness::new();
    let config = mcp_config(
        &h,
        json!({"everything": {"command": server_bin("mcp-server-everything")}}),
    );
    let (out, _) = run_with(
        &h,
        &config,
        "bypass",
        &[
            ("everything__get-tiny-image", json!({})),
            (
                "everything__get-structured-content",
                json!({"location": "Chicago"}),
            ),
            ("everything__get-resource-links", json!({"count": 2})),
            (
                "everything__get-resource-reference",
                json!({"resourceType": "Text", "resourceId": 1}),
            ),
            (
                "everything__get-resource-reference",
                json!({"resourceType": "Text", "resourceId": -1}),
            ),
        ],
    )
    .await;
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 5, "{}", out.stdout);
    let image = results[0]["data"].to_string();
    assert!(
        image.contains("image/png"),
        "the image reaches the result: {image}"
    );
    let structured = tool_results(&out)[1].to_string();
    assert!(structured.contains("temperature"), "{structured}");
    let links = tool_results(&out)[2].to_string();
    assert!(links.contains("resource link: "), "{links}");
    let resource = tool_results(&out)[3].to_string();
    assert!(resource.contains("resource "), "{resource}");
    // The server's own error (isError): a failed call the model sees.
    assert_eq!(
        results[4]["data"]["update"]["status"], "failed",
        "{}",
        results[4]
    );
    assert!(
        results[4]["data"]["result"]["error"].is_string(),
        "{}",
        results[4]
    );
}

#[tokio::test]
async fn progress_notifications_stream_as_tool_output() {
    let h = Harness::new();
    let config = mcp_config(
        &h,
        json!({"everything": {"command": server_bin("mcp-server-everything")}}),
    );
    let (out, _) = run_with(
        &h,
        &config,
        "bypass",
        &[(
            "everything__trigger-long-running-operation",
            json!({"duration": 1, "steps": 3}),
        )],
    )
    .await;
    let output = super::basics::streamed(&out);
    assert!(
        output.contains("progress 1/3"),
        "{output:?} in {}",
        out.stdout
    );
    assert!(output.contains("progress 3/3"), "{output:?}");
    assert_eq!(
        out.of_kind("tool_result")[0]["data"]["update"]["status"],
        "completed"
    );
}

#[tokio::test]
async fn a_server_gets_the_tool_environment_not_corrals_secrets() {
    let h = Harness::new();
    let config = mcp_config(
        &h,
        json!({"everything": {"command": server_bin("mcp-server-everything"),
                              "env": {"GIVEN_BY_CONFIG": "yes"}}}),
    );
    let model = crate::support::FakeModel::start().await;
    model.push(crate::support::Reply::new().tool_call("c0", "everything__get-env", "{}"));
    model.push(crate::support::Reply::new().text("done"));
    std::fs::create_dir_all(h.work()).unwrap();
    let out = crate::common::openai_run(&h, &model, "go")
        .args(["-p", "bypass", "--mcp-config", &config])
        .env("OPENAI_API_KEY", "sk-corral-secret-1234")
        .env("CORRAL_JWT_SECRET", "jwt-secret-5678")
        .run()
        .await;
    let env = tool_results(&out)[0].to_string();
    assert!(env.contains("GIVEN_BY_CONFIG"), "{env}");
    assert!(
        !env.contains("sk-corral-secret-1234"),
        "a secret reached the server: {env}"
    );
    assert!(
        !env.contains("jwt-secret-5678"),
        "a secret reached the server: {env}"
    );
}

/// server-filesystem is told it may use the root and a directory outside it; the sandbox
/// still keeps its writes inside the root and corral's own config out of its sight.
#[tokio::test]
async fn a_stdio_server_runs_inside_the_sessions_sandbox() {
    let h = Harness::new();
    std::fs::create_dir_all(h.work()).unwrap();
    std::fs::write(h.work().join("hello.txt"), "hello inside").unwrap();
    let outside = h.home_dir().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    h.write_config("# corral's own config: hidden from tools\nmax_steps = 40\n");
    let corral_config = h.config_dir().join("corral");
    let server = |sandbox: bool| {
        json!({"fs": {"command": server_bin("mcp-server-filesystem"),
                      "args": [h.work(), &outside, &corral_config],
                      "sandbox": sandbox}})
    };
    let calls = [
        (
            "fs__read_text_file",
            json!({"path": h.work().join("hello.txt")}),
        ),
        (
            "fs__write_file",
            json!({"path": outside.join("escaped.txt"), "content": "out"}),
        ),
        (
            "fs__read_text_file",
            json!({"path": corral_config.join("config.toml")}),
        ),
    ];
    let (out, _) = run_with(&h, &mcp_config(&h, server(true)), "bypass", &calls).await;
    let results = tool_results(&out);
    assert_eq!(results.len(), 3, "{}", out.stdout);
    assert!(
        results[0].to_string().contains("hello inside"),
        "{results:?}"
    );
    assert!(
        !outside.join("escaped.txt").exists(),
        "the server wrote outside the root"
    );
    assert!(
        !results[2].to_string().contains("max_steps"),
        "corral's config reached the server: {results:?}"
    );
    // The same server unconfined does both: the sandbox is what stopped it.
    let (out, _) = run_with(&h, &mcp_config(&h, server(false)), "bypass", &calls).await;
    assert!(outside.join("escaped.txt").exists(), "{}", out.stdout);
    assert!(tool_results(&out)[2].to_string().contains("max_steps"));
}

#[tokio::test]
async fn python_servers_from_pypi_time_and_git() {
    let h = Harness::new();
    let repo = crate::common::git_repo(&h, "tracked\n");
    let config = mcp_config(
        &h,
        json!({
            "time": {"command": server_bin("mcp-server-time"), "args": ["--local-timezone", "UTC"]},
            "git": {"command": server_bin("mcp-server-git"), "args": ["--repository", &repo]},
        }),
    );
    std::fs::write(repo.join("new.txt"), "untracked").unwrap();
    let (out, model) = run_with(
        &h,
        &config,
        "bypass",
        &[
            ("time__get_current_time", json!({"timezone": "UTC"})),
            ("git__git_status", json!({"repo_path": &repo})),
        ],
    )
    .await;
    let offered = crate::common::offered_tools(&model, 0);
    assert!(
        offered.iter().any(|t| t == "time__convert_time"),
        "{offered:?}"
    );
    let results = tool_results(&out);
    assert!(results[0].to_string().contains("UTC"), "{results:?}");
    assert!(results[1].to_string().contains("new.txt"), "{results:?}");
}
