//! `corral token` and `corral serve`'s refusal to listen beyond loopback by accident.

use crate::support::Harness;

#[tokio::test]
async fn token_mints_a_jwt_the_server_secret_verifies() {
    let h = Harness::new();
    let out = h
        .corral()
        .args(["token", "--sub", "ana", "--role", "admin", "--ttl", "1h"])
        .env("CORRAL_JWT_SECRET", "token-test-secret")
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let token = out.stdout.trim();
    let claims = corral::Auth::new(b"token-test-secret")
        .unwrap()
        .verify(token)
        .unwrap();
    assert_eq!(claims.sub, "ana");
    assert!(claims.is_admin());
    assert!(
        corral::Auth::new(b"another")
            .unwrap()
            .verify(token)
            .is_err()
    );

    // Without a configured secret, the first use generates the 0600 file both share.
    let out = h.corral().args(["token", "--sub", "bo"]).run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let secret = std::fs::read(h.config_dir().join("corral/jwt-secret")).unwrap();
    let claims = corral::Auth::new(&secret)
        .unwrap()
        .verify(out.stdout.trim())
        .unwrap();
    assert_eq!(claims.sub, "bo");
    assert!(!claims.is_admin());

    let out = h
        .corral()
        .args(["token", "--sub", "x", "--ttl", "forever"])
        .run()
        .await;
    assert_eq!(out.code, Some(2));
    assert!(out.stderr.contains("--ttl"), "{}", out.stderr);
}

#[tokio::test]
async fn serve_refuses_a_non_loopback_address_without_allow_remote() {
    let h = Harness::new();
    let out = h
        .corral()
        .args(["serve", "--listen", "0.0.0.0:0"])
        .env("CORRAL_JWT_SECRET", "s")
        .run()
        .await;
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("not a loopback address") && out.stderr.contains("--allow-remote"));
}

/// Not on a terminal (a service, output piped into a log), `serve` prints no token: only
/// where the page is and how to mint one. (On a terminal it prints a signed-in link:
/// `web_page::link`.)
#[tokio::test]
async fn serve_prints_no_token_when_not_on_a_terminal() {
    use tokio::io::AsyncBufReadExt;
    let h = Harness::new();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("HOME", h.home_dir())
        .env("XDG_CACHE_HOME", h.cache_dir())
        .env("XDG_CONFIG_HOME", h.config_dir())
        .env("XDG_DATA_HOME", h.data_dir())
        .env("CORRAL_JWT_SECRET", "s")
        .current_dir(h.work())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stderr = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let wait = std::time::Duration::from_secs(30);
    let listening = tokio::time::timeout(wait, stdout.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let base = listening.rsplit(' ').next().unwrap().to_string();
    let mut said = String::new();
    while !said.contains("asks for a token") {
        let line = tokio::time::timeout(wait, stderr.next_line())
            .await
            .unwrap_or_else(|_| panic!("no word on the page; stderr: {said}"))
            .unwrap()
            .unwrap_or_else(|| panic!("stderr closed: {said}"));
        said.push_str(&line);
        said.push('\n');
    }
    assert!(said.contains(&format!("{base}/")), "{said}");
    assert!(
        said.contains("corral token --sub NAME --role admin"),
        "{said}"
    );
    assert!(
        !said.contains("token=") && !said.contains("eyJ"),
        "no token in a log: {said}"
    );
    assert!(!listening.contains("eyJ"), "{listening}");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id().unwrap() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = tokio::time::timeout(wait, child.wait()).await;
}
