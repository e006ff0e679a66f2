//! A stream's state as recovery rebuilds it, and the replay of one frame
//! onto it: the fence rule read backwards ([`crate::fence::check_replay`]),
//! the idempotent producer and cursor rules, and the index
//! candidates each records frame leaves.

use crate::carried::{Carried, ProducerWrite};
use crate::codec::checkpoint::{StreamEntry, FENCE_HISTORY_MAX};
use crate::codec::{Frame, FrameKind, Payload};
use crate::fence::{self, Change, FenceState, ReplayViolation, Replayed};
use fencelog_types::{FenceBy, FenceEvent, StreamConfig};

/// Everything a checkpoint keeps of a stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Core {
    pub fence: FenceState,
    pub last_timestamp_ms: u64,
    pub config: StreamConfig,
    /// Oldest first, at most [`FENCE_HISTORY_MAX`].
    pub history: Vec<FenceEvent>,
    pub carried: Carried,
}

impl Core {
    pub fn from_entry(e: &StreamEntry) -> Core {
        Core {
            fence: FenceState {
                exists: true,
                highest_token: e.highest_token,
                next_seq: e.next_seq,
                first_seq: e.first_seq,
                sealed: e.sealed,
                deleted: e.deleted,
            },
            last_timestamp_ms: e.last_timestamp_ms,
            config: StreamConfig {
                retention_age_s: e.retention_age_s,
                retention_bytes: e.retention_bytes,
                respect_cursors: e.respect_cursors,
            },
            history: e.history.clone(),
            carried: Carried {
                producer_token_floor: e.producer_token_floor,
                producers: e.producers.clone(),
                cursors: e.cursors.clone(),
            },
        }
    }

    fn push_event(&mut self, event: FenceEvent) {
        if self.history.len() >= FENCE_HISTORY_MAX {
            self.history.remove(0);
        }
        self.history.push(event);
    }
}

/// A records frame that may become an index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Found {
    pub first_seq: u64,
    pub count: u32,
    pub segment: u64,
    pub offset: u64,
    pub len: u32,
    /// Log order: later copies win.
    pub group: u64,
}

impl Found {
    pub fn end_seq(&self) -> u64 {
        self.first_seq + self.count as u64
    }
}

/// Why a frame does not fit the state it is replayed onto.
pub(crate) enum Misfit {
    Rule(ReplayViolation),
    /// A producer or cursor frame the producer or cursor rules refuse.
    Carried(String),
    /// A relocated copy (or a frame the checkpoint already covers) of
    /// records the stream never had.
    Beyond {
        end: u64,
        next_seq: u64,
    },
}

fn change_of(frame: &Frame<'_>) -> Option<Change> {
    let h = &frame.header;
    Some(match h.kind {
        FrameKind::Records => Change::Append {
            count: h.record_count,
        },
        FrameKind::Fence => Change::Fence,
        FrameKind::Trim => Change::Trim {
            first_seq: h.first_seq,
            retention: h.retention(),
        },
        FrameKind::Seal => Change::Seal,
        FrameKind::Delete => Change::Delete,
        FrameKind::Config => Change::Config,
        FrameKind::Cursor | FrameKind::Applied => return None,
    })
}

fn by_of(change: Change) -> FenceBy {
    match change {
        Change::Append { .. } => FenceBy::Append,
        Change::Fence => FenceBy::Fence,
        Change::Trim { .. } => FenceBy::Trim,
        Change::Seal => FenceBy::Seal,
        Change::Delete => FenceBy::Delete,
        Change::Config => FenceBy::Config,
    }
}

/// Replays `frame` (of group `group`) onto `core`, as its state. A
/// RELOCATED copy is not state; the caller handles it.
pub(crate) fn apply(
    core: &mut Core,
    frame: &Frame<'_>,
    group: u64,
    producers_max: usize,
) -> Result<(), Misfit> {
    let h = &frame.header;
    let Some(change) = change_of(frame) else {
        // A cursor (an Applied marker names no stream).
        let Payload::Cursor(name) = frame.payload else {
            unreachable!("only cursors and applied markers have no change");
        };
        return core
            .carried
            .apply_cursor(
                core.fence,
                name,
                h.fencing_token,
                h.first_seq,
                h.timestamp_ms,
            )
            .map(drop)
            .map_err(|r| Misfit::Carried(format!("cursor {name}: {r:?}")));
    };
    let before = core.fence;
    let replayed = Replayed {
        change,
        token: h.fencing_token,
        first_seq: h.first_seq,
    };
    if change == Change::Fence && mutated!(FenceOnlyInMemory) {
        return Ok(());
    }
    core.fence = fence::check_replay(before, replayed).map_err(Misfit::Rule)?;
    if fence::takes_effect(before, h.fencing_token) {
        core.push_event(FenceEvent {
            token: h.fencing_token,
            first_seq: before.next_seq,
            timestamp_ms: h.timestamp_ms,
            by: by_of(change),
        });
    }
    match frame.payload {
        Payload::Records { producer, .. } => {
            core.last_timestamp_ms = h.timestamp_ms;
            if let Some(p) = producer {
                let w = ProducerWrite {
                    id: p.id,
                    seq: p.seq,
                    first_seq: h.first_seq,
                    count: h.record_count,
                    token: h.fencing_token,
                    timestamp_ms: h.timestamp_ms,
                    group,
                };
                core.carried
                    .apply_producer(w, producers_max)
                    .map(drop)
                    .map_err(|r| Misfit::Carried(format!("producer {}: {r:?}", p.id)))?;
            }
        }
        Payload::Config(c) => core.config = c,
        _ => {}
    }
    if change == Change::Delete {
        core.config = StreamConfig::default();
        core.carried = Carried::default();
    }
    Ok(())
}

/// A records frame whose effect is already in the state (a relocated copy,
/// or an original the checkpoint covers): it must lie below the stream's
/// `next_seq`, or the log has records the state never counted.
pub(crate) fn check_known(core: &Core, frame: &Frame<'_>) -> Result<(), Misfit> {
    let end = frame.header.first_seq + frame.header.record_count as u64;
    if end > core.fence.next_seq || frame.header.fencing_token > core.fence.highest_token {
        return Err(Misfit::Beyond {
            end,
            next_seq: core.fence.next_seq,
        });
    }
    Ok(())
}
