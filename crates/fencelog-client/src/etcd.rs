//! A fenced worker that takes its lock and its fencing token from etcd, for
//! the end-to-end story of the README: lease, pause, takeover, rejection.
//!
//! It talks to etcd's v3 JSON gateway (`/v3/...` over plain HTTP), so no
//! gRPC stack is needed. Keys and values are base64 in that API; 64-bit
//! integers come back as JSON strings.
//!
//! # Which number is the fencing token
//!
//! The token is the etcd revision at which this worker's lock key was
//! created (its `create_revision`). etcd has one revision counter for the
//! whole keyspace; every write transaction increments it through Raft, and
//! it is persisted, so it never repeats or goes back, even across etcd
//! restarts. A new owner can only create the lock key after the previous
//! key is gone (its lease expired or it was released — itself a write that
//! bumps the revision), and creating the key is another write, so each
//! acquisition's `create_revision` is strictly greater than every earlier
//! one. Gaps (other keys' writes) are harmless: fencelog only needs order.
//! Lease IDs, by contrast, are unique but not ordered, and must not be used.
//!
//! # Why the worker does not check its lease before writing
//!
//! Any check ("do I still hold the lease?") can be invalidated by a pause
//! between the check and the write reaching the store. fencelog is the
//! authority: the worker presents its token and treats
//! [`ClientError::StaleToken`] as "you lost ownership, stop".
//!
//! # Exactly once and deadlines
//!
//! The worker appends through an idempotent [`Producer`] whose id is its
//! name: a lost answer is retried with the same `producer_seq`, and the
//! server answers a retry of an applied append with its original ack, so
//! no line is written twice and no outcome stays unknown. Each append also
//! carries `not_after_ms`: the lease's expiry as this worker last renewed
//! it (the time just before the successful keep-alive was sent, plus the
//! TTL) minus `deadline_margin_ms` for clock skew, so a write that reaches
//! the server after the lease may have ended is refused (`lease expired`)
//! even before a successor has fenced. Fenced out, the worker asks "did my
//! write land?" (the producer lookup) and reports the answer.
//!
//! ```no_run
//! # async fn demo() -> Result<(), fencelog_client::etcd::WorkerError> {
//! use fencelog_client::etcd::{run_worker, WorkerConfig, WorkerOutcome};
//! let config = WorkerConfig {
//!     etcd_url: "http://127.0.0.1:2379".into(),
//!     fencelog_url: "http://127.0.0.1:7070".into(),
//!     lock_key: "fencelog/locks/orders".into(),
//!     stream: "orders".into(),
//!     name: "worker-1".into(),
//!     lease_ttl_s: 5,
//!     deadline_margin_ms: Some(500),
//! };
//! let input = tokio::io::BufReader::new(&b"order #1\norder #2\n"[..]);
//! match run_worker(&config, input, tokio::io::sink()).await? {
//!     WorkerOutcome::Finished { appended, .. } => println!("wrote {appended}"),
//!     WorkerOutcome::FencedOut { highest, .. } => println!("token {highest} took over"),
//!     WorkerOutcome::LeaseExpired { writer_ms, .. } => println!("lease over at {writer_ms}"),
//! }
//! # Ok(()) }
//! ```

use crate::{Client, ClientError, Producer};
use base64::Engine as _;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;
/// Between attempts to take a lock somebody else holds.
const ACQUIRE_POLL: Duration = Duration::from_millis(100);

/// What went wrong talking to etcd.
#[derive(Debug)]
pub struct EtcdError(pub String);

impl std::fmt::Display for EtcdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "etcd: {}", self.0)
    }
}

impl std::error::Error for EtcdError {}

/// A minimal client of etcd's JSON gateway: leases and a create-if-absent lock.
#[derive(Debug, Clone)]
pub struct Etcd {
    http: reqwest::Client,
    base: String,
}

/// A held lock: the lease that keeps it and the token it grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lock {
    pub lease_id: i64,
    /// The lock key's `create_revision`; see the module docs.
    pub token: u64,
    /// Unix ms (this machine's clock) when the lease's last renewal —
    /// the grant, or a keep-alive while waiting for the key — was sent:
    /// the lease lasts at least its TTL from then (etcd starts the TTL
    /// when it handles the request, later).
    pub renewed_ms: u64,
}

/// A key as etcd holds it (what [`Etcd::get`] returns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyInfo {
    pub value: String,
    /// For a lock key, its holder's token.
    pub create_revision: u64,
    pub mod_revision: u64,
    /// 0 when the key is bound to no lease.
    pub lease_id: i64,
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_i64(),
        _ => None,
    }
}

