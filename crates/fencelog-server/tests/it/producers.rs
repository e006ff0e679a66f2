//! Producers over HTTP: idempotent producers (JSON fields and headers),
//! "did my write land?", deadlines, the fence history, fenced cursors and
//! multi-stream batches, with every new error code's exact body in both
//! body forms; and the paused worker that learns its write landed.

use fencelog_engine::Config;
use fencelog_server::server::ServerConfig;
use fencelog_testkit::http::{records_json, stale_body, Api, TestServer};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

async fn put_json(api: &Api, path: &str, body: &Value) -> (u16, Value) {
    let resp = api
        .client
        .put(format!("{}{path}", api.base))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

/// A raw (`raw = true`) or binary-batch append of `body` with headers.
async fn append_headers(
    api: &Api,
    stream: &str,
    raw: bool,
    body: &str,
    headers: &[(&str, String)],
) -> (u16, Value) {
    let (ctype, bytes) = if raw {
        ("application/octet-stream", body.as_bytes().to_vec())
    } else {
        let mut b = (body.len() as u32).to_le_bytes().to_vec();
        b.extend_from_slice(body.as_bytes());
        ("application/vnd.fencelog.batch", b)
    };
    let mut req = api
        .client
        .post(format!("{}/v1/streams/{stream}/records", api.base))
        .header("content-type", ctype)
        .body(bytes);
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

fn producer_json(token: u64, id: &str, seq: u64, bodies: &[&str]) -> Value {
    json!({
        "fencing_token": token, "producer_id": id, "producer_seq": seq,
        "records": records_json(bodies),
    })
}

fn headers(token: u64, id: &str, seq: u64) -> Vec<(&'static str, String)> {
    vec![
        ("fencing-token", token.to_string()),
        ("producer-id", id.to_string()),
        ("producer-seq", seq.to_string()),
    ]
}

async fn append_p(api: &Api, s: &str, token: u64, id: &str, seq: u64, b: &[&str]) -> (u16, Value) {
    api.post_json(
        &format!("/v1/streams/{s}/records"),
        &producer_json(token, id, seq, b),
    )
    .await
}

#[tokio::test]
async fn a_retry_answers_the_original_ack_with_duplicate_in_every_body_form() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    let (status, first) = append_p(api, "s", 3, "w-1", 0, &["a", "b"]).await;
    assert_eq!(status, 200);
    let ts = first["timestamp_ms"].clone();
    let ack = json!({
        "stream": "s", "first_seq": 0, "last_seq": 1, "next_seq": 2,
        "fencing_token": 3, "timestamp_ms": ts,
    });
    assert_eq!(first, ack);
    let mut dup = ack.clone();
    dup["duplicate"] = json!(true);
    assert_eq!(
        append_p(api, "s", 3, "w-1", 0, &["a", "b"]).await,
        (200, dup.clone())
    );
    // The same answer for a header-form retry, raw and binary: the retry
    // is known by (producer_id, producer_seq), whatever its body.
    for raw in [true, false] {
        let got = append_headers(api, "s", raw, "a", &headers(3, "w-1", 0)).await;
        assert_eq!(got, (200, dup.clone()), "raw {raw}");
    }
    // Header form, new seq: applied.
    let (status, next) = append_headers(api, "s", true, "c", &headers(3, "w-1", 1)).await;
    assert_eq!((status, next["first_seq"].as_u64()), (200, Some(2)));
    let (status, next) = append_headers(api, "s", false, "d", &headers(3, "w-1", 2)).await;
    assert_eq!((status, next["first_seq"].as_u64()), (200, Some(3)));
    assert_eq!(api.bodies("s").await, ["a", "b", "c", "d"]);
    // The lookup.
    let (status, p) = api.get("/v1/streams/s/producers/w-1").await;
    assert_eq!(
        (status, p),
        (
            200,
            json!({
                "producer_id": "w-1", "producer_seq": 2, "first_seq": 3, "last_seq": 3,
                "fencing_token": 3, "timestamp_ms": next["timestamp_ms"],
            })
        )
    );
    let (status, p) = api.get("/v1/streams/s/producers/nobody").await;
    assert_eq!(
        (status, p),
        (
            404,
            json!({
                "error": "producer_not_found",
                "message": "stream s does not remember producer \"nobody\"",
                "stream": "s", "producer_id": "nobody",
            })
        )
    );
    let (status, body) = api.get("/v1/streams/none/producers/w-1").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (404, Some("stream_not_found"))
    );
}

