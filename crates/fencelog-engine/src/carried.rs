//! Per-stream state that format v2 defines for idempotent producers and
//! fenced cursors. The writer plans producer appends and
//! cursor commits with it, recovery replays their frames with the same
//! functions (so the state a restart rebuilds, LRU order and evictions
//! included, is the state the writer had), and the checkpoint carries it,
//! so compaction never loses it. Pure.

use crate::fence::{self, FenceState, ProducerCheck, Refusal, Verdict};
use fencelog_types::{CursorEntry, ProducerEntry};

/// Producers one stream remembers; beyond it the least recently used is
/// evicted and the stream's producer token floor rises past its token
/// (ARCHITECTURE.md, invariant 13: exactly once for idempotent producers).
pub const PRODUCERS_PER_STREAM_DEFAULT: usize = 1024;
/// Hard cap: the checkpoint's producer count is a u16.
pub const PRODUCERS_PER_STREAM_LIMIT: usize = u16::MAX as usize;
/// Cursors one stream keeps (the checkpoint's cursor count is a u16).
pub const CURSORS_PER_STREAM_MAX: usize = u16::MAX as usize;

/// A stream's producers and cursors.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Carried {
    /// Unknown producers with a token below it are fenced.
    pub producer_token_floor: u64,
    pub producers: Vec<ProducerEntry>,
    pub cursors: Vec<CursorEntry>,
}

/// One idempotent append as a records frame carries it.
#[derive(Debug, Clone, Copy)]
pub struct ProducerWrite<'a> {
    pub id: &'a str,
    pub seq: u64,
    pub first_seq: u64,
    pub count: u32,
    pub token: u64,
    pub timestamp_ms: u64,
    pub group: u64,
}

impl Carried {
    pub fn is_empty(&self) -> bool {
        self.producer_token_floor == 0 && self.producers.is_empty() && self.cursors.is_empty()
    }

    pub fn producer(&self, id: &str) -> Option<&ProducerEntry> {
        self.producers.iter().find(|p| p.id == id)
    }

    /// What the fence rule needs to know of producer `id`.
    pub fn producer_check(&self, id: &str, seq: u64) -> ProducerCheck {
        ProducerCheck {
            seq,
            last: self.producer(id).map(|p| p.producer_seq),
            floor: self.producer_token_floor,
        }
    }

    /// Applies an idempotent append the rule accepted (rules 2 and 5),
    /// evicting the least recently used producer beyond `max`. Returns how
    /// many it evicted.
    pub fn apply_producer(&mut self, w: ProducerWrite<'_>, max: usize) -> Result<u64, Refusal> {
        let check = self.producer_check(w.id, w.seq);
        if fence::check_producer(check, w.token)? == Verdict::Duplicate {
            // The writer answers a duplicate without writing it.
            return Err(Refusal::ProducerSeqStale { last: w.seq });
        }
        let last_seq = w.first_seq + w.count as u64 - 1;
        match self.producers.iter_mut().find(|p| p.id == w.id) {
            // In place: the id is already there (no allocation per append).
            Some(p) => {
                p.producer_seq = w.seq;
                p.first_seq = w.first_seq;
                p.last_seq = last_seq;
                p.token = w.token;
                p.timestamp_ms = w.timestamp_ms;
                p.last_used_group = w.group;
            }
            None => self.producers.push(ProducerEntry {
                id: w.id.to_string(),
                producer_seq: w.seq,
                first_seq: w.first_seq,
                last_seq,
                token: w.token,
                timestamp_ms: w.timestamp_ms,
                last_used_group: w.group,
            }),
        }
        let mut evicted_count = 0;
        while self.producers.len() > max.max(1) {
            let lru = (0..self.producers.len())
                .min_by_key(|&i| (self.producers[i].last_used_group, i))
                .expect("not empty");
            let evicted = self.producers.remove(lru);
            // Every write the evicted producer applied carried a token ≤
            // its last one, so no retry of it can pass the floor.
            let floor = if mutated!(EvictWithoutFloor) {
                0
            } else {
                evicted.token + 1
            };
            self.producer_token_floor = self.producer_token_floor.max(floor);
            evicted_count += 1;
        }
        Ok(evicted_count)
    }

