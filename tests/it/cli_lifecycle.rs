//! `fencelog trim`, `seal`, `delete` and `config` against the real server:
//! what they print and how they exit (0, 3 stale, 4 rejected, 2 usage).

use crate::support::{serve, BIN};
use serde_json::{json, Value};
use std::process::{Command, Output, Stdio};

fn run(url: &str, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("FENCELOG_URL", url)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// [`run`] for a command that should end by itself (a tail of a sealed
/// stream): killed by its pid, failing the test, if it is still running
/// after a deadline.
fn run_to_end(url: &str, args: &[&str]) -> Output {
    let child = Command::new(BIN)
        .args(args)
        .env("FENCELOG_URL", url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    match rx.recv_timeout(std::time::Duration::from_secs(30)) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").arg(pid.to_string()).status();
            panic!("fencelog {args:?} did not end within 30 s");
        }
    }
}

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(bytes)))
}

#[test]
fn trim_seal_delete_and_config_from_the_command_line() {
    let tmp = tempfile::tempdir().unwrap();
    let server = serve().data_dir(tmp.path().join("data")).start();
    let url = server.url();
    for i in 0..3 {
        assert!(run(url, &["append", "s", "--token", "2", &format!("r{i}")])
            .status
            .success());
    }
    let o = run(url, &["trim", "s", "--token", "2", "--to", "2", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let s = json_of(&o.stdout);
    assert_eq!((&s["first_seq"], &s["next_seq"]), (&json!(2), &json!(3)));

    let o = run(url, &["trim", "s", "--token", "1", "--to", "3", "--json"]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "a stale trim exits like a stale append"
    );
    assert_eq!(json_of(&o.stderr)["error"], json!("stale_fencing_token"));

    let o = run(
        url,
        &[
            "config",
            "s",
            "--retention-age",
            "7d",
            "--retention-bytes",
            "10GiB",
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let s = json_of(&o.stdout);
    assert_eq!(
        (&s["retention_age_s"], &s["retention_bytes"]),
        (&json!(604800), &json!(10737418240u64))
    );
    let o = run(url, &["config", "s", "--retention-age", "soon"]);
    assert_eq!(o.status.code(), Some(2));

    let o = run(url, &["seal", "s", "--token", "2"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let line = String::from_utf8(o.stdout).unwrap();
    assert!(
        line.starts_with("sealed s\tnext_seq=3\t") && line.trim_end().ends_with("\tsealed"),
        "{line:?}"
    );
    let o = run(url, &["append", "s", "--token", "9", "late", "--json"]);
    assert_eq!(o.status.code(), Some(4));
    let err = json_of(&o.stderr);
    assert_eq!(
        (&err["error"], &err["next_seq"], &err["sealed"]),
        (&json!("stream_sealed"), &json!(3), &json!(true))
    );

    // A tail of the sealed stream prints what is left and ends, exit 0.
    let o = run_to_end(url, &["tail", "s", "--from", "2"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "2\t2\tr2\n");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("fencelog: s is sealed at next_seq 3"),
        "{o:?}"
    );

    let o = run(url, &["delete", "s", "--token", "2", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(json_of(&o.stdout)["deleted"], json!(true));
    let o = run(url, &["status", "s"]);
    assert_eq!(o.status.code(), Some(4));
    let o = run(url, &["append", "s", "--token", "2", "zombie"]);
    assert_eq!(o.status.code(), Some(3), "the tombstone keeps the token");
}
