//! Shared by the crash, fault, corruption and mutation suites: scripted
//! workloads ([`script`]), a model of what every request was told, and the
//! invariant checker that compares an engine against that model
//! ([`verify`]).
//!
//! Each suite is a plain function returning `Err(violation)` so the
//! mutation tests can run it with a deliberate bug switched on and assert
//! that it complains.

pub mod compaction;
pub mod corruption;
pub mod crash;
pub mod faults;
pub mod gate;
#[cfg(feature = "mutations")]
pub mod mutation;
pub mod script;
pub mod verify;

pub use script::{lifecycle_script, script};
pub use verify::{dump_records, verify, Mode};

use bytes::Bytes;
pub use fencelog_engine::sim::Rng;
use fencelog_engine::sim::SimStorage;
use fencelog_engine::{
    Config, Engine, Header, OpenError, RecordIn, Retention, StreamConfig, WriteError,
};
use std::sync::Arc;

pub const STREAMS: [&str; 4] = ["alpha", "beta", "g.1:x-y", "doomed"];

/// Suite sizes can be raised for a deeper run without editing code.
pub fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The suites' engine: small segments, and a reclaimer that runs only
/// when the script says so, so every run makes the same storage calls.
pub fn config(segment_bytes: u64) -> Config {
    Config {
        segment_bytes_max: segment_bytes,
        reclaim_interval_ms: 0,
        ..Config::default()
    }
}

/// The segment files of a real data directory, in log order.
pub fn segment_files(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".seg"))
        .collect();
    v.sort();
    v
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

pub fn open(sim: &SimStorage, cfg: &Config) -> Result<Engine, OpenError> {
    Engine::open_storage(Arc::new(sim.clone()), cfg.clone())
}

#[derive(Debug, Clone, Copy)]
pub enum MatchSeq {
    No,
    Right,
    Wrong,
}

/// Where a trim aims, relative to the stream when it is sent.
#[derive(Debug, Clone, Copy)]
pub enum TrimTo {
    /// Below the current trim point: a no-op.
    Below,
    /// This share (per cent) of the readable records.
    Inside(u8),
    /// Past the tail: clamped to `next_seq`.
    Past,
}

#[derive(Debug, Clone)]
pub enum Step {
    Append {
        stream: usize,
        token: u64,
        records: usize,
        size: usize,
        match_seq: MatchSeq,
    },
    Fence {
        stream: usize,
        token: u64,
    },
    Trim {
        stream: usize,
        token: u64,
        to: TrimTo,
    },
    Seal {
        stream: usize,
        token: u64,
    },
    Delete {
        stream: usize,
        token: u64,
    },
    /// An operator's retention change (no token).
    Config {
        stream: usize,
        retention_bytes: Option<u64>,
    },
    /// A reclamation pass: retention, compaction, checkpoint, deletion.
    Reclaim,
    /// Requests submitted back to back without waiting, so the writer can
    /// put several in one group (arrival order is the vector's order).
    Burst(Vec<Step>),
}

/// What an attempt asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Append,
    Fence,
    Trim,
    Seal,
    Delete,
    Config,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Not answered yet.
    Pending,
    Acked {
        first_seq: u64,
    },
    FenceAcked,
    /// A trim, seal, delete or config acknowledged; the stream's
    /// `first_seq`, `next_seq` and highest token as answered (a seal of a
    /// sealed stream succeeds without raising the token).
    Done {
        first_seq: u64,
        next_seq: u64,
        highest_token: u64,
    },
    /// Definitely not applied.
    Rejected,
    /// Applied or not: the client cannot know.
    Unknown,
}

#[derive(Debug, Clone)]
pub struct Attempt {
    pub stream: String,
    pub kind: Kind,
    pub token: u64,
    /// Empty but for appends.
    pub bodies: Vec<Bytes>,
    /// Empty for an append without headers; else one list per body.
    pub headers: Vec<Vec<Header>>,
    pub outcome: Outcome,
}

impl Attempt {
    /// An attempt without records (not an append).
    pub fn op(stream: &str, kind: Kind, token: u64) -> Attempt {
        Attempt::append(stream, kind, token, Vec::new(), Vec::new())
    }