#[tokio::test]
async fn producer_seq_stale_gap_and_fenced_have_exact_bodies_in_both_forms() {
    let cfg = Config {
        producers_per_stream_max: 1,
        ..Config::default()
    };
    let srv = TestServer::start_with(cfg, |_| {}, ServerConfig::default()).await;
    let api = &srv.api;
    assert_eq!(append_p(api, "s", 5, "p", 4, &["x"]).await.0, 200);
    assert_eq!(append_p(api, "s", 5, "p", 5, &["y"]).await.0, 200);
    let stale = json!({
        "error": "producer_seq_stale",
        "message": "producer_seq is below the producer's last applied producer_seq 5",
        "stream": "s", "last_producer_seq": 5,
    });
    let gap = json!({
        "error": "producer_seq_gap",
        "message": "producer_seq skips ahead: the stream expects producer_seq 6 from this producer",
        "stream": "s", "expected_producer_seq": 6,
    });
    assert_eq!(
        append_p(api, "s", 5, "p", 3, &["old"]).await,
        (409, stale.clone())
    );
    assert_eq!(
        append_p(api, "s", 5, "p", 7, &["skip"]).await,
        (409, gap.clone())
    );
    for raw in [true, false] {
        let got = append_headers(api, "s", raw, "old", &headers(5, "p", 3)).await;
        assert_eq!(got, (409, stale.clone()), "raw {raw}");
        let got = append_headers(api, "s", raw, "skip", &headers(5, "p", 7)).await;
        assert_eq!(got, (409, gap.clone()), "raw {raw}");
    }
    // q evicts p (one producer per stream): p's retry is fenced.
    assert_eq!(append_p(api, "s", 5, "q", 0, &["q"]).await.0, 200);
    let fenced = json!({
        "error": "producer_fenced",
        "message": "unknown producer with a fencing token below the stream's producer token floor 6: it may retry a write of an evicted producer; use a token of at least 6",
        "stream": "s", "producer_token_floor": 6,
    });
    assert_eq!(
        append_p(api, "s", 5, "p", 5, &["y"]).await,
        (409, fenced.clone())
    );
    for raw in [true, false] {
        let got = append_headers(api, "s", raw, "y", &headers(5, "p", 5)).await;
        assert_eq!(got, (409, fenced.clone()), "raw {raw}");
    }
    assert_eq!(api.bodies("s").await, ["x", "y", "q"]);
    // A new seq with a stale token: stale as ever.
    api.fence("s", 9).await;
    assert_eq!(
        append_p(api, "s", 5, "q", 1, &["z"]).await,
        (409, stale_body("s", 5, 9, 3))
    );
}

#[tokio::test]
async fn malformed_producer_and_deadline_fields_are_400() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    let path = "/v1/streams/s/records";
    let bad = |m: &str| json!({ "error": "bad_request", "message": m, "stream": "s" });
    let cases = [
        (
            json!({"fencing_token": 1, "producer_id": "p", "records": records_json(&["x"])}),
            bad("producer_id needs producer_seq"),
        ),
        (
            json!({"fencing_token": 1, "producer_seq": 1, "records": records_json(&["x"])}),
            bad("producer_seq needs producer_id"),
        ),
        (
            json!({"fencing_token": 1, "producer_id": 7, "producer_seq": 1, "records": records_json(&["x"])}),
            bad("producer_id must be a string, got 7"),
        ),
        (
            json!({"fencing_token": 1, "not_after_ms": -1, "records": records_json(&["x"])}),
            bad("not_after_ms must be a non-negative integer, got -1"),
        ),
    ];
    for (body, want) in cases {
        assert_eq!(api.post_json(path, &body).await, (400, want), "{body}");
    }
    let (status, body) = api
        .post_json(path, &producer_json(1, "bad id", 0, &["x"]))
        .await;
    assert_eq!((status, body["error"].as_str()), (400, Some("bad_request")));
    let mut h = headers(1, "p", 0);
    h.pop();
    assert_eq!(
        append_headers(api, "s", true, "x", &h).await,
        (400, bad("header Producer-Id needs Producer-Seq"))
    );
    let h = vec![
        ("fencing-token", "1".to_string()),
        ("not-after-ms", "soon".to_string()),
    ];
    assert_eq!(
        append_headers(api, "s", true, "x", &h).await,
        (
            400,
            bad("header not-after-ms must be a non-negative integer, got \"soon\"")
        )
    );
    assert_eq!(api.state("s").await.0, 404);
}

