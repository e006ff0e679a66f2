//! Shared by the crash, fault, corruption and mutation suites: a scripted
//! workload, a model of what every request was told, and the invariant
//! checker that compares an engine against that model.
//!
//! Each suite is a plain function returning `Err(violation)` so the
//! mutation tests can run it with a deliberate bug switched on and assert
//! that it complains.

pub mod corruption;
pub mod crash;
pub mod faults;
pub mod gate;

use bytes::Bytes;
use fencelog_engine::sim::{Rng, SimStorage};
use fencelog_engine::{Config, Engine, OpenError, ReadError, WriteError};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

pub const STREAMS: [&str; 3] = ["alpha", "beta", "g.1:x-y"];

/// Suite sizes can be raised for a deeper run without editing code.
pub fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub fn config(segment_bytes: u64) -> Config {
    Config {
        segment_bytes_max: segment_bytes,
        ..Config::default()
    }
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
    /// Requests submitted back to back without waiting, so the writer can
    /// put several in one group (arrival order is the vector's order).
    Burst(Vec<Step>),
}

/// A deterministic script: appends in batches, fences (some data-less, some
/// re-fences), stale writers, `match_seq_num` both ways, and bursts where a
/// higher token arrives before a lower one in the same group. Ends with a
/// data-less fence on every stream so the highest token must come from a
/// fence frame.
pub fn script(seed: u64, steps: usize) -> Vec<Step> {
    let mut rng = Rng::new(seed);
    let mut tok = [1u64; 3];
    let mut out = Vec::new();
    let one = |rng: &mut Rng, tok: &mut [u64; 3]| -> Step {
        let s = rng.below(3) as usize;
        match rng.below(100) {
            0..=54 => Step::Append {
                stream: s,
                token: tok[s],
                records: rng.range(1, 4) as usize,
                size: rng.range(8, 200) as usize,
                match_seq: MatchSeq::No,
            },
            55..=66 => {
                tok[s] += rng.below(3);
                Step::Fence {
                    stream: s,
                    token: tok[s],
                }
            }
            67..=76 => Step::Append {
                stream: s,
                token: tok[s].saturating_sub(1).max(1),
                records: 1,
                size: 16,
                match_seq: MatchSeq::No,
            },
            77..=84 => {
                tok[s] += 1;
                Step::Append {
                    stream: s,
                    token: tok[s],
                    records: 2,
                    size: 40,
                    match_seq: MatchSeq::No,
                }
            }
            _ => Step::Append {
                stream: s,
                token: tok[s],
                records: 1,
                size: 24,
                match_seq: if rng.chance(1, 2) {
                    MatchSeq::Right
                } else {
                    MatchSeq::Wrong
                },
            },
        }
    };
    for _ in 0..steps {
        if rng.chance(1, 6) {
            let n = rng.range(3, 8);
            let burst = (0..n).map(|_| one(&mut rng, &mut tok)).collect();
            out.push(Step::Burst(burst));
        } else {
            out.push(one(&mut rng, &mut tok));
        }
    }
    for (s, t) in tok.iter().enumerate() {
        out.push(Step::Fence {
            stream: s,
            token: t + 1,
        });
    }
    out
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Not answered yet.
    Pending,
    Acked {
        first_seq: u64,
    },
    FenceAcked,
    /// Definitely not applied.
    Rejected,
    /// Applied or not: the client cannot know.
    Unknown,
}

#[derive(Debug, Clone)]
pub struct Attempt {
    pub stream: String,
    pub token: u64,
    /// Empty for a fence.
    pub bodies: Vec<Bytes>,
    pub outcome: Outcome,
}

