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
