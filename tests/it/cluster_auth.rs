//! Issue 12's tokens in cluster mode (issue 14), against three real
//! processes: every route of the route table × every scope × inside and
//! outside the prefix answers the single node's exact 401/403 bodies
//! through a follower and through the leader; `/_cluster/admin/` needs an
//! `admin` token; every other `/_cluster/` path needs the peer secret, so
//! a forward forged by a client (even with a valid admin token) is refused
//! and changes nothing; and a node with tokens but no peer secret refuses
//! to start.

use crate::auth_scopes::{every_route_every_scope, forbidden, secret_for, send, write_config};
use crate::cluster_support::{others, ProcCluster};
use fencelog_cluster::raft::WireOp;
use fencelog_cluster::rpc::{decode, encode, RpcKind};
use fencelog_engine::WriteOp;
use fencelog_server::auth::Scope;
use serde_json::{json, Value};
use std::path::Path;

const PEER_SECRET: &str = "peer-secret-of-this-test-0123456789";

fn client_with(secret: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    let value = format!("Bearer {secret}").parse().unwrap();
    headers.insert(reqwest::header::AUTHORIZATION, value);
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap()
}

/// `--config` with the auth test's tokens and `--cluster-secret-file`.
fn auth_args(dir: &Path) -> Vec<String> {
    let config = write_config(dir);
    let secret = dir.join("peer.secret");
    std::fs::write(&secret, format!("{PEER_SECRET}\n")).unwrap();
    vec![
        "--config".into(),
        config.display().to_string(),
        "--cluster-secret-file".into(),
        secret.display().to_string(),
    ]
}

