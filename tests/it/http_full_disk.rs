//! Storage faults over HTTP: a full disk. The real server on a 2 MiB tmpfs is
//! filled until a write fails: that write and every later one get 507 with
//! the JSON error; since the space runs out while zero-filling ahead of a
//! group, before any of its data is written, nothing changed and the
//! engine is not poisoned: `/healthz` stays 200, reads keep
//! answering, and once the filesystem grows appends succeed again without
//! a restart; after a crash and restart nothing acknowledged is missing.
//!
//! Mounting needs root (CI runs as root). Where it is refused the test says
//! `SKIPPED` on stderr with the reason, and passes — except under
//! `cargo xtask test`, where that is a failure (`fencelog_testkit::deps`).
//! The in-process variant below covers the HTTP mapping on a simulated full
//! disk everywhere.

use crate::support::serve;
use axum::body::Body;
use axum::http::Request;
use axum::Router;
use fencelog_client::{Client, ClientError, ReadOptions};
use fencelog_engine::sim::{Fault, FaultKind, SimStorage};
use fencelog_engine::{Config, Engine};
use fencelog_server::app;
use fencelog_server::state::AppState;
use fencelog_testkit::deps;
use fencelog_testkit::process::ServerProcess;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use tower::ServiceExt;

/// Unmounts on drop, so a failed assertion does not leave a mount behind.
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(at: &Path, size: &str) -> Result<Mount, String> {
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Mount(at.to_path_buf()))
    }

    fn resize(&self, size: &str) {
        let out = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "remount failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Something still holds it; detach so the directory can go.
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

/// The server on `data`, logging outside the tmpfs (the log must not eat
/// the space under test); segments roll inside the test, so a segment
/// creation can hit the full disk too.
fn start(data: &Path, log: &Path) -> (ServerProcess, Client) {
    let srv = serve()
        .data_dir(data)
        .log_file(log)
        .env("FENCELOG_SEGMENT_BYTES", "262144")
        .start();
    let client = Client::new(srv.url().to_string()).unwrap();
    (srv, client)
}

async fn get_json(base: &str, path: &str) -> (u16, Value) {
    let resp = reqwest::get(format!("{base}{path}")).await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

/// Every acknowledged body is at its seq.
async fn assert_all_there(client: &Client, acked: &[(u64, String)]) {
    let opts = ReadOptions {
        count: Some(10_000),
        bytes: Some(64 << 20),
        ..Default::default()
    };
    let mut log = Vec::new();
    let next = client.state("disk").await.unwrap().next_seq;
    while (log.len() as u64) < next {
        let page = client.read("disk", log.len() as u64, &opts).await.unwrap();
        log.extend(page.records);
    }
    for (seq, body) in acked {
        let r = &log[*seq as usize];
        assert_eq!(r.body, body.as_bytes(), "acknowledged seq {seq} differs");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_server_on_a_full_tmpfs() {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mount = match Mount::tmpfs(&mnt, "2m") {
        Ok(m) => m,
        Err(why) => {
            deps::missing("real_server_on_a_full_tmpfs", &why);
            return;
        }
    };
    let data = mnt.join("data");
    let log = tmp.path().join("server.log");
    let (srv, c) = start(&data, &log);
    let c = &c;

    let filler = "f".repeat(8 << 10);
    let mut acked: Vec<(u64, String)> = Vec::new();
    let mut refusal = None;
    for i in 0..1000 {
        let bodies: Vec<String> = (0..4).map(|k| format!("{i}.{k}:{filler}")).collect();
        match c.append("disk", 7, bodies.clone()).await {
            Ok(a) => acked.extend((a.first_seq..).zip(bodies)),
            Err(e) => {
                refusal = Some(e);
                break;
            }
        }
    }
    // The disk filled up while zero-filling ahead of a group, before any
    // of its data was written: a clean 507, nothing changed, and the
    // engine is not poisoned.
    let first = refusal.expect("2 MiB never filled up");
    assert!(
        matches!(
            first,
            ClientError::InsufficientStorage {
                outcome_unknown: false,
                ..
            }
        ),
        "first failed append: {first:?}"
    );
    assert!(!acked.is_empty());
    // Later writes are refused the same way, in JSON, and the server stays
    // healthy: nothing was lost, only space is missing.
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/streams/disk/records", srv.url()))
        .json(&json!({"fencing_token": 7, "records": [{"body": "more"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 507);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"], json!("insufficient_storage"), "{body}");
    assert_eq!(body["outcome_unknown"], Value::Null, "{body}");
    assert!(body["message"]
        .as_str()
        .is_some_and(|m| m.contains("nothing changed")));
    let (status, health) = get_json(srv.url(), "/healthz").await;
    assert_eq!(status, 200, "{health}");
    // Reads of what was acknowledged still work.
    assert_all_there(c, &acked).await;
    println!(
        "filled 2 MiB after {} acknowledged records; then 507 {}",
        acked.len(),
        body["message"]
    );
    // The operator frees space: writes resume without a restart.
    mount.resize("4m");
    let a = c.append("disk", 7, ["after.space"]).await.unwrap();
    acked.push((a.first_seq, "after.space".to_string()));
    assert_all_there(c, &acked).await;

    // ...and after a crash and restart on a bigger disk, everything is there.
    srv.kill9();
    mount.resize("8m");
    let (srv, c) = start(&data, &log);
    let c = &c;
    assert_all_there(c, &acked).await;
    let (status, _) = get_json(srv.url(), "/healthz").await;
    assert_eq!(status, 200);
    for i in 0..20 {
        let body = format!("after.{i}");
        let a = c.append("disk", 7, [body.clone()]).await.unwrap();
        acked.push((a.first_seq, body));
    }
    assert_all_there(c, &acked).await;
    srv.kill9();
    drop(mount);
}

async fn call(router: &Router, req: Request<Body>) -> (u16, Value) {
    let resp = router.clone().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, serde_json::from_slice(&bytes).unwrap())
}

fn append(token: u64, body: &str) -> Request<Body> {
    Request::post("/v1/streams/s/records")
        .header("content-type", "application/json")
        .body(Body::from(
            json!({"fencing_token": token, "records": [{"body": body}]}).to_string(),
        ))
        .unwrap()
}

fn get(uri: &str) -> Request<Body> {
    Request::get(uri).body(Body::empty()).unwrap()
}

/// The same story in process, on the simulated disk: ENOSPC from the next
/// storage call on (every one that changes the disk), answered through the
/// router; then a restart with space and nothing acknowledged missing.
#[tokio::test]
async fn simulated_full_disk_through_the_router() {
    let sim = SimStorage::new();
    let open = || Engine::open_storage(Arc::new(sim.clone()), Config::default()).unwrap();
    let router = app(AppState::new(open()));
    for i in 0..5 {
        assert_eq!(call(&router, append(3, &format!("ok{i}"))).await.0, 200);
    }
    sim.inject(Fault {
        at_op: sim.op_count(),
        kind: FaultKind::NoSpace,
        persistent: true,
    });
    let (status, body) = call(&router, append(3, "lost?")).await;
    assert_eq!(
        (status, &body["error"], &body["outcome_unknown"]),
        (507, &json!("insufficient_storage"), &json!(true)),
        "{body}"
    );
    let (status, body) = call(&router, append(3, "refused")).await;
    assert_eq!(
        (status, &body["error"]),
        (507, &json!("insufficient_storage"))
    );
    assert_eq!(call(&router, get("/healthz")).await.0, 503);
    let (status, body) = call(&router, get("/v1/streams/s/records?start_seq=0")).await;
    assert_eq!(status, 200);
    let bodies: Vec<&str> = body["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["body"].as_str().unwrap())
        .collect();
    assert_eq!(bodies, ["ok0", "ok1", "ok2", "ok3", "ok4"]);

    // Space freed, process restarted (the fault dies with the process).
    drop(router);
    sim.restart();
    let router = app(AppState::new(open()));
    assert_eq!(call(&router, get("/healthz")).await.0, 200);
    let (status, ack) = call(&router, append(3, "after")).await;
    assert_eq!(status, 200, "{ack}");
    assert_eq!(
        ack["first_seq"],
        json!(5),
        "the refused writes left no trace"
    );
    let (_, body) = call(&router, get("/v1/streams/s/records?start_seq=0")).await;
    assert_eq!(body["next_seq"], json!(6));
    assert_eq!(body["records"][4]["body"], json!("ok4"));
    assert_eq!(body["records"][5]["body"], json!("after"));
}
