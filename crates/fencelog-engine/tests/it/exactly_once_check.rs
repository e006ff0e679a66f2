//! The script and the checker of the exactly-once suites (see
//! `exactly_once.rs`), shared with the mutation tests.

use bytes::Bytes;
use fencelog_engine::{AppendOptions, BatchAction, BatchOp, Engine, ProducerSeq, WriteError};
use std::collections::BTreeMap;

pub const STREAM: &str = "s";
pub const PRODUCER: &str = "w-1";
pub const TOKEN: u64 = 3;
/// Rounds of the script.
pub const STEPS: usize = 12;
/// A stream fenced far above [`TOKEN`]: every batch touching it is refused.
const FENCED: &str = "z";

/// What the script heard back.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    /// producer_seq → (first_seq, last_seq) of acknowledged appends.
    pub acked_appends: BTreeMap<u64, (u64, u64)>,
    /// Batches acknowledged (by index).
    pub acked_batches: Vec<usize>,
    /// The highest acknowledged cursor seq.
    pub acked_cursor: Option<u64>,
    /// Producer seqs sent at all.
    pub attempted: u64,
    /// Bodies sent with a deadline, and the deadline.
    pub deadlines: Vec<(Bytes, u64)>,
}

pub fn body(seq: u64) -> Bytes {
    Bytes::from(format!("p-{seq}"))
}

fn batch_body(stream: &str, k: usize) -> Bytes {
    Bytes::from(format!("{stream}-{k}"))
}

pub fn producer(seq: u64) -> AppendOptions {
    AppendOptions {
        producer: Some(ProducerSeq {
            id: PRODUCER.into(),
            seq,
        }),
        ..Default::default()
    }
}

fn batch_on(streams: [&str; 2], k: usize) -> Vec<BatchOp> {
    streams
        .into_iter()
        .map(|s| BatchOp {
            stream: s.into(),
            fencing_token: TOKEN,
            action: BatchAction::Append {
                records: vec![batch_body(s, k)],
                match_seq_num: None,
            },
        })
        .collect()
}

/// Two appends that must commit together, or (`refused`) one that the
/// fenced stream refuses, taking the other with it.
fn batch(k: usize, refused: bool) -> Vec<BatchOp> {
    batch_on(if refused { ["a", FENCED] } else { ["a", "b"] }, k)
}

/// A deadline already past when the writer sees it (odd rounds) or far
/// ahead (even rounds); the body names the round.
fn deadline_of(i: usize) -> (Bytes, u64) {
    let ms = if i % 2 == 1 { 1 } else { u64::MAX / 2 };
    (Bytes::from(format!("d-{i}")), ms)
}

/// `steps` rounds of: one idempotent append (two records), one batch over
/// streams a and b, one cursor commit. Stops at the first failure (the
/// engine is poisoned from then on).
pub async fn run(e: &Engine, steps: usize) -> Seen {
    let mut seen = Seen::default();
    if e.fence(FENCED, TOKEN * 10).await.is_err() {
        return seen;
    }
    for i in 0..steps {
        let seq = i as u64;
        seen.attempted = seq + 1;
        let records = vec![body(seq), Bytes::from_static(b"pad")];
        match e.append_with(STREAM, TOKEN, records, producer(seq)).await {
            Ok(a) => {
                seen.acked_appends.insert(seq, (a.first_seq, a.last_seq));
            }
            Err(_) => return seen,
        }
        match e.batch(batch(i, false), None).await {
            Ok(_) => seen.acked_batches.push(i),
            Err(_) => return seen,
        }
        match e.batch(batch(i, true), None).await {
            Err(WriteError::BatchRefused(_)) => {}
            // A poisoned engine, or a mutation that lets it through.
            _ => return seen,
        }
        let (body, ms) = deadline_of(i);
        seen.deadlines.push((body.clone(), ms));
        let late = AppendOptions {
            not_after_ms: Some(ms),
            ..Default::default()
        };
        match e.append_with("d", TOKEN, vec![body], late).await {
            Ok(_) | Err(WriteError::DeadlineExceeded { .. }) => {}
            Err(_) => return seen,
        }
        let next = e.state(STREAM).map(|s| s.next_seq).unwrap_or(0);
        match e.commit_cursor(STREAM, "c", TOKEN, next).await {
            Ok(_) => seen.acked_cursor = Some(next),
            Err(_) => return seen,
        }
    }
    seen
}

