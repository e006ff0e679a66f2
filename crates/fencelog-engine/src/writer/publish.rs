//! Publishing a group once it is durable (index changes, each stream's
//! durable state, metrics, answers, wake-ups), and the two ways a group
//! ends without publishing: refused on a poisoned engine, or failed by
//! storage.

use super::persist::Placed;
use super::plan::{Counts, IndexChange, Pending, PlannedFrame};
use super::protocol::{Answer, Request};
use crate::codec::checkpoint::AppliedState;
use crate::error::{StorageFailure, WriteError};
use crate::locks;
use crate::metrics::Metrics;
use crate::shared::Shared;
use crate::stream::{Inner, StreamShared};
use fencelog_types::{BatchAck, StreamState};
use prometheus_client::metrics::counter::Counter;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Makes durable group `group_id` visible: a stream the group creates
/// enters the stream map; then, stream by stream under the stream's lock,
/// its index changes in log order, its fence history and settings, and
/// its durable state (`next_seq` last, so a reader that sees it finds the
/// index entries). The checkpointer captures a stream under the same lock,
/// so it sees a group's changes to it all or not at all. Returns the
/// streams to wake.
///
/// A panic in here (see `Mutation::PanicMidGroup`) leaves every structure
/// usable: the stream map and the index are changed by single operations
/// that check before they mutate, and a stream whose state is not stored
/// yet shows readers only what it showed before (its new index entries lie
/// past the `next_seq` they load).
pub(super) fn publish(
    shared: &Shared,
    mut streams: HashMap<Box<str>, Pending<Arc<StreamShared>>>,
    frames: &[PlannedFrame],
    (segment, base): Placed,
    group_id: u64,
    applied: Option<AppliedState>,
) -> Vec<Box<str>> {
    // Streams in the order of their first frame, so publishing follows
    // the log (and a panic midway leaves a prefix of it published).
    let mut order: Vec<(&str, Vec<&PlannedFrame>)> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::new();
    // An Applied marker names no stream.
    for f in frames.iter().filter(|f| !f.stream.is_empty()) {
        let i = *at.entry(&f.stream).or_insert_with(|| {
            order.push((&f.stream, Vec::new()));
            order.len() - 1
        });
        order[i].1.push(f);
    }
    let mut touched = Vec::with_capacity(order.len());
    for (name, changes) in order {
        let p = streams
            .get_mut(name)
            .expect("every planned frame's stream is in the plan");
        let s = p.handle.get_or_insert_with(|| {
            let s = Arc::new(StreamShared::default());
            locks::write(&shared.streams).insert(name.into(), s.clone());
            s
        });
        let durable_highest = s.highest_token();
        let mut inner = locks::lock(&s.inner);
        for f in changes {
            apply_index(&mut inner, f, segment, base);
        }
        let mut previous = durable_highest;
        for e in p.events.drain(..) {
            inner.push_event(previous, e);
            previous = e.token;
        }
        if p.config_changed {
            inner.cold_mut().config = p.config;
        }
        if p.carried_changed {
            inner.cold_mut().carried = p.carried.take().map(|c| *c).unwrap_or_default();
        }
        if p.fence.deleted {
            if let Some(c) = inner.cold.as_mut() {
                c.carried = Default::default();
            }
        }
        inner.tidy();
        inner.as_of_group = group_id;
        s.store(p.fence, p.last_timestamp_ms);
        drop(inner);
        touched.push(name.into());
    }
    if let Some(a) = applied {
        publish_applied(shared, a);
    }
    shared.published_group.store(group_id, Ordering::Release);
    touched
}

/// The shard engine's applied position moves to the group's last marker,
/// before the group counts as published: a checkpoint covering the group
/// then carries a position at least this new.
fn publish_applied(shared: &Shared, mut a: AppliedState) {
    let mut applied = locks::lock(&shared.applied);
    if let Some(prev) = applied.as_ref() {
        assert!(
            a.index > prev.index,
            "applied {} after {}",
            a.index,
            prev.index
        );
        if a.membership.is_empty() {
            a.membership = prev.membership.clone();
        }
    }
    *applied = Some(a);
}

fn apply_index(inner: &mut Inner, f: &PlannedFrame, segment: u64, base: u64) {
    let at = base + f.offset_in_buf as u64;
    let index = &mut inner.index;
    match f.index {
        IndexChange::Push {
            first_seq,
            count,
            len,
        } => {
            if mutated!(PanicMidGroup) && index.len() > 0 {
                panic!(
                    "mutation PanicMidGroup: the writer panics publishing {}",
                    f.stream
                );
            }
            index.push(first_seq, segment, at, count, len);
        }
        IndexChange::Repoint { first_seq, from } => {
            // Live when planned; nothing but this writer changes the index,
            // so it still points there.
            let moved = index.repoint(first_seq, from, (segment, at));
            debug_assert!(moved || mutated!(RelocateDeadOnArrival));
        }
        IndexChange::TrimTo(first_seq) => {
            index.trim_to(first_seq);
        }
        IndexChange::Clear => index.clear(),
        IndexChange::None => {}
    }
}

