//! Real `fencelog serve --cluster` processes on loopback: start, find the
//! shard leader through `/_cluster/admin/status`, kill and restart.

use crate::support::serve;
use fencelog_testkit::process::ServerProcess;
use serde_json::Value;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Every wait's bound.
pub const WAIT: Duration = Duration::from_secs(60);

/// Between two tries of a request answered 503 `unavailable`.
const UNAVAILABLE_RETRY: Duration = Duration::from_millis(100);

/// Sends the request `make` builds, again while it is answered 503
/// `unavailable` with nothing proposed (bounded by [`WAIT`]), and returns
/// the last answer. The node found no quorum in time (on a loaded 2-core
/// machine a heartbeat round can miss its deadline), and repeating is what
/// a documented client does. A 503 whose body says `"outcome_unknown":
/// true` is returned, never repeated: the first request may yet apply.
pub async fn settled(make: impl Fn() -> reqwest::RequestBuilder) -> (u16, Value) {
    repeat_unavailable(make, false).await
}

/// [`settled`], also repeating a 503 whose outcome is unknown: only for a
/// request that may apply twice with no effect on what the test checks
/// (an idempotent admin step, or appends counted afterwards from the
/// streams themselves).
pub async fn settled_even_if_unknown(make: impl Fn() -> reqwest::RequestBuilder) -> (u16, Value) {
    repeat_unavailable(make, true).await
}

async fn repeat_unavailable(
    make: impl Fn() -> reqwest::RequestBuilder,
    unknown_too: bool,
) -> (u16, Value) {
    let deadline = Instant::now() + WAIT;
    loop {
        let r = make().send().await.unwrap();
        let status = r.status().as_u16();
        let v: Value = r.json().await.unwrap_or(Value::Null);
        let unknown = v["outcome_unknown"] == true;
        let again = status == 503 && v["error"] == "unavailable" && (unknown_too || !unknown);
        if !again || Instant::now() >= deadline {
            return (status, v);
        }
        tokio::time::sleep(UNAVAILABLE_RETRY).await;
    }
}

pub struct ProcCluster {
    pub dir: tempfile::TempDir,
    pub addrs: Vec<String>,
    pub procs: Vec<Option<ServerProcess>>,
    pub shards: u32,
    pub http: reqwest::Client,
    /// The nodes of the initial `--cluster` (the rest joined).
    pub initial: usize,
    /// Each joined node's `--join` address.
    pub joined: std::collections::BTreeMap<usize, String>,
    /// `https` when the nodes serve TLS (`--tls-cert` among the args).
    pub scheme: &'static str,
}