    /// An attempt with these records, not answered yet.
    pub fn append(
        stream: &str,
        kind: Kind,
        token: u64,
        bodies: Vec<Bytes>,
        headers: Vec<Vec<Header>>,
    ) -> Attempt {
        Attempt {
            stream: stream.to_string(),
            kind,
            token,
            bodies,
            headers,
            outcome: Outcome::Pending,
        }
    }

    /// The headers record `k` of the batch was appended with.
    pub fn headers_of(&self, k: usize) -> &[Header] {
        self.headers.get(k).map_or(&[], |h| &h[..])
    }

    /// A write that may have happened: acknowledged or unknown.
    pub fn maybe(&self) -> bool {
        !matches!(self.outcome, Outcome::Rejected | Outcome::Pending)
    }

    /// A write that did happen.
    pub fn acked(&self) -> bool {
        matches!(
            self.outcome,
            Outcome::Acked { .. } | Outcome::FenceAcked | Outcome::Done { .. }
        )
    }
}

/// Everything every request was told.
#[derive(Debug, Clone, Default)]
pub struct Model {
    pub attempts: Vec<Attempt>,
    /// Any request saw a storage failure.
    pub failed: bool,
    /// Reclamation passes that completed.
    pub reclaims: u64,
    /// Any request was refused because storage failed before its group
    /// was written (`NotWritten`: nothing changed, not poisoned).
    pub refused: bool,
    /// The order the attempts took effect in, when it is not their ids'
    /// (a retried idempotent append counts where it may have applied);
    /// empty: id order.
    pub order: Vec<usize>,
}

/// A record body names its attempt and position, padded to `size` with
/// bytes derived from both, so a misplaced or damaged body never passes.
fn body(stream: &str, id: usize, k: usize, size: usize) -> Bytes {
    let mut b = format!("{stream}|{id}|{k}|").into_bytes();
    let mut x = (id as u64) << 16 | k as u64;
    while b.len() < size {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        b.push(b'a' + ((x >> 40) % 26) as u8);
    }
    Bytes::from(b)
}

/// The headers of attempt `id`'s records: every third append carries
/// some, on its even records only (so one frame mixes records with and
/// without headers), with a repeated name, an empty value and a value that
/// is not UTF-8, all derived from (stream, id, k) so a header served for
/// the wrong record, lost or reordered never passes.
pub fn headers_for(stream: &str, id: usize, records: usize) -> Vec<Vec<Header>> {
    if id % 3 != 1 {
        return Vec::new();
    }
    (0..records)
        .map(|k| {
            let count = if k % 2 == 0 { 1 + (id + k) % 3 } else { 0 };
            (0..count)
                .map(|j| match j {
                    0 => Header::new("trace-id", format!("{stream}/{id}/{k}")),
                    1 => Header::new(&b"bin\xff"[..], vec![0xfe, id as u8, k as u8]),
                    _ => Header::new("trace-id", ""),
                })
                .collect()
        })
        .collect()
}

/// Appends `bodies` with `headers` (see [`Attempt::headers`]): a plain
/// append when there are none, so most frames keep version 1's bytes.
pub async fn append_with(
    e: &Engine,
    stream: &str,
    token: u64,
    bodies: Vec<Bytes>,
    headers: Vec<Vec<Header>>,
    m: Option<u64>,
) -> Result<fencelog_engine::Ack, WriteError> {
    let options = fencelog_engine::AppendOptions {
        match_seq_num: m,
        ..Default::default()
    };
    append_opts(e, stream, token, bodies, headers, options).await
}

/// [`append_with`] with an idempotent producer and a deadline.
pub async fn append_opts(
    e: &Engine,
    stream: &str,
    token: u64,
    bodies: Vec<Bytes>,
    headers: Vec<Vec<Header>>,
    options: fencelog_engine::AppendOptions,
) -> Result<fencelog_engine::Ack, WriteError> {
    if headers.is_empty() {
        return e.append_with(stream, token, bodies, options).await;
    }
    let records = bodies
        .into_iter()
        .zip(headers)
        .map(|(body, headers)| RecordIn { body, headers })
        .collect();
    e.append_records_with(stream, token, records, options).await
}

pub(crate) fn parse_body(b: &[u8]) -> Option<(String, usize, usize)> {
    let s = std::str::from_utf8(b).ok()?;
    let mut it = s.splitn(4, '|');
    let stream = it.next()?.to_string();
    let id = it.next()?.parse().ok()?;
    let k = it.next()?.parse().ok()?;
    Some((stream, id, k))
}

