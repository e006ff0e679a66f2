//! Trim, seal and delete in cluster mode (issue 14), against three real
//! processes: each is a replicated op decided in apply through the fencing
//! rule on every replica, a stale token is refused through every node, and
//! every replica holds the same state, before and after all three restart.

use crate::cluster_support::{others, ProcCluster};
use fencelog_testkit::http::stale_body;
use serde_json::{json, Value};

/// What node `id` says about the three streams: state (or error) and the
/// page of the trimmed one's records (timestamps included: the leader's).
async fn view(c: &ProcCluster, id: usize) -> Value {
    let mut v = json!({});
    for stream in ["t", "d", "u"] {
        let (s, body) = c.get(id, &format!("/v1/streams/{stream}")).await;
        v[stream] = json!([s, body]);
    }
    v["t_records"] = c.get(id, "/v1/streams/t/records?start_seq=1").await.1;
    v
}

async fn delete(c: &ProcCluster, id: usize, stream: &str, token: u64) -> (u16, Value) {
    let url = format!("{}/v1/streams/{stream}", c.url(id));
    let r = c.http.delete(url).json(&json!({ "fencing_token": token }));
    let r = r.send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// A trim through one follower, a seal through the other, a delete through
/// the leader; then stale trims and deletes through every node are the
/// single node's exact 409, and a trim of the sealed stream is 409
/// `stream_sealed` through every node. Every replica agrees, and still
/// does after every node was SIGKILLed and restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trim_seal_and_delete_are_replicated_fenced_and_survive_restarts() {
    let mut c = ProcCluster::start(3, 1, &[]);
    let ids = [1, 2, 3];
    let leader = c.leader(0, &ids).await;
    let (a, b) = match others(&ids, leader)[..] {
        [a, b] => (a, b),
        _ => unreachable!("three nodes"),
    };
    for (stream, body) in [("t", "r0"), ("t", "r1"), ("t", "r2"), ("d", "x")] {
        assert_eq!(c.append(leader, stream, 2, body).await.0, 200);
    }
    assert_eq!(c.append(leader, "u", 5, "y").await.0, 200);
    let trim = json!({"fencing_token": 2, "trim_seq": 1});
    let (s, v, _) = c.post(a, "/v1/streams/t/trim", &trim).await;
    assert_eq!(
        (s, &v["first_seq"], &v["next_seq"]),
        (200, &json!(1), &json!(3)),
        "{v}"
    );
    let (s, v, _) = c
        .post(b, "/v1/streams/t/seal", &json!({"fencing_token": 3}))
        .await;
    assert_eq!(
        (s, &v["sealed"], &v["highest_token"]),
        (200, &json!(true), &json!(3)),
        "{v}"
    );
    let (s, v) = delete(&c, leader, "d", 3).await;
    assert_eq!(
        (s, &v["deleted"], &v["highest_token"]),
        (200, &json!(true), &json!(3)),
        "{v}"
    );
    for id in ids {
        let stale_trim = json!({"fencing_token": 4, "trim_seq": 1});
        let (s, v, _) = c.post(id, "/v1/streams/u/trim", &stale_trim).await;
        assert_eq!(
            (s, v),
            (409, stale_body("u", 4, 5, 1)),
            "trim through node {id}"
        );
        assert_eq!(
            delete(&c, id, "u", 4).await,
            (409, stale_body("u", 4, 5, 1)),
            "node {id}"
        );
        let (s, v, _) = c
            .post(
                id,
                "/v1/streams/t/trim",
                &json!({"fencing_token": 3, "trim_seq": 2}),
            )
            .await;
        assert_eq!(
            (s, &v["error"]),
            (409, &json!("stream_sealed")),
            "node {id}: {v}"
        );
    }
    c.converged(0, &ids).await;
    let expected = view(&c, leader).await;
    assert_eq!(
        (
            &expected["t"][1]["first_seq"],
            &expected["d"][0],
            &expected["u"][1]["first_seq"]
        ),
        (&json!(1), &json!(404), &json!(0)),
        "{expected}"
    );
    let records: Vec<(&Value, &Value)> = expected["t_records"]["records"]
        .as_array()
        .expect("a page")
        .iter()
        .map(|r| (&r["seq"], &r["body"]))
        .collect();
    assert_eq!(
        records,
        [(&json!(1), &json!("r1")), (&json!(2), &json!("r2"))]
    );
    for id in ids {
        assert_eq!(view(&c, id).await, expected, "node {id}");
    }
    for id in ids {
        c.kill9(id);
    }
    for id in ids {
        c.restart(id, &[]);
    }
    c.converged(0, &ids).await;
    for id in ids {
        assert_eq!(view(&c, id).await, expected, "node {id} after the restart");
    }
    assert_eq!(
        delete(&c, a, "d", 2).await.0,
        409,
        "the tombstone keeps its token"
    );
}

