//! Publishing a group once it is durable (index entries, each stream's
//! durable state, metrics, answers, wake-ups), and the two ways a group
//! ends without publishing: refused on a poisoned engine, or failed by
//! storage.

use super::persist::Placed;
use super::plan::{Counts, Pending, PlannedFrame};
use super::protocol::{Answer, Request};
use crate::codec::FrameKind;
use crate::error::{StorageFailure, WriteError};
use crate::locks;
use crate::metrics::Metrics;
use crate::shared::Shared;
use crate::stream::StreamShared;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// Makes a durable group visible, in log order: a stream the group creates
/// enters the stream map, each records frame its stream's index, then every
/// stream the group looked at publishes its state (`next_seq` last, so a
/// reader that sees it finds the index entries). Returns the streams to
/// wake.
///
/// A panic in here (see `Mutation::PanicMidGroup`) leaves every structure
/// consistent: the stream map and the indexes are changed by single
/// operations that check before they mutate, and a stream whose state is
/// not published yet shows only what it showed before.
pub(super) fn publish(
    shared: &Shared,
    mut streams: HashMap<Box<str>, Pending<Arc<StreamShared>>>,
    frames: &[PlannedFrame],
    (segment, base): Placed,
) -> Vec<Box<str>> {
    for f in frames {
        let p = streams
            .get_mut(&f.stream)
            .expect("every planned frame's stream is in the plan");
        let s = p.handle.get_or_insert_with(|| {
            let s = Arc::new(StreamShared::default());
            locks::write(&shared.streams).insert(f.stream.clone(), s.clone());
            s
        });
        if f.kind == FrameKind::Records {
            let mut index = locks::lock(&s.index);
            if mutated!(PanicMidGroup) && index.end_seq() > 0 {
                panic!(
                    "mutation PanicMidGroup: the writer panics publishing {}",
                    f.stream
                );
            }
            index.push(f.first_seq, segment, base + f.offset_in_buf as u64, f.count);
        }
    }
    let mut touched = Vec::with_capacity(streams.len());
    for (name, p) in streams {
        if let Some(s) = &p.handle {
            s.publish(p.fence.highest_token, p.fence.next_seq, p.last_timestamp_ms);
            touched.push(name);
        }
    }
    touched
}

/// Counts a committed group of `bytes` frame bytes.
pub(super) fn count_committed(m: &Metrics, counts: &Counts, bytes: usize) {
    m.appends_accepted.inc_by(counts.appends);
    m.fences_accepted.inc_by(counts.fences);
    m.records_written.inc_by(counts.records);
    m.bytes_written.inc_by(bytes as u64);
    count_refusals(m, counts);
    m.groups_committed.inc();
    m.group_records.observe(counts.records as f64);
}

/// Counts the refusals of a group.
pub(super) fn count_refusals(m: &Metrics, counts: &Counts) {
    m.stale_rejections.inc_by(counts.stale);
    m.seq_mismatches.inc_by(counts.mismatched);
}

/// Sends every planned answer, in arrival order.
pub(super) fn answer(answers: &mut Vec<Answer>) {
    answers.drain(..).for_each(Answer::send);
}

/// The group in flight failed to become durable: poison the engine and
/// tell every request in it that its outcome is unknown.
pub(super) fn fail_group(shared: &Shared, failure: StorageFailure, answers: &mut Vec<Answer>) {
    let failure = Arc::new(failure);
    tracing::error!(error = %failure, "storage failure; engine poisoned, no further writes until reopened");
    let _ = shared.poisoned.set(failure.clone());
    for a in answers.drain(..) {
        a.fail(WriteError::StorageFailed(failure.clone()));
    }
    shared.wake_all_waiters();
}

/// The group could not be written, and nothing of it was (see
/// `persist::PersistError::NotWritten`): every request in it is refused —
/// the ones planned as stale too, since a refusal decided against pending
/// state that never became durable would not be explained by durable
/// state — and the engine goes on.
pub(super) fn refuse_group(shared: &Shared, failure: StorageFailure, answers: &mut Vec<Answer>) {
    let failure = Arc::new(failure);
    tracing::warn!(error = %failure, "a group was refused before any of it was written; the engine goes on");
    shared.metrics.groups_refused.inc();
    for a in answers.drain(..) {
        a.fail(WriteError::NotWritten(failure.clone()));
    }
}

/// Answers every request of a group with `err`, deciding nothing.
pub(super) fn refuse_all(requests: &mut VecDeque<Request>, err: &WriteError) {
    for r in requests.drain(..) {
        r.refuse(err.clone());
    }
}