/// `fencelog serve` with what `args` adds, which must refuse to start
/// (exit 2) before touching anything; its stderr.
pub fn serve_refused(args: impl FnOnce(&mut std::process::Command)) -> String {
    let mut cmd = std::process::Command::new(crate::support::BIN);
    cmd.arg("serve").env_remove("FENCELOG_CONFIG");
    args(&mut cmd);
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{cmd:?}: {o:?}");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Free loopback ports (bound then released: another process could take
/// one in between, which fails the start loudly rather than silently).
pub fn free_ports(n: usize) -> Vec<u16> {
    let socks: Vec<_> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    socks
        .iter()
        .map(|s| s.local_addr().unwrap().port())
        .collect()
}

impl ProcCluster {
    pub fn start(n: usize, shards: u32, extra: &[&str]) -> ProcCluster {
        Self::start_with(n, shards, extra, reqwest::Client::new())
    }

    /// As [`ProcCluster::start`], its own requests (status included) sent
    /// with `http` (a client with an admin token, when auth is on).
    pub fn start_with(n: usize, shards: u32, extra: &[&str], http: reqwest::Client) -> ProcCluster {
        let addrs: Vec<String> = free_ports(n)
            .into_iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let mut c = ProcCluster {
            dir: tempfile::tempdir().unwrap(),
            addrs,
            procs: (0..n).map(|_| None).collect(),
            shards,
            http,
            initial: n,
            joined: Default::default(),
            scheme: if extra.contains(&"--tls-cert") {
                "https"
            } else {
                "http"
            },
        };
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let starting: Vec<_> = (0..n).map(|i| c.builder(i + 1, &extra).spawn()).collect();
        for (i, s) in starting.into_iter().enumerate() {
            c.procs[i] = Some(s.wait_ready());
        }
        c
    }

    pub fn data_dir(&self, id: usize) -> PathBuf {
        self.dir.path().join(format!("node-{id}"))
    }

    fn members(&self) -> String {
        let m: Vec<String> = self.addrs[..self.initial]
            .iter()
            .enumerate()
            .map(|(i, a)| format!("{}={a}", i + 1))
            .collect();
        m.join(",")
    }

    fn builder(&self, id: usize, extra: &[String]) -> fencelog_testkit::process::ServerBuilder {
        let seed: Vec<String> = match self.joined.get(&id) {
            Some(via) => vec!["--join".into(), via.clone()],
            None => vec!["--cluster".into(), self.members()],
        };
        // The rebalancer moves leaders on its own: off unless a test asks.
        let rebalance = if extra.iter().any(|a| a == "--rebalance-ms") {
            Vec::new()
        } else {
            vec!["--rebalance-ms", "0"]
        };
        serve()
            .data_dir(self.data_dir(id))
            .listen(self.addrs[id - 1].clone())
            .log_file(self.dir.path().join(format!("node-{id}.log")))
            .args(["--node-id", &id.to_string()])
            .args(seed)
            .args(rebalance)
            .args(["--shards", &self.shards.to_string()])
            .args([
                "--raft-heartbeat-ms",
                "100",
                "--raft-election-ms",
                "500-1000",
            ])
            .args(extra)
    }

    /// Starts node `n + 1` with `--join` through node `via` (it waits to
    /// be added); returns its id.
    pub fn join(&mut self, via: usize, extra: &[&str]) -> usize {
        let port = free_ports(1)[0];
        self.addrs.push(format!("127.0.0.1:{port}"));
        self.procs.push(None);
        let id = self.addrs.len();
        self.joined.insert(id, self.addrs[via - 1].clone());
        self.restart(id, extra);
        id
    }

    /// Restarts node `id` (its process must be gone).
    pub fn restart(&mut self, id: usize, extra: &[&str]) {
        assert!(self.procs[id - 1].is_none(), "node {id} still runs");
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        self.procs[id - 1] = Some(self.builder(id, &extra).start());
    }

    pub fn kill9(&mut self, id: usize) {
        let p = self.procs[id - 1].take().expect("node runs");
        p.kill9();
    }

    pub fn proc(&self, id: usize) -> &ServerProcess {
        self.procs[id - 1].as_ref().expect("node runs")
    }

    pub fn url(&self, id: usize) -> String {
        format!("{}://{}", self.scheme, self.addrs[id - 1])
    }

    pub async fn status(&self, id: usize) -> Option<Value> {
        let url = format!("{}/_cluster/admin/status", self.url(id));
        let r = self
            .http
            .get(url)
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .ok()?;
        r.json().await.ok()
    }

    /// The leader of shard `k` that every node in `among` reports, itself
    /// reporting state Leader.
    pub async fn leader(&self, k: u32, among: &[usize]) -> usize {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(l) = self.agreed_leader(k, among).await {
                return l;
            }
            assert!(
                Instant::now() < deadline,
                "no agreed leader of shard {k} among {among:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn agreed_leader(&self, k: u32, among: &[usize]) -> Option<usize> {
        let mut seen = Vec::new();
        for id in among {
            let s = self.status(*id).await?;
            seen.push(s["shards"][k as usize]["leader"].as_u64()? as usize);
        }
        let l = seen[0];
        if !among.contains(&l) || seen.iter().any(|x| *x != l) {
            return None;
        }
        let s = self.status(l).await?;
        (s["shards"][k as usize]["state"] == "Leader").then_some(l)
    }

    /// Waits until every node in `among` applied the same index of shard
    /// `k`, at least the leader's last log index.
    pub async fn converged(&self, k: u32, among: &[usize]) {
        let leader = self.leader(k, among).await;
        let last = self.status(leader).await.unwrap()["shards"][k as usize]["last_log_index"]
            .as_u64()
            .unwrap_or(0);
        let deadline = Instant::now() + WAIT;
        loop {
            let mut applied = Vec::new();
            for id in among {
                let s = self.status(*id).await;
                applied.push(s.and_then(|s| s["shards"][k as usize]["applied_index"].as_u64()));
            }
            if applied[0].is_some_and(|a| a >= last) && applied.iter().all(|a| *a == applied[0]) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "shard {k} not applied alike: {applied:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `(status, body, leader header)` of a JSON POST to node `id`.
    pub async fn post(&self, id: usize, path: &str, body: &Value) -> (u16, Value, Option<String>) {
        let url = format!("{}{path}", self.url(id));
        let r = self.http.post(url).json(body).send().await.unwrap();
        let status = r.status().as_u16();
        let leader = r
            .headers()
            .get("fencelog-leader")
            .map(|v| v.to_str().unwrap().to_string());
        (status, r.json().await.unwrap_or(Value::Null), leader)
    }

    /// `(status, body)` of a GET of `path` from node `id`.
    pub async fn get(&self, id: usize, path: &str) -> (u16, Value) {
        let url = format!("{}{path}", self.url(id));
        let r = self.http.get(url).send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// [`ProcCluster::get`], repeated while it is 503 `unavailable`
    /// ([`settled`]).
    pub async fn get_settled(&self, id: usize, path: &str) -> (u16, Value) {
        let url = format!("{}{path}", self.url(id));
        settled(|| self.http.get(&url)).await
    }

    pub async fn append(&self, id: usize, stream: &str, token: u64, body: &str) -> (u16, Value) {
        let records = fencelog_testkit::http::records_json(&[body]);
        let b = serde_json::json!({ "fencing_token": token, "records": records });
        let (s, v, _) = self
            .post(id, &format!("/v1/streams/{stream}/records"), &b)
            .await;
        (s, v)
    }

    pub async fn fence(&self, id: usize, stream: &str, token: u64) -> (u16, Value) {
        let body = serde_json::json!({ "fencing_token": token });
        let (s, v, _) = self
            .post(id, &format!("/v1/streams/{stream}/fence"), &body)
            .await;
        (s, v)
    }

    /// Node `id`'s records of `stream`: (seq, token, body).
    pub async fn records(&self, id: usize, stream: &str) -> Vec<(u64, u64, String)> {
        let url = format!("{}/v1/streams/{stream}/records?count=10000", self.url(id));
        let r = self.http.get(url).send().await.unwrap();
        let v: Value = r.json().await.unwrap();
        v["records"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|r| {
                        (
                            r["seq"].as_u64().unwrap(),
                            r["fencing_token"].as_u64().unwrap(),
                            r["body"].as_str().unwrap().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

pub fn others(ids: &[usize], not: usize) -> Vec<usize> {
    ids.iter().copied().filter(|i| *i != not).collect()
}

/// A failed test (or any, with `FENCELOG_TEST_NODE_LOGS` set) prints the
/// tail of every node's log: a flake seen once in CI is then diagnosable
/// from CI's output alone.
impl Drop for ProcCluster {
    fn drop(&mut self) {
        if !std::thread::panicking() && std::env::var_os("FENCELOG_TEST_NODE_LOGS").is_none() {
            return;
        }
        for id in 1..=self.addrs.len() {
            let path = self.dir.path().join(format!("node-{id}.log"));
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
            eprintln!("---- node {id}: last {} log lines ----", tail.len());
            for l in tail {
                eprintln!("{l}");
            }
        }
    }
}

/// How much of each node's log a failed test prints.
const LOG_TAIL_LINES: usize = 120;
