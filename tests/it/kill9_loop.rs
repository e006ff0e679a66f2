//! The real `fencelog serve` process, SIGKILLed over and over.
//!
//! Each cycle starts the built binary on the same data directory, checks
//! through the API that every record ever acknowledged is still there at
//! its seq with its body and token, and that tokens never go down along a
//! stream; then 4–8 concurrent clients (fresh owners and deliberately stale
//! writers) append and fence until the process is killed at a seeded
//! random moment. Some kills land during startup, before the server has
//! announced its address. A kill -9 keeps the page cache, so this proves
//! the process-level story (no acknowledgement before the write reached the
//! kernel, recovery of whatever the kernel has); power loss is the
//! simulated disk's job (`protocol_sim`, `crash_points`).
//!
//! `FENCELOG_KILL_CYCLES` (default 150) and `FENCELOG_KILL_SEED` size it.

use crate::support::{env_or, serve};
use fencelog_client::{Client, ClientError};
use fencelog_engine::sim::Rng;
use fencelog_testkit::process::ServerBuilder;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const STREAMS: [&str; 2] = ["kill.a", "kill.b"];

/// Every cycle's server: the same directory and log, small segments so the
/// loop rolls through several.
fn server(data: &Path, log: &Path) -> ServerBuilder {
    serve()
        .data_dir(data)
        .log_file(log)
        .env("FENCELOG_SEGMENT_BYTES", "65536")
}

#[derive(Debug, Clone)]
struct Acked {
    stream: usize,
    first_seq: u64,
    token: u64,
    bodies: Vec<String>,
}

#[derive(Default)]
struct Ledger {
    acked: Vec<Acked>,
    /// Highest token a fence or append was acknowledged with, per stream.
    acked_token: [u64; 2],
    /// Bodies of appends refused with 409 or 412: must never appear.
    refused: HashSet<String>,
    /// `highest` named by every 409: must stay durable.
    cited: [u64; 2],
    stale_409s: u64,
    unknown: u64,
}

/// One client's loop until the server dies or the cycle ends.
async fn client_loop(
    client: Client,
    stream: usize,
    token: u64,
    fence_first: bool,
    tag: String,
    ledger: Arc<Mutex<Ledger>>,
    stop: Arc<AtomicBool>,
) {
    let name = STREAMS[stream];
    if fence_first {
        match client.fence(name, token).await {
            Ok(info) => {
                let mut l = ledger.lock().unwrap();
                l.acked_token[stream] = l.acked_token[stream].max(info.highest_token);
            }
            Err(ClientError::StaleToken { highest, .. }) => {
                let mut l = ledger.lock().unwrap();
                l.cited[stream] = l.cited[stream].max(highest);
                l.stale_409s += 1;
                return;
            }
            Err(_) => return,
        }
    }
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let bodies: Vec<String> = (0..1 + n % 3).map(|k| format!("{tag}-{n}-{k}")).collect();
        n += 1;
        match client.append(name, token, bodies.clone()).await {
            Ok(ack) => {
                assert_eq!(ack.fencing_token, token);
                assert_eq!(ack.last_seq + 1 - ack.first_seq, bodies.len() as u64);
                let mut l = ledger.lock().unwrap();
                l.acked_token[stream] = l.acked_token[stream].max(token);
                l.acked.push(Acked {
                    stream,
                    first_seq: ack.first_seq,
                    token,
                    bodies,
                });
            }
            Err(ClientError::StaleToken {
                presented, highest, ..
            }) => {
                assert!(highest > presented, "409 for {presented} citing {highest}");
                let mut l = ledger.lock().unwrap();
                l.refused.extend(bodies);
                l.cited[stream] = l.cited[stream].max(highest);
                l.stale_409s += 1;
                // Lost ownership: a correct client stops.
                return;
            }
            Err(ClientError::SeqMismatch { .. }) => {
                ledger.lock().unwrap().refused.extend(bodies);
            }
            Err(_) => {
                // Killed mid-request, or refused to connect: either way this
                // body's fate is not known, and the server is gone.
                ledger.lock().unwrap().unknown += 1;
                return;
            }
        }
    }
}