fn deadline_body(stream: &str, writer_ms: u64) -> Value {
    json!({
        "error": "deadline_exceeded",
        "message": format!("the writer's time {writer_ms} ms is past the request's not_after_ms; nothing changed"),
        "stream": stream, "writer_ms": writer_ms,
    })
}

#[tokio::test]
async fn deadline_exceeded_has_an_exact_body_on_every_write_and_changes_nothing() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    assert_eq!(api.append("s", 2, &["a"]).await.0, 200);
    let (_, before) = api.state("s").await;
    let check = |(status, body): (u16, Value)| {
        let writer_ms = body["writer_ms"].as_u64().expect("writer_ms");
        assert!(writer_ms > 1);
        assert_eq!((status, body), (409, deadline_body("s", writer_ms)));
    };
    let json_append =
        json!({"fencing_token": 2, "not_after_ms": 1, "records": records_json(&["late"])});
    check(api.post_json("/v1/streams/s/records", &json_append).await);
    for raw in [true, false] {
        let h = vec![
            ("fencing-token", "2".to_string()),
            ("not-after-ms", "1".to_string()),
        ];
        check(append_headers(api, "s", raw, "late", &h).await);
    }
    let t = json!({"fencing_token": 3, "not_after_ms": 1});
    check(api.post_json("/v1/streams/s/fence", &t).await);
    check(api.post_json("/v1/streams/s/seal", &t).await);
    let trim = json!({"fencing_token": 3, "trim_seq": 1, "not_after_ms": 1});
    check(api.post_json("/v1/streams/s/trim", &trim).await);
    assert_eq!(api.state("s").await, (200, before));
    // A deadline in the future is met, and the timestamp proves it.
    let far = 4_000_000_000_000u64;
    let ok = json!({"fencing_token": 2, "not_after_ms": far, "records": records_json(&["b"])});
    let (status, ack) = api.post_json("/v1/streams/s/records", &ok).await;
    assert_eq!(status, 200);
    assert!(ack["timestamp_ms"].as_u64().unwrap() <= far);
}

#[tokio::test]
async fn the_fence_history_lists_tokens_newest_first() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    api.append("s", 1, &["a"]).await;
    api.append("s", 1, &["b"]).await; // same token: no entry
    api.fence("s", 4).await;
    api.append("s", 6, &["c"]).await;
    let (status, h) = api.get("/v1/streams/s/fences").await;
    assert_eq!(status, 200);
    let got: Vec<(u64, u64, String)> = h["fences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["fencing_token"].as_u64().unwrap(),
                e["first_seq"].as_u64().unwrap(),
                e["by"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (6, 2, "append".into()),
            (4, 2, "fence".into()),
            (1, 0, "append".into())
        ]
    );
    let (_, one) = api.get("/v1/streams/s/fences?limit=1").await;
    assert_eq!(one["fences"].as_array().unwrap().len(), 1);
    assert_eq!(one["stream"], "s");
    let (status, body) = api.get("/v1/streams/s/fences?limit=0").await;
    assert_eq!((status, body["error"].as_str()), (400, Some("bad_request")));
    let (status, body) = api.get("/v1/streams/none/fences").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (404, Some("stream_not_found"))
    );
}

/// A deleted stream answers its fence history and its producers like
/// every other read: 404 `stream_not_found` naming it (the tombstone keeps
/// the token, not a readable stream). Recreated with a higher token, its
/// history shows the delete under the new owner's token.
#[tokio::test]
async fn a_deleted_stream_has_no_readable_history_until_recreated() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    api.post_json("/v1/streams/s/records", &producer_json(1, "w", 0, &["a"]))
        .await;
    assert_eq!(crate::lifecycle::delete(api, "s", 2).await.0, 200);
    let gone = json!({"error": "stream_not_found", "message": "stream not found", "stream": "s"});
    assert_eq!(api.get("/v1/streams/s/fences").await, (404, gone.clone()));
    assert_eq!(api.get("/v1/streams/s/producers/w").await, (404, gone));
    api.append("s", 3, &["b"]).await;
    let (status, h) = api.get("/v1/streams/s/fences").await;
    assert_eq!(status, 200);
    let by: Vec<(u64, &str)> = h["fences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["fencing_token"].as_u64().unwrap(),
                e["by"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(by, vec![(3, "append"), (2, "delete"), (1, "append")]);
    let (status, body) = api.get("/v1/streams/s/producers/w").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (404, Some("producer_not_found"))
    );
}

