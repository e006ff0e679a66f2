//! The seeds' hostile fencing scenarios, over a real socket, each asserted
//! on the state read back through the API.

use fencelog_testkit::http::{
    batch_bytes, raw_exchange, read_response, records_json, stale_body, state_body, TestServer,
};
use serde_json::json;
use std::collections::BTreeSet;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

fn ack(
    stream: &str,
    first: u64,
    last: u64,
    token: u64,
    ts: &serde_json::Value,
) -> serde_json::Value {
    json!({
        "stream": stream,
        "first_seq": first,
        "last_seq": last,
        "next_seq": last + 1,
        "fencing_token": token,
        "timestamp_ms": ts,
    })
}

/// Seed test 1: A writes with 41, B takes over with 42, A's late write with
/// 41 is refused and the stream holds only the rightful owners' records.
#[tokio::test]
async fn stale_owner_is_rejected_after_newer_owner_writes() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    let (status, a) = api.append("orders", 41, &["A: order 1"]).await;
    assert_eq!(status, 200);
    assert_eq!(a, ack("orders", 0, 0, 41, &a["timestamp_ms"]));
    let (status, b) = api.append("orders", 42, &["B: order 1"]).await;
    assert_eq!(status, 200);
    assert_eq!(b, ack("orders", 1, 1, 42, &b["timestamp_ms"]));

    let (status, late) = api.append("orders", 41, &["A: late"]).await;
    assert_eq!((status, late), (409, stale_body("orders", 41, 42, 2)));

    assert_eq!(api.bodies("orders").await, ["A: order 1", "B: order 1"]);
    let (status, state) = api.state("orders").await;
    assert_eq!(
        (status, state.clone()),
        (
            200,
            state_body(
                "orders",
                2,
                42,
                b["timestamp_ms"].as_u64().unwrap(),
                batch_bytes("orders", &[b"A: order 1"]) + batch_bytes("orders", &[b"B: order 1"])
            )
        )
    );
    api.assert_healthy().await;
}

/// Seed test 2: A's request is on the wire (headers and half the body sent)
/// when B commits with a higher token; once A's body completes, the token is
/// checked against durable state at that moment and A is refused.
#[tokio::test]
async fn request_in_flight_when_owner_changes_is_rejected() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    assert_eq!(api.append("jobs", 41, &["A: step 1"]).await.0, 200);

    let body =
        json!({ "fencing_token": 41, "records": records_json(&["A: step 2 (stale)"]) }).to_string();
    let (first_half, second_half) = body.as_bytes().split_at(body.len() / 2);
    let mut a = TcpStream::connect(srv.addr).await.unwrap();
    a.write_all(
        format!(
            "POST /v1/streams/jobs/records HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    a.write_all(first_half).await.unwrap();
    a.flush().await.unwrap();

    let (status, b) = api.append("jobs", 42, &["B: step 1"]).await;
    assert_eq!(status, 200, "{b}");

    a.write_all(second_half).await.unwrap();
    let (status, answer) = read_response(&mut a).await;
    assert_eq!((status, answer), (409, stale_body("jobs", 41, 42, 2)));
    assert_eq!(api.bodies("jobs").await, ["A: step 1", "B: step 1"]);
    let (_, state) = api.state("jobs").await;
    assert_eq!(
        (state["next_seq"].clone(), state["highest_token"].clone()),
        (json!(2), json!(42))
    );
}

/// Seed test 3: B fences with 42 without writing anything; A's 41 append and
/// A's 41 fence are both refused, and nothing changes.
#[tokio::test]
async fn data_less_fence_locks_out_the_old_owner() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    let (_, a) = api.append("leases", 41, &["A: before"]).await;
    let ts = a["timestamp_ms"].as_u64().unwrap();

    let (status, fenced) = api.fence("leases", 42).await;
    assert_eq!(
        (status, fenced),
        (
            200,
            state_body("leases", 1, 42, ts, batch_bytes("leases", &[b"A: before"]))
        )
    );

    assert_eq!(
        api.append("leases", 41, &["A: after"]).await,
        (409, stale_body("leases", 41, 42, 1))
    );
    assert_eq!(
        api.fence("leases", 41).await,
        (409, stale_body("leases", 41, 42, 1))
    );

    assert_eq!(
        api.state("leases").await,
        (
            200,
            state_body("leases", 1, 42, ts, batch_bytes("leases", &[b"A: before"]))
        )
    );
    assert_eq!(api.bodies("leases").await, ["A: before"]);

    // A fence alone creates the stream with no records.
    assert_eq!(
        api.fence("fresh", 7).await,
        (200, state_body("fresh", 0, 7, 0, 0))
    );
    assert_eq!(
        api.append("fresh", 6, &["x"]).await,
        (409, stale_body("fresh", 6, 7, 0))
    );
}

/// Seed test 4: tokens only need to increase, not be contiguous; the
/// largest u64 survives the JSON round trip.
#[tokio::test]
async fn token_gaps_are_accepted_and_lower_tokens_are_not() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    for token in [5u64, 1000, 1 << 62] {
        let (status, body) = api.append("gaps", token, &[&format!("t{token}")]).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["fencing_token"], json!(token));
    }
    assert_eq!(
        api.append("gaps", 999, &["no"]).await,
        (409, stale_body("gaps", 999, 1 << 62, 3))
    );
    assert_eq!(api.append("gaps", u64::MAX, &["max"]).await.0, 200);
    assert_eq!(
        api.append("gaps", 1 << 62, &["no"]).await,
        (409, stale_body("gaps", 1 << 62, u64::MAX, 4))
    );
    let (_, state) = api.state("gaps").await;
    assert_eq!(state["highest_token"], json!(u64::MAX));
    assert_eq!(
        api.bodies("gaps").await,
        ["t5", "t1000", "t4611686018427387904", "max"]
    );
}

