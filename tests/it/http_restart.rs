//! The real `fencelog serve` binary: killed with SIGKILL it loses nothing it
//! acknowledged (seed test 5); stopped with SIGTERM it drains and exits 0.

use crate::support::serve;
use fencelog_testkit::http::{batch_bytes, stale_body, state_body, Api};
use fencelog_testkit::process::ServerProcess;
use serde_json::json;

fn api_of(srv: &ServerProcess) -> Api {
    Api::new(srv.url().to_string())
}

/// Seed test 5: SIGKILL after acknowledged appends and a data-less fence;
/// after a restart on the same directory every acknowledged record,
/// `next_seq` and `highest_token` are back and the stale token still fails.
#[tokio::test]
async fn sigkill_after_acks_loses_nothing_acknowledged() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let srv = serve().data_dir(&data).start();
    let api = &api_of(&srv);
    assert_eq!(api.append("orders", 41, &["A1", "A2"]).await.0, 200);
    let (status, b) = api.append("orders", 42, &["B1"]).await;
    assert_eq!(status, 200);
    let b_ts = b["timestamp_ms"].as_u64().unwrap();
    assert_eq!(
        api.append_raw(
            "orders",
            &[("fencing-token", "42")],
            vec![0u8, 159, 146, 150]
        )
        .await
        .0,
        200
    );
    let (status, fenced) = api.fence("orders", 43).await;
    assert_eq!(status, 200);
    let last_ts = fenced["last_timestamp_ms"].as_u64().unwrap();
    assert!(last_ts >= b_ts);
    assert_eq!(
        api.fence("lease", 9).await,
        (200, state_body("lease", 0, 9, 0, 0))
    );

    srv.kill9();

    let srv = serve().data_dir(&data).start();
    let api = &api_of(&srv);
    assert_eq!(
        api.state("orders").await,
        (
            200,
            state_body(
                "orders",
                4,
                43,
                last_ts,
                batch_bytes("orders", &[b"A1", b"A2"])
                    + batch_bytes("orders", &[b"B1"])
                    + batch_bytes("orders", &[&[0u8, 159, 146, 150]])
            )
        )
    );
    assert_eq!(
        api.state("lease").await,
        (200, state_body("lease", 0, 9, 0, 0))
    );
    let (status, read) = api.read("orders", "start_seq=0").await;
    assert_eq!(status, 200);
    let records = read["records"].as_array().unwrap();
    let bodies: Vec<_> = records
        .iter()
        .map(|r| {
            (
                r["seq"].clone(),
                r["fencing_token"].clone(),
                r.get("body").or(r.get("body_base64")).cloned().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        bodies,
        vec![
            (json!(0), json!(41), json!("A1")),
            (json!(1), json!(41), json!("A2")),
            (json!(2), json!(42), json!("B1")),
            (json!(3), json!(42), json!("AJ+Slg==")),
        ]
    );
    assert_eq!(read["next_seq"], json!(4));
    assert_eq!(
        api.append("orders", 42, &["late"]).await,
        (409, stale_body("orders", 42, 43, 4))
    );
    assert_eq!(
        api.append("lease", 8, &["late"]).await,
        (409, stale_body("lease", 8, 9, 0))
    );
    assert_eq!(api.append("orders", 43, &["C1"]).await.0, 200);
    api.assert_healthy().await;
    srv.kill9();
}

/// SIGTERM: live tails end, the process exits 0, and what was acknowledged
/// is there on the next start. Configured through the environment only.
#[tokio::test]
async fn sigterm_drains_and_exits_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let srv = serve().data_dir(&data).settings_in_env().start();
    let api = api_of(&srv);
    assert_eq!(api.append("s", 1, &["one", "two"]).await.0, 200);
    let mut tail = api.tail("s", "start_seq=0", None).await;
    tail.expect("records").await;
    // The tail is live on the server; the signal must end it, not hang.
    tail.expect("caught_up").await;

    srv.sigterm();
    assert_eq!(tail.next().await, None, "the tail ends on shutdown");
    assert_eq!(srv.wait().code(), Some(0));

    let srv = serve().data_dir(&data).start();
    assert_eq!(api_of(&srv).bodies("s").await, ["one", "two"]);
}

/// The last segment file deleted while the server was stopped.
/// The MANIFEST lists it, so `fencelog serve` refuses to start — exit 5,
/// the file named in the log, nothing served — instead of coming up
/// without the acknowledged records (and accepting a token below one it
/// already accepted). With the file put back it starts healthy with every
/// record and token.
#[tokio::test]
async fn a_last_segment_deleted_while_stopped_is_refused_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let srv = serve()
        .data_dir(&data)
        .args(["--segment-bytes", "4096"])
        .start();
    let api = api_of(&srv);
    let body = "x".repeat(300);
    for i in 0..30 {
        let rec = format!("{i}{body}");
        assert_eq!(api.append("orders", 1 + i / 10, &[&rec]).await.0, 200);
    }
    let (status, state) = api.state("orders").await;
    assert_eq!(status, 200);
    srv.sigterm();
    assert_eq!(srv.wait().code(), Some(0));

    let mut segs: Vec<String> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".seg"))
        .collect();
    segs.sort();
    assert!(segs.len() >= 3, "{segs:?}");
    let last = segs.last().unwrap().clone();
    let aside = tmp.path().join("aside.seg");
    std::fs::rename(data.join(&last), &aside).unwrap();

    let o = std::process::Command::new(crate::support::BIN)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--segment-bytes",
            "4096",
        ])
        .arg("--data-dir")
        .arg(&data)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(5), "{log}");
    assert!(
        log.contains(&format!(
            "refusing to open the log: corrupt log: {last} at offset 0: segment listed in the MANIFEST is missing"
        )),
        "{log}"
    );
    assert!(!String::from_utf8_lossy(&o.stdout).contains("listening on"));
    assert!(!data.join(&last).exists());

    std::fs::rename(&aside, data.join(&last)).unwrap();
    let srv = serve()
        .data_dir(&data)
        .args(["--segment-bytes", "4096"])
        .start();
    let api = api_of(&srv);
    api.assert_healthy().await;
    assert_eq!(api.state("orders").await, (200, state));
    let bodies = api.bodies("orders").await;
    assert_eq!(bodies.len(), 30);
    assert_eq!(bodies[29], format!("29{body}"));
    assert_eq!(api.append("orders", 2, &["stale"]).await.0, 409);
    srv.kill9();
}