#[tokio::test]
async fn cursors_are_fenced_listed_and_start_reads() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    api.append("s", 9, &["a", "b", "c"]).await;
    let (status, c) = put_json(
        api,
        "/v1/streams/s/cursors/r",
        &json!({"fencing_token": 2, "seq": 1}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        c,
        json!({"stream": "s", "name": "r", "fencing_token": 2, "seq": 1, "timestamp_ms": c["timestamp_ms"]})
    );
    let (status, stale) = put_json(
        api,
        "/v1/streams/s/cursors/r",
        &json!({"fencing_token": 1, "seq": 2}),
    )
    .await;
    assert_eq!(
        (status, stale),
        (
            409,
            json!({
                "error": "stale_fencing_token",
                "message": "fencing token 1 is below the stream's highest accepted token 2 (next_seq 1)",
                "stream": "s", "cursor": "r", "presented_token": 1, "highest_token": 2, "next_seq": 1,
            })
        )
    );
    let (status, far) = put_json(
        api,
        "/v1/streams/s/cursors/r",
        &json!({"fencing_token": 2, "seq": 4}),
    )
    .await;
    assert_eq!(
        (status, far),
        (
            416,
            json!({
                "error": "out_of_range",
                "message": "cursor seq 4 is past the stream's next_seq 3",
                "stream": "s", "cursor": "r", "seq": 4, "next_seq": 3,
            })
        )
    );
    let (status, bad) =
        put_json(api, "/v1/streams/s/cursors/r", &json!({"fencing_token": 2})).await;
    assert_eq!(
        (status, bad),
        (
            400,
            json!({"error": "bad_request", "message": "seq is required"})
        )
    );
    // A read and a tail start at the cursor.
    let (status, page) = api.read("s", "cursor=r").await;
    assert_eq!(status, 200);
    let seqs: Vec<u64> = page["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, vec![1, 2]);
    let mut tail = api.tail("s", "cursor=r", None).await;
    let ev = tail.expect("records").await;
    assert_eq!(ev.id.as_deref(), Some("3"), "{ev:?}");
    assert_eq!(ev.json()[0]["seq"], 1);
    let missing = json!({
        "error": "cursor_not_found", "message": "stream s has no cursor \"nope\"",
        "stream": "s", "cursor": "nope",
    });
    assert_eq!(api.read("s", "cursor=nope").await, (404, missing.clone()));
    assert_eq!(api.get("/v1/streams/s/cursors/nope").await, (404, missing));
    let (status, body) = api.read("s", "cursor=r&start_seq=0").await;
    assert_eq!((status, body["error"].as_str()), (400, Some("bad_request")));
    put_json(
        api,
        "/v1/streams/s/cursors/a",
        &json!({"fencing_token": 1, "seq": 0}),
    )
    .await;
    let (status, list) = api.get("/v1/streams/s/cursors").await;
    assert_eq!(status, 200);
    let names: Vec<&str> = list["cursors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["a", "r"]);
}

#[tokio::test]
async fn a_batch_is_all_or_nothing_with_every_outcome() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    api.fence("b", 9).await;
    let ok = json!({"ops": [
        {"stream": "a", "fencing_token": 9, "records": records_json(&["a0"])},
        {"stream": "b", "fencing_token": 9, "fence": true},
        {"stream": "a", "fencing_token": 9, "records": records_json(&["a1"]), "match_seq_num": 1},
    ]});
    let (status, body) = api.post_json("/v1/batch", &ok).await;
    assert_eq!(status, 200, "{body}");
    let ops = body["ops"].as_array().unwrap();
    assert_eq!(
        (ops[0]["first_seq"].as_u64(), ops[2]["first_seq"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(ops[1]["highest_token"], 9);
    let refused = json!({"ops": [
        {"stream": "a", "fencing_token": 9, "records": records_json(&["x"])},
        {"stream": "b", "fencing_token": 3, "records": records_json(&["stale"])},
    ]});
    let (status, body) = api.post_json("/v1/batch", &refused).await;
    assert_eq!(status, 409);
    assert_eq!(body["error"], "stale_fencing_token");
    assert_eq!(
        body["message"],
        "1 of the batch's 2 operations were refused; none was applied"
    );
    let ops = body["ops"].as_array().unwrap();
    assert_eq!(ops[0]["first_seq"], 2);
    assert_eq!(ops[1], stale_body("b", 3, 9, 0));
    let mismatch = json!({"ops": [
        {"stream": "a", "fencing_token": 9, "records": records_json(&["x"]), "match_seq_num": 7},
    ]});
    let (status, body) = api.post_json("/v1/batch", &mismatch).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (412, Some("seq_mismatch"))
    );
    assert_eq!(body["ops"][0]["match_seq_num"], 7);
    let late =
        json!({"not_after_ms": 1, "ops": [{"stream": "a", "fencing_token": 9, "fence": true}]});
    let (status, body) = api.post_json("/v1/batch", &late).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (409, Some("deadline_exceeded"))
    );
    assert_eq!(api.bodies("a").await, ["a0", "a1"]);
    for (body, msg) in [
        (json!({}), "ops is required"),
        (
            json!({"ops": []}),
            "a batch has 1..=64 operations, this one 0",
        ),
        (
            json!({"ops": [{"stream": "a", "fencing_token": 1}]}),
            "ops[0]: needs records or \"fence\": true",
        ),
        (
            json!({"ops": [{"stream": "a", "fencing_token": 1, "fence": true, "records": []}]}),
            "ops[0]: a fence carries neither records nor match_seq_num",
        ),
        (
            json!({"ops": [{"stream": "a", "fencing_token": 1, "fence": true, "x": 1}]}),
            "ops[0]: unknown field \"x\"",
        ),
        // A batch's op has no producer ids: a batch is made exactly
        // once with match_seq_num on its appends, not with producer seqs.
        (
            json!({"ops": [{"stream": "a", "fencing_token": 1, "records": [{"body": "x"}], "producer_id": "p", "producer_seq": 0}]}),
            "ops[0]: unknown field \"producer_id\"",
        ),
    ] {
        assert_eq!(
            api.post_json("/v1/batch", &body).await,
            (400, json!({"error": "bad_request", "message": msg})),
            "{body}"
        );
    }
}

/// Worker A appends with a producer id; the answer never reaches it (its
/// connection dies: outcome unknown) and it pauses. B takes over and
/// fences. A wakes up and retries the same append: the duplicate answer
/// tells it the write landed and where, nothing is written a second time,
/// and B's ownership is untouched. The lookup tells it the same.
#[tokio::test]
async fn a_paused_worker_learns_from_the_duplicate_answer_that_its_write_landed() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    // A takes its lease (token 41) and fences the stream with it.
    assert_eq!(api.fence("orders", 41).await.0, 200);
    let body = producer_json(41, "worker-a", 7, &["A: order 1"]).to_string();
    let mut conn = TcpStream::connect(srv.addr).await.unwrap();
    let head = format!(
        "POST /v1/streams/orders/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(body.as_bytes()).await.unwrap();
    drop(conn); // A never reads the answer.
                // The long-poll ends when the record is durable (a signal, not a sleep).
    let (status, page) = api.read("orders", "start_seq=0&wait_ms=10000").await;
    assert_eq!(
        (status, page["records"][0]["body"].as_str()),
        (200, Some("A: order 1"))
    );
    let (status, b) = api.fence("orders", 42).await;
    assert_eq!((status, b["highest_token"].as_u64()), (200, Some(42)));
    api.append("orders", 42, &["B: order 1"]).await;
    // A retries.
    let (status, dup) = append_p(api, "orders", 41, "worker-a", 7, &["A: order 1"]).await;
    assert_eq!(status, 200);
    assert_eq!(
        dup,
        json!({
            "stream": "orders", "first_seq": 0, "last_seq": 0, "next_seq": 1,
            "fencing_token": 41, "timestamp_ms": page["records"][0]["timestamp_ms"],
            "duplicate": true,
        })
    );
    let (_, p) = api.get("/v1/streams/orders/producers/worker-a").await;
    assert_eq!(
        (p["producer_seq"].as_u64(), p["first_seq"].as_u64()),
        (Some(7), Some(0))
    );
    // Nothing written twice; B still owns the stream.
    assert_eq!(api.bodies("orders").await, ["A: order 1", "B: order 1"]);
    let (_, st) = api.state("orders").await;
    assert_eq!(
        (st["highest_token"].as_u64(), st["next_seq"].as_u64()),
        (Some(42), Some(2))
    );
    // Its next write is refused: it lost ownership.
    let (status, _) = append_p(api, "orders", 41, "worker-a", 8, &["A: late"]).await;
    assert_eq!(status, 409);
}
