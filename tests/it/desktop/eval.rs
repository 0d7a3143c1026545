//! The desktop tasks of `corral eval` (evals/desktop): each program starts, a scripted model
//! doing what a person would (clicks at the widgets' places, typing, keys) passes every check,
//! and a model that does nothing fails them.

use super::computer::screen;
use super::*;

fn tasks() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("evals/desktop")
}

fn act(server: &FakeModel, id: &str, args: Value) {
    server.push(Reply::new().tool_call(id, "computer", &args.to_string()));
}

fn click(server: &FakeModel, id: &str, x: i64, y: i64) {
    act(
        server,
        id,
        json!({"action": "left_click", "coordinate": [x, y], "screenshot_after": false}),
    );
}

fn typed(server: &FakeModel, id: &str, text: &str) {
    act(
        server,
        id,
        json!({"action": "type", "text": text, "screenshot_after": false}),
    );
}

fn keys(server: &FakeModel, id: &str, text: &str) {
    act(server, id, json!({"action": "key", "text": text}));
}

/// The calls that failed in any session log under `dir`, for a failure's message: what the
/// program did not receive may have been refused before it was sent.
fn failed_calls(dir: &Path) -> String {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                for line in text.lines() {
                    let Ok(event) = serde_json::from_str::<Value>(line) else {
                        continue;
                    };
                    let result = &event["data"]["result"];
                    if event["kind"] == "tool_result" && result["success"] == false {
                        found.push(format!("{}: {}", result["toolCallId"], result["error"]));
                    }
                }
            }
        }
    }
    found.join("\n")
}

fn eval(h: &Harness, server: &FakeModel, d: &Desktop, only: &[&str]) -> Cmd {
    let mut cmd = h
        .corral()
        .args(["eval", "-m", "llamacpp:fake-model", "--base-url"])
        .arg(server.openai_base())
        .arg("--tasks")
        .arg(tasks().to_string_lossy())
        .arg("--out")
        .arg(h.work().join("desktop-eval.json").to_string_lossy())
        .env("DISPLAY", &d.display)
        .env("DBUS_SESSION_BUS_ADDRESS", &d.bus);
    for task in only {
        cmd = cmd.args(["--task", task]);
    }
    if let Ok(auth) = std::env::var("XAUTHORITY") {
        cmd = cmd.env("XAUTHORITY", auth);
    }
    cmd
}

#[tokio::test]
async fn a_scripted_person_passes_the_five_desktop_tasks() {
    let _screen = screen().await;
    let d = desktop();
    let h = Harness::new();
    let server = FakeModel::start().await;
    // editor-type-and-save: into the text, type, save with the keyboard.
    click(&server, "e1", 200, 100);
    typed(&server, "e2", "hello from corral");
    keys(&server, "e3", "ctrl+s");
    server.push(Reply::new().text("Saved."));
    // fill-a-form
    click(&server, "f1", 240, 35);
    typed(&server, "f2", "Ada Lovelace");
    click(&server, "f3", 240, 85);
    typed(&server, "f4", "ada@example.org");
    click(&server, "f5", 150, 135);
    server.push(Reply::new().text("Submitted."));
    // pick-a-menu-item: open the menu, pick Export by its underlined letter.
    click(&server, "m1", 50, 25);
    keys(&server, "m2", "e");
    server.push(Reply::new().text("Exported."));
    // tick-and-continue
    click(&server, "t1", 40, 35);
    click(&server, "t2", 60, 95);
    server.push(Reply::new().text("Agreed."));
    // use-a-calculator: 7 + 5 =
    for (id, (x, y)) in [
        ("k1", (40, 80)),
        ("k2", (110, 230)),
        ("k3", (110, 130)),
        ("k4", (180, 230)),
    ] {
        click(&server, id, x, y);
    }
    server.push(Reply::new().text("12."));
    let out = eval(&h, &server, &d, &[]).run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(h.work().join("desktop-eval.json")).unwrap())
            .unwrap();
    assert!(
        out.stdout.contains("5/5 passed"),
        "{}\n{report:#}\nfailed calls: {}\nstderr: {}",
        out.stdout,
        failed_calls(&h.cache_dir()),
        out.stderr
    );
    let tools: Vec<u64> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["toolCalls"].as_u64().unwrap())
        .collect();
    assert_eq!(tools, [3, 5, 2, 2, 4], "{report}");
}

#[tokio::test]
async fn a_model_that_does_nothing_fails_a_desktop_task_and_its_program_is_gone() {
    let _screen = screen().await;
    let d = desktop();
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("Done, I think."));
    let out = eval(&h, &server, &d, &["tick-and-continue"]).run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("0/1 passed"), "{}", out.stdout);
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(h.work().join("desktop-eval.json")).unwrap())
            .unwrap();
    let check = report["results"][0]["checkOutput"].as_str().unwrap();
    assert!(check.contains("recorded nothing"), "{check}");
    let windows =
        String::from_utf8_lossy(&run_tool("xwininfo", &["-root", "-tree"], &d).stdout).into_owned();
    assert!(
        !windows.contains("corral-eval-agree"),
        "the task's program outlived it:\n{windows}"
    );
}
