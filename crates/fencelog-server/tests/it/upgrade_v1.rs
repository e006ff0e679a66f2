//! Format compatibility: a data directory written by the format-v1 code
//! (commit f50ad33; how it was made is in tests/fixtures/v1/README.md)
//! opens under format v2, serves exactly what the v1 server answered,
//! keeps every token, takes appends and trims, and still does after a
//! restart. Its v1 segments are never rewritten.

use fencelog_engine::{Config, Engine};
use fencelog_testkit::http::{stale_body, TestServer};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1")
}

/// The fixture's data directory, copied (into `root/data`) so the test
/// never changes it.
fn copy_of_fixture(root: &Path) -> PathBuf {
    let data = root.join("data");
    std::fs::create_dir(&data).unwrap();
    for e in std::fs::read_dir(fixture().join("data")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), data.join(e.file_name())).unwrap();
    }
    data
}

fn v1_segment(name: &str) -> Vec<u8> {
    std::fs::read(fixture().join("data").join(name)).unwrap()
}

fn config() -> Config {
    Config {
        segment_bytes_max: 4096,
        // Reclamation only when the test asks: it may delete v1 segments.
        reclaim_interval_ms: 0,
        ..Config::default()
    }
}

/// A server over `data`; the directory outlives it (the server's own
/// temporary directory is an empty one).
async fn serve(data: &Path) -> TestServer {
    let engine = Engine::open_with(data, config()).unwrap();
    TestServer::with_engine(engine, tempfile::tempdir().unwrap()).await
}

/// Every stream reads back exactly as the v1 server answered it.
async fn assert_reads_as_v1(s: &TestServer) {
    for (stream, file) in [
        ("orders", "orders.json"),
        ("bin.1:x-y", "bin.json"),
        ("big", "big.json"),
        ("late", "late.json"),
    ] {
        let want: Value =
            serde_json::from_slice(&std::fs::read(fixture().join(file)).unwrap()).unwrap();
        let (status, got) = s.api.read(stream, "start_seq=0&count=1000").await;
        assert_eq!(status, 200, "{stream}: {got}");
        assert_eq!(got["records"], want["records"], "{stream}");
        assert_eq!(got["next_seq"], want["next_seq"], "{stream}");
    }
}

async fn assert_tokens_kept(s: &TestServer) {
    let (status, st) = s.api.state("orders").await;
    assert_eq!(status, 200);
    assert_eq!(
        (&st["next_seq"], &st["highest_token"]),
        (&json!(33), &json!(43))
    );
    let (status, st) = s.api.state("fenced-only").await;
    assert_eq!(status, 200);
    assert_eq!(
        (&st["next_seq"], &st["highest_token"]),
        (&json!(0), &json!(7))
    );
    // Stale owners stay refused.
    assert_eq!(
        s.api.append("orders", 42, &["B again"]).await,
        (409, stale_body("orders", 42, 43, 33))
    );
    assert_eq!(
        s.api.fence("fenced-only", 6).await,
        (409, stale_body("fenced-only", 6, 7, 0))
    );
    assert_eq!(
        s.api.append("big", 4, &["stale"]).await,
        (409, stale_body("big", 4, 5, 1))
    );
}

#[tokio::test]
async fn a_v1_directory_opens_keeps_its_records_and_tokens_and_takes_new_writes() {
    let root = tempfile::tempdir().unwrap();
    let data = copy_of_fixture(root.path());
    let s = serve(&data).await;
    assert_reads_as_v1(&s).await;
    assert_tokens_kept(&s).await;

    // New writes on the upgraded directory: an append, a trim, a seal.
    let (status, a) = s.api.append("orders", 43, &["C after upgrade"]).await;
    assert_eq!((status, &a["first_seq"]), (200, &json!(33)), "{a}");
    let (status, t) = s
        .api
        .post_json(
            "/v1/streams/orders/trim",
            &json!({"fencing_token": 44, "trim_seq": 10}),
        )
        .await;
    assert_eq!(status, 200, "{t}");
    assert_eq!(
        (&t["first_seq"], &t["next_seq"], &t["highest_token"]),
        (&json!(10), &json!(34), &json!(44))
    );
    let (status, sealed) = s
        .api
        .post_json("/v1/streams/late/seal", &json!({"fencing_token": 3}))
        .await;
    assert_eq!((status, &sealed["sealed"]), (200, &json!(true)), "{sealed}");
    s.stop().await.unwrap();

    // After a restart: the v2 frames and the v1 records together.
    let s = serve(&data).await;
    let (status, st) = s.api.state("orders").await;
    assert_eq!(status, 200);
    assert_eq!(
        (&st["first_seq"], &st["next_seq"], &st["highest_token"]),
        (&json!(10), &json!(34), &json!(44))
    );
    let (status, below) = s.api.read("orders", "start_seq=9").await;
    assert_eq!(
        (status, &below["error"]),
        (416, &json!("out_of_range")),
        "{below}"
    );
    let want: Value =
        serde_json::from_slice(&std::fs::read(fixture().join("orders.json")).unwrap()).unwrap();
    let (status, got) = s.api.read("orders", "start_seq=10&count=1000").await;
    assert_eq!(status, 200);
    let got = got["records"].as_array().unwrap();
    assert_eq!(got[..23], want["records"].as_array().unwrap()[10..]);
    assert_eq!(got[23]["body"], json!("C after upgrade"));
    assert_eq!(got.len(), 24);
    assert_eq!(
        s.api.append("orders", 43, &["stale"]).await,
        (409, stale_body("orders", 43, 44, 34))
    );
    let (status, late) = s.api.append("late", 9, &["after seal"]).await;
    assert_eq!(
        (status, &late["error"]),
        (409, &json!("stream_sealed")),
        "{late}"
    );
    assert_eq!(
        s.api.fence("fenced-only", 6).await,
        (409, stale_body("fenced-only", 6, 7, 0))
    );
    for (stream, file) in [("bin.1:x-y", "bin.json"), ("big", "big.json")] {
        let want: Value =
            serde_json::from_slice(&std::fs::read(fixture().join(file)).unwrap()).unwrap();
        assert_eq!(
            s.api.read(stream, "start_seq=0").await.1["records"],
            want["records"]
        );
    }
    s.stop().await.unwrap();

    // v1 segments are read-only: the full ones are byte for byte as the v1
    // code left them, and the directory now has a MANIFEST.
    for seg in ["00000000000000000000.seg", "00000000000000000001.seg"] {
        assert_eq!(
            std::fs::read(data.join(seg)).unwrap(),
            v1_segment(seg),
            "{seg}"
        );
    }
    assert!(data.join("MANIFEST").exists());

    // Reclamation over v1 segments: the trimmed part of "orders" may go,
    // nothing readable does, and the tokens stay.
    let s = serve(&data).await;
    s.engine.reclaim().await.unwrap();
    s.stop().await.unwrap();
    let s = serve(&data).await;
    assert_eq!(
        s.api.read("orders", "start_seq=10&count=1000").await.1["records"]
            .as_array()
            .unwrap()
            .len(),
        24
    );
    let want: Value =
        serde_json::from_slice(&std::fs::read(fixture().join("big.json")).unwrap()).unwrap();
    assert_eq!(
        s.api.read("big", "start_seq=0").await.1["records"],
        want["records"]
    );
    assert_eq!(
        s.api.fence("fenced-only", 6).await,
        (409, stale_body("fenced-only", 6, 7, 0))
    );
    assert_eq!(
        s.api.append("orders", 43, &["stale"]).await,
        (409, stale_body("orders", 43, 44, 34))
    );
    s.stop().await.unwrap();
}