/// Counts a committed group of `bytes` frame bytes.
pub(super) fn count_committed(m: &Metrics, counts: &Counts, bytes: usize) {
    add(&m.appends_accepted, counts.appends);
    add(&m.fences_accepted, counts.fences);
    add(&m.trims_accepted, counts.trims);
    add(&m.seals_accepted, counts.seals);
    add(&m.deletes_accepted, counts.deletes);
    add(&m.configs_accepted, counts.configs);
    add(&m.retention_trims, counts.retention_trims);
    add(&m.records_written, counts.records);
    add(&m.bytes_written, bytes as u64);
    add(&m.compaction_frames_copied, counts.relocated);
    add(&m.compaction_bytes_copied, counts.relocated_bytes);
    add(&m.producer_evictions, counts.evictions);
    add(&m.cursor_commits, counts.cursors);
    add(&m.batches_accepted, counts.batches);
    count_refusals(m, counts);
    m.groups_committed.inc();
    m.group_records.observe(counts.records as f64);
}

/// Counts a group's refusals (and copies found dead on arrival).
pub(super) fn count_refusals(m: &Metrics, counts: &Counts) {
    add(&m.stale_rejections, counts.stale);
    add(&m.seq_mismatches, counts.mismatched);
    add(&m.sealed_rejections, counts.sealed);
    add(&m.budget_rejections, counts.over_budget);
    add(&m.compaction_dead_on_arrival, counts.dead_on_arrival);
    add(&m.producer_duplicates, counts.duplicates);
    add(&m.producer_rejections, counts.producer_refusals);
    add(&m.deadline_rejections, counts.deadline_refusals);
    add(&m.batches_refused, counts.batches_refused);
}

/// Adds `n` unless it is 0. Most of a group's counts are 0, and an
/// atomic add costs tens of cycles even when it adds nothing: with one
/// appender (one append per group) the skipped adds were a measurable
/// part of a plain append's cost.
fn add(counter: &Counter, n: u64) {
    if n != 0 {
        counter.inc_by(n);
    }
}

/// Sends every planned answer, in arrival order. A stream state answer
/// gets its `bytes` from the published stream (the group's end).
pub(super) fn answer(shared: &Shared, answers: &mut Vec<Answer>) {
    for a in answers.drain(..) {
        match a {
            Answer::State(tx, Ok(mut state)) => {
                fill_bytes(shared, &mut state);
                let _ = tx.send(Ok(state));
            }
            Answer::Batch(tx, Ok(mut acks)) => {
                for a in &mut acks {
                    if let BatchAck::Fence(state) = a {
                        fill_bytes(shared, state);
                    }
                }
                let _ = tx.send(Ok(acks));
            }
            Answer::Applied(tx, Ok(mut results)) => {
                for r in results.iter_mut().flatten() {
                    match r {
                        crate::op::Applied::State(state) => fill_bytes(shared, state),
                        crate::op::Applied::Batch(acks) => {
                            for a in acks {
                                if let BatchAck::Fence(state) = a {
                                    fill_bytes(shared, state);
                                }
                            }
                        }
                        _ => {}
                    }
                }
                let _ = tx.send(Ok(results));
            }
            a => a.send(),
        }
    }
}

/// The part of a state answer planning does not know: the stream's size,
/// from the published stream (so as of the group's end).
fn fill_bytes(shared: &Shared, state: &mut StreamState) {
    if let Some(s) = shared.stream(&state.stream) {
        state.bytes = locks::lock(&s.inner).index.bytes();
    }
}

/// The group in flight failed to become durable: poison the engine and
/// tell every request in it that its outcome is unknown.
pub(super) fn fail_group(shared: &Shared, failure: StorageFailure, answers: &mut Vec<Answer>) {
    let failure = shared.poison(failure);
    for a in answers.drain(..) {
        a.fail(WriteError::StorageFailed(failure.clone()));
    }
}

/// The group could not be written, and nothing of it was (see
/// `persist::PersistError::NotWritten`): every request in it is refused —
/// the ones planned as stale too, since a refusal decided against pending
/// state that never became durable would not be explained by durable
/// state — and the engine goes on.
///
/// Except a group holding a Raft entry (cluster mode): the entries queued
/// behind it (`Engine::apply_entries`) would otherwise be applied past it,
/// and a restart would resume after the hole. openraft takes the failed
/// apply as fatal anyway, so the shard engine is poisoned: nothing queued
/// behind the entry is applied until it is reopened and the entry applied
/// again.
pub(super) fn refuse_group(shared: &Shared, failure: StorageFailure, answers: &mut Vec<Answer>) {
    let applies = answers.iter().any(|a| matches!(a, Answer::Applied(..)));
    let failure = match applies && !mutated!(RefusedApplyGoesOn) {
        true => shared.poison(failure),
        false => {
            let failure = Arc::new(failure);
            tracing::warn!(error = %failure, "a group was refused before any of it was written; the engine goes on");
            failure
        }
    };
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
