//! cursor-agent and antigravity, which no package registry has, as scripted stand-ins that
//! speak their formats: the command line corral builds, resume, tool calls, crashes, garbage.

use serde_json::Value;

use super::*;
use crate::common::*;

fn standin(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/it/per_turn/{name}"))
}

fn argv_log(h: &Harness) -> Vec<Vec<String>> {
    std::fs::read_to_string(h.home_dir().join("standin.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn cursor(h: &Harness, args: &[&str]) -> Cmd {
    let program = standin("cursor_agent.py").display().to_string();
    let log = h.home_dir().join("standin.log").display().to_string();
    let env = [
        ("CORRAL_CURSOR", program.as_str()),
        ("STANDIN_LOG", log.as_str()),
    ];
    corral_run(h, "cursor:stand-in", &env, args)
}

#[tokio::test]
async fn cursor_turns_resume_by_session_id_and_its_tool_calls_are_events() {
    let h = Harness::new();
    let out = two_turns(
        cursor(&h, &["-i", "USE_TOOL please"]),
        "--force-looking second turn",
        || {},
    )
    .await;
    let argv = argv_log(&h);
    assert_eq!(argv.len(), 2);
    let first_id = argv[0].iter().all(|a| !a.starts_with("--resume"));
    assert!(first_id, "{argv:?}");
    // The second process resumed the id the first one gave.
    let texts = authoritative(&out, "assistant_text");
    assert!(texts[0].ends_with("resumed=None"), "{texts:?}");
    let resumed = argv[1]
        .iter()
        .find_map(|a| a.strip_prefix("--resume="))
        .unwrap();
    assert!(resumed.starts_with("cur-"), "{argv:?}");
    assert_eq!(texts[1], format!("Hello resumed={resumed}"));
    for line in &argv {
        assert!(line.contains(&"--model=stand-in".to_string()), "{line:?}");
        // The default preset never lets cursor run its commands unasked.
        assert!(!line.contains(&"--force".to_string()), "{line:?}");
        // The prompt is after `--`: a prompt that looks like a flag is still the prompt.
        let dashes = line.iter().position(|a| a == "--").unwrap();
        assert_eq!(dashes, line.len() - 2, "{line:?}");
    }
    assert!(argv[1].last().unwrap().starts_with("--force-looking"));
    // The first prompt carried the notifications section, the second did not need it.
    assert!(argv[0].last().unwrap().contains("## Message Notifications"));
    assert!(!argv[1].last().unwrap().contains("## Message Notifications"));
    let used = out.of_kind("tool_use");
    assert_eq!(used.len(), 1, "{used:?}");
    assert_eq!(used[0]["data"]["call"]["kind"], "execute");
    assert_eq!(used[0]["data"]["call"]["title"], "echo from-cursor");
    let result = &out.of_kind("tool_result")[0];
    assert_eq!(result["data"]["update"]["status"], "completed", "{result}");
    assert!(result.to_string().contains("from-cursor"), "{result}");
}

#[tokio::test]
async fn a_cursor_that_dies_mid_turn_is_an_error_with_its_stderr_and_the_session_goes_on() {
    let h = Harness::new();
    let mut running = cursor(&h, &["-i", "CRASH now"]).live_stdin().spawn().await;
    running.wait_for_event(0, |e| e["kind"] == "result").await;
    running.send_line("GARBAGE then answer").await;
    running.close_stdin();
    let out = running.wait().await;
    assert_eq!(
        stop_reasons(&out),
        ["error", "end_turn"],
        "{:#?}",
        out.events()
    );
    let errors: Vec<String> = out
        .of_kind("error")
        .iter()
        .map(|e| {
            e["data"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert!(
        errors
            .iter()
            .any(|e| e.contains("exit status: 3") && e.contains("something broke")),
        "{errors:?}"
    );
    // Garbage is reported (a 20 MB line is cut, not held whole) and the turn still ends.
    let garbage: Vec<&String> = errors
        .iter()
        .filter(|e| e.contains("not a JSON object"))
        .collect();
    assert_eq!(garbage.len(), 2, "{errors:?}");
    assert!(garbage.iter().all(|e| e.len() < 1000));
    // The crashed turn still gave a session id, which the next one resumed.
    let argv = argv_log(&h);
    assert!(
        argv[1].iter().any(|a| a.starts_with("--resume=cur-")),
        "{argv:?}"
    );
}

#[tokio::test]
async fn antigravity_takes_its_prompt_on_stdin_and_answers_in_plain_text() {
    let h = Harness::new();
    let log = h.home_dir().join("standin.log");
    let mut running = h
        .corral()
        .env("CORRAL_ANTIGRAVITY", standin("antigravity.py"))
        .env("STANDIN_LOG", &log)
        .args(["run", "--json", "-m", "antigravity", "-i", "hello there"])
        .live_stdin()
        .timeout(AGENT_TIMEOUT)
        .spawn()
        .await;
    running.wait_for_event(0, |e| e["kind"] == "result").await;
    running.send_line("FAIL please").await;
    running.close_stdin();
    let out = running.wait().await;
    assert_eq!(
        stop_reasons(&out),
        ["end_turn", "error"],
        "{:#?}",
        out.events()
    );
    let texts = authoritative(&out, "assistant_text");
    assert!(
        texts[0].starts_with("ANTIGRAVITY line one\nsaw "),
        "{texts:?}"
    );
    let errors: Vec<Value> = out.of_kind("error");
    assert!(
        errors.iter().any(|e| e.to_string().contains("no model")),
        "{errors:?}"
    );
    let seen = std::fs::read_to_string(&log).unwrap();
    assert!(
        seen.lines()
            .next()
            .unwrap()
            .contains("## Message Notifications"),
        "{seen}"
    );
    assert!(seen.contains("hello there"), "{seen}");
}

/// Kimi CLI needs Python 3.12, which Debian 12 lacks: a stand-in that checks corral runs
/// `kimi acp` and then speaks ACP as the scripted ACP agent does.
#[tokio::test]
async fn kimi_runs_as_kimi_acp_on_a_voucher_with_its_model_chosen() {
    let h = Harness::new();
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/external_acp/scripted_agent.py");
    let log = h.home_dir().join("kimi.log");
    let wrapper = h.home_dir().join("kimi");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n[ \"$*\" = acp ] || {{ echo \"kimi stand-in: got $*\" >&2; exit 9; }}\n\
             echo \"$KIMI_API_KEY $KIMI_BASE_URL\" > {}\nexec python3 {}\n",
            log.display(),
            script.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let out = h
        .corral()
        .env("CORRAL_KIMI", &wrapper)
        .env("KIMI_API_KEY", "real-kimi-key")
        .env("KIMI_BASE_URL", "http://127.0.0.1:9/v1")
        .args(["run", "--json", "-m", "kimi:large", "say hello from kimi"])
        .timeout(AGENT_TIMEOUT)
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(stop_reasons(&out), ["end_turn"], "{:#?}", out.events());
    assert!(out.stdout.contains("hello from kimi"), "{out:?}");
    // The model was chosen through ACP's config option.
    let chosen = std::fs::read_to_string(h.work().join("set_config_option.log")).unwrap();
    assert_eq!(chosen.trim(), "large");
    // kimi held a voucher for corral's proxy, never the key.
    let seen = std::fs::read_to_string(&log).unwrap();
    assert!(!seen.contains("real-kimi-key"), "{seen}");
    assert!(seen.starts_with("corral-voucher-"), "{seen}");
    assert!(seen.contains(" http://127.0.0.1:"), "{seen}");
    assert!(!seen.contains(":9/v1"), "{seen}");
}
