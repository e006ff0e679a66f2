//! The history checker's rules for trims, seals, deletes and idempotent
//! producers (the cluster's leader kill loop drives them through real
//! clusters).
//! Pure, like [`crate::history`].

use super::model::{Call, FinalLog, Op, Outcome};
use std::collections::BTreeSet;

/// Whether `o` may have taken effect: anything but a definite refusal.
pub(crate) fn unrefused(o: &Op) -> bool {
    !matches!(o.outcome, Outcome::Stale { .. } | Outcome::Refused(_))
}

fn same_stream<'a>(op: &'a Op, ops: &'a [Op]) -> impl Iterator<Item = &'a Op> {
    ops.iter()
        .filter(move |o| o.call.stream() == op.call.stream())
}

/// Whether an unrefused delete of `op`'s stream is in the history.
pub fn deleted_by(op: &Op, ops: &[Op]) -> bool {
    same_stream(op, ops).any(|o| matches!(o.call, Call::Delete { .. }) && unrefused(o))
}

/// Whether an unrefused delete with `token` of `op`'s stream was sent
/// before `op`'s answer: a tombstone refuses its own token too (only a
/// higher one recreates the stream), so its 409 cites the token presented.
pub fn tombstone_of(op: &Op, ops: &[Op], token: u64) -> bool {
    same_stream(op, ops).any(|o| {
        matches!(o.call, Call::Delete { token: t, .. } if t == token)
            && o.invoked < op.completed
            && unrefused(o)
    })
}

/// Whether the record at `seq` of `op`'s stream may be missing from the
/// final log: below an unrefused trim's point, below the final front of a
/// stream an unrefused retention setting lets the store trim, or deleted
/// with the stream.
pub fn may_be_gone(op: &Op, ops: &[Op], log: &FinalLog, seq: u64) -> bool {
    if log.deleted {
        return deleted_by(op, ops);
    }
    let first_seq = log.next_seq - log.records.len() as u64;
    seq < first_seq
        && same_stream(op, ops).any(|o| {
            let covers = match o.call {
                Call::Trim { trim_seq, .. } => trim_seq > seq,
                Call::Retention { .. } => true,
                _ => false,
            };
            covers && unrefused(o)
        })
}

/// No record body twice in one log: every logical append of the tests
/// has its own body, so a second copy is a retry written again (an
/// idempotent producer's duplicate not recognised).
pub fn no_body_twice(name: &str, log: &FinalLog) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for r in &log.records {
        if !seen.insert(&r.body) {
            return Err(format!(
                "{name}: body {:?} written twice (seq {})",
                String::from_utf8_lossy(&r.body),
                r.seq
            ));
        }
    }
    Ok(())
}

/// An accepted write sent after its stream's seal was acknowledged, or
/// carrying a token at or below an acknowledged delete's (a tombstone
/// keeps its token: only a higher one recreates the stream).
pub fn after_seal_or_delete(op: &Op, ops: &[Op]) -> Result<(), String> {
    let token = op.call.token().expect("a write");
    for o in same_stream(op, ops) {
        if o.completed >= op.invoked || !matches!(o.outcome, Outcome::Fenced { .. }) {
            continue;
        }
        match o.call {
            Call::Seal { .. } => {
                return Err(format!(
                    "accepted after the seal acknowledged at tick {}",
                    o.completed
                ))
            }
            Call::Delete { token: t, .. } if token <= t => {
                return Err(format!(
                    "accepted with token {token} after the delete with {t} was acknowledged"
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// An acknowledged trim, seal or delete shows in the final state (unless
/// the stream was deleted later).
pub fn final_state_shows(op: &Op, log: &FinalLog) -> Result<(), String> {
    if log.deleted {
        return Ok(());
    }
    let first_seq = log.next_seq - log.records.len() as u64;
    match (&op.call, &op.outcome) {
        (Call::Trim { trim_seq, .. }, Outcome::Fenced { next_seq }) => {
            let point = (*trim_seq).min(*next_seq);
            if first_seq < point {
                return Err(format!(
                    "acknowledged trim to {point}, final first_seq {first_seq}"
                ));
            }
            Ok(())
        }
        (Call::Seal { .. }, _) if !log.sealed => {
            Err("acknowledged seal, final log not sealed".into())
        }
        (Call::Delete { .. }, _) => Err("acknowledged delete, final log not a tombstone".into()),
        _ => Ok(()),
    }
}
