//! `computer` and `windows` end to end: `corral run` against the fake model, a real X server
//! (Xvfb), real windows (`xev`, which logs every button it receives with its root
//! coordinates), approvals answered on stdin.
//!
//! Tests that put windows up take the screen in turn ([`screen`]); each still keeps its
//! windows in its own quarter of the 1280×800 screen, so a leftover never sits under another's
//! point.

use std::path::PathBuf;
use std::process::Child;

use base64::Engine as _;

use super::*;
use crate::support::Running;

/// One test at a time puts windows on the screen and clicks: tests run in parallel, and a
/// click or a key meant for one test's window must not reach another's.
pub(super) async fn screen() -> tokio::sync::MutexGuard<'static, ()> {
    static SCREEN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    SCREEN.lock().await
}

/// An `xev` window that logs what it receives.
struct Xev {
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Xev {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Xev {
    async fn open(d: &Desktop, name: &str, geometry: &str) -> Xev {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("xev.log");
        let child = Command::new("xev")
            .args(["-geometry", geometry, "-name", name])
            .env("DISPLAY", &d.display)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .expect("xev (x11-utils, from scripts/setup)");
        let xev = Xev {
            child,
            log,
            _dir: dir,
        };
        let shown = eventually(Duration::from_secs(10), || {
            String::from_utf8_lossy(&run_tool("xwininfo", &["-name", name], d).stdout)
                .contains("IsViewable")
        })
        .await;
        assert!(shown, "the xev window {name} never showed");
        xev
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for a button press logged at these root coordinates.
    async fn pressed_at(&self, x: i32, y: i32) -> bool {
        let needle = format!("root:({x},{y})");
        eventually(Duration::from_secs(10), || {
            let log = self.log();
            log.split("ButtonPress event")
                .skip(1)
                .any(|event| event.contains(&needle))
        })
        .await
    }

    fn presses(&self) -> usize {
        self.log().matches("ButtonPress event").count()
    }
}

/// `corral run --json --approve-stdin` on the desktop under the default preset.
async fn approving(h: &Harness, server: &FakeModel, d: &Desktop, extra: &[&str]) -> Running {
    let mut cmd = openai_run(h, server, "use the desktop")
        .args(["--approve-stdin"])
        .args(extra.iter().copied())
        .env("DISPLAY", &d.display)
        .env("DBUS_SESSION_BUS_ADDRESS", &d.bus);
    if let Ok(auth) = std::env::var("XAUTHORITY") {
        cmd = cmd.env("XAUTHORITY", auth);
    }
    cmd.live_stdin().spawn().await
}

fn is_request(e: &Value) -> bool {
    e["kind"] == "permission" && e["data"].get("resolved").is_none()
}

async fn answer(running: &mut Running, n: usize, decision: &str) -> Value {
    let request = running.wait_for_event(n, is_request).await;
    let id = request["data"]["requestId"].as_str().unwrap().to_owned();
    running
        .send_line(&json!({"requestId": id, "decision": decision}).to_string())
        .await;
    request
}

fn click(id: &str, x: i64, y: i64) -> Reply {
    Reply::new().tool_call(
        id,
        "computer",
        &json!({"action": "left_click", "coordinate": [x, y]}).to_string(),
    )
}

#[tokio::test]
async fn a_click_lands_where_the_model_saw_it_and_the_person_saw_it_marked() {
    let _screen = screen().await;
    let d = desktop();
    let h = Harness::new();
    // A screenshot half the screen's size: the model's [100, 75] is the screen's (201, 151).
    h.write_config("screenshot_max_long_edge = 640\n");
    let xev = Xev::open(&d, "corral-click-target", "600x300+0+0").await;
    let server = FakeModel::start().await;
    server.push(click("c1", 100, 75));
    server.push(Reply::new().text("clicked"));
    let mut running = approving(&h, &server, &d, &[]).await;
    let request = answer(&mut running, 0, "allow").await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");

    let desktop = &request["data"]["desktop"];
    assert_eq!(desktop["action"], "left_click", "{desktop}");
    assert_eq!(desktop["point"], json!([201, 151]));
    assert_eq!(desktop["window"]["title"], "corral-click-target");
    let description = desktop["description"].as_str().unwrap();
    assert!(
        description.starts_with("left click at (201, 151) in ")
            && description.contains("corral-click-target"),
        "{description}"
    );
    let (w, hgt, pixels) =
        decode_png(desktop["image"]["dataBase64"].as_str().unwrap_or_else(|| {
            desktop["image"]["data_base64"]
                .as_str()
                .expect("the marked screenshot")
        }));
    assert_eq!((w, hgt), (640, 400));
    let at = |x: u32, y: u32| {
        let i = ((y * w + x) * 3) as usize;
        [pixels[i], pixels[i + 1], pixels[i + 2]]
    };
    assert_eq!(at(100, 75), [235, 20, 60], "the click point is marked");

    assert!(xev.pressed_at(201, 151).await, "xev log:\n{}", xev.log());
    let result = &out.of_kind("tool_result")[0]["data"];
    assert_eq!(result["result"]["success"], true, "{result}");
    let images: Vec<&Value> = result["update"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["content"]["type"] == "image")
        .collect();
    assert_eq!(
        images.len(),
        1,
        "a fresh screenshot follows the click: {result}"
    );

    // The log replays it: the marked screen the person approved, then the screen after.
    let id = out.of_kind("result")[0]["agent"]
        .as_str()
        .unwrap()
        .to_owned();
    let frames = h.work().join("frames");
    let logs = h
        .corral()
        .args(["logs", &id, "--images", frames.to_str().unwrap()])
        .run()
        .await;
    assert!(logs.success(), "{logs:?}");
    let mut files: Vec<String> = std::fs::read_dir(&frames)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(files[0].ends_with("-asked-c1.png"), "{files:?}");
    assert!(files[1].ends_with("-result-c1.png"), "{files:?}");
    let asked = std::fs::read(frames.join(&files[0])).unwrap();
    let shown = base64::engine::general_purpose::STANDARD
        .decode(desktop["image"]["data_base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(asked, shown, "the frame is the image the person saw");
    for file in &files {
        assert!(
            logs.stdout
                .contains(&format!("image → {}", frames.join(file).display())),
            "{}",
            logs.stdout
        );
    }
}

#[tokio::test]
async fn a_window_that_came_up_under_the_point_after_approval_is_not_clicked() {
    let _screen = screen().await;
    let d = desktop();
    let h = Harness::new();
    let below = Xev::open(&d, "corral-approved-window", "600x300+660+0").await;
    let server = FakeModel::start().await;
    server.push(click("c1", 900, 150));
    server.push(Reply::new().text("it moved"));
    let mut running = approving(&h, &server, &d, &[]).await;
    let request = running.wait_for_event(0, is_request).await;
    assert_eq!(
        request["data"]["desktop"]["window"]["title"],
        "corral-approved-window"
    );
    // Between the person's look and the click, another window takes the spot.
    let cover = Xev::open(&d, "corral-usurper", "200x200+800+50").await;
    let id = request["data"]["requestId"].as_str().unwrap().to_owned();
    running
        .send_line(&json!({"requestId": id, "decision": "allow"}).to_string())
        .await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let error = error_of(&out.of_kind("tool_result")[0]["data"]);
    assert!(
        error.contains("changed since the action was approved")
            && error.contains("corral-approved-window")
            && error.contains("corral-usurper"),
        "{error}"
    );
    assert_eq!(below.presses() + cover.presses(), 0, "nothing was clicked");
}

#[tokio::test]
async fn rules_per_window_let_clicks_run_and_refuse_key_combos() {
    let _screen = screen().await;
    let d = desktop();
    let h = Harness::new();
    let preset = h.work().join("desk.toml");
    std::fs::write(
        &preset,
        "description = \"clicks in one window\"\nauto_approve = \"safe\"\noffer = \"all\"\n\
         [[rules]]\ntool = \"computer\"\nallow = [\"title:corral-ruled*\"]\n\
         deny = [\"key:ctrl+alt+*\"]\n",
    )
    .unwrap();
    let xev = Xev::open(&d, "corral-ruled-window", "600x300+0+420").await;
    let server = FakeModel::start().await;
    server.push(click("c1", 200, 520));
    server.push(Reply::new().tool_call(
        "c2",
        "computer",
        r#"{"action": "key", "text": "ctrl+alt+Delete"}"#,
    ));
    server.push(Reply::new().text("done"));
    // No --approve-stdin: anything that asked would be refused.
    let mut cmd = openai_run(&h, &server, "click")
        .args(["-p", preset.to_str().unwrap()])
        .env("DISPLAY", &d.display)
        .env("DBUS_SESSION_BUS_ADDRESS", &d.bus);
    if let Ok(auth) = std::env::var("XAUTHORITY") {
        cmd = cmd.env("XAUTHORITY", auth);
    }
    let out = cmd.run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.of_kind("permission").is_empty(), "nothing asked");
    let results = out.of_kind("tool_result");
    assert_eq!(
        results[0]["data"]["result"]["success"], true,
        "{}",
        results[0]
    );
    assert!(xev.pressed_at(200, 520).await, "xev log:\n{}", xev.log());
    let refused = error_of(&results[1]["data"]);
    assert!(
        refused.contains("denied by the preset rule") && refused.contains("key:ctrl+alt+*"),
        "{refused}"
    );
}

#[tokio::test]
async fn nothing_is_clicked_while_a_screen_saver_says_the_screen_is_locked() {
    let _screen = screen().await;
    let d = desktop();
    let h = Harness::new();
    let xev = Xev::open(&d, "corral-locked-window", "600x300+660+420").await;
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/desktop/screensaver.py");
    let mut saver = Command::new("/usr/bin/python3")
        .arg(&fixture)
        .arg(&ready)
        .env("DBUS_SESSION_BUS_ADDRESS", &d.bus)
        .spawn()
        .expect("python3 with python3-dbus (scripts/setup)");
    assert!(
        eventually(Duration::from_secs(10), || ready.exists()).await,
        "the screen saver never owned its name"
    );
    let server = FakeModel::start().await;
    server.push(click("c1", 900, 520));
    server.push(Reply::new().text("locked"));
    let mut running = approving(&h, &server, &d, &[]).await;
    answer(&mut running, 0, "allow").await;
    let out = running.wait().await;
    let _ = saver.kill();
    let _ = saver.wait();
    assert_eq!(out.code, Some(0), "{out:?}");
    let error = error_of(&out.of_kind("tool_result")[0]["data"]);
    assert!(error.contains("the screen is locked"), "{error}");
    assert_eq!(xev.presses(), 0, "nothing was clicked");
}

#[tokio::test]
async fn windows_lists_focuses_and_captures_one_window() {
    let _screen = screen().await;
    let d = desktop();
    let h = Harness::new();
    let _xev = Xev::open(&d, "corral-listed-window", "300x200+320+300").await;
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "windows", r#"{"action": "list"}"#));
    server.push(Reply::new().tool_call(
        "c2",
        "windows",
        r#"{"action": "focus", "title": "corral-listed"}"#,
    ));
    server.push(Reply::new().tool_call(
        "c3",
        "windows",
        r#"{"action": "screenshot", "title": "corral-listed-window"}"#,
    ));
    server.push(Reply::new().text("seen"));
    let out = desktop_run(&h, &server, &d, "windows").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let results = out.of_kind("tool_result");
    let list = output_of(&results[0]["data"]);
    let line = list
        .lines()
        .find(|l| l.contains("title=\"corral-listed-window\""))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(line.contains("width=300 height=200"), "{line}");
    let focused = output_of(&results[1]["data"]);
    assert!(focused.starts_with("focused id="), "{focused}");
    let shot = &results[2]["data"];
    let text = output_of(shot);
    assert!(text.contains("300×200"), "{text}");
    let image = shot["update"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["content"]["type"] == "image")
        .unwrap_or_else(|| panic!("{shot}"));
    let (w, hgt, _) = decode_png(image["content"]["data"].as_str().unwrap());
    assert_eq!((w, hgt), (300, 200));
}

/// Presses and releases a key through XTEST, as the person at the keyboard would.
fn press(d: &Desktop, keysym: u32) {
    use x11rb::connection::Connection as _;
    use x11rb::protocol::xproto::ConnectionExt as _;
    use x11rb::protocol::xtest::ConnectionExt as _;
    let (conn, screen) = x11rb::connect(Some(&d.display)).unwrap();
    let root = conn.setup().roots[screen].root;
    let min = conn.setup().min_keycode;
    let count = conn.setup().max_keycode - min + 1;
    let map = conn
        .get_keyboard_mapping(min, count)
        .unwrap()
        .reply()
        .unwrap();
    let per = usize::from(map.keysyms_per_keycode);
    let keycode = min
        + map
            .keysyms
            .chunks(per)
            .position(|syms| syms.contains(&keysym))
            .expect("the key is on the keyboard") as u8;
    for kind in [
        x11rb::protocol::xproto::KEY_PRESS_EVENT,
        x11rb::protocol::xproto::KEY_RELEASE_EVENT,
    ] {
        conn.xtest_fake_input(kind, keycode, 0, root, 0, 0, 0)
            .unwrap()
            .check()
            .unwrap();
    }
    x11rb::wrapper::ConnectionExt::sync(&conn).unwrap();
}

#[tokio::test]
async fn the_pause_key_stops_a_running_desktop_turn() {
    let _screen = screen().await;
    let d = desktop();
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "computer", r#"{"action": "wait", "duration": 25}"#));
    server.push(Reply::new().text("never asked"));
    let mut cmd = desktop_run(&h, &server, &d, "wait for me");
    cmd = cmd.env("RUST_LOG", "corral=warn");
    let running = cmd.spawn().await;
    running
        .wait_for_event(0, |e| {
            e["kind"] == "tool_use" && e["data"]["call"]["status"] == "in_progress"
        })
        .await;
    // The watcher grabs Pause when the action starts: press until the turn ends.
    let started = Instant::now();
    let mut ended = false;
    while !ended && started.elapsed() < Duration::from_secs(20) {
        press(&d, 0xff13);
        ended = running
            .events_so_far()
            .iter()
            .any(|e| e["kind"] == "result");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let out = running.wait().await;
    let result = &out.of_kind("result")[0]["data"];
    assert_eq!(result["stopReason"], "cancelled", "{out:?}");
    assert_eq!(
        server.chat_requests().len(),
        1,
        "the model was not asked again"
    );
    assert!(out.stderr.contains("stop key (Pause)"), "{}", out.stderr);
}

#[tokio::test]
async fn after_a_window_screenshot_coordinates_are_in_that_windows_picture() {
    let _screen = screen().await;
    let d = desktop();
    let h = Harness::new();
    let xev = Xev::open(&d, "corral-window-view", "300x200+700+450").await;
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call(
        "c1",
        "windows",
        r#"{"action": "screenshot", "title": "corral-window-view"}"#,
    ));
    server.push(click("c2", 10, 20));
    server.push(Reply::new().text("clicked"));
    let out = desktop_run(&h, &server, &d, "click in the window")
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    // The window's contents start inside xev's 2 px border, at (702, 452).
    assert!(xev.pressed_at(712, 472).await, "xev log:\n{}", xev.log());
}
