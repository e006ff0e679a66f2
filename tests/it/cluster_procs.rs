//! Issue 14 against real processes: three `fencelog serve --cluster` nodes
//! on loopback. Writes through any node (followers forward), exact 409
//! bodies decided in apply, identical replicas, 503 `outcome_unknown` once
//! a write was proposed but could not commit, and the seeds' paused owner
//! at the server level (SIGSTOP of the shard leader).

use crate::cluster_support::{others, ProcCluster};
use fencelog_cluster::shard::shard_of;
use fencelog_testkit::http::stale_body;
use serde_json::Value;
use std::time::Duration;

/// Follower writes are forwarded to the leader and answered with its apply
/// result and a leader hint; a stale token is refused with the exact 409
/// body through every node; every node serves the same records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_node_accepts_writes_and_every_replica_agrees() {
    let c = ProcCluster::start(3, 2, &[]);
    let ids = [1, 2, 3];
    let k = shard_of("orders", 2);
    let leader = c.leader(k, &ids).await;
    let follower = others(&ids, leader)[0];
    let (s, v) = c.append(leader, "orders", 5, "a").await;
    assert_eq!((s, v["first_seq"].as_u64()), (200, Some(0)), "{v}");
    let body = serde_json::json!({ "fencing_token": 5, "records": [{ "body": "b" }] });
    let (s, v, hint) = c.post(follower, "/v1/streams/orders/records", &body).await;
    assert_eq!((s, v["first_seq"].as_u64()), (200, Some(1)), "{v}");
    assert_eq!(hint, Some(format!("{leader}={}", c.addrs[leader - 1])));
    let (s, v) = c.fence(follower, "orders", 7).await;
    assert_eq!(
        (s, v["highest_token"].as_u64(), v["next_seq"].as_u64()),
        (200, Some(7), Some(2)),
        "{v}"
    );
    for id in ids {
        let (s, v) = c.append(id, "orders", 6, "late").await;
        assert_eq!(
            (s, v),
            (409, stale_body("orders", 6, 7, 2)),
            "through node {id}"
        );
    }
    c.converged(k, &ids).await;
    let expected = vec![(0, 5, "a".to_string()), (1, 5, "b".to_string())];
    for id in ids {
        assert_eq!(c.records(id, "orders").await, expected, "node {id}");
    }
}

/// With both followers of a shard dead, the leader proposes but cannot
/// commit: 503 with `outcome_unknown: true`, never 200 and never "not
/// applied".
///
/// A follower starved of CPU may still start an election before it is
/// killed, and the leader then steps down before the write: it answers
/// "no leader" with `outcome_unknown: false`, correctly, since it proposed
/// nothing (this was the flake). That answer is accepted only with the
/// proof — the node's term moved past the one it led in — and the scenario
/// is set up again (a leader, once its peers are dead, never steps down:
/// only a higher vote or a membership change makes an openraft 0.9 leader
/// step down).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_proposed_without_a_quorum_is_503_outcome_unknown() {
    const ATTEMPTS_MAX: usize = 4;
    let mut c = ProcCluster::start(3, 1, &["--commit-timeout-ms", "1500"]);
    let ids = [1, 2, 3];
    for attempt in 1..=ATTEMPTS_MAX {
        let leader = c.leader(0, &ids).await;
        let (s, _) = c.append(leader, "q", 1, "first").await;
        assert_eq!(s, 200);
        let term = |v: &Value| v["shards"][0]["term"].as_u64().expect("a term");
        let led_in = term(&c.status(leader).await.expect("the leader answers"));
        for id in others(&ids, leader) {
            c.kill9(id);
        }
        let (s, v) = c.append(leader, "q", 1, "unsure").await;
        assert_eq!(s, 503, "{v}");
        assert_eq!(v["error"].as_str(), Some("unavailable"), "{v}");
        if v["outcome_unknown"] == Value::Bool(true) {
            return;
        }
        let now = term(&c.status(leader).await.expect("the node answers"));
        assert!(
            v["outcome_unknown"] == Value::Bool(false) && now > led_in,
            "not proposed although node {leader} still led term {led_in}: {v}"
        );
        eprintln!("attempt {attempt}: an election (term {led_in} -> {now}) came before the kill");
        for id in others(&ids, leader) {
            c.restart(id, &["--commit-timeout-ms", "1500"]);
        }
    }
    panic!("an election raced the kill in all {ATTEMPTS_MAX} attempts");
}