    /// Applies a cursor commit the cursor rule accepts.
    pub fn apply_cursor(
        &mut self,
        state: FenceState,
        name: &str,
        token: u64,
        seq: u64,
        timestamp_ms: u64,
    ) -> Result<CursorEntry, Refusal> {
        let current = self
            .cursors
            .iter()
            .find(|c| c.name == name)
            .map(|c| (c.token, c.seq))
            .map(|(t, seq)| (t, if mutated!(CursorBackwards) { 0 } else { seq }));
        fence::check_cursor(state, current, token, seq)?;
        let entry = CursorEntry {
            name: name.to_string(),
            token,
            seq,
            timestamp_ms,
        };
        let full = self.cursors.len() >= CURSORS_PER_STREAM_MAX;
        match self.cursors.iter_mut().find(|c| c.name == name) {
            Some(c) => *c = entry.clone(),
            None if !full => self.cursors.push(entry.clone()),
            None => {
                return Err(Refusal::CursorOutOfRange {
                    seq,
                    next_seq: state.next_seq,
                })
            }
        }
        Ok(entry)
    }

    /// The lowest cursor position, for retention that respects cursors.
    pub fn min_cursor(&self) -> Option<u64> {
        self.cursors.iter().map(|c| c.seq).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(id: &str, seq: u64, token: u64, group: u64) -> ProducerWrite<'_> {
        ProducerWrite {
            id,
            seq,
            first_seq: seq * 10,
            count: 2,
            token,
            timestamp_ms: 5,
            group,
        }
    }

    #[test]
    fn producers_continue_their_sequence_and_evict_the_least_recently_used() {
        let mut c = Carried::default();
        c.apply_producer(w("a", 0, 3, 1), 2).unwrap();
        c.apply_producer(w("b", 5, 4, 2), 2).unwrap();
        assert_eq!(
            c.apply_producer(w("a", 0, 3, 3), 2),
            Err(Refusal::ProducerSeqStale { last: 0 })
        );
        assert_eq!(
            c.apply_producer(w("a", 2, 3, 3), 2),
            Err(Refusal::ProducerSeqGap { expected: 1 })
        );
        c.apply_producer(w("a", 1, 5, 3), 2).unwrap();
        assert_eq!(c.producer("a").unwrap().last_seq, 11);
        // A third producer evicts b (used at group 2), raising the floor
        // past b's token.
        c.apply_producer(w("c", 9, 6, 4), 2).unwrap();
        assert!(c.producer("b").is_none());
        assert_eq!(c.producer_token_floor, 5);
        // b comes back with its old token: fenced; a new one above: fine.
        assert_eq!(
            c.apply_producer(w("b", 6, 4, 5), 2),
            Err(Refusal::ProducerFenced { floor: 5 })
        );
        c.apply_producer(w("d", 0, 7, 5), 2).unwrap();
    }

    #[test]
    fn cursors_follow_the_cursor_rule() {
        let s = FenceState {
            exists: true,
            highest_token: 9,
            next_seq: 10,
            ..Default::default()
        };
        let mut c = Carried::default();
        c.apply_cursor(s, "r", 2, 4, 1).unwrap();
        assert_eq!(
            c.apply_cursor(s, "r", 1, 8, 2),
            Err(Refusal::Stale {
                presented: 1,
                highest: 2,
                next_seq: 4
            })
        );
        assert_eq!(
            c.apply_cursor(s, "r", 2, 3, 2),
            Err(Refusal::Stale {
                presented: 2,
                highest: 2,
                next_seq: 4
            })
        );
        c.apply_cursor(s, "r", 3, 1, 3).unwrap();
        c.apply_cursor(s, "q", 1, 7, 3).unwrap();
        assert_eq!(c.min_cursor(), Some(1));
        assert!(c.apply_cursor(s, "q", 1, 11, 3).is_err());
    }
}