fn classify(e: &WriteError) -> Outcome {
    match e {
        // The group carrying it failed, or the writer went away mid-group.
        WriteError::StorageFailed(_) | WriteError::ShuttingDown => Outcome::Unknown,
        _ => Outcome::Rejected,
    }
}

fn is_failure(e: &WriteError) -> bool {
    matches!(e, WriteError::StorageFailed(_) | WriteError::Poisoned(_))
}

/// A reclamation step (not a group) that failed poisons the engine, so the
/// first failure a request sees can be `Poisoned`.
fn poisoned_by_reclamation(engine: &Engine) -> bool {
    engine.poisoned().is_some_and(|f| {
        ["checkpoint", "MANIFEST", "segment", "directory"]
            .iter()
            .any(|w| f.op.contains(w))
            && !matches!(f.op, "create segment" | "fdatasync" | "write")
    })
}

type Answer = Result<Outcome, WriteError>;
type Pending = std::pin::Pin<Box<dyn std::future::Future<Output = Answer>>>;

/// Starts one step's request; its attempt is recorded in `model`.
fn invoke(engine: &Engine, model: &mut Model, step: &Step) -> Pending {
    let id = model.attempts.len();
    let e = engine.clone();
    let mut attempt = |stream: usize, kind: Kind, token: u64, bodies: Vec<Bytes>| {
        let headers = headers_for(STREAMS[stream], id, bodies.len());
        model.attempts.push(Attempt::append(
            STREAMS[stream],
            kind,
            token,
            bodies,
            headers.clone(),
        ));
        (STREAMS[stream], headers)
    };
    let done = |s: fencelog_engine::StreamState| Outcome::Done {
        first_seq: s.first_seq,
        next_seq: s.next_seq,
        highest_token: s.highest_token,
    };
    match *step {
        Step::Append {
            stream,
            token,
            records,
            size,
            match_seq,
        } => {
            let name = STREAMS[stream];
            let bodies: Vec<Bytes> = (0..records).map(|k| body(name, id, k, size)).collect();
            let next = engine.state(name).map(|s| s.next_seq).unwrap_or(0);
            let m = match match_seq {
                MatchSeq::No => None,
                MatchSeq::Right => Some(next),
                MatchSeq::Wrong => Some(next + 1),
            };
            let (name, headers) = attempt(stream, Kind::Append, token, bodies.clone());
            Box::pin(async move {
                append_with(&e, name, token, bodies, headers, m)
                    .await
                    .map(|a| Outcome::Acked {
                        first_seq: a.first_seq,
                    })
            })
        }
        Step::Fence { stream, token } => {
            let (name, _) = attempt(stream, Kind::Fence, token, Vec::new());
            Box::pin(async move { e.fence(name, token).await.map(|_| Outcome::FenceAcked) })
        }
        Step::Trim { stream, token, to } => {
            let st = engine.state(STREAMS[stream]).ok();
            let (first, next) = st.map_or((0, 0), |s| (s.first_seq, s.next_seq));
            let trim_seq = match to {
                TrimTo::Below => first.saturating_sub(1),
                TrimTo::Inside(p) => first + (next - first) * p as u64 / 100,
                TrimTo::Past => next + 5,
            };
            let (name, _) = attempt(stream, Kind::Trim, token, Vec::new());
            Box::pin(async move { e.trim(name, token, trim_seq).await.map(done) })
        }
        Step::Seal { stream, token } => {
            let (name, _) = attempt(stream, Kind::Seal, token, Vec::new());
            Box::pin(async move { e.seal(name, token).await.map(done) })
        }
        Step::Delete { stream, token } => {
            let (name, _) = attempt(stream, Kind::Delete, token, Vec::new());
            Box::pin(async move { e.delete(name, token).await.map(done) })
        }
        Step::Config {
            stream,
            retention_bytes,
        } => {
            let (name, _) = attempt(stream, Kind::Config, 0, Vec::new());
            let config = StreamConfig {
                retention_bytes: retention_bytes.map_or(Retention::Default, Retention::Limit),
                ..StreamConfig::default()
            };
            Box::pin(async move { e.set_config(name, None, config).await.map(done) })
        }
        Step::Reclaim => Box::pin(async move {
            e.reclaim().await.map(|_| Outcome::Done {
                first_seq: 0,
                next_seq: 0,
                highest_token: 0,
            })
        }),
        Step::Burst(_) => unreachable!("bursts do not nest"),
    }
}