/// The seeds' paused owner at the server level: SIGSTOP shard 0's leader
/// with A's append in flight; the others elect a new leader; B fences with
/// a higher token and appends through another node; SIGCONT. A's in-flight
/// append is never a 200, the old leader steps down, and A's retry through
/// it is 409.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_leader_cannot_commit_a_stale_write() {
    let c = ProcCluster::start(3, 1, &["--commit-timeout-ms", "5000"]);
    let ids = [1, 2, 3];
    let old = c.leader(0, &ids).await;
    let (s, _) = c.append(old, "lock", 1, "A1").await;
    assert_eq!(s, 200);
    c.converged(0, &ids).await;
    c.proc(old).sigstop();
    let url = format!("{}/v1/streams/lock/records", c.url(old));
    let in_flight = tokio::spawn({
        let http = c.http.clone();
        let body = serde_json::json!({ "fencing_token": 1, "records": [{ "body": "A2" }] });
        async move {
            let r = http.post(url).json(&body).send().await.unwrap();
            (
                r.status().as_u16(),
                r.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    });
    let rest = others(&ids, old);
    let new = c.leader(0, &rest).await;
    let via = others(&rest, new)[0];
    let (s, v) = c.fence(via, "lock", 2).await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = c.append(via, "lock", 2, "B1").await;
    assert_eq!((s, v["first_seq"].as_u64()), (200, Some(1)), "{v}");
    // Paused for well past the election timeout (1000 ms at most).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    c.proc(old).sigcont();
    let (s, v) = in_flight.await.unwrap();
    assert!(
        s == 409 || (s == 503 && v["outcome_unknown"] == true),
        "the paused leader's stale write answered {s} {v}"
    );
    let stepped_down = c.leader(0, &ids).await;
    assert_ne!(
        stepped_down, old,
        "the old leader must not lead again at once"
    );
    c.converged(0, &ids).await;
    let (s, v) = c.append(old, "lock", 1, "A3").await;
    assert_eq!((s, v), (409, stale_body("lock", 1, 2, 2)));
    let expected = vec![(0, 1, "A1".to_string()), (1, 2, "B1".to_string())];
    for id in ids {
        assert_eq!(c.records(id, "lock").await, expected, "node {id}");
    }
}

/// `fencelog dev-cluster` starts three nodes that form one cluster (a
/// write through node 2 is read back through node 3) and SIGTERM stops it
/// and every node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_cluster_starts_three_nodes_and_stops_them() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let ports: Vec<String> = crate::cluster_support::free_ports(3)
        .iter()
        .map(|p| p.to_string())
        .collect();
    let mut cmd = std::process::Command::new(crate::support::BIN);
    cmd.args(["dev-cluster", "--shards", "2", "--ports", &ports.join(",")])
        .arg("--data-dir")
        .arg(dir.path())
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped());
    let mut dev = fencelog_testkit::process::ChildGuard::spawn(&mut cmd);
    let mut out = BufReader::new(dev.child_mut().stdout.take().unwrap());
    let mut urls = Vec::new();
    for i in 1..=3 {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let want = format!("node {i}: http://127.0.0.1:{}", ports[i - 1]);
        assert_eq!(line.trim_end(), want);
        urls.push(format!("http://127.0.0.1:{}", ports[i - 1]));
    }
    let http = reqwest::Client::new();
    let body = serde_json::json!({ "fencing_token": 1, "records": [{ "body": "hi" }] });
    let deadline = std::time::Instant::now() + crate::cluster_support::WAIT;
    loop {
        let r = http
            .post(format!("{}/v1/streams/dev/records", urls[1]))
            .json(&body)
            .send()
            .await
            .unwrap();
        match r.status().as_u16() {
            200 => break,
            // No leader elected yet: nothing was proposed.
            503 => {
                let v: Value = r.json().await.unwrap();
                assert_eq!(v["outcome_unknown"], false, "{v}");
            }
            s => panic!("append through node 2: {s}"),
        }
        assert!(std::time::Instant::now() < deadline, "no leader");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    loop {
        let r = http
            .get(format!("{}/v1/streams/dev/records", urls[2]))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let v: Value = r.json().await.unwrap();
        if status == 200 {
            assert_eq!(v["records"][0]["body"], "hi", "{v}");
            break;
        }
        // Node 3 has not heard from the shard's leader yet.
        assert_eq!((status, &v["error"]), (503, &Value::from("unavailable")));
        assert!(std::time::Instant::now() < deadline, "node 3: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    dev.signal(fencelog_testkit::process::Signal::Term);
    assert!(dev.wait().success());
    for url in &urls {
        assert!(
            http.get(format!("{url}/healthz")).send().await.is_err(),
            "{url} still serves after dev-cluster stopped"
        );
    }
}

/// Record headers in cluster mode, as on a single node (issue 16 §2): a
/// batch mixing records with and without headers, written through a
/// follower, reads back exactly through the other follower and the leader;
/// over a limit or malformed, the refusal is the single node's exact 413 or
/// 400 body, and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_headers_come_back_exactly_through_another_node() {
    use serde_json::json;
    let c = ProcCluster::start(3, 1, &[]);
    let ids = [1, 2, 3];
    let leader = c.leader(0, &ids).await;
    let (via, read_at) = match others(&ids, leader)[..] {
        [a, b] => (a, b),
        _ => unreachable!("three nodes"),
    };
    let path = "/v1/streams/h/records";
    let batch = json!({"fencing_token": 1, "records": [
        {"body": "traced", "headers": [["trace-id", "abc"], ["trace-id", ""]]},
        {"body": "plain"},
        {"body_base64": "/w==", "headers_base64": [["dHJhY2UtaWQ=", "/w=="]]},
    ]});
    let (s, ack, _) = c.post(via, path, &batch).await;
    assert_eq!((s, &ack["first_seq"]), (200, &json!(0)), "{ack}");
    let many: Vec<Value> = (0..65).map(|_| json!(["n", "v"])).collect();
    let refused = [
        (
            json!({"fencing_token": 1, "records": [{"body": "b", "headers": many}]}),
            413,
            json!({"error": "too_large", "message": "records[0]: 65 headers, the limit is 64 per record",
                   "limit": 64, "actual": 65, "stream": "h"}),
        ),
        (
            json!({"fencing_token": 1, "records": [{"body": "b", "headers": [["", "v"]]}]}),
            400,
            json!({"error": "bad_request", "message": "records[0]: header 0 has an empty name",
                   "stream": "h"}),
        ),
    ];
    for (body, status, expected) in refused {
        let (s, v, _) = c.post(read_at, path, &body).await;
        assert_eq!((s, v), (status, expected));
    }
    c.converged(0, &ids).await;
    let page = |id: usize| {
        let url = format!("{}{path}?start_seq=0", c.url(id));
        let http = c.http.clone();
        async move {
            http.get(url)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    let read = page(read_at).await;
    let ts = &read["records"][0]["timestamp_ms"];
    let expected = json!({
        "records": [
            {"seq": 0, "fencing_token": 1, "timestamp_ms": ts,
             "headers": [["trace-id", "abc"], ["trace-id", ""]], "body": "traced"},
            {"seq": 1, "fencing_token": 1, "timestamp_ms": ts, "body": "plain"},
            {"seq": 2, "fencing_token": 1, "timestamp_ms": ts,
             "headers_base64": [["dHJhY2UtaWQ=", "/w=="]], "body_base64": "/w=="},
        ],
        "next_start_seq": 3,
        "next_seq": 3,
    });
    assert_eq!(read, expected);
    assert_eq!(page(leader).await, expected, "the leader's replica");
}

/// The append session in cluster mode (issue 13's session, issue 14's
/// "any node"): opened through a follower, the Rust client follows the
/// 307 to the shard's leader; 200 appends pipelined on one connection,
/// one of them with a stale token and one with a wrong `match_seq_num`,
/// are answered in the order sent — 409 and 412 for those two alone, the
/// single node's exact bodies — and every replica holds the other 198 in
/// send order, seqs dense.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_session_through_a_follower_is_served_on_the_leader_in_order() {
    let c = ProcCluster::start(3, 2, &[]);
    let ids = [1, 2, 3];
    let k = shard_of("piped", 2);
    let leader = c.leader(k, &ids).await;
    let follower = others(&ids, leader)[0];
    let (s, v) = c.fence(leader, "piped", 5).await;
    assert_eq!(s, 200, "{v}");
    let client = fencelog_client::Client::new(c.url(follower)).unwrap();
    let session = client.append_session("piped").await.unwrap();
    let (mut tx, mut rx) = (session.sender, session.receiver);
    const N: u64 = 200;
    const STALE: u64 = 70;
    const MISMATCH: u64 = 140;
    let sending = async move {
        for i in 0..N {
            let (token, matching) = match i {
                STALE => (4, None),
                MISMATCH => (5, Some(0)),
                _ => (5, None),
            };
            tx.send(token, matching, format!("r{i}").as_bytes()).await?;
        }
        tx.close().await
    };
    let receiving = async move {
        let mut answers = Vec::new();
        while let Some(a) = rx.recv().await? {
            answers.push(a);
        }
        Ok::<_, fencelog_client::ClientError>(answers)
    };
    let (sent, answers) = tokio::join!(sending, receiving);
    sent.unwrap();
    let answers = answers.unwrap();
    assert_eq!(answers.len() as u64, N);
    let mut seq = 0;
    for (i, (n, answer)) in answers.into_iter().enumerate() {
        assert_eq!(n, i as u64, "answers in the order sent");
        match (n, answer) {
            (STALE, Err(fencelog_client::ClientError::StaleToken { answer, .. })) => {
                assert_eq!(answer.to_value(), stale_body("piped", 4, 5, seq));
            }
            (
                MISMATCH,
                Err(fencelog_client::ClientError::SeqMismatch {
                    expected, next_seq, ..
                }),
            ) => {
                assert_eq!((expected, next_seq), (0, seq));
            }
            (n, Ok(ack)) if n != STALE && n != MISMATCH => {
                assert_eq!((ack.first_seq, ack.fencing_token), (seq, 5), "append {n}");
                seq += 1;
            }
            (n, other) => panic!("append {n}: {other:?}"),
        }
    }
    c.converged(k, &ids).await;
    let expected: Vec<(u64, u64, String)> = (0..N)
        .filter(|i| *i != STALE && *i != MISMATCH)
        .enumerate()
        .map(|(seq, i)| (seq as u64, 5, format!("r{i}")))
        .collect();
    for id in ids {
        assert_eq!(c.records(id, "piped").await, expected, "node {id}");
    }
}
