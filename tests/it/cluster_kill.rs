//! Issue 14's leader kill loop against real processes: three
//! `fencelog serve --cluster` nodes (S = 2), four clients writing through
//! random nodes — per stream an owner that fences with ever higher tokens
//! and a deliberately stale writer — while the leader of a random shard is
//! SIGKILLed at a seeded moment and restarted after a seeded delay. Then
//! every replica must hold the same log of each stream, seqs dense, with
//! every acknowledged append at its seq, no refused or stale write in it,
//! and every record after an acknowledged fence at least that token.
//!
//! `FENCELOG_CLUSTER_KILL_CYCLES` (default 30) and
//! `FENCELOG_CLUSTER_KILL_SEED` size it.

use crate::cluster_support::{others, ProcCluster};
use crate::support::env_or;
use fencelog_engine::sim::Rng;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const STREAMS: [&str; 2] = ["kill.a", "kill.b"];

#[derive(Default)]
struct Ledger {
    /// (stream, first_seq, token, body) of every 200 append.
    acked: Vec<(usize, u64, u64, String)>,
    /// (stream, next_seq, token) of every 200 fence.
    fences: Vec<(usize, u64, u64)>,
    /// Bodies answered 409: never in any log.
    refused: HashSet<String>,
    unknown: u64,
}

enum Answer {
    Ok(Value),
    Refused,
    Unknown,
}

async fn post(http: &reqwest::Client, url: String, body: Value) -> Answer {
    let sent = http
        .post(url)
        .json(&body)
        .timeout(Duration::from_secs(15))
        .send()
        .await;
    let Ok(r) = sent else { return Answer::Unknown };
    match r.status().as_u16() {
        200 => Answer::Ok(r.json().await.unwrap_or(Value::Null)),
        409 => Answer::Refused,
        _ => Answer::Unknown,
    }
}

/// One client until `stop`: the owner fences with a fresh token every few
/// appends; the stale writer always uses token 1.
async fn client(
    urls: Vec<String>,
    stream: usize,
    owner: bool,
    seed: u64,
    tokens: Arc<AtomicU64>,
    ledger: Arc<Mutex<Ledger>>,
    stop: Arc<AtomicBool>,
) {
    let http = reqwest::Client::new();
    let mut rng = Rng::new(seed);
    let name = STREAMS[stream];
    let mut token = 1;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let url = &urls[rng.below(urls.len() as u64) as usize];
        if owner && n.is_multiple_of(8) {
            let t = tokens.fetch_add(1, Ordering::Relaxed);
            let a = post(
                &http,
                format!("{url}/v1/streams/{name}/fence"),
                json!({"fencing_token": t}),
            )
            .await;
            if let Answer::Ok(v) = a {
                token = t;
                let next = v["next_seq"].as_u64().unwrap();
                ledger.lock().unwrap().fences.push((stream, next, t));
            }
        }
        n += 1;
        let body = format!("{}-{seed}-{n}", if owner { "own" } else { "stale" });
        let req = json!({"fencing_token": token, "records": [{"body": body}]});
        let a = post(&http, format!("{url}/v1/streams/{name}/records"), req).await;
        let mut l = ledger.lock().unwrap();
        match a {
            Answer::Ok(v) => l
                .acked
                .push((stream, v["first_seq"].as_u64().unwrap(), token, body)),
            Answer::Refused => drop(l.refused.insert(body)),
            Answer::Unknown => l.unknown += 1,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_shard_leaders_loses_nothing_and_accepts_nothing_stale() {
    let cycles = env_or("FENCELOG_CLUSTER_KILL_CYCLES", 30);
    let seed = env_or("FENCELOG_CLUSTER_KILL_SEED", 0x14c1_u64);
    eprintln!("cluster kill loop: {cycles} cycles, seed {seed:#x}");
    let mut c = ProcCluster::start(3, 2, &["--commit-timeout-ms", "3000"]);
    let ids = [1, 2, 3];
    let urls: Vec<String> = ids.iter().map(|i| c.url(*i)).collect();
    let (ledger, stop) = (
        Arc::new(Mutex::new(Ledger::default())),
        Arc::new(AtomicBool::new(false)),
    );
    let tokens = Arc::new(AtomicU64::new(2));
    let clients: Vec<_> = (0..4)
        .map(|i| {
            let args = (urls.clone(), i % 2, i < 2, seed + i as u64);
            tokio::spawn(client(
                args.0,
                args.1,
                args.2,
                args.3,
                tokens.clone(),
                ledger.clone(),
                stop.clone(),
            ))
        })
        .collect();
    let mut rng = Rng::new(seed);
    for cycle in 0..cycles {
        let k = rng.below(2) as u32;
        let leader = c.leader(k, &ids).await;
        tokio::time::sleep(Duration::from_millis(rng.range(50, 400))).await;
        c.kill9(leader);
        tokio::time::sleep(Duration::from_millis(rng.below(300))).await;
        c.restart(leader, &["--commit-timeout-ms", "3000"]);
        for k in 0..2 {
            c.converged(k, &ids).await;
        }
        eprintln!("cycle {cycle}: killed node {leader} (leader of shard {k})");
    }
    stop.store(true, Ordering::Relaxed);
    for cl in clients {
        cl.await.unwrap();
    }
    for k in 0..2 {
        c.converged(k, &ids).await;
    }
    let l = std::mem::take(&mut *ledger.lock().unwrap());
    eprintln!(
        "acked {} appends, {} fences, {} refused, {} unknown",
        l.acked.len(),
        l.fences.len(),
        l.refused.len(),
        l.unknown
    );
    assert!(l.acked.len() > cycles as usize, "the clients made progress");
    for (s, name) in STREAMS.iter().enumerate() {
        let log = c.records(1, name).await;
        for id in others(&ids, 1) {
            assert_eq!(
                c.records(id, name).await,
                log,
                "node {id} differs from node 1 on {name}"
            );
        }
        assert!(
            log.iter().enumerate().all(|(i, r)| r.0 == i as u64),
            "{name}: seqs dense"
        );
        for (_, first, token, body) in l.acked.iter().filter(|a| a.0 == s) {
            let r = log.get(*first as usize);
            assert_eq!(
                r,
                Some(&(*first, *token, body.clone())),
                "{name}: acknowledged append lost"
            );
        }
        for (_, at, token) in l.fences.iter().filter(|f| f.0 == s) {
            let stale = log.iter().find(|r| r.0 >= *at && r.1 < *token);
            assert!(
                stale.is_none(),
                "{name}: {stale:?} accepted after fence {token} at {at}"
            );
        }
        assert!(
            log.iter().all(|r| !l.refused.contains(&r.2)),
            "{name}: a refused write is in the log"
        );
    }
}
