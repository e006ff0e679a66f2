//! The audit log against the real binary: every token rise is a
//! structured info line with the principal, stream, old and new token;
//! a flood of stale writers is logged aggregated (at most a line a second
//! per stream and principal, with the count and the lowest and highest
//! token presented) while `/metrics` counts every rejection.

use crate::support::serve;
use serde_json::Value;
use std::time::{Duration, Instant};

fn audit_lines(log: &str, event: &str) -> Vec<Value> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["target"] == "fencelog::audit" && v["fields"]["event"] == event)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rises_are_logged_and_stale_floods_are_aggregated() {
    let tmp = tempfile::tempdir().unwrap();
    let srv = serve()
        .data_dir(tmp.path().join("data"))
        .args(["--log-format", "json"])
        .start();
    let http = reqwest::Client::new();
    let append = |token: u64| {
        http.post(format!("{}/v1/streams/jobs/records", srv.url()))
            .header("fencing-token", token.to_string())
            .body("x")
            .send()
    };
    let fence = http
        .post(format!("{}/v1/streams/jobs/fence", srv.url()))
        .json(&serde_json::json!({"fencing_token": 5}))
        .send()
        .await
        .unwrap();
    assert_eq!(fence.status().as_u16(), 200);
    assert_eq!(append(7).await.unwrap().status().as_u16(), 200);
    assert_eq!(
        append(7).await.unwrap().status().as_u16(),
        200,
        "no rise, no line"
    );
    let started = Instant::now();
    for i in 0..500u64 {
        assert_eq!(append(1 + i % 6).await.unwrap().status().as_u16(), 409);
    }
    let flood_secs = started.elapsed().as_secs_f64();
    // The last window is written by the once-a-second flush.
    let deadline = Instant::now() + Duration::from_secs(30);
    let stale = loop {
        let lines = audit_lines(&srv.log_text(), "stale_rejected");
        let count: u64 = lines
            .iter()
            .map(|l| l["fields"]["count"].as_u64().unwrap())
            .sum();
        if count == 500 {
            break lines;
        }
        assert!(
            count < 500 && Instant::now() < deadline,
            "{count} of 500 logged"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    println!(
        "500 stale rejections in {flood_secs:.2} s logged in {} lines",
        stale.len()
    );
    assert!(
        stale.len() as f64 <= flood_secs + 3.0,
        "{} lines for a {flood_secs:.2} s flood",
        stale.len()
    );
    let lowest = stale
        .iter()
        .map(|l| l["fields"]["lowest_presented_token"].as_u64().unwrap())
        .min();
    let highest = stale
        .iter()
        .map(|l| l["fields"]["highest_presented_token"].as_u64().unwrap())
        .max();
    assert_eq!((lowest, highest), (Some(1), Some(6)));
    assert!(stale
        .iter()
        .all(|l| l["fields"]["stream"] == "jobs" && l["fields"]["highest_token"] == 7));
    let rises = audit_lines(&srv.log_text(), "token_raised");
    let rises: Vec<(String, u64, u64)> = rises
        .iter()
        .map(|l| {
            let f = &l["fields"];
            (
                f["op"].as_str().unwrap().to_string(),
                f["old_token"].as_u64().unwrap(),
                f["new_token"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rises,
        [("fence".to_string(), 0, 5), ("append".to_string(), 5, 7)]
    );
    let metrics = http
        .get(format!("{}/metrics", srv.url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("fencelog_stale_rejections_total 500\n"),
        "{metrics}"
    );
    srv.sigterm_and_wait();
}