impl Etcd {
    pub fn new(base_url: impl Into<String>) -> Self {
        Etcd {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .expect("reqwest client with default TLS-less settings"),
            base: base_url.into().trim_end_matches('/').to_string(),
        }
    }

    /// The gateway's answer: the JSON of a success, or, for an error, the
    /// gRPC status code it carries (5 is NOT_FOUND) with the whole text.
    async fn call_answer(
        &self,
        path: &str,
        body: Value,
    ) -> Result<Result<Value, (Option<i64>, String)>, EtcdError> {
        let resp = self
            .http
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .map_err(|e| EtcdError(format!("{path}: {e}")))?;
        let status = resp.status();
        let text = resp
            .text()
            .await
            .map_err(|e| EtcdError(format!("{path}: {e}")))?;
        let json = serde_json::from_str::<Value>(&text);
        if !status.is_success() {
            let code = json.ok().as_ref().and_then(|v| int(&v["code"]));
            return Ok(Err((code, format!("{path}: {status}: {text}"))));
        }
        json.map(Ok)
            .map_err(|e| EtcdError(format!("{path}: {e}: {text}")))
    }

    async fn call(&self, path: &str, body: Value) -> Result<Value, EtcdError> {
        self.call_answer(path, body)
            .await?
            .map_err(|(_, text)| EtcdError(text))
    }

    /// A lease that expires `ttl_s` seconds after its last keep-alive.
    pub async fn grant_lease(&self, ttl_s: u64) -> Result<i64, EtcdError> {
        let v = self
            .call("/v3/lease/grant", json!({ "TTL": ttl_s }))
            .await?;
        int(&v["ID"]).ok_or_else(|| EtcdError(format!("lease grant without ID: {v}")))
    }

    /// Renews the lease; false once it has expired.
    pub async fn keep_alive(&self, lease_id: i64) -> Result<bool, EtcdError> {
        let v = self
            .call("/v3/lease/keepalive", json!({ "ID": lease_id.to_string() }))
            .await?;
        // An expired lease answers without a TTL (proto3 omits the zero).
        Ok(int(&v["result"]["TTL"]).unwrap_or(0) > 0)
    }

    pub async fn revoke(&self, lease_id: i64) -> Result<(), EtcdError> {
        self.call("/v3/lease/revoke", json!({ "ID": lease_id.to_string() }))
            .await
            .map(|_| ())
    }

    /// Releases a lock by revoking its lease: etcd deletes the keys bound
    /// to that lease, and only those, so a late release by an owner whose
    /// lease already expired cannot delete its successor's key. `false`
    /// when the lease was already gone (expired or revoked).
    pub async fn release(&self, lock: Lock) -> Result<bool, EtcdError> {
        const GRPC_NOT_FOUND: i64 = 5;
        let id = json!({ "ID": lock.lease_id.to_string() });
        match self.call_answer("/v3/lease/revoke", id).await? {
            Ok(_) => Ok(true),
            Err((Some(GRPC_NOT_FOUND), _)) => Ok(false),
            Err((_, text)) => Err(EtcdError(text)),
        }
    }