/// Reads every stream whole through the API and checks it against the
/// ledger. Returns the acknowledged records it confirmed.
async fn verify(client: &Client, ledger: &Ledger, cycle: u64) -> u64 {
    let mut confirmed = 0;
    for (s, name) in STREAMS.iter().enumerate() {
        let (info, log) = match client.state(name).await {
            Ok(info) => {
                let mut log = Vec::new();
                while (log.len() as u64) < info.next_seq {
                    let opts = fencelog_client::ReadOptions {
                        count: Some(10_000),
                        ..Default::default()
                    };
                    let page = client.read(name, log.len() as u64, &opts).await.unwrap();
                    assert!(!page.records.is_empty(), "cycle {cycle}: empty page");
                    log.extend(page.records);
                }
                (Some(info), log)
            }
            Err(ClientError::StreamNotFound { .. }) => (None, Vec::new()),
            Err(e) => panic!("cycle {cycle}: state of {name}: {e}"),
        };
        let highest = info.as_ref().map_or(0, |i| i.highest_token);
        assert!(
            highest >= ledger.acked_token[s] && highest >= ledger.cited[s],
            "cycle {cycle}: {name} highest_token {highest} lost an acknowledged ({}) or cited ({}) token",
            ledger.acked_token[s],
            ledger.cited[s]
        );
        let mut seen = HashSet::new();
        let mut last_token = 0;
        for (i, r) in log.iter().enumerate() {
            assert_eq!(r.seq, i as u64, "cycle {cycle}: {name} seqs not dense");
            assert!(
                r.fencing_token >= last_token,
                "cycle {cycle}: {name} seq {i}: token {} after {last_token}",
                r.fencing_token
            );
            last_token = r.fencing_token;
            let body = String::from_utf8(r.body.to_vec()).unwrap();
            assert!(
                !ledger.refused.contains(&body),
                "cycle {cycle}: {name} seq {i}: refused write {body} is in the log"
            );
            assert!(
                seen.insert(body.clone()),
                "cycle {cycle}: {name}: {body} twice"
            );
        }
        assert!(highest >= last_token);
        for a in ledger.acked.iter().filter(|a| a.stream == s) {
            for (k, b) in a.bodies.iter().enumerate() {
                let seq = a.first_seq + k as u64;
                let got = log.get(seq as usize);
                assert!(
                    got.is_some_and(|r| r.body == b.as_bytes() && r.fencing_token == a.token),
                    "cycle {cycle}: {name}: acknowledged {b} (token {}) at seq {seq} is {:?}",
                    a.token,
                    got
                );
                confirmed += 1;
            }
        }
    }
    confirmed
}

#[test]
fn sigkill_loop_loses_nothing_acknowledged() {
    let cycles = env_or("FENCELOG_KILL_CYCLES", 150);
    let seed = env_or("FENCELOG_KILL_SEED", 0x0C1D_9A11);
    println!("kill loop: seed {seed} (replay with FENCELOG_KILL_SEED={seed}), {cycles} cycles");
    let mut rng = Rng::new(seed);
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let log = tmp.path().join("server.log");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // The client's connection pool needs a runtime context to be built in.
    let _rt_context = rt.enter();
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut lease = 0u64;
    // A token from an earlier cycle, for the stale writers.
    let mut old_token = [1u64; 2];
    let started = Instant::now();
    let (mut startup_kills, mut announced_then_killed_early, mut verified) = (0, 0, 0u64);
    let mut last_addr = String::new();
    for cycle in 0..cycles {
        let starting = server(&data, &log).spawn();
        if rng.chance(1, 6) {
            // Kill during startup: somewhere between exec and serving.
            std::thread::sleep(Duration::from_micros(rng.below(15_000)));
            let (_, announced) = starting.kill9();
            if announced {
                announced_then_killed_early += 1;
            } else {
                startup_kills += 1;
            }
            continue;
        }
        let p = starting.wait_ready();
        let addr = p.addr().to_string();
        last_addr = addr.clone();
        let client = Client::builder(format!("http://{addr}"))
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        verified += rt.block_on(verify(&client, &ledger.lock().unwrap(), cycle));
        let stop = Arc::new(AtomicBool::new(false));
        let n_clients = rng.range(4, 8) as usize;
        let mut tasks = Vec::new();
        let mut fresh = [0u64; 2];
        for c in 0..n_clients {
            let stream = c % 2;
            let stale = c >= 2 && rng.chance(1, 2);
            let token = if stale {
                old_token[stream]
            } else {
                lease += 1;
                fresh[stream] = fresh[stream].max(lease);
                lease
            };
            tasks.push(rt.spawn(client_loop(
                client.clone(),
                stream,
                token,
                !stale && rng.chance(1, 2),
                format!("k{cycle}c{c}{}", if stale { "s" } else { "f" }),
                ledger.clone(),
                stop.clone(),
            )));
        }
        for s in 0..2 {
            if fresh[s] > 0 {
                old_token[s] = fresh[s];
            }
        }
        // The workload runs for a random while; the kill is not waiting
        // for anything, it is the hostile moment itself.
        let run_for = Duration::from_micros(rng.range(0, 40_000));
        rt.block_on(tokio::time::sleep(run_for));
        p.kill9();
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            rt.block_on(t).unwrap();
        }
    }
    // One last start: everything acknowledged in the last cycle too.
    let p = server(&data, &log).start();
    let client = Client::new(p.url().to_string()).unwrap();
    let l = ledger.lock().unwrap();
    let last = rt.block_on(verify(&client, &l, cycles));
    verified += last;
    p.kill9();
    let acked_records: usize = l.acked.iter().map(|a| a.bodies.len()).sum();
    println!(
        "{cycles} kill cycles in {:.1?}: {startup_kills} killed before announcing, {announced_then_killed_early} killed right after announcing, {} acknowledged appends ({acked_records} records, all {last} present at the end), {verified} record checks over all restarts, {} stale 409s, {} unknown outcomes, last address {last_addr}",
        started.elapsed(),
        l.acked.len(),
        l.stale_409s,
        l.unknown,
    );
    assert_eq!(last as usize, acked_records);
    assert!(
        acked_records > 0 && l.stale_409s > 0,
        "the workload did too little"
    );
    assert!(startup_kills > 0, "no kill landed during startup");
    let per_stream: BTreeMap<_, _> = STREAMS.iter().zip(l.acked_token).collect();
    println!("acknowledged tokens per stream: {per_stream:?}");
}