/// Seed test 6: concurrent appends with one token all land exactly once with
/// contiguous seqs; with `match_seq_num`, one of several writers expecting
/// the same seq wins and the rest get 412.
#[tokio::test]
async fn concurrent_writers_same_token_and_match_seq_num() {
    let srv = TestServer::start().await;
    let api = srv.api.clone();
    let clients = 16;
    let per_client = 8;
    let mut tasks = Vec::new();
    for c in 0..clients {
        let api = api.clone();
        tasks.push(tokio::spawn(async move {
            let mut seqs = Vec::new();
            for i in 0..per_client {
                let (status, body) = api.append("shared", 7, &[&format!("c{c}-{i}")]).await;
                assert_eq!(status, 200, "{body}");
                assert_eq!(body["first_seq"], body["last_seq"]);
                seqs.push(body["first_seq"].as_u64().unwrap());
            }
            seqs
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let total = (clients * per_client) as u64;
    assert_eq!(
        all.iter().copied().collect::<BTreeSet<_>>(),
        (0..total).collect()
    );
    let bodies = api.bodies("shared").await;
    let distinct: BTreeSet<_> = bodies.iter().cloned().collect();
    assert_eq!(
        (bodies.len(), distinct.len()),
        (total as usize, total as usize)
    );

    // Everyone believes next_seq is `total`; exactly one gets it.
    let mut racers = Vec::new();
    for c in 0..8 {
        let api = api.clone();
        racers.push(tokio::spawn(async move {
            api.append_matching("shared", 7, &[&format!("racer {c}")], total)
                .await
        }));
    }
    let mut winners = 0;
    for r in racers {
        let (status, body) = r.await.unwrap();
        match status {
            200 => {
                winners += 1;
                assert_eq!(body["first_seq"], json!(total));
            }
            412 => assert_eq!(
                body,
                json!({
                    "error": "seq_mismatch",
                    "message": format!("match_seq_num {total} does not equal the stream's next_seq {}", total + 1),
                    "stream": "shared",
                    "match_seq_num": total,
                    "next_seq": total + 1,
                })
            ),
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert_eq!(winners, 1);
    let (_, state) = api.state("shared").await;
    assert_eq!(state["next_seq"], json!(total + 1));

    // Raw appends honour Match-Seq-Num the same way.
    let (status, _) = api
        .append_raw(
            "shared",
            &[("fencing-token", "7"), ("match-seq-num", "3")],
            "raw",
        )
        .await;
    assert_eq!(status, 412);
    let next = (total + 1).to_string();
    let (status, body) = api
        .append_raw(
            "shared",
            &[("fencing-token", "7"), ("match-seq-num", &next)],
            "raw",
        )
        .await;
    assert_eq!((status, body["first_seq"].clone()), (200, json!(total + 1)));
}

/// Seed test 7: JSON append, raw append and fence all apply the same rule:
/// equal or higher tokens pass, lower ones are refused with the same body.
#[tokio::test]
async fn every_write_path_applies_the_fencing_rule() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    assert_eq!(api.fence("paths", 50).await.0, 200);

    assert_eq!(
        api.append("paths", 49, &["json"]).await,
        (409, stale_body("paths", 49, 50, 0))
    );
    assert_eq!(
        api.append_raw("paths", &[("fencing-token", "49")], "raw")
            .await,
        (409, stale_body("paths", 49, 50, 0))
    );
    assert_eq!(
        api.fence("paths", 49).await,
        (409, stale_body("paths", 49, 50, 0))
    );

    // Equal tokens are the current owner.
    assert_eq!(api.append("paths", 50, &["json 50"]).await.0, 200);
    assert_eq!(
        api.append_raw("paths", &[("fencing-token", "50")], "raw 50")
            .await
            .0,
        200
    );
    assert_eq!(api.fence("paths", 50).await.0, 200);

    // A raw append can raise the token too, and then binds the JSON path.
    let (status, raw) = api
        .append_raw("paths", &[("fencing-token", "51")], "raw 51")
        .await;
    assert_eq!((status, raw["first_seq"].clone()), (200, json!(2)));
    assert_eq!(
        api.append("paths", 50, &["json"]).await,
        (409, stale_body("paths", 50, 51, 3))
    );
    assert_eq!(
        api.fence("paths", 50).await,
        (409, stale_body("paths", 50, 51, 3))
    );

    // The same refusal over a raw socket, not just through reqwest.
    let body = json!({ "fencing_token": 1, "records": records_json(&["x"]) }).to_string();
    let head = format!(
        "POST /v1/streams/paths/records HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    assert_eq!(
        raw_exchange(srv.addr, &head, body.as_bytes()).await,
        (409, stale_body("paths", 1, 51, 3))
    );

    assert_eq!(api.bodies("paths").await, ["json 50", "raw 50", "raw 51"]);
    let (_, state) = api.state("paths").await;
    assert_eq!(
        (state["next_seq"].clone(), state["highest_token"].clone()),
        (json!(3), json!(51))
    );
}