/// A peer RPC as a client might forge it: a forwarded fence of `in-s`.
async fn forward(c: &ProcCluster, id: usize, shard: u32, secret: Option<&str>) -> (u16, Value) {
    let op = WireOp(WriteOp::Fence {
        stream: "in-s".into(),
        token: 1000,
        not_after_ms: None,
    });
    let url = format!("{}/_cluster/raft/{shard}/forward", c.url(id));
    let mut req = c.http.post(url).body(encode(&op));
    if let Some(s) = secret {
        req = req.header("fencelog-peer-secret", s);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let bytes = r.bytes().await.unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// `in-s`'s highest token as node `id` holds it, read with the setup
/// token.
async fn token(c: &ProcCluster, setup: &reqwest::Client, id: usize) -> Value {
    let url = format!("{}/v1/streams/in-s", c.url(id));
    let r = setup.get(url).send().await.unwrap();
    r.json::<Value>().await.unwrap()["highest_token"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_routes_take_the_single_nodes_tokens_scopes_and_bodies() {
    let tmp = tempfile::tempdir().unwrap();
    let args = auth_args(tmp.path());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // The cluster's own requests carry a token with every scope it needs:
    // admin for status, and the setup token's for the reads below.
    let admin = client_with(&secret_for(Scope::Admin));
    let c = ProcCluster::start_with(3, 2, &args, admin);
    let ids = [1, 2, 3];
    let k = fencelog_cluster::shard::shard_of("in-s", 2);
    let leader = c.leader(k, &ids).await;
    let follower = others(&ids, leader)[0];
    // Redirects not followed: a follower answers the append session's
    // upgrade with 307 to the leader, the answer this walk judges.
    let plain = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for id in [follower, leader] {
        every_route_every_scope(&plain, &c.url(id)).await;
    }
    let status = format!("{}/_cluster/admin/status", c.url(follower));
    let (s, body, challenge) = send(&plain, "get", &status, None).await;
    assert_eq!(
        (s, body, challenge.as_deref()),
        (
            401,
            json!({"error": "unauthenticated", "message": "this server requires an access token: send Authorization: Bearer <secret>"}),
            Some("Bearer")
        )
    );
    let read = secret_for(Scope::Read);
    let (s, body, _) = send(&plain, "get", &status, Some(&read)).await;
    assert_eq!((s, body), (403, forbidden(Scope::Read, Scope::Admin, None)));
    let (s, body, _) = send(&plain, "get", &status, Some(&secret_for(Scope::Admin))).await;
    assert_eq!((s, &body["node_id"]), (200, &json!(follower)), "{body}");
    // A forged forward: the admin token is a client's, not a peer's.
    let setup = client_with("setup-secret");
    assert_eq!(
        token(&c, &setup, leader).await,
        json!(5),
        "the walk's setup appends used token 5"
    );
    let no_secret = json!({"error": "unauthenticated", "message": "this path is for cluster peers: no peer secret"});
    let wrong = json!({"error": "unauthenticated", "message": "wrong peer secret"});
    for id in ids {
        assert_eq!(forward(&c, id, k, None).await, (401, no_secret.clone()));
        let guess = Some("peer-secret-of-this-test-012345678X");
        assert_eq!(forward(&c, id, k, guess).await, (401, wrong.clone()));
        let vote = format!("{}/_cluster/raft/{k}/vote", c.url(id));
        let r = c.http.post(vote).body(vec![1u8]).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 401, "a vote without the secret");
    }
    c.converged(k, &ids).await;
    for id in ids {
        let t = token(&c, &setup, id).await;
        assert_eq!(t, json!(5), "node {id}: a forged forward applied");
    }
    // The same bytes with the secret are a real forward: the refusals above
    // were the secret's, not a malformed request's.
    let (s, _) = forward(&c, leader, k, Some(PEER_SECRET)).await;
    assert_eq!(s, 200);
    c.converged(k, &ids).await;
    for id in ids {
        assert_eq!(token(&c, &setup, id).await, json!(1000), "node {id}");
    }
    the_peer_stream_takes_the_same_secret(&c, leader, k).await;
    c.converged(k, &ids).await;
    for id in ids {
        assert_eq!(token(&c, &setup, id).await, json!(2000), "node {id}");
    }
}

/// The peer stream's upgrade (`/_cluster/raft/stream`) is a `/_cluster/`
/// path like the others: refused without the secret, with the same
/// bodies; with it, a forwarded fence of token 2000 over the stream is
/// applied; a frame of no RPC kind closes the stream.
async fn the_peer_stream_takes_the_same_secret(c: &ProcCluster, leader: usize, k: u32) {
    use fencelog_cluster::peer::{put_request, take_answer, STREAM_PATH, UPGRADE_PROTOCOL};
    use fencelog_cluster::raft::Proposed;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let url = format!("{}{STREAM_PATH}", c.url(leader));
    let upgrade = |secret: Option<&str>| {
        let mut r = c
            .http
            .get(&url)
            .header("connection", "upgrade")
            .header("upgrade", UPGRADE_PROTOCOL);
        if let Some(s) = secret {
            r = r.header("fencelog-peer-secret", s);
        }
        r
    };
    let no_secret = json!({"error": "unauthenticated", "message": "this path is for cluster peers: no peer secret"});
    let r = upgrade(None).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(r.json::<Value>().await.unwrap(), no_secret);
    let wrong = upgrade(Some("peer-secret-of-this-test-012345678X"));
    let r = wrong.send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let plain = c.http.get(&url).header("fencelog-peer-secret", PEER_SECRET);
    let r = plain.send().await.unwrap();
    assert_eq!(r.status().as_u16(), 400, "a GET without the upgrade");
    let body = r.json::<Value>().await.unwrap();
    assert_eq!(body["error"], json!("bad_request"), "{body}");
    // With the secret: the stream itself, spoken by hand.
    let r = upgrade(Some(PEER_SECRET)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 101);
    let mut io = r.upgrade().await.unwrap();
    let op = WireOp(WriteOp::Fence {
        stream: "in-s".into(),
        token: 2000,
        not_after_ms: None,
    });
    let mut frames = Vec::new();
    put_request(&mut frames, 41, 999, RpcKind::Vote, b"");
    put_request(&mut frames, 42, k, RpcKind::Forward, &encode(&op));
    io.write_all(&frames).await.unwrap();
    let mut buf = bytes::BytesMut::new();
    let mut answers = Vec::new();
    while answers.len() < 2 {
        match take_answer(&mut buf, 1 << 20).unwrap() {
            Some(a) => answers.push(a),
            None => assert!(io.read_buf(&mut buf).await.unwrap() > 0, "closed early"),
        }
    }
    answers.sort_by_key(|a| a.id);
    assert_eq!(
        answers[0].outcome,
        Err("shard 999 out of range".to_string())
    );
    let applied: Proposed = decode(answers[1].outcome.as_ref().unwrap()).unwrap();
    assert!(matches!(applied, Proposed::Applied(_)), "{applied:?}");
    // A frame of no RPC kind: the node closes the stream.
    let mut bad = Vec::new();
    put_request(&mut bad, 43, k, RpcKind::Vote, b"");
    bad[16] = 0;
    io.write_all(&bad).await.unwrap();
    assert_eq!(
        io.read_buf(&mut buf).await.unwrap(),
        0,
        "closed on a bad frame"
    );
}

#[test]
fn a_node_with_tokens_but_no_peer_secret_refuses_to_start() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path());
    let short = tmp.path().join("short.secret");
    std::fs::write(&short, "too-short").unwrap();
    let port = crate::cluster_support::free_ports(1)[0];
    let cluster = format!("1=127.0.0.1:{port}");
    let cases: [(&[&str], &str); 2] = [
        (&[], "access tokens are configured but no cluster secret"),
        (
            &["--cluster-secret-file", short.to_str().unwrap()],
            "the cluster secret must be at least 16 bytes, got 9",
        ),
    ];
    for (extra, says) in cases {
        let err = crate::cluster_support::serve_refused(|cmd| {
            cmd.args(["--node-id", "1", "--cluster", &cluster])
                .arg("--config")
                .arg(&config)
                .arg("--data-dir")
                .arg(tmp.path().join("data"))
                .args(extra);
        });
        assert!(err.contains(says), "{extra:?}: {err}");
    }
}
