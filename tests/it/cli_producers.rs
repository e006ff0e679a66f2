//! `fencelog producer`, `fencelog fences`, `fencelog cursor` and the
//! multi-stream `fencelog fence` against the real server: what they print
//! and how they exit.

use crate::support::{serve, BIN};
use fencelog_client::{Client, Producer};
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

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(bytes)))
}

fn lines(o: &Output) -> Vec<String> {
    String::from_utf8(o.stdout.clone())
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn producer_fences_cursor_and_multi_stream_fence_from_the_command_line() {
    let tmp = tempfile::tempdir().unwrap();
    let server = serve().data_dir(tmp.path().join("data")).start();
    let url = server.url();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ack = rt.block_on(async {
        let c = Client::new(url).unwrap();
        let mut p = Producer::start(c, "s", "w-1", 2).await.unwrap();
        p.append(["a", "b"]).await.unwrap()
    });
    let o = run(url, &["producer", "s", "w-1", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(
        json_of(&o.stdout),
        json!({"producer_id": "w-1", "producer_seq": 0, "first_seq": 0, "last_seq": 1,
               "fencing_token": 2, "timestamp_ms": ack.timestamp_ms})
    );
    let o = run(url, &["producer", "s", "nobody"]);
    assert_eq!(o.status.code(), Some(4), "{o:?}");

    // Several streams: one all-or-nothing batch.
    let o = run(url, &["fence", "s", "t", "u", "--token", "5"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(
        lines(&o),
        [
            "fenced s at token 5 (next_seq 2)",
            "fenced t at token 5 (next_seq 0)",
            "fenced u at token 5 (next_seq 0)"
        ]
    );
    // A stale one refuses all of them: exit 3, nothing changed.
    let o = run(url, &["fence", "v", "s", "--token", "4", "--json"]);
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    let err = json_of(&o.stderr);
    assert_eq!(err["error"], "stale_fencing_token");
    assert_eq!(err["ops"].as_array().unwrap().len(), 2);
    assert_eq!(run(url, &["status", "v"]).status.code(), Some(4));

    let o = run(url, &["fences", "s"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let got = lines(&o);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got[0].starts_with("5\tfirst_seq=2\t") && got[0].ends_with("\tby=fence"));
    assert!(got[1].starts_with("2\tfirst_seq=0\t") && got[1].ends_with("\tby=append"));

    let o = run(
        url,
        &["cursor", "s", "r", "--set", "1", "--token", "3", "--json"],
    );
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(
        (
            json_of(&o.stdout)["seq"].clone(),
            json_of(&o.stdout)["fencing_token"].clone()
        ),
        (json!(1), json!(3))
    );
    let o = run(url, &["cursor", "s", "r", "--set", "2", "--token", "2"]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "a stale cursor commit exits like a stale append"
    );
    let o = run(url, &["cursor", "s", "r"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(
        lines(&o)[0].starts_with("r\tseq=1\tfencing_token=3\t"),
        "{o:?}"
    );
    let o = run(url, &["cursor", "s", "none"]);
    assert_eq!(o.status.code(), Some(4));
    let o = run(url, &["cursor", "s", "r", "--set", "2"]);
    assert_eq!(o.status.code(), Some(2), "--set needs --token");
}
