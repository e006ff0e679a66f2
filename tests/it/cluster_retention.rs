//! Retention in cluster mode (issue 14 with issue 10's settings), against
//! three real processes: streams with a retention by age and by size are
//! trimmed on every replica identically — the shard leader proposes each
//! retention trim at its own clock, apply decides it through the fencing
//! rule — while an owner appends and a stale writer is refused through
//! every node; a stream without retention keeps everything; the history
//! checker judges every answer; and a SIGKILLed replica comes back with
//! the same trimmed logs.

use crate::cluster_history::{append, fence, read, replica};
use crate::cluster_support::{others, ProcCluster, WAIT};
use fencelog_testkit::history::{check, Call, History, Outcome};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const AGE: &str = "ret-age";
const SIZE: &str = "ret-size";
const NONE: &str = "ret-none";
const STREAMS: [&str; 3] = [AGE, SIZE, NONE];
/// Appends per stream by the owner.
const APPENDS: u64 = 40;
/// `ret-size`'s retention, in bytes of frames.
const SIZE_LIMIT_BYTES: u64 = 2000;

/// One record body of a fixed length, so every frame of a stream has the
/// same size.
fn body(who: &str, n: u64) -> String {
    format!("{who}-{n:04}-{}", "x".repeat(90))
}

/// A retention setting through node `url`, recorded.
async fn retention(h: &History, http: &reqwest::Client, url: &str, stream: &str, setting: Value) {
    let at = h.invoke();
    let r = http
        .put(format!("{url}/v1/streams/{stream}/config"))
        .json(&setting)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let v: Value = r.json().await.unwrap();
    assert_eq!(status, 200, "{v}");
    let next_seq = v["next_seq"].as_u64().unwrap();
    let call = Call::Retention {
        stream: stream.into(),
    };
    h.complete(at, call, Outcome::Fenced { next_seq });
}

/// `(first_seq, next_seq, bytes)` of every stream on node `id`.
async fn fronts(c: &ProcCluster, id: usize) -> Vec<(u64, u64, u64)> {
    let mut out = Vec::new();
    for s in STREAMS {
        let (_, v) = c.get(id, &format!("/v1/streams/{s}")).await;
        let n = |f: &str| v[f].as_u64().unwrap_or(u64::MAX);
        out.push((n("first_seq"), n("next_seq"), n("bytes")));
    }
    out
}

/// Waits until every node shows `ret-age` trimmed to its end and the same
/// fronts as every other node.
async fn trimmed_alike(c: &ProcCluster, ids: &[usize]) -> Vec<(u64, u64, u64)> {
    let deadline = Instant::now() + WAIT;
    loop {
        let mut seen = Vec::new();
        for id in ids {
            seen.push(fronts(c, *id).await);
        }
        let age = seen[0][0];
        if age.0 == age.1 && age.1 > 0 && seen.iter().all(|s| *s == seen[0]) {
            return seen.swap_remove(0);
        }
        assert!(Instant::now() < deadline, "not trimmed alike: {seen:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The owner's appends (token 2) and a stale writer's (token 1), through
/// node after node, with a read of each stream now and then.
async fn write(h: &History, c: &ProcCluster, ids: &[usize], stale: bool) {
    let who = if stale { "stale" } else { "own" };
    let token = if stale { 1 } else { 2 };
    let rounds = if stale { APPENDS / 4 } else { APPENDS };
    for n in 0..rounds {
        for (i, s) in STREAMS.iter().enumerate() {
            let url = c.url(ids[(n as usize + i) % ids.len()]);
            let got = append(h, &c.http, &url, s, token, &[body(who, n)]).await;
            let want_ok = !stale;
            match got {
                Outcome::Appended { .. } => assert!(want_ok, "a stale append accepted"),
                Outcome::Stale { .. } => assert!(stale, "the owner refused"),
                // A leader change under load: the checker judges it.
                Outcome::Unknown(_) => {}
                other => panic!("{who} append to {s}: {other:?}"),
            }
            if n % 8 == 0 {
                read(h, &c.http, &url, s, 0).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_trims_every_replica_alike_through_the_log() {
    let mut c = ProcCluster::start(3, 2, &["--retention-interval-ms", "200"]);
    let ids = [1, 2, 3];
    for k in 0..2 {
        c.leader(k, &ids).await;
    }
    let h = History::default();
    for s in STREAMS {
        assert!(matches!(
            fence(&h, &c.http, &c.url(1), s, 2).await,
            Outcome::Fenced { .. }
        ));
    }
    retention(&h, &c.http, &c.url(2), AGE, json!({"retention_age_s": 1})).await;
    let size = json!({ "retention_bytes": SIZE_LIMIT_BYTES });
    retention(&h, &c.http, &c.url(3), SIZE, size).await;
    tokio::join!(write(&h, &c, &ids, false), write(&h, &c, &ids, true));
    // No leader change is provoked; one under load answers "unknown",
    // which the checker judges (and the exact tail check below skips).
    let unknown = |token| {
        let ops = h.ops();
        let unknown = |o: &&fencelog_testkit::history::Op| {
            matches!(o.outcome, Outcome::Unknown(_))
                && matches!(o.call, Call::Append { token: t, .. } if t == token)
        };
        ops.iter().filter(unknown).count() as u64
    };
    let (unknown_own, unknown_stale) = (unknown(2), unknown(1));
    let fronts = trimmed_alike(&c, &ids).await;
    for k in 0..2 {
        c.converged(k, &ids).await;
    }
    let mut replicas = Vec::new();
    for id in ids {
        replicas.push(replica(&c.http, &c.url(id), &STREAMS).await);
    }
    let report = check(&h.ops(), &replicas).unwrap();
    assert_eq!(report.acked + unknown_own, 3 * APPENDS, "{report:?}");
    assert_eq!(report.stale + unknown_stale, 3 * APPENDS / 4, "{report:?}");
    // By age: everything, once a second old. Unlimited: nothing.
    let logs = &replicas[0];
    assert!(logs[AGE].records.is_empty(), "{:?}", logs[AGE]);
    let none = &logs[NONE];
    assert_eq!((none.records.len() as u64, fronts[2].0), (none.next_seq, 0));
    // By size: whole frames from the front while the stream holds more
    // than the limit, so what is left fits and one more frame would not.
    let (first, next, bytes) = fronts[1];
    let kept = next - first;
    assert!(first > 0 && kept > 0, "{fronts:?}");
    let frame = bytes / kept;
    assert_eq!(frame * kept, bytes, "every frame the same size: {fronts:?}");
    assert!(
        bytes <= SIZE_LIMIT_BYTES && SIZE_LIMIT_BYTES < bytes + frame,
        "{fronts:?}"
    );
    if unknown_own == 0 {
        let want: Vec<String> = (APPENDS - kept..APPENDS).map(|n| body("own", n)).collect();
        let got: Vec<String> = logs[SIZE]
            .records
            .iter()
            .map(|r| String::from_utf8(r.body.clone()).unwrap())
            .collect();
        assert_eq!(got, want);
    }
    // Durable: a SIGKILLed follower comes back with the same logs.
    let victim = others(&ids, c.leader(0, &ids).await)[0];
    c.kill9(victim);
    c.restart(victim, &["--retention-interval-ms", "200"]);
    for k in 0..2 {
        c.converged(k, &ids).await;
    }
    let back = replica(&c.http, &c.url(victim), &STREAMS).await;
    assert_eq!(back, replicas[0], "node {victim} after SIGKILL");
}
