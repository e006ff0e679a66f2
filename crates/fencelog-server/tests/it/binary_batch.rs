//! The compact binary append body (`application/vnd.fencelog.batch`): a
//! batch goes in as length-prefixed records and comes back byte for byte;
//! every malformed body is a 400 naming what is wrong, every limit a 413,
//! and none of them changes the stream.

use bytes::Bytes;
use fencelog_client::{Client, ClientError};
use fencelog_engine::Config;
use fencelog_server::server::ServerConfig;
use fencelog_testkit::http::{stale_body, TestServer};
use serde_json::{json, Value};

const BATCH: &str = "application/vnd.fencelog.batch";

/// A request body, its headers, and the exact message it must be refused with.
type Case = (Vec<u8>, &'static [(&'static str, &'static str)], String);

fn frame(records: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        out.extend_from_slice(&(r.len() as u32).to_le_bytes());
        out.extend_from_slice(r);
    }
    out
}

async fn post(
    srv: &TestServer,
    stream: &str,
    content_type: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (u16, Value) {
    let mut req = srv
        .api
        .client
        .post(format!("{}/v1/streams/{stream}/records", srv.api.base))
        .header("content-type", content_type)
        .body(body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

/// The acknowledgement minus its timestamp, which is the server's clock.
fn ack_without_time(mut v: Value) -> Value {
    assert!(v["timestamp_ms"].as_u64().is_some_and(|t| t > 0), "{v}");
    v.as_object_mut().unwrap().remove("timestamp_ms");
    v
}

/// Every record of `stream` as raw bytes, decoding whichever body field the
/// server chose.
async fn read_back(srv: &TestServer, stream: &str) -> Vec<Vec<u8>> {
    use base64::Engine as _;
    let (status, v) = srv.api.read(stream, "start_seq=0").await;
    assert_eq!(status, 200, "{v}");
    v["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| match (&r["body"], &r["body_base64"]) {
            (Value::String(s), Value::Null) => s.as_bytes().to_vec(),
            (Value::Null, Value::String(b)) => {
                base64::engine::general_purpose::STANDARD.decode(b).unwrap()
            }
            _ => panic!("record without exactly one body field: {r}"),
        })
        .collect()
}

#[tokio::test]
async fn a_binary_batch_is_appended_and_read_back_byte_exact() {
    let srv = TestServer::start().await;
    let records: [&[u8]; 4] = [b"text", b"", b"\x00\xff\xfe not utf-8", b"{\"json\": true}"];
    let (status, ack) = post(&srv, "s", BATCH, &[("fencing-token", "5")], frame(&records)).await;
    assert_eq!(status, 200, "{ack}");
    assert_eq!(
        ack_without_time(ack),
        json!({"stream": "s", "first_seq": 0, "last_seq": 3, "next_seq": 4, "fencing_token": 5})
    );
    assert_eq!(read_back(&srv, "s").await, records);

    // Parameters and letter case in the media type do not matter, and
    // Match-Seq-Num guards the append as it does for raw bodies.
    let (status, ack) = post(
        &srv,
        "s",
        "Application/Vnd.Fencelog.Batch; version=1",
        &[("fencing-token", "5"), ("match-seq-num", "4")],
        frame(&[b"fifth"]),
    )
    .await;
    assert_eq!(
        (status, ack_without_time(ack)),
        (
            200,
            json!({"stream": "s", "first_seq": 4, "last_seq": 4, "next_seq": 5, "fencing_token": 5})
        )
    );
    let (status, body) = post(
        &srv,
        "s",
        BATCH,
        &[("fencing-token", "5"), ("match-seq-num", "4")],
        frame(&[b"late"]),
    )
    .await;
    assert_eq!(
        (status, body),
        (
            412,
            json!({"error": "seq_mismatch", "message": "match_seq_num 4 does not equal the stream's next_seq 5",
                   "stream": "s", "match_seq_num": 4, "next_seq": 5})
        )
    );
    let (status, body) = post(
        &srv,
        "s",
        BATCH,
        &[("fencing-token", "4")],
        frame(&[b"old"]),
    )
    .await;
    assert_eq!((status, body), (409, stale_body("s", 4, 5, 5)));
    assert_eq!(read_back(&srv, "s").await.len(), 5);
    srv.stop().await.unwrap();
}

#[tokio::test]
async fn malformed_batches_are_400_with_the_exact_reason() {
    let srv = TestServer::start().await;
    post(
        &srv,
        "s",
        BATCH,
        &[("fencing-token", "5")],
        frame(&[b"kept"]),
    )
    .await;
    const TOKEN: &[(&str, &str)] = &[("fencing-token", "5")];
    let token = TOKEN;
    let cases: Vec<Case> = vec![
        (
            vec![],
            token,
            format!("the {BATCH} body is empty: it needs at least one record (a u32 little-endian length, then that many bytes)"),
        ),
        (
            b"\x02\x00".to_vec(),
            token,
            format!("the {BATCH} body has 2 trailing bytes at offset 0: a record length needs 4"),
        ),
        (
            [frame(&[b"ok"]), b"\x01".to_vec()].concat(),
            token,
            format!("the {BATCH} body has 1 trailing bytes at offset 6: a record length needs 4"),
        ),
        (
            [frame(&[b"ok"]), b"\x09\x00\x00\x00abc".to_vec()].concat(),
            token,
            format!("the {BATCH} body is truncated: record 1 at offset 6 declares 9 bytes but only 3 follow"),
        ),
        (
            b"\xff\xff\xff\xff".to_vec(),
            token,
            format!("the {BATCH} body is truncated: record 0 at offset 0 declares 4294967295 bytes but only 0 follow"),
        ),
        (
            frame(&[b"x"]),
            &[],
            "header Fencing-Token is required".to_string(),
        ),
        (
            frame(&[b"x"]),
            &[("fencing-token", "0")],
            "header Fencing-Token must be an integer in 1..=18446744073709551615, got \"0\"".to_string(),
        ),
        (
            frame(&[b"x"]),
            &[("fencing-token", "5"), ("match-seq-num", "-1")],
            "header match-seq-num must be a non-negative integer, got \"-1\"".to_string(),
        ),
    ];
    for (body, headers, message) in cases {
        let (status, got) = post(&srv, "s", BATCH, headers, body).await;
        assert_eq!(
            (status, got),
            (
                400,
                json!({"error": "bad_request", "message": message, "stream": "s"})
            )
        );
    }
    assert_eq!(read_back(&srv, "s").await, vec![b"kept".to_vec()]);
    srv.api.assert_healthy().await;
    srv.stop().await.unwrap();
}

#[tokio::test]
async fn batches_over_the_limits_are_413_before_anything_is_written() {
    let config = Config {
        batch_records_max: 4,
        batch_bytes_max: 64,
        ..Config::default()
    };
    let srv =
        TestServer::start_with(config, |l| l.body_bytes_max = 200, ServerConfig::default()).await;
    let token = [("fencing-token", "5")];
    let five: [&[u8]; 5] = [b"1", b"2", b"3", b"4", b"5"];
    let (status, body) = post(&srv, "s", BATCH, &token, frame(&five)).await;
    assert_eq!(
        (status, body),
        (
            413,
            json!({"error": "too_large", "message": "records in the batch is 5, the limit is 4", "limit": 4, "actual": 5, "stream": "s"})
        )
    );
    let big = [b'x'; 65];
    let (status, body) = post(&srv, "s", BATCH, &token, frame(&[&big])).await;
    assert_eq!(
        (status, body),
        (
            413,
            json!({"error": "too_large", "message": "bytes in the batch is 65, the limit is 64", "limit": 64, "actual": 65, "stream": "s"})
        )
    );
    // The body cap applies before the framing is even looked at.
    let (status, body) = post(&srv, "s", BATCH, &token, vec![0u8; 201]).await;
    assert_eq!(
        (status, body),
        (
            413,
            json!({"error": "too_large", "message": "request body is 201 bytes or more, the limit is 200", "limit": 200, "stream": "s"})
        )
    );
    let (status, _) = srv.api.state("s").await;
    assert_eq!(status, 404, "a refused batch created the stream");
    srv.stop().await.unwrap();
}

#[tokio::test]
async fn the_client_sends_binary_batches() {
    let srv = TestServer::start().await;
    let client = Client::new(srv.api.base.clone()).unwrap();
    let records = [Bytes::from_static(b"\x00\x01"), Bytes::from_static(b"two")];
    let ack = client
        .append_batch_binary("c", 3, &records, None)
        .await
        .unwrap();
    assert_eq!((ack.first_seq, ack.next_seq, ack.fencing_token), (0, 2, 3));
    assert_eq!(
        read_back(&srv, "c").await,
        vec![b"\x00\x01".to_vec(), b"two".to_vec()]
    );
    let err = client
        .append_batch_binary("c", 2, [b"stale"], None)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::StaleToken {
                presented: 2,
                highest: 3,
                ..
            }
        ),
        "{err:?}"
    );
    let err = client
        .append_batch_binary("c", 3, [b"x"], Some(0))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClientError::SeqMismatch { next_seq: 2, .. }),
        "{err:?}"
    );
    srv.stop().await.unwrap();
}