    /// `key` as it is now, or `None` when nobody holds it.
    pub async fn get(&self, key: &str) -> Result<Option<KeyInfo>, EtcdError> {
        let v = self
            .call("/v3/kv/range", json!({ "key": B64.encode(key) }))
            .await?;
        let Some(kv) = v["kvs"].as_array().and_then(|kvs| kvs.first()) else {
            return Ok(None);
        };
        let value = kv["value"].as_str().unwrap_or_default();
        let value = B64
            .decode(value)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| EtcdError(format!("range: value is not base64 UTF-8: {kv}")))?;
        let field = |name: &str| int(&kv[name]).unwrap_or(0);
        Ok(Some(KeyInfo {
            value,
            create_revision: field("create_revision") as u64,
            mod_revision: field("mod_revision") as u64,
            lease_id: field("lease"),
        }))
    }

    /// Creates `key` bound to `lease_id` if no one holds it. Returns the
    /// revision of that creation, or `None` when the key exists.
    pub async fn try_lock(
        &self,
        key: &str,
        owner: &str,
        lease_id: i64,
    ) -> Result<Option<u64>, EtcdError> {
        let k = B64.encode(key);
        let v = self
            .call(
                "/v3/kv/txn",
                json!({
                    "compare": [{
                        "key": k, "target": "CREATE", "result": "EQUAL", "create_revision": "0",
                    }],
                    "success": [{ "request_put": {
                        "key": k, "value": B64.encode(owner), "lease": lease_id.to_string(),
                    }}],
                }),
            )
            .await?;
        if v["succeeded"] != json!(true) {
            return Ok(None);
        }
        // The put is the transaction's only write, so the transaction's
        // revision is the one at which the key was created.
        int(&v["header"]["revision"])
            .map(|r| Some(r as u64))
            .ok_or_else(|| EtcdError(format!("txn without revision: {v}")))
    }

    /// Whether `key` exists now.
    pub async fn exists(&self, key: &str) -> Result<bool, EtcdError> {
        let v = self
            .call(
                "/v3/kv/range",
                json!({ "key": B64.encode(key), "count_only": true }),
            )
            .await?;
        Ok(int(&v["count"]).unwrap_or(0) > 0)
    }

    /// Takes the lock, waiting for the current holder's key to go away.
    pub async fn lock(&self, key: &str, owner: &str, ttl_s: u64) -> Result<Lock, EtcdError> {
        let mut renewed_ms = now_ms();
        let lease_id = self.grant_lease(ttl_s).await?;
        loop {
            if let Some(token) = self.try_lock(key, owner, lease_id).await? {
                return Ok(Lock {
                    lease_id,
                    token,
                    renewed_ms,
                });
            }
            // The waiting lease must not expire before we get the lock.
            renewed_ms = now_ms();
            self.keep_alive(lease_id).await?;
            tokio::time::sleep(ACQUIRE_POLL).await;
        }
    }
}

/// How a worker is set up.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub etcd_url: String,
    pub fencelog_url: String,
    /// The etcd key that is the lock; one per protected stream.
    pub lock_key: String,
    pub stream: String,
    /// A name for logs and the lock key's value; also the idempotent
    /// producer's id (1-64 of `[A-Za-z0-9._:-]`).
    pub name: String,
    pub lease_ttl_s: u64,
    /// Appends carry `not_after_ms` = the lease's expiry minus this (the
    /// clock-skew margin); `None`: no deadline.
    pub deadline_margin_ms: Option<u64>,
}

/// Unix ms by this machine's clock.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// How a worker ended.
#[derive(Debug)]
pub enum WorkerOutcome {
    /// Its input ended; it released the lock.
    Finished { token: u64, appended: u64 },
    /// fencelog rejected its token: a newer owner took over.
    FencedOut {
        token: u64,
        highest: u64,
        appended: u64,
    },
    /// fencelog's time was past the lease's expiry (the append's
    /// `not_after_ms`): the lease may be over, so the worker stopped.
    LeaseExpired {
        token: u64,
        writer_ms: u64,
        appended: u64,
    },
}

#[derive(Debug)]
pub enum WorkerError {
    Etcd(EtcdError),
    Fencelog(ClientError),
    Io(std::io::Error),
}

impl std::fmt::Display for WorkerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkerError::Etcd(e) => write!(f, "{e}"),
            WorkerError::Fencelog(e) => write!(f, "fencelog: {e}"),
            WorkerError::Io(e) => write!(f, "io: {e}"),
        }
    }
}

impl std::error::Error for WorkerError {}

impl From<EtcdError> for WorkerError {
    fn from(e: EtcdError) -> Self {
        WorkerError::Etcd(e)
    }
}

impl From<std::io::Error> for WorkerError {
    fn from(e: std::io::Error) -> Self {
        WorkerError::Io(e)
    }
}

