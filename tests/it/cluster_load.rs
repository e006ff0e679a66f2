//! Client load on a real cluster, recorded for the shared history checker
//! (`fencelog_testkit::history`): per stream an owner that fences with
//! ever higher tokens and a deliberately stale writer, plus a reader,
//! each through random nodes of a given set. [`Load::finish`] stops them,
//! waits until the replicas agree, and checks the history against every
//! replica's final log.

use crate::cluster_history;
use crate::cluster_support::ProcCluster;
use fencelog_engine::sim::Rng;
use fencelog_testkit::history::{self, History, Outcome, Report};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

pub const STREAMS: [&str; 2] = ["kill.a", "kill.b"];

/// One writer until `stop`: the owner fences with a fresh token every few
/// appends; the stale writer always uses token 1.
async fn writer(
    urls: Vec<String>,
    (stream, owner, seed): (usize, bool, u64),
    tokens: Arc<AtomicU64>,
    h: Arc<History>,
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
            if let Outcome::Fenced { .. } = cluster_history::fence(&h, &http, url, name, t).await {
                token = t;
            }
        }
        n += 1;
        let body = format!("{}-{seed}-{n}", if owner { "own" } else { "stale" });
        cluster_history::append(&h, &http, url, name, token, &[body]).await;
    }
}

/// One reader until `stop`: reads both streams from a random seq through
/// random nodes (a slice of the applied prefix, with a linearizable tail).
async fn reader(urls: Vec<String>, seed: u64, h: Arc<History>, stop: Arc<AtomicBool>) {
    let http = reqwest::Client::new();
    let mut rng = Rng::new(seed);
    while !stop.load(Ordering::Relaxed) {
        let url = &urls[rng.below(urls.len() as u64) as usize];
        let name = STREAMS[rng.below(2) as usize];
        cluster_history::read(&h, &http, url, name, rng.below(64)).await;
    }
}

/// Four writers and a reader, running.
pub struct Load {
    pub h: Arc<History>,
    pub seed: u64,
    stop: Arc<AtomicBool>,
    clients: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    /// Starts the clients, each sending through random `urls`.
    pub fn start(urls: &[String], seed: u64) -> Load {
        let h = Arc::new(History::default());
        let stop = Arc::new(AtomicBool::new(false));
        let tokens = Arc::new(AtomicU64::new(2));
        let mut clients: Vec<_> = (0..4)
            .map(|i| {
                let who = (i % 2, i < 2, seed + i as u64);
                let (t, h, stop) = (tokens.clone(), h.clone(), stop.clone());
                tokio::spawn(writer(urls.to_vec(), who, t, h, stop))
            })
            .collect();
        clients.push(tokio::spawn(reader(
            urls.to_vec(),
            seed + 10,
            h.clone(),
            stop.clone(),
        )));
        Load {
            h,
            seed,
            stop,
            clients,
        }
    }

    /// The writes answered so far with 503 `unavailable` and
    /// `"outcome_unknown": false`: nothing was proposed, the node found no
    /// leader to take them.
    pub fn unproposed(&self) -> Vec<String> {
        self.h
            .ops()
            .into_iter()
            .filter_map(|op| match op.outcome {
                Outcome::Unknown(m) if m.contains(r#""outcome_unknown":false"#) => Some(m),
                _ => None,
            })
            .collect()
    }

    /// The reads answered so far with 503 `unavailable` (no read index).
    pub fn unavailable_reads(&self) -> Vec<String> {
        self.h
            .ops()
            .into_iter()
            .filter_map(|op| match op.outcome {
                Outcome::ReadFailed(m) if m.starts_with("503 ") => Some(m),
                _ => None,
            })
            .collect()
    }

    /// Stops the clients, waits until nodes `among` applied alike, and
    /// checks the history against each one's final logs.
    pub async fn finish(self, c: &ProcCluster, among: &[usize]) -> Report {
        self.stop.store(true, Ordering::Relaxed);
        for cl in self.clients {
            cl.await.unwrap();
        }
        for k in 0..c.shards {
            c.converged(k, among).await;
        }
        let mut replicas = Vec::new();
        for id in among {
            replicas.push(cluster_history::replica(&c.http, &c.url(*id), &STREAMS).await);
        }
        let seed = self.seed;
        history::check(&self.h.ops(), &replicas).unwrap_or_else(|e| panic!("seed {seed:#x}: {e}"))
    }
}
