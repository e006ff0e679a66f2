//! The history checker: what clients were told, recorded with
//! logical invoke/complete ticks, judged against every replica's final log.
//! Pure (no I/O, no engine types), so the protocol simulation and the
//! real-process cluster tests feed it alike.
//!
//! It proves, per stream:
//! - every replica's final log is identical, and its seqs are dense;
//! - 0 acknowledged appends lost: each 200 append is in the final log at
//!   the seq it was told, with its token and bodies;
//! - 0 stale tokens accepted: the final log's tokens never fall, nothing
//!   after an acknowledged fence's position carries a lower token, nothing
//!   answered 409 is in the log, and no write was accepted with a token
//!   below one already acknowledged when it was sent;
//! - nothing definitely refused was applied: a refused append's records
//!   are not in the log (unless another call carried the same body);
//! - every 409 is explained: the token it cites is at most the final
//!   highest, above the token presented, and carried by a write sent
//!   before the 409 came back that was not itself refused;
//! - every read is a contiguous slice of the final log, and its `next_seq`
//!   covers every append acknowledged before the read was sent (tail
//!   answers are linearizable) and never passes the final one;
//! - with trims, seals, deletes and idempotent producers in the history
//!   (the cluster's leader kill loop drives them), the rules of
//!   [`lifecycle`]: a record may be missing only below an
//!   unrefused trim's point, or from a stream an unrefused delete removed;
//!   no body is in a log twice (a producer's retry written again); nothing
//!   is accepted on a stream after its seal was acknowledged, nor with a
//!   token at or below an acknowledged delete's;
//! - with a retention setting in the history, a record may also be
//!   missing from the front of its stream (below the final first seq,
//!   never in the middle: seqs stay dense), as retention trims it.

mod lifecycle;
mod model;

pub use model::{Call, FinalLog, History, Op, Outcome, Rec, Replica, OPS_MAX};

use std::collections::HashMap;

/// What a checked history held.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub acked: u64,
    pub fenced: u64,
    pub stale: u64,
    pub refused: u64,
    pub unknown: u64,
    pub reads: u64,
    pub read_records: u64,
    pub final_records: u64,
}

/// Checks `ops` against the replicas' final logs (see the module comment).
pub fn check(ops: &[Op], replicas: &[Replica]) -> Result<Report, String> {
    let first = replicas.first().ok_or("no replica to check against")?;
    for (i, r) in replicas.iter().enumerate().skip(1) {
        if r != first {
            return Err(format!("replica {i}'s final logs differ from replica 0's"));
        }
    }
    let empty = FinalLog::default();
    let carriers = Carriers::of(ops);
    let streams = StreamOps::of(ops);
    let mut report = Report::default();
    for (name, log) in first {
        check_log(name, log)?;
        lifecycle::no_body_twice(name, log)?;
        report.final_records += log.records.len() as u64;
    }
    for (i, op) in ops.iter().enumerate() {
        let log = first.get(op.call.stream()).unwrap_or(&empty);
        let fail = |what: String| Err(format!("op {i} {:?} -> {:?}: {what}", op.call, op.outcome));
        let mine = &streams[op.call.stream()];
        if let Err(what) = check_op(op, (mine, &carriers), log, &mut report) {
            return fail(what);
        }
    }
    Ok(report)
}

/// Seqs dense and tokens never falling along the log.
fn check_log(name: &str, log: &FinalLog) -> Result<(), String> {
    let first_seq = log.next_seq - log.records.len() as u64;
    for (k, r) in log.records.iter().enumerate() {
        if r.seq != first_seq + k as u64 {
            return Err(format!("{name}: seq {} at position {k}: not dense", r.seq));
        }
        if r.token > log.highest_token {
            return Err(format!("{name}: seq {} above the highest token", r.seq));
        }
    }
    for w in log.records.windows(2) {
        if w[1].token < w[0].token {
            return Err(format!(
                "{name}: stale token accepted: seq {} has token {} after token {}",
                w[1].seq, w[1].token, w[0].token
            ));
        }
    }
    Ok(())
}

pub(crate) fn at(log: &FinalLog, seq: u64) -> Option<&Rec> {
    let first_seq = log.next_seq - log.records.len() as u64;
    log.records
        .get(usize::try_from(seq.checked_sub(first_seq)?).ok()?)
}

/// For each stream and token, the earliest invocation of a write that
/// carried it and was not itself refused: a 409 is explained by one sent
/// before the 409 came back. Built once, so checking a 409 does not scan
/// the whole history (a kill loop records 10⁵ of them).
struct Carriers<'a>(HashMap<(&'a str, u64), u64>);