/// Everything every request was told.
#[derive(Debug, Clone, Default)]
pub struct Model {
    pub attempts: Vec<Attempt>,
    /// Any request saw a storage failure.
    pub failed: bool,
    /// Any request was refused because storage failed before its group
    /// was written (`NotWritten`: nothing changed, not poisoned).
    pub refused: bool,
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

fn parse_body(b: &[u8]) -> Option<(String, usize, usize)> {
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

/// Runs the script on an open engine, recording every answer. Checks on
/// the way that nothing is acknowledged once a storage failure was seen,
/// that the first failure reported is the group in flight
/// (`StorageFailed`), and that acks describe what was asked.
pub async fn run_script(engine: &Engine, steps: &[Step]) -> Result<Model, String> {
    let mut model = Model::default();
    let mut first_failure: Option<String> = None;
    for step in steps {
        let batch: Vec<&Step> = match step {
            Step::Burst(v) => v.iter().collect(),
            s => vec![s],
        };
        let failed_before = first_failure.is_some();
        type Answer = Result<Option<fencelog_engine::Ack>, WriteError>;
        let mut futs: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = Answer>>>> =
            Vec::new();
        let mut ids = Vec::new();
        for s in batch {
            let id = model.attempts.len();
            ids.push(id);
            match s {
                Step::Append {
                    stream,
                    token,
                    records,
                    size,
                    match_seq,
                } => {
                    let name = STREAMS[*stream];
                    let bodies: Vec<Bytes> =
                        (0..*records).map(|k| body(name, id, k, *size)).collect();
                    let next = engine.state(name).map(|s| s.next_seq).unwrap_or(0);
                    let m = match match_seq {
                        MatchSeq::No => None,
                        MatchSeq::Right => Some(next),
                        MatchSeq::Wrong => Some(next + 1),
                    };
                    model.attempts.push(Attempt {
                        stream: name.to_string(),
                        token: *token,
                        bodies: bodies.clone(),
                        outcome: Outcome::Pending,
                    });
                    let e = engine.clone();
                    let token = *token;
                    futs.push(Box::pin(async move {
                        e.append(name, token, bodies, m).await.map(Some)
                    }));
                }
                Step::Fence { stream, token } => {
                    let name = STREAMS[*stream];
                    model.attempts.push(Attempt {
                        stream: name.to_string(),
                        token: *token,
                        bodies: Vec::new(),
                        outcome: Outcome::Pending,
                    });
                    let e = engine.clone();
                    let token = *token;
                    futs.push(Box::pin(
                        async move { e.fence(name, token).await.map(|_| None) },
                    ));
                }
                Step::Burst(_) => unreachable!("bursts do not nest"),
            }
        }
        let results = futures_util::future::join_all(futs).await;
        for (id, r) in ids.into_iter().zip(results) {
            let a = &mut model.attempts[id];
            a.outcome = match &r {
                Ok(Some(ack)) => {
                    if ack.fencing_token != a.token
                        || ack.last_seq + 1 != ack.first_seq + a.bodies.len() as u64
                        || ack.next_seq != ack.last_seq + 1
                    {
                        return Err(format!("attempt {id}: ack {ack:?} does not match {a:?}"));
                    }
                    Outcome::Acked {
                        first_seq: ack.first_seq,
                    }
                }
                Ok(None) => Outcome::FenceAcked,
                Err(e) => classify(e),
            };
            if let Err(e) = &r {
                model.refused |= matches!(e, WriteError::NotWritten(_));
                if is_failure(e) && first_failure.is_none() {
                    if !matches!(e, WriteError::StorageFailed(_)) {
                        return Err(format!(
                            "attempt {id}: first storage failure reported as {e}, not as the group in flight"
                        ));
                    }
                    first_failure = Some(e.to_string());
                    model.failed = true;
                }
            }
            if r.is_ok() && failed_before {
                return Err(format!(
                    "attempt {id} acknowledged after a storage failure ({})",
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

/// How strictly [`verify`] compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The engine that served the script: it must show exactly what it
    /// acknowledged (no unsynced or failed group is visible). `reads_may_fail`
    /// when the disk under it is gone.
    Live { reads_may_fail: bool },
    /// After recovery: every acknowledged record, plus any subset of whole
    /// unknown-outcome batches, nothing else.
    Recovered,
    /// After damage at rest that recovery may legally cut (a torn tail):
    /// what is there must be right, but acked records may be missing from
    /// the end of the log; the caller bounds how many.
    Prefix,
}

/// A stream's full durable content, for comparing two recoveries.
pub type Dump = BTreeMap<String, (u64, u64, Vec<(u64, u64, Bytes)>)>;

/// Reads everything back through `Engine::read` and checks the invariants
/// against the model. Returns the content for idempotence comparisons.
pub fn verify(engine: &Engine, model: &Model, mode: Mode) -> Result<Dump, String> {
    let mut dump = Dump::new();
    let mut by_stream: HashMap<&str, Vec<usize>> = HashMap::new();
    for (id, a) in model.attempts.iter().enumerate() {
        if a.outcome == Outcome::Pending {
            return Err(format!("attempt {id} was never answered"));
        }
        by_stream.entry(&a.stream).or_default().push(id);
    }
    let listed = engine.list_streams("", None, usize::MAX);
    for st in &listed {
        if !by_stream.contains_key(st.stream.as_str()) {
            return Err(format!("stream {} exists but nobody wrote it", st.stream));
        }
    }
    for (name, ids) in &by_stream {
        let state = match engine.state(name) {
            Ok(s) => Some(s),
            Err(ReadError::NotFound) => None,
            Err(e) => return Err(format!("state({name}): {e}")),
        };
        let must_exist = ids.iter().any(|&i| {
            matches!(
                model.attempts[i].outcome,
                Outcome::Acked { .. } | Outcome::FenceAcked
            )
        });
        let Some(state) = state else {
            if must_exist && mode != Mode::Prefix {
                return Err(format!("stream {name} with acknowledged writes is missing"));
            }
            continue;
        };
        // Read it all, in pages, through the public read path.
        let mut records = Vec::new();
        let mut seq = 0;
        while seq < state.next_seq {
            match engine.read(name, seq, 7, 600) {
                Ok(b) => {
                    if b.records.is_empty() {
                        return Err(format!("{name}: empty read at {seq} below next_seq"));
                    }
                    seq += b.records.len() as u64;
                    records.extend(b.records);
                }
                Err(ReadError::Io(e))
                    if mode
                        == (Mode::Live {
                            reads_may_fail: true,
                        }) =>
                {
                    let _ = e;
                    break;
                }
                Err(e) => return Err(format!("{name}: read at {seq} failed: {e}")),
            }
        }
        let complete = seq >= state.next_seq;
        // Records: dense seqs, whole batches of non-rejected attempts with
        // exactly the bytes sent, tokens and timestamps never going down.
        let mut seen: HashMap<usize, u64> = HashMap::new();
        let mut expect: Option<(usize, usize)> = None;
        let mut last_token = 0;
        let mut last_ts = 0;
        for (i, r) in records.iter().enumerate() {
            if r.seq != i as u64 {
                return Err(format!("{name}: record {i} has seq {}", r.seq));
            }
            let (s, id, k) = parse_body(&r.body)
                .ok_or_else(|| format!("{name} seq {}: unrecognisable body {:?}", r.seq, r.body))?;
            let a = model
                .attempts
                .get(id)
                .ok_or_else(|| format!("{name} seq {}: body of unknown attempt {id}", r.seq))?;
            if s != *name || a.stream != *name || k >= a.bodies.len() || a.bodies[k] != r.body {
                return Err(format!(
                    "{name} seq {}: wrong bytes served: {:?}",
                    r.seq, r.body
                ));
            }
            match (&a.outcome, mode) {
                (Outcome::Rejected, _) => {
                    return Err(format!(
                        "{name} seq {}: attempt {id} was rejected but is in the log",
                        r.seq
                    ))
                }
                (Outcome::Unknown, Mode::Live { .. }) => {
                    return Err(format!(
                        "{name} seq {}: attempt {id} failed (not acknowledged) but readers see it",
                        r.seq
                    ))
                }
                _ => {}
            }
            if r.fencing_token != a.token {
                return Err(format!(
                    "{name} seq {}: token {} but attempt {id} used {}",
                    r.seq, r.fencing_token, a.token
                ));
            }
            if r.fencing_token < last_token || r.timestamp_ms < last_ts {
                return Err(format!(
                    "{name} seq {}: token or timestamp went down",
                    r.seq
                ));
            }
            last_token = r.fencing_token;
            last_ts = r.timestamp_ms;
            match expect {
                Some((eid, ek)) if (eid, ek) != (id, k) => {
                    return Err(format!(
                        "{name} seq {}: batch {eid} is torn (wanted record {ek}, found {id}/{k})",
                        r.seq
                    ))
                }
                None if k != 0 => {
                    return Err(format!(
                        "{name} seq {}: batch {id} starts at its record {k}",
                        r.seq
                    ))
                }
                _ => {}
            }
            if k == 0 && seen.insert(id, r.seq).is_some() {
                return Err(format!("{name}: attempt {id} appears twice"));
            }
            expect = if k + 1 < a.bodies.len() {
                Some((id, k + 1))
            } else {
                None
            };
        }
        if complete && expect.is_some() {
            return Err(format!("{name}: the last batch is torn"));
        }
        if complete && records.len() as u64 != state.next_seq {
            return Err(format!(
                "{name}: next_seq {} but {} records",
                state.next_seq,
                records.len()
            ));
        }
        // Every acknowledged append is at the seq it was told.
        let mut acked_records = 0u64;
        let mut max_acked_token = 0;
        let mut max_tried_token = 0;
        for &id in ids {
            let a = &model.attempts[id];
            if a.outcome != Outcome::Rejected {
                max_tried_token = max_tried_token.max(a.token);
            }
            match a.outcome {
                Outcome::Acked { first_seq } => {
                    acked_records += a.bodies.len() as u64;
                    max_acked_token = max_acked_token.max(a.token);
                    if !complete || mode == Mode::Prefix {
                        continue;
                    }
                    if seen.get(&id) != Some(&first_seq) {
                        return Err(format!(
                            "{name}: acknowledged attempt {id} at seq {first_seq} is {}",
                            match seen.get(&id) {
                                Some(s) => format!("at seq {s}"),
                                None => "missing".to_string(),
                            }
                        ));
                    }
                }
                Outcome::FenceAcked => max_acked_token = max_acked_token.max(a.token),
                _ => {}
            }
        }
        if mode != Mode::Prefix && state.highest_token < max_acked_token {
            return Err(format!(
                "{name}: highest_token {} is below the acknowledged token {max_acked_token}",
                state.highest_token
            ));
        }
        if state.highest_token > max_tried_token || state.highest_token < last_token {
            return Err(format!(
                "{name}: highest_token {} not explained by the log or the requests",
                state.highest_token
            ));
        }
        if let Mode::Live { .. } = mode {
            if state.highest_token != max_acked_token || state.next_seq != acked_records {
                return Err(format!(
                    "{name}: live state {state:?} differs from what was acknowledged (highest {max_acked_token}, {acked_records} records)"
                ));
            }
        }
        dump.insert(
            name.to_string(),
            (
                state.next_seq,
                state.highest_token,
                records
                    .into_iter()
                    .map(|r| (r.seq, r.fencing_token, r.body))
                    .collect(),
            ),
        );
    }
    Ok(dump)
}

/// Records in the dump, over all streams.
pub fn dump_records(d: &Dump) -> u64 {
    d.values().map(|v| v.2.len() as u64).sum()
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
