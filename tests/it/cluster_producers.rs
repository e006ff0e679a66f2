//! Issue 11's append options in cluster mode (issue 14), against three real
//! processes: an idempotent producer's duplicate and a deadline are decided
//! in apply, from the replicated producer table and the leader's carried
//! timestamp, the same on every replica. (Batches and cursor commits,
//! once refused here, are replicated: `cluster_ops.rs`.)

use crate::cluster_support::{others, ProcCluster};
use serde_json::{json, Value};

fn deadline_body(stream: &str, writer_ms: u64) -> Value {
    json!({
        "error": "deadline_exceeded",
        "message": format!(
            "the writer's time {writer_ms} ms is past the request's not_after_ms; nothing changed"
        ),
        "stream": stream,
        "writer_ms": writer_ms,
    })
}

/// A producer's append through one follower; another owner's fence through
/// the other; the producer's retry with its old token through that follower
/// (whose applied state holds the higher token: it must not refuse early)
/// and through the leader is the original ack with `duplicate`, and nothing
/// is written twice. A plain stale append is still 409 at once; appends and
/// fences past their deadline are 409 `deadline_exceeded` at the leader's
/// time. Every replica then holds the same records, producer and fences.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_and_deadlines_are_decided_in_apply_on_every_replica() {
    let c = ProcCluster::start(3, 1, &[]);
    let ids = [1, 2, 3];
    let leader = c.leader(0, &ids).await;
    let (a, b) = match others(&ids, leader)[..] {
        [a, b] => (a, b),
        _ => unreachable!("three nodes"),
    };
    let path = "/v1/streams/p/records";
    let first = json!({"fencing_token": 3, "producer_id": "w-1", "producer_seq": 0,
                       "records": [{"body": "a"}]});
    let (s, ack, _) = c.post(a, path, &first).await;
    // `duplicate` is left out of a first write's ack.
    assert_eq!(
        (s, &ack["first_seq"], ack.get("duplicate")),
        (200, &json!(0), None),
        "{ack}"
    );
    let (s, v) = c.fence(b, "p", 4).await;
    assert_eq!((s, &v["highest_token"]), (200, &json!(4)), "{v}");
    let mut dup = ack.clone();
    dup["duplicate"] = json!(true);
    for via in [b, leader] {
        let (s, v, _) = c.post(via, path, &first).await;
        assert_eq!((s, &v), (200, &dup), "the retry through node {via}");
    }
    let (s, v) = c.append(b, "p", 3, "plain stale").await;
    assert_eq!(
        (s, &v["error"]),
        (409, &json!("stale_fencing_token")),
        "{v}"
    );
    let late = json!({"fencing_token": 4, "not_after_ms": 1, "records": [{"body": "late"}]});
    let (s, v, _) = c.post(a, path, &late).await;
    let writer_ms = v["writer_ms"].as_u64().unwrap_or(0);
    assert!(writer_ms >= ack["timestamp_ms"].as_u64().unwrap(), "{v}");
    assert_eq!((s, v), (409, deadline_body("p", writer_ms)));
    let late_fence = json!({"fencing_token": 5, "not_after_ms": 1});
    let (s, v, _) = c.post(b, "/v1/streams/p/fence", &late_fence).await;
    let writer_ms = v["writer_ms"].as_u64().unwrap_or(0);
    assert_eq!((s, v), (409, deadline_body("p", writer_ms)));
    c.converged(0, &ids).await;
    let producer = c.get(leader, "/v1/streams/p/producers/w-1").await;
    assert_eq!(
        (producer.0, &producer.1["producer_seq"]),
        (200, &json!(0)),
        "{producer:?}"
    );
    let fences = c.get(leader, "/v1/streams/p/fences").await;
    assert_eq!(fences.0, 200, "{fences:?}");
    for id in ids {
        assert_eq!(
            c.records(id, "p").await,
            vec![(0, 3, "a".to_string())],
            "node {id}"
        );
        assert_eq!(
            c.get(id, "/v1/streams/p/producers/w-1").await,
            producer,
            "node {id}"
        );
        assert_eq!(c.get(id, "/v1/streams/p/fences").await, fences, "node {id}");
    }
}
