//! Config changes, cursor commits, multi-stream batches and the stream
//! listing in cluster mode (issue 14), against three real processes: one
//! script of requests gets, through a follower and through the leader,
//! exactly the answers a single node gives it (timestamps aside, which are
//! the leader's clock); a batch across shards is refused with its own
//! 400; every replica holds the same state, before and after all three
//! were SIGKILLed and restarted.

use crate::cluster_support::{others, settled_even_if_unknown, ProcCluster};
use crate::support::serve;
use fencelog_cluster::shard::shard_of;
use serde_json::{json, Value};

const SHARDS: u32 = 2;

/// Stream names of one run of the script, all the same length: `a` and
/// `b` in one shard, `c` in the other.
struct Names {
    set: char,
    a: String,
    b: String,
    c: String,
}

impl Names {
    fn pick(set: char) -> Names {
        let name = |role: char, n: u32| format!("{set}{role}{n}");
        let k = shard_of(&name('a', 10), SHARDS);
        let b = (10..100).find(|n| shard_of(&name('b', *n), SHARDS) == k);
        let c = (10..100).find(|n| shard_of(&name('c', *n), SHARDS) != k);
        Names {
            set,
            a: name('a', 10),
            b: name('b', b.expect("a name in the same shard")),
            c: name('c', c.expect("a name in the other shard")),
        }
    }

    /// `v` with this run's names as `A`/`B`/`C` and every timestamp 0.
    fn canonical(&self, v: &Value) -> Value {
        let text = v
            .to_string()
            .replace(&self.a, "A")
            .replace(&self.b, "B")
            .replace(&self.c, "C");
        let mut v: Value = serde_json::from_str(&text).unwrap();
        zero_timestamps(&mut v);
        v
    }
}

