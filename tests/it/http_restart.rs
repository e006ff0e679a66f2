//! The real `fencelog serve` binary: killed with SIGKILL it loses nothing it
//! acknowledged (seed test 5); stopped with SIGTERM it drains and exits 0.

use fencelog_testkit::http::{batch_bytes, stale_body, state_body, Api};
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

struct Server {
    child: Child,
    api: Api,
    // Held so the server never writes to a closed pipe.
    _stdout: BufReader<ChildStdout>,
}

impl Drop for Server {
    // A failed assertion must not leave a server running.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(data_dir: &Path, log_name: &str) -> Server {
    start_with(data_dir, log_name, true)
}

/// Starts the binary on `data_dir`, configured by flags or, with
/// `flags == false`, by the environment variables alone.
fn start_with(data_dir: &Path, log_name: &str, flags: bool) -> Server {
    let log_path = data_dir.with_extension(log_name);
    let log = std::fs::File::create(&log_path).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fencelog"));
    cmd.arg("serve")
        .env_remove("FENCELOG_LISTEN")
        .env_remove("FENCELOG_DATA_DIR");
    if flags {
        cmd.args(["--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir);
    } else {
        cmd.env("FENCELOG_LISTEN", "127.0.0.1:0")
            .env("FENCELOG_DATA_DIR", data_dir);
    }
    let mut child = cmd.stdout(Stdio::piped()).stderr(log).spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| {
            let _ = child.kill();
            let status = child.wait();
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            panic!("unexpected first line {line:?}; exit {status:?}; log:\n{log}")
        })
        .to_string();
    Server {
        child,
        api: Api::new(format!("http://{addr}")),
        _stdout: stdout,
    }
}

/// Seed test 5: SIGKILL after acknowledged appends and a data-less fence;
/// after a restart on the same directory every acknowledged record,
/// `next_seq` and `highest_token` are back and the stale token still fails.
#[tokio::test]
async fn sigkill_after_acks_loses_nothing_acknowledged() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut srv = start(&data, "log1");
    let api = &srv.api;
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

    srv.child.kill().unwrap(); // SIGKILL to this child's own pid
    srv.child.wait().unwrap();

    let mut srv = start(&data, "log2");
    let api = &srv.api;
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

    srv.child.kill().unwrap();
    srv.child.wait().unwrap();
}

/// SIGTERM: live tails end, the process exits 0, and what was acknowledged
/// is there on the next start. Configured through the environment only.
#[tokio::test]
async fn sigterm_drains_and_exits_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut srv = start_with(&data, "log1", false);
    assert_eq!(srv.api.append("s", 1, &["one", "two"]).await.0, 200);
    let mut tail = srv.api.tail("s", "start_seq=0", None).await;
    tail.expect("records").await;
    // The tail is live on the server; the signal must end it, not hang.
    tail.expect("caught_up").await;

    let status = Command::new("kill")
        .args(["-TERM", &srv.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(tail.next().await, None, "the tail ends on shutdown");
    let exit = srv.child.wait().unwrap();
    assert_eq!(exit.code(), Some(0));

    let mut srv = start(&data, "log2");
    assert_eq!(srv.api.bodies("s").await, ["one", "two"]);
    srv.child.kill().unwrap();
    srv.child.wait().unwrap();
}