fn records_of(e: &Engine, s: &str) -> Vec<fencelog_engine::Record> {
    let Ok(st) = e.state(s) else {
        return Vec::new();
    };
    e.read(s, st.first_seq, 100_000, 1 << 26).unwrap().records
}

fn bodies_of(e: &Engine, s: &str) -> Vec<(u64, Bytes)> {
    records_of(e, s)
        .into_iter()
        .map(|r| (r.seq, r.body))
        .collect()
}

/// No record has a timestamp above the deadline it was sent with.
fn check_deadlines(e: &Engine, seen: &Seen) -> Result<(), String> {
    for r in records_of(e, "d") {
        let Some((_, ms)) = seen.deadlines.iter().find(|(b, _)| *b == r.body) else {
            return Err(format!("record {r:?} was never sent"));
        };
        if r.timestamp_ms > *ms {
            return Err(format!(
                "seq {} has timestamp {} above its deadline {ms}",
                r.seq, r.timestamp_ms
            ));
        }
    }
    Ok(())
}

/// Every batch wholly present or wholly absent; acknowledged ones present.
fn check_batches(e: &Engine, seen: &Seen) -> Result<(), String> {
    let (a, b, z) = (bodies_of(e, "a"), bodies_of(e, "b"), bodies_of(e, FENCED));
    let has =
        |log: &[(u64, Bytes)], s: &str, k: usize| log.iter().any(|(_, x)| *x == batch_body(s, k));
    for k in 0..STEPS {
        let (in_a, in_b) = (has(&a, "a", k), has(&b, "b", k));
        if in_a != in_b {
            return Err(format!("batch {k} torn: in a {in_a}, in b {in_b}"));
        }
        if seen.acked_batches.contains(&k) && !in_a {
            return Err(format!("acknowledged batch {k} lost"));
        }
        if has(&z, FENCED, k) {
            return Err(format!("a refused batch {k} wrote to the fenced stream"));
        }
    }
    // The refused batches' "a" ops share bodies with the accepted ones:
    // each "a-k" must be there once (never also from the refused batch).
    for k in 0..STEPS {
        let n = a.iter().filter(|(_, x)| *x == batch_body("a", k)).count();
        if n > 1 {
            return Err(format!(
                "refused batch {k} applied its op on a: a-{k} there {n} times"
            ));
        }
    }
    Ok(())
}

/// Checks a recovered engine against what the script heard, retrying like
/// a producer that lost its connection, then checks exactly once.
pub async fn check_recovered(e: &Engine, seen: &Seen) -> Result<(), String> {
    let log = bodies_of(e, STREAM);
    for (seq, (first, _)) in &seen.acked_appends {
        if !log.iter().any(|(s, b)| s == first && *b == body(*seq)) {
            return Err(format!("acknowledged producer_seq {seq} lost: {log:?}"));
        }
    }
    // The retrying producer: everything it sent, again, in order.
    for seq in 0..seen.attempted.max(1) {
        let records = vec![body(seq), Bytes::from_static(b"pad")];
        match e.append_with(STREAM, TOKEN, records, producer(seq)).await {
            Ok(a) if a.duplicate => {
                let now = bodies_of(e, STREAM);
                if !now
                    .iter()
                    .any(|(s, b)| *s == a.first_seq && *b == body(seq))
                {
                    return Err(format!(
                        "duplicate answer {a:?} names seqs not holding p-{seq}"
                    ));
                }
            }
            Ok(_) => {
                if seen.acked_appends.contains_key(&seq) {
                    return Err(format!("acknowledged producer_seq {seq} applied twice"));
                }
            }
            Err(WriteError::ProducerSeqStale { .. }) => {}
            Err(err) => return Err(format!("retry of producer_seq {seq}: {err}")),
        }
    }
    let log = bodies_of(e, STREAM);
    for seq in 0..seen.attempted {
        let n = log.iter().filter(|(_, b)| *b == body(seq)).count();
        if n != 1 {
            return Err(format!(
                "p-{seq} is there {n} times after the retries: {log:?}"
            ));
        }
    }
    check_batches(e, seen)?;
    check_deadlines(e, seen)?;
    if let Some(c) = seen.acked_cursor {
        let durable = e.cursor(STREAM, "c").map_err(|e| e.to_string())?;
        if durable.as_ref().map(|d| d.seq) < Some(c) {
            return Err(format!("cursor at {durable:?}, acknowledged at {c}"));
        }
    }
    Ok(())
}