/// Checks an answer describes what was asked.
fn check_answer(id: usize, a: &Attempt, outcome: &Outcome) -> Result<(), String> {
    if let (Outcome::Acked { first_seq }, Kind::Append) = (outcome, a.kind) {
        let _ = first_seq;
        return Ok(());
    }
    if let Outcome::Done {
        first_seq,
        next_seq,
        highest_token,
    } = outcome
    {
        if first_seq > next_seq {
            return Err(format!(
                "attempt {id}: answered first_seq {first_seq} above next_seq {next_seq}"
            ));
        }
        if a.kind != Kind::Config && *highest_token < a.token {
            return Err(format!(
                "attempt {id}: accepted token {} but answered highest {highest_token}",
                a.token
            ));
        }
    }
    Ok(())
}

/// Runs the script on an open engine, recording every answer. Checks on
/// the way that nothing is acknowledged once a storage failure was seen,
/// that the first failure reported is the group in flight (`StorageFailed`)
/// unless a reclamation step failed outside any group, and that acks
/// describe what was asked.
pub async fn run_script(engine: &Engine, steps: &[Step]) -> Result<Model, String> {
    let mut model = Model::default();
    let mut first_failure: Option<String> = None;
    for step in steps {
        let batch: Vec<&Step> = match step {
            Step::Burst(v) => v.iter().collect(),
            s => vec![s],
        };
        let failed_before = first_failure.is_some();
        let mut futs: Vec<Pending> = Vec::new();
        let mut ids = Vec::new();
        for s in batch {
            // A reclamation pass has no attempt of its own: it changes no
            // stream (its retention trims are explained by the configs).
            ids.push((!matches!(s, Step::Reclaim)).then_some(model.attempts.len()));
            futs.push(invoke(engine, &mut model, s));
        }
        let results = futures_util::future::join_all(futs).await;
        for (id, r) in ids.into_iter().zip(results) {
            if let Some(id) = id {
                let outcome = match &r {
                    Ok(o) => o.clone(),
                    Err(e) => classify(e),
                };
                check_answer(id, &model.attempts[id], &outcome)?;
                model.attempts[id].outcome = outcome;
            } else if r.is_ok() {
                model.reclaims += 1;
            }
            if let Err(e) = &r {
                model.refused |= matches!(e, WriteError::NotWritten(_));
                if is_failure(e) && first_failure.is_none() {
                    if !matches!(e, WriteError::StorageFailed(_))
                        && !poisoned_by_reclamation(engine)
                    {
                        return Err(format!(
                            "attempt {id:?}: first storage failure reported as {e}, not as the group in flight"
                        ));
                    }
                    first_failure = Some(e.to_string());
                    model.failed = true;
                }
            }
            if r.is_ok() && failed_before {
                return Err(format!(
                    "attempt {id:?} acknowledged after a storage failure ({})",
                    first_failure.as_deref().unwrap_or("?")
                ));
            }
        }
        if let Some(f) = &first_failure {
            if engine.poisoned().is_none() {
                return Err(format!(
                    "saw a storage failure ({f}) but the engine is not poisoned"
                ));
            }
        }
    }
    Ok(model)
}

/// Acknowledged records in the model.
pub fn acked_records(m: &Model) -> u64 {
    m.attempts
        .iter()
        .filter(|a| matches!(a.outcome, Outcome::Acked { .. }))
        .map(|a| a.bodies.len() as u64)
        .sum()
}

/// After recovery, the log must accept a write at the recovered tail.
pub async fn append_after_recovery(engine: &Engine) -> Result<(), String> {
    let name = STREAMS[0];
    let st = engine.state(name).ok();
    let token = st.as_ref().map(|s| s.highest_token).unwrap_or(1).max(1);
    let next = st.map(|s| s.next_seq).unwrap_or(0);
    match engine
        .append(name, token, vec![Bytes::from_static(b"after")], Some(next))
        .await
    {
        Ok(a) if a.first_seq == next => Ok(()),
        other => Err(format!("append after recovery at {next}: {other:?}")),
    }
}