/// The worker: takes the lock, fences the stream with its token (so the
/// previous owner is shut out even before this one writes), then appends one
/// record per input line. It reports progress on `out`, one line per step:
///
/// - `acquired token=T`
/// - `appended seq=S token=T`
/// - `fenced out: token=T highest=H`, then what the producer lookup says
///   landed last: `last landed: producer_seq=P seq=F..=L token=T2` or
///   `last landed: none` (then it stops)
/// - `lease expired: token=T writer_ms=W` (then it stops)
/// - `finished token=T appended=N`
///
/// The lease is kept alive in the background for as long as the worker
/// runs; when the process is paused, so is the keep-alive, and the lease
/// expires — exactly the failure fencing exists for.
pub async fn run_worker<R, W>(
    config: &WorkerConfig,
    input: R,
    mut out: W,
) -> Result<WorkerOutcome, WorkerError>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let etcd = Etcd::new(config.etcd_url.clone());
    let store = Client::new(config.fencelog_url.clone()).map_err(WorkerError::Fencelog)?;
    let ttl_ms = config.lease_ttl_s * 1000;
    let lock = etcd
        .lock(&config.lock_key, &config.name, config.lease_ttl_s)
        .await?;
    // The lease lasts at least TTL from the moment its last renewal was
    // sent — while waiting for the key too, so a worker that waited long
    // does not start with a deadline already past.
    let expiry_ms = Arc::new(AtomicU64::new(lock.renewed_ms + ttl_ms));
    let keeper = {
        let (etcd, expiry_ms) = (etcd.clone(), expiry_ms.clone());
        let every = Duration::from_millis(ttl_ms / 3).max(ACQUIRE_POLL);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let sent = now_ms();
                if !matches!(etcd.keep_alive(lock.lease_id).await, Ok(true)) {
                    tracing::warn!(lease = lock.lease_id, "lease lost");
                    return;
                }
                expiry_ms.fetch_max(sent + ttl_ms, Ordering::Relaxed);
            }
        })
    };
    let deadline = || {
        config
            .deadline_margin_ms
            .map(|m| expiry_ms.load(Ordering::Relaxed).saturating_sub(m))
    };
    let result = work(config, &store, lock.token, &deadline, input, &mut out).await;
    keeper.abort();
    // Releasing lets the next owner in without waiting out the TTL. It is
    // safe however late it comes (it revokes this worker's own lease, see
    // `Etcd::release`), so a fenced-out worker releases too; it may no
    // longer reach etcd, which changes nothing about how it ended.
    match (&result, etcd.release(lock).await) {
        (Ok(WorkerOutcome::Finished { .. }), Err(e)) => return Err(e.into()),
        (_, Err(e)) => tracing::warn!(lease = lock.lease_id, "release failed: {e}"),
        (_, Ok(released)) => tracing::info!(lease = lock.lease_id, released, "released"),
    }
    result
}

async fn work<R, W>(
    config: &WorkerConfig,
    store: &Client,
    token: u64,
    deadline: &dyn Fn() -> Option<u64>,
    input: R,
    out: &mut W,
) -> Result<WorkerOutcome, WorkerError>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut appended = 0;
    match store.fence(&config.stream, token).await {
        Ok(_) => {}
        Err(ClientError::StaleToken { highest, .. }) => {
            say(out, format!("fenced out: token={token} highest={highest}")).await?;
            return Ok(WorkerOutcome::FencedOut {
                token,
                highest,
                appended,
            });
        }
        Err(e) => return Err(WorkerError::Fencelog(e)),
    }
    say(out, format!("acquired token={token}")).await?;
    let mut producer = Producer::start(store.clone(), &config.stream, &config.name, token)
        .await
        .map_err(WorkerError::Fencelog)?;
    let mut lines = input.lines();
    while let Some(line) = lines.next_line().await? {
        producer.set_deadline(deadline());
        match producer.append([line]).await {
            Ok(ack) => {
                appended += 1;
                say(out, format!("appended seq={} token={token}", ack.first_seq)).await?;
            }
            Err(ClientError::StaleToken { highest, .. }) => {
                say(out, format!("fenced out: token={token} highest={highest}")).await?;
                say(out, last_landed(store, config).await?).await?;
                return Ok(WorkerOutcome::FencedOut {
                    token,
                    highest,
                    appended,
                });
            }
            Err(ClientError::DeadlineExceeded { writer_ms, .. }) => {
                say(
                    out,
                    format!("lease expired: token={token} writer_ms={writer_ms}"),
                )
                .await?;
                return Ok(WorkerOutcome::LeaseExpired {
                    token,
                    writer_ms,
                    appended,
                });
            }
            Err(e) => return Err(WorkerError::Fencelog(e)),
        }
    }
    say(out, format!("finished token={token} appended={appended}")).await?;
    Ok(WorkerOutcome::Finished { token, appended })
}

/// Writes one line of the worker's report and flushes it: the test that
/// drives the worker reads each line as it happens.
async fn say<W: AsyncWrite + Unpin>(out: &mut W, line: String) -> std::io::Result<()> {
    out.write_all(line.as_bytes()).await?;
    out.write_all(b"\n").await?;
    out.flush().await
}

/// "Did my write land?": the producer lookup's answer, as the worker
/// reports it when it is fenced out.
async fn last_landed(store: &Client, config: &WorkerConfig) -> Result<String, WorkerError> {
    let last = store
        .producer(&config.stream, &config.name)
        .await
        .map_err(WorkerError::Fencelog)?;
    Ok(match last {
        Some(p) => format!(
            "last landed: producer_seq={} seq={}..={} token={}",
            p.producer_seq, p.first_seq, p.last_seq, p.fencing_token
        ),
        None => "last landed: none".to_string(),
    })
}