impl<'a> Carriers<'a> {
    fn of(ops: &'a [Op]) -> Carriers<'a> {
        let mut first = HashMap::new();
        for o in ops.iter().filter(|o| lifecycle::unrefused(o)) {
            if let Some(t) = o.call.token() {
                let e = first.entry((o.call.stream(), t)).or_insert(o.invoked);
                *e = (*e).min(o.invoked);
            }
        }
        Carriers(first)
    }

    /// Whether a write carrying `token` on `stream` was sent before `tick`.
    fn sent_before(&self, stream: &str, token: u64, tick: u64) -> bool {
        self.0.get(&(stream, token)).is_some_and(|t| *t < tick)
    }
}

/// One stream's ops, whole and in the two subsets the rules scan, so no
/// rule walks the whole history per op (a kill loop records 10⁵ ops, most
/// of them stale writes on two streams).
#[derive(Default)]
struct StreamOps {
    /// Every op on the stream, in history order.
    all: Vec<Op>,
    /// Its acknowledged writes (200 to an append, fence, trim, seal or
    /// delete): what `not_below_acked`, `after_seal_or_delete` and a
    /// read's tail look at.
    acked: Vec<Op>,
    /// Its trims, seals, deletes and retention settings, answered however:
    /// what may make a record missing or a 409 a tombstone's.
    lifecycle: Vec<Op>,
}

impl StreamOps {
    fn of(ops: &[Op]) -> HashMap<&str, StreamOps> {
        let mut by: HashMap<&str, StreamOps> = HashMap::new();
        for o in ops {
            let s = by.entry(o.call.stream()).or_default();
            s.all.push(o.clone());
            if matches!(o.outcome, Outcome::Appended { .. } | Outcome::Fenced { .. }) {
                s.acked.push(o.clone());
            }
            if matches!(
                o.call,
                Call::Trim { .. }
                    | Call::Seal { .. }
                    | Call::Delete { .. }
                    | Call::Retention { .. }
            ) {
                s.lifecycle.push(o.clone());
            }
        }
        by
    }
}

fn check_op(
    op: &Op,
    (ops, carriers): (&StreamOps, &Carriers),
    log: &FinalLog,
    report: &mut Report,
) -> Result<(), String> {
    match (&op.call, &op.outcome) {
        (Call::Append { token, bodies, .. }, Outcome::Appended { first_seq }) => {
            report.acked += 1;
            for (k, body) in bodies.iter().enumerate() {
                let seq = first_seq + k as u64;
                let want = Rec {
                    seq,
                    token: *token,
                    body: body.clone(),
                };
                let gone = lifecycle::may_be_gone(op, &ops.lifecycle, log, seq);
                if !gone && at(log, seq) != Some(&want) {
                    return Err(format!("acknowledged record at seq {seq} lost"));
                }
            }
            not_below_acked(op, &ops.acked)?;
            lifecycle::after_seal_or_delete(op, &ops.acked)
        }
        (Call::Trim { .. } | Call::Seal { .. } | Call::Delete { .. }, Outcome::Fenced { .. }) => {
            report.fenced += 1;
            not_below_acked(op, &ops.acked)?;
            lifecycle::after_seal_or_delete(op, &ops.acked)?;
            lifecycle::final_state_shows(op, log)
        }
        (Call::Retention { .. }, Outcome::Fenced { .. }) => {
            report.fenced += 1;
            Ok(())
        }
        (Call::Fence { token, .. }, Outcome::Fenced { next_seq }) => {
            report.fenced += 1;
            if let Some(r) = log
                .records
                .iter()
                .find(|r| r.seq >= *next_seq && r.token < *token)
            {
                return Err(format!(
                    "seq {} with token {} after the fence",
                    r.seq, r.token
                ));
            }
            not_below_acked(op, &ops.acked)?;
            lifecycle::after_seal_or_delete(op, &ops.acked)
        }
        (call, Outcome::Stale { highest }) => {
            report.stale += 1;
            if let Call::Append { bodies, .. } = call {
                if log.records.iter().any(|r| bodies.contains(&r.body)) {
                    return Err("a refused record is in the log".into());
                }
            }
            explained(op, (&ops.lifecycle, carriers), *highest, log)
        }
        (Call::Read { start, .. }, Outcome::Read { records, next_seq }) => {
            report.reads += 1;
            report.read_records += records.len() as u64;
            check_read(op, ops, log, *start, records, *next_seq)
        }
        (call, Outcome::Refused(_)) => {
            report.refused += 1;
            refused_not_applied(call, &ops.all, log)
        }
        (_, Outcome::Unknown(_)) => {
            report.unknown += 1;
            Ok(())
        }
        (_, Outcome::ReadFailed(_)) => Ok(()),
        _ => Err("answer does not fit the call".into()),
    }
}

/// A definite refusal applied nothing: none of a refused append's bodies
/// is in the log, unless another call carried the same body (an
/// idempotent producer's retry of an append that did apply).
fn refused_not_applied(call: &Call, ops: &[Op], log: &FinalLog) -> Result<(), String> {
    let Call::Append { bodies, .. } = call else {
        return Ok(());
    };
    let carried_elsewhere = |body: &Vec<u8>| {
        ops.iter()
            .filter(|o| matches!(&o.call, Call::Append { bodies: b, .. } if b.contains(body)))
            .nth(1)
            .is_some()
    };
    match log
        .records
        .iter()
        .find(|r| bodies.contains(&r.body) && !carried_elsewhere(&r.body))
    {
        Some(r) => Err(format!(
            "a refused append's record is in the log at seq {}",
            r.seq
        )),
        None => Ok(()),
    }
}

/// An accepted write: no write with a higher token on its stream had been
/// acknowledged before it was sent.
fn not_below_acked(op: &Op, ops: &[Op]) -> Result<(), String> {
    let token = op.call.token().expect("a write");
    let before = ops.iter().find(|o| {
        o.call.stream() == op.call.stream()
            && o.completed < op.invoked
            && matches!(o.outcome, Outcome::Appended { .. } | Outcome::Fenced { .. })
            && o.call.token().is_some_and(|t| t > token)
    });
    match before {
        Some(o) => Err(format!(
            "accepted although token {:?} was acknowledged before it was sent",
            o.call.token()
        )),
        None => Ok(()),
    }
}

/// A 409: a committed higher token explains it.
fn explained(
    op: &Op,
    (ops, carriers): (&[Op], &Carriers),
    highest: u64,
    log: &FinalLog,
) -> Result<(), String> {
    let token = op.call.token().ok_or("a 409 to a read")?;
    let final_highest = log.highest_token;
    // A tombstone's token is not readable: the bound is unknown.
    if highest > final_highest && !log.deleted {
        return Err(format!(
            "cites token {highest} above the final {final_highest}"
        ));
    }
    let tombstone = highest == token && lifecycle::tombstone_of(op, ops, token);
    if highest <= token && !tombstone {
        return Err(format!(
            "cites token {highest}, not above the {token} presented"
        ));
    }
    if carriers.sent_before(op.call.stream(), highest, op.completed) {
        Ok(())
    } else {
        Err(format!(
            "cites token {highest}, which no earlier unrefused write carried"
        ))
    }
}

fn check_read(
    op: &Op,
    ops: &StreamOps,
    log: &FinalLog,
    start: u64,
    records: &[Rec],
    next_seq: u64,
) -> Result<(), String> {
    if log.deleted && lifecycle::deleted_by(op, &ops.lifecycle) {
        // The log it was a slice of is gone with the tombstone.
        return Ok(());
    }
    if next_seq > log.next_seq {
        return Err(format!(
            "next_seq {next_seq} past the final {}",
            log.next_seq
        ));
    }
    for (k, r) in records.iter().enumerate() {
        let seq = start + k as u64;
        // Trimmed (or deleted) since the read: nothing left to compare.
        let gone = lifecycle::may_be_gone(op, &ops.lifecycle, log, seq);
        if r.seq != seq || (!gone && at(log, seq) != Some(r)) {
            return Err(format!(
                "record {k} is not the final log's record at seq {seq}"
            ));
        }
    }
    if start + records.len() as u64 > next_seq {
        return Err("records past the next_seq it answered".into());
    }
    // Linearizable tail: every append acknowledged before this read was
    // sent is below the next_seq it answered.
    let acked_end = ops
        .acked
        .iter()
        .filter(|o| o.call.stream() == op.call.stream() && o.completed < op.invoked)
        .filter_map(|o| match (&o.call, &o.outcome) {
            (Call::Append { bodies, .. }, Outcome::Appended { first_seq }) => {
                Some(first_seq + bodies.len() as u64)
            }
            _ => None,
        })
        .max()
        .unwrap_or(0);
    if next_seq < acked_end {
        return Err(format!(
            "next_seq {next_seq} misses appends acknowledged up to {acked_end} before the read"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
