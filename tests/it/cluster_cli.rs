//! `fencelog cluster status|add|remove|transfer` against a real cluster,
//! with exact output and exit codes; and `--cluster-redirect`: a follower
//! answers a write with 307 and the leader's address, which the Rust
//! client and the CLI follow (method and body kept).

use crate::cluster_support::{others, ProcCluster};
use crate::support::BIN;
use serde_json::{json, Value};
use std::process::Command;

/// `(exit code, stdout, stderr)` of `fencelog cluster ARGS --server URL`.
fn cluster(url: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .arg("cluster")
        .args(args)
        .args(["--server", url])
        .env_remove("FENCELOG_URL")
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
    (
        out.status.code().unwrap(),
        text(&out.stdout),
        text(&out.stderr),
    )
}

/// One status line as `cluster status` prints it, from the JSON status.
fn shard_line(s: &Value) -> String {
    let ids = |v: &Value| {
        let v: Vec<String> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.to_string())
            .collect();
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(",")
        }
    };
    format!(
        "{:<6} {:<10} {:<7} {:<10} {:<5} {:<9} {:<9} {:<10} -",
        s["shard"].to_string(),
        s["state"].as_str().unwrap(),
        s["leader"].to_string(),
        s["preferred_leader"].to_string(),
        s["term"].to_string(),
        ids(&s["voters"]),
        ids(&s["learners"]),
        s["applied_index"].to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_commands_print_exactly_what_they_did() {
    let c = ProcCluster::start(3, 2, &[]);
    let ids = [1, 2, 3];
    for k in 0..2 {
        c.leader(k, &ids).await;
    }
    let url = c.url(2);
    let (code, out, err) = cluster(&url, &["transfer", "0", "1"]);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (0, "shard 0 is led by node 1\n", "")
    );
    let (code, out, _) = cluster(&url, &["transfer", "1", "3", "--json"]);
    assert_eq!((code, out.as_str()), (0, "{\"leader\":3,\"shard\":1}\n"));
    for k in 0..2 {
        c.converged(k, &ids).await;
    }
    let (code, out, err) = cluster(&url, &["status"]);
    assert_eq!((code, err.as_str()), (0, ""));
    let v = c.status(2).await.unwrap();
    let mut expected = vec![
        "node 2 (healthy)".to_string(),
        "shard  state      leader  preferred  term  voters    learners  applied    quorum ack"
            .to_string(),
    ];
    expected.extend(v["shards"].as_array().unwrap().iter().map(shard_line));
    expected.push("leaders: node 1: 0; node 2: -; node 3: 1".to_string());
    assert_eq!(out.lines().collect::<Vec<_>>(), expected, "{v}");
    assert!(
        out.contains("\n0      Follower   1       1          "),
        "{out}"
    );
    // Node 2 leads nothing (the `-` above); node 1 leads shard 0, and a
    // majority answered it a few heartbeats ago at most.
    let (code, out, _) = cluster(&c.url(1), &["status"]);
    let line = out.lines().find(|l| l.starts_with("0 ")).unwrap();
    let ms: u64 = line
        .strip_suffix(" ms ago")
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(code == 0 && ms < 5_000, "{out}");
    let v1 = c.status(1).await.unwrap();
    assert!(
        v1["shards"][0]["quorum_ack_ms"].as_u64().unwrap() < 5_000,
        "{v1}"
    );
    assert_eq!(v1["shards"][1]["quorum_ack_ms"], Value::Null, "{v1}");
    let (code, out, _) = cluster(&url, &["status", "--json"]);
    let json: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (code, &json["node_id"], &json["leaders"]),
        (0, &json!(2), &json!({"1": [0], "2": [], "3": [1]}))
    );
    let refused = [
        (
            &["transfer", "9", "1"][..],
            4,
            "fencelog: bad request: shard 9 does not exist: the cluster has 2 shards\n",
        ),
        (
            &["remove", "7"][..],
            4,
            "fencelog: bad request: node 7 is not a member of any shard\n",
        ),
    ];
    for (args, want_code, want_err) in refused {
        let (code, out, err) = cluster(&url, args);
        assert_eq!(
            (code, out.as_str(), err.as_str()),
            (want_code, "", want_err),
            "{args:?}"
        );
    }
    let (code, _, err) = cluster(&url, &["add", "5", "127.0.0.1:1", "--json"]);
    let e: Value = serde_json::from_str(&err).unwrap();
    assert_eq!((code, &e["error"]), (1, &json!("unavailable")), "{err}");
    let (code, _, err) = cluster("http://127.0.0.1:1", &["status"]);
    assert_eq!(code, 1, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirecting_follower_answers_307_and_clients_follow_it() {
    let c = ProcCluster::start(3, 1, &["--cluster-redirect"]);
    let ids = [1, 2, 3];
    let leader = c.leader(0, &ids).await;
    let follower = others(&ids, leader)[0];
    let lead_addr = &c.addrs[leader - 1];
    let raw = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let body = json!({ "fencing_token": 1, "records": [{ "body": "never" }] });
    let r = raw
        .post(format!("{}/v1/streams/r/records?wait=1", c.url(follower)))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 307);
    let header = |name: &str| r.headers()[name].to_str().unwrap().to_string();
    assert_eq!(
        header("location"),
        format!("http://{lead_addr}/v1/streams/r/records?wait=1")
    );
    assert_eq!(header("fencelog-leader"), format!("{leader}={lead_addr}"));
    let client = fencelog_client::Client::new(c.url(follower)).unwrap();
    let ack = client.append("r", 1, ["a"]).await.unwrap();
    assert_eq!((ack.first_seq, ack.last_seq), (0, 0));
    let out = Command::new(BIN)
        .args([
            "append",
            "r",
            "--token",
            "1",
            "b",
            "--server",
            &c.url(follower),
        ])
        .env_remove("FENCELOG_URL")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    client.fence("r", 5).await.unwrap();
    let stale = client.append("r", 4, ["late"]).await.unwrap_err();
    assert!(
        matches!(stale, fencelog_client::ClientError::StaleToken { .. }),
        "{stale:?}"
    );
    c.converged(0, &ids).await;
    let expected = vec![(0, 1, "a".to_string()), (1, 1, "b".to_string())];
    for id in ids {
        assert_eq!(c.records(id, "r").await, expected, "node {id}");
    }
    let (s, _) = c.get(follower, "/v1/streams/r/records").await;
    assert_eq!(s, 200, "reads are served by the follower itself");
}
