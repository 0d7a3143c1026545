//! Hostile model servers (issue 14): one huge SSE event, one huge error body.

use std::time::{Duration, Instant};

use super::support::{FakeModel, Harness, Reply};
use super::{Row, corral_cmd, peak_rss_kib};

/// Wall time of a run whose one reply carries `mib` MiB of text in a single SSE event
/// (the cap raised above it), and the peak RSS.
async fn one_long_event(mib: usize) -> (Duration, u64) {
    let h = Harness::new();
    h.write_config("[limits]\nmax_stream_line_bytes = 268435456\n");
    let server = FakeModel::start().await;
    server.push(Reply::new().text(&"x".repeat(mib << 20)));
    let started = Instant::now();
    let child = corral_cmd(&h, &server, &["go"]).spawn().unwrap();
    let (peak, status) = peak_rss_kib(child).await;
    assert!(status.success(), "corral failed: {status}");
    (started.elapsed(), peak)
}

/// Peak RSS of a run whose model answers HTTP 400 with a `mib` MiB body.
async fn huge_error_body(mib: usize) -> u64 {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let body = format!("{{\"error\":\"{}\"}}", "e".repeat(mib << 20));
    server.push(Reply::new().status(400, &body));
    let child = corral_cmd(&h, &server, &["go"]).spawn().unwrap();
    peak_rss_kib(child).await.0
}

pub async fn hostile(rows: &mut Vec<Row>) {
    for (mib, name) in [
        (
            10,
            "hostile: run with one 10 MiB SSE event (time, peak RSS)",
        ),
        (
            40,
            "hostile: run with one 40 MiB SSE event (time, peak RSS)",
        ),
    ] {
        let (took, peak) = one_long_event(mib).await;
        rows.push(Row {
            name,
            figure: format!(
                "{:.2} s, {:.0} MiB",
                took.as_secs_f64(),
                peak as f64 / 1024.0
            ),
            goal: "linear: 40 MiB ≈ 4 × 10 MiB (was 1.8 s / 26.9 s)",
        });
    }
    let peak = huge_error_body(300).await;
    rows.push(Row {
        name: "hostile: peak RSS of corral run, HTTP 400 with a 300 MiB body",
        figure: format!("{:.1} MiB", peak as f64 / 1024.0),
        goal: "bounded: 64 KiB read (was 633 MiB)",
    });
}