fn zero_timestamps(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k.ends_with("timestamp_ms") {
                    *x = json!(0);
                } else {
                    zero_timestamps(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(zero_timestamps),
        _ => {}
    }
}

/// One step; a 503 `unavailable` is repeated, as a client does, so the
/// answers compared are the decided ones. One whose outcome is unknown
/// too: had the first applied, the repeat would show (a second record,
/// another seq) in the comparison with the single node.
async fn call(http: &reqwest::Client, method: &str, url: &str, body: &Value) -> (u16, Value) {
    settled_even_if_unknown(|| match method {
        "put" => http.put(url).json(body),
        "post" => http.post(url).json(body),
        _ => http.get(url),
    })
    .await
}

/// The script: each step's (status, canonical body).
async fn script(http: &reqwest::Client, base: &str, n: &Names) -> Vec<(u16, Value)> {
    let (a, b) = (&n.a, &n.b);
    let records = |body: &str| json!([{ "body": body }]);
    let steps: Vec<(&str, String, Value)> = vec![
        (
            "post",
            format!("/v1/streams/{a}/fence"),
            json!({"fencing_token": 5}),
        ),
        (
            "put",
            format!("/v1/streams/{a}/config"),
            json!({"fencing_token": 5, "retention_age_s": 3600, "retention_respect_cursors": true}),
        ),
        (
            "put",
            format!("/v1/streams/{a}/config"),
            json!({"fencing_token": 4, "retention_age_s": 60}),
        ),
        (
            "put",
            format!("/v1/streams/{a}/config"),
            json!({"retention_bytes": 0}),
        ),
        (
            "put",
            format!("/v1/streams/{a}/config"),
            json!({"fencing_token": 0}),
        ),
        (
            "put",
            format!("/v1/streams/{b}/config"),
            json!({"retention_bytes": 1000}),
        ),
        (
            "put",
            format!("/v1/streams/{a}/config"),
            json!({"retention_bytes": "unlimited"}),
        ),
        (
            "post",
            "/v1/batch".into(),
            json!({"ops": [
                {"stream": a, "fencing_token": 5, "records": records("x0")},
                {"stream": b, "fencing_token": 3, "fence": true},
                {"stream": a, "fencing_token": 5, "records": records("x1"), "match_seq_num": 1},
            ]}),
        ),
        (
            "post",
            "/v1/batch".into(),
            json!({"ops": [
                {"stream": b, "fencing_token": 3, "records": records("y")},
                {"stream": a, "fencing_token": 4, "records": records("stale")},
            ]}),
        ),
        ("post", "/v1/batch".into(), json!({"ops": []})),
        (
            "put",
            format!("/v1/streams/{a}/cursors/c1"),
            json!({"fencing_token": 2, "seq": 1}),
        ),
        (
            "put",
            format!("/v1/streams/{a}/cursors/c1"),
            json!({"fencing_token": 1, "seq": 2}),
        ),
        (
            "put",
            format!("/v1/streams/{a}/cursors/c1"),
            json!({"fencing_token": 2, "seq": 99}),
        ),
        (
            "put",
            format!("/v1/streams/{a}/cursors/bad name"),
            json!({"fencing_token": 2, "seq": 0}),
        ),
        (
            "put",
            format!("/v1/streams/{a}/cursors/c1"),
            json!({"fencing_token": 0, "seq": 0}),
        ),
        (
            "put",
            format!("/v1/streams/{a}/cursors/c2"),
            json!({"fencing_token": 9, "seq": 2}),
        ),
        ("get", format!("/v1/streams/{a}/cursors"), Value::Null),
        ("get", format!("/v1/streams/{a}"), Value::Null),
        (
            "get",
            format!("/v1/streams/{b}/records?start_seq=0"),
            Value::Null,
        ),
        (
            "get",
            format!("/v1/streams?prefix={}&limit=1", n.set),
            Value::Null,
        ),
        (
            "get",
            format!("/v1/streams?prefix={}&limit=1&start_after={a}", n.set),
            Value::Null,
        ),
        ("get", format!("/v1/streams?prefix={}", n.set), Value::Null),
    ];
    let mut out = Vec::new();
    for (method, path, body) in steps {
        let (s, v) = call(http, method, &format!("{base}{path}"), &body).await;
        out.push((s, n.canonical(&v)));
    }
    out
}

/// What node `id` holds of run `n`'s streams.
async fn view(c: &ProcCluster, id: usize, n: &Names) -> Value {
    let mut v = json!({});
    for s in [&n.a, &n.b, &n.c] {
        v[s] = json!([
            c.get_settled(id, &format!("/v1/streams/{s}")).await,
            c.get_settled(id, &format!("/v1/streams/{s}/cursors")).await,
            c.get_settled(id, &format!("/v1/streams/{s}/records?start_seq=0"))
                .await,
        ]);
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_cursors_batches_and_listing_answer_as_a_single_node_and_replicate() {
    let tmp = tempfile::tempdir().unwrap();
    let single = serve().data_dir(tmp.path().join("single")).start();
    let http = reqwest::Client::new();
    let x = Names::pick('x');
    let expected = script(&http, single.url(), &x).await;
    single.sigterm_and_wait();
    let statuses: Vec<u16> = expected.iter().map(|(s, _)| *s).collect();
    assert_eq!(
        statuses,
        [
            200, 200, 409, 400, 400, 404, 200, 200, 409, 400, 200, 409, 416, 400, 400, 200, 200,
            200, 200, 200, 200, 200
        ],
        "the single node's answers: {expected:#?}"
    );
    let mut c = ProcCluster::start(3, SHARDS, &[]);
    let ids = [1, 2, 3];
    let (y, z) = (Names::pick('y'), Names::pick('z'));
    let follower = others(&ids, c.leader(shard_of(&y.a, SHARDS), &ids).await)[0];
    let leader = c.leader(shard_of(&z.a, SHARDS), &ids).await;
    for (id, n, via) in [(follower, &y, "a follower"), (leader, &z, "the leader")] {
        let got = script(&c.http, &c.url(id), n).await;
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            assert_eq!(g, e, "step {i} through {via} (node {id})");
        }
        let cross = json!({"ops": [
            {"stream": n.a, "fencing_token": 5, "records": [{"body": "p"}]},
            {"stream": n.c, "fencing_token": 1, "fence": true},
        ]});
        let (s, v, _) = c.post(id, "/v1/batch", &cross).await;
        let (ka, kc) = (shard_of(&n.a, SHARDS), shard_of(&n.c, SHARDS));
        let message = format!("a batch in cluster mode must keep all its streams in one shard: atomicity across shards would need a two-phase commit, which fencelog does not do ({} is in shard {ka}, {} is in shard {kc}); nothing was changed", n.a, n.c);
        assert_eq!(
            (s, v),
            (400, json!({"error": "bad_request", "message": message})),
            "through {via}"
        );
        assert_eq!(c.get(id, &format!("/v1/streams/{}", n.c)).await.0, 404);
    }
    for k in 0..SHARDS {
        c.converged(k, &ids).await;
    }
    let mut before = Vec::new();
    for n in [&y, &z] {
        let v = view(&c, 1, n).await;
        for id in ids {
            assert_eq!(view(&c, id, n).await, v, "node {id}");
        }
        before.push(v);
    }
    for id in ids {
        c.kill9(id);
    }
    for id in ids {
        c.restart(id, &[]);
    }
    for k in 0..SHARDS {
        c.converged(k, &ids).await;
    }
    for (n, v) in [&y, &z].into_iter().zip(&before) {
        for id in ids {
            assert_eq!(&view(&c, id, n).await, v, "node {id} after the restart");
        }
    }
}