/// `--data-bytes-max` in cluster mode: the shard leader refuses an append
/// that would take its shard engines past the budget with the single
/// node's exact 507 (definitely not applied), through the leader and
/// through a follower; a fence and a trim still go through, and once the
/// trim's reclamation gives segments back, appends are accepted again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_node_keeps_its_disk_budget() {
    const BUDGET: u64 = 256 << 10;
    let budget = BUDGET.to_string();
    let extra = [
        "--segment-bytes",
        "65536",
        "--data-bytes-max",
        budget.as_str(),
    ];
    let c = ProcCluster::start(3, 1, &extra);
    let ids = [1, 2, 3];
    let leader = c.leader(0, &ids).await;
    let follower = others(&ids, leader)[0];
    let body = "b".repeat(1000);
    let mut appended = 0u64;
    let full = loop {
        let via = [leader, follower][appended as usize % 2];
        let (s, v) = c.append(via, "fill", 5, &body).await;
        match s {
            200 => {
                assert_eq!(v["first_seq"], json!(appended), "{v}");
                appended += 1;
            }
            507 => break v,
            _ => panic!("append {appended}: {s} {v}"),
        }
        assert!(appended < 1000, "the budget never filled");
    };
    let actual = full["actual"].as_u64().expect("actual");
    assert_eq!(
        full,
        json!({
            "error": "insufficient_storage",
            "message": format!("the data directory holds {actual} bytes and its budget is {BUDGET}; trim, delete or set retention to free space"),
            "stream": "fill",
            "limit": BUDGET,
            "actual": actual,
            "outcome_unknown": false,
        })
    );
    assert!(appended >= 100, "{appended} appends of 1 KB in 256 KiB");
    for via in ids {
        let (s, v) = c.append(via, "fill", 5, &body).await;
        assert_eq!(
            (s, &v["error"]),
            (507, &json!("insufficient_storage")),
            "via {via}: {v}"
        );
    }
    // All four refusals were the leader's (the follower forwards).
    let url = format!("{}/metrics", c.url(leader));
    let text = c.http.get(url).send().await.unwrap().text().await.unwrap();
    let line = "fencelog_budget_rejections_total{shard=\"0\"} 4";
    assert!(text.lines().any(|l| l == line), "{text}");
    assert_eq!(c.fence(follower, "fill", 6).await.0, 200);
    let trim = json!({"fencing_token": 6, "trim_seq": appended - 1});
    let (s, v, _) = c.post(leader, "/v1/streams/fill/trim", &trim).await;
    assert_eq!(s, 200, "{v}");
    // The trim's reclamation pass runs after its apply: wait for it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let again = loop {
        let (s, v) = c.append(leader, "fill", 6, &body).await;
        match s {
            200 => break v,
            507 => assert!(std::time::Instant::now() < deadline, "still full: {v}"),
            _ => panic!("{s} {v}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(again["first_seq"], json!(appended), "{again}");
    c.converged(0, &ids).await;
    let from = appended - 1;
    for id in ids {
        let path = format!("/v1/streams/fill/records?start_seq={from}");
        let (s, v) = c.get(id, &path).await;
        let seqs: Vec<&Value> = v["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| &r["seq"])
            .collect();
        assert_eq!(
            (s, seqs),
            (200, vec![&json!(from), &json!(appended)]),
            "node {id}: {v}"
        );
    }
}
