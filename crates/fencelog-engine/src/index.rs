//! Per-stream index from seq to the frame that holds it.
//!
//! One packed `u64` per batch frame: `segment (20 bits) | offset (32 bits) |
//! record_count - 1 (12 bits)`, plus one `u64` checkpoint (the first seq) for
//! every 64 frames after the first 64, so a lookup is a binary search plus a
//! scan of at most 64 counts. That is 8 bytes per batch and at most 8.125
//! bytes per record (single-record batches), well under the 16 bytes per
//! record budget. A stream with one batch keeps its entry inline and
//! allocates nothing.

/// Frames per checkpoint: the scan length a lookup pays after its binary
/// search, traded against 8 bytes of checkpoint per this many frames.
const CHECKPOINT_FRAMES: usize = 64;

pub const SEGMENT_BITS: u32 = 20;
pub const OFFSET_BITS: u32 = 32;
pub const COUNT_BITS: u32 = 12;
/// Segments an index entry can name.
pub const SEGMENT_INDEX_MAX: u64 = (1 << SEGMENT_BITS) - 1;
/// Frames must start below this offset within their segment.
pub const FRAME_OFFSET_MAX: u64 = (1 << OFFSET_BITS) - 1;

/// Where one batch frame lives and how many records it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameLoc {
    pub segment: u64,
    pub offset: u64,
    pub first_seq: u64,
    pub record_count: u32,
}

/// A stream's frames. Most streams in a many-stream workload hold one batch,
/// so one entry lives inline and costs no allocation; a vector appears at
/// the second.
#[derive(Debug, Default)]
enum Entries {
    #[default]
    Empty,
    One(u64),
    Many(Vec<u64>),
}

impl Entries {
    fn as_slice(&self) -> &[u64] {
        match self {
            Entries::Empty => &[],
            Entries::One(e) => std::slice::from_ref(e),
            Entries::Many(v) => v,
        }
    }

    /// Changes `self` in place, never through a moved-out state, so no
    /// point inside can leave the entries half gone.
    fn push(&mut self, e: u64) {
        match self {
            Entries::Empty => *self = Entries::One(e),
            Entries::One(first) => *self = Entries::Many(vec![*first, e]),
            Entries::Many(v) => v.push(e),
        }
    }
}

#[derive(Debug, Default)]
pub struct StreamIndex {
    entries: Entries,
    /// `checkpoints[k]` is the first seq of `entries[(k + 1) * CHECKPOINT_FRAMES]`;
    /// the first block's checkpoint is `base_seq`, so a stream with at most
    /// one block allocates none.
    checkpoints: Vec<u64>,
    /// Seq of the first indexed record.
    base_seq: u64,
    /// Seq after the last indexed record.
    end_seq: u64,
}

fn pack(segment: u64, offset: u64, count: u32) -> u64 {
    assert!(
        segment <= SEGMENT_INDEX_MAX,
        "segment {segment} over index range"
    );
    assert!(
        offset <= FRAME_OFFSET_MAX,
        "offset {offset} over index range"
    );
    assert!((1..=1 << COUNT_BITS).contains(&count), "count {count}");
    (segment << (OFFSET_BITS + COUNT_BITS)) | (offset << COUNT_BITS) | (count as u64 - 1)
}

fn unpack(e: u64) -> (u64, u64, u32) {
    let count = (e & ((1 << COUNT_BITS) - 1)) as u32 + 1;
    let offset = (e >> COUNT_BITS) & FRAME_OFFSET_MAX;
    let segment = e >> (OFFSET_BITS + COUNT_BITS);
    (segment, offset, count)
}

impl StreamIndex {
    /// Records a batch frame. Frames must arrive in seq order without gaps.
    ///
    /// Every check comes before the first change, so a push that panics
    /// leaves the index as it was: the writer's panic handling relies on
    /// that (readers keep using the index afterwards).
    pub fn push(&mut self, first_seq: u64, segment: u64, offset: u64, count: u32) {
        let len = self.entries.as_slice().len();
        if len > 0 {
            assert_eq!(first_seq, self.end_seq(), "index gap");
        }
        let entry = pack(segment, offset, count);
        if len == 0 {
            self.base_seq = first_seq;
        } else if len.is_multiple_of(CHECKPOINT_FRAMES) {
            self.checkpoints.push(first_seq);
        }
        self.entries.push(entry);
        self.end_seq = first_seq + count as u64;
    }

    /// The seq after the last indexed record.
    pub fn end_seq(&self) -> u64 {
        self.end_seq
    }

    /// The frame holding `seq`, if indexed.
    pub fn find(&self, seq: u64) -> Option<(usize, FrameLoc)> {
        let entries = self.entries.as_slice();
        if entries.is_empty() || seq >= self.end_seq || seq < self.base_seq {
            return None;
        }
        let block = self.checkpoints.partition_point(|&s| s <= seq);
        let mut first = match block {
            0 => self.base_seq,
            b => self.checkpoints[b - 1],
        };
        let start = block * CHECKPOINT_FRAMES;
        for (i, &e) in entries[start..].iter().enumerate() {
            let (segment, offset, count) = unpack(e);
            if seq < first + count as u64 {
                return Some((
                    start + i,
                    FrameLoc {
                        segment,
                        offset,
                        first_seq: first,
                        record_count: count,
                    },
                ));
            }
            first += count as u64;
        }
        unreachable!("checkpoints and entries disagree")
    }

    /// The frame after entry `i`, given the location of entry `i`.
    pub fn next_after(&self, i: usize, loc: &FrameLoc) -> Option<(usize, FrameLoc)> {
        let e = *self.entries.as_slice().get(i + 1)?;
        let (segment, offset, count) = unpack(e);
        Some((
            i + 1,
            FrameLoc {
                segment,
                offset,
                first_seq: loc.first_seq + loc.record_count as u64,
                record_count: count,
            },
        ))
    }

    /// Heap bytes held, for memory accounting.
    #[cfg(test)]
    pub fn heap_bytes(&self) -> usize {
        let entries = match &self.entries {
            Entries::Many(v) => v.capacity(),
            _ => 0,
        };
        (entries + self.checkpoints.capacity()) * 8
    }

    /// Gives back spare capacity after recovery has built the index.
    pub fn shrink_to_fit(&mut self) {
        if let Entries::Many(v) = &mut self.entries {
            v.shrink_to_fit();
        }
        self.checkpoints.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_round_trip_at_the_edges() {
        for &(s, o, c) in &[
            (0, 0, 1),
            (SEGMENT_INDEX_MAX, FRAME_OFFSET_MAX, 4096),
            (3, 12345, 17),
        ] {
            assert_eq!(unpack(pack(s, o, c)), (s, o, c));
        }
    }

    #[test]
    fn finds_every_seq_across_many_checkpoints() {
        let mut idx = StreamIndex::default();
        let mut seq = 0;
        let mut frames = Vec::new();
        for i in 0..1000u64 {
            let count = (i % 7 + 1) as u32;
            idx.push(seq, i / 100, i * 1000, count);
            frames.push((seq, count, i));
            seq += count as u64;
        }
        assert_eq!(idx.end_seq(), seq);
        for &(first, count, i) in &frames {
            for s in first..first + count as u64 {
                let (at, loc) = idx.find(s).unwrap();
                assert_eq!(at as u64, i);
                assert_eq!(
                    loc,
                    FrameLoc {
                        segment: i / 100,
                        offset: i * 1000,
                        first_seq: first,
                        record_count: count
                    }
                );
            }
        }
        assert_eq!(idx.find(seq), None);
        let (at, loc) = idx.find(0).unwrap();
        let (at2, loc2) = idx.next_after(at, &loc).unwrap();
        assert_eq!((at2, loc2.first_seq, loc2.record_count), (1, 1, 2));
    }

    #[test]
    fn one_batch_allocates_nothing_and_checkpoints_start_after_a_block() {
        let mut idx = StreamIndex::default();
        assert_eq!(idx.find(0), None);
        idx.push(0, 0, 40, 3);
        assert_eq!(idx.heap_bytes(), 0);
        assert_eq!(idx.find(2).unwrap().1.offset, 40);
        for i in 1..64u64 {
            idx.push(idx.end_seq(), 0, 40 + i, 1);
        }
        assert!(idx.checkpoints.is_empty());
        idx.push(idx.end_seq(), 1, 7, 1);
        assert_eq!(idx.checkpoints, vec![66]);
        assert_eq!(
            idx.find(66).unwrap().1,
            FrameLoc {
                segment: 1,
                offset: 7,
                first_seq: 66,
                record_count: 1
            }
        );
        assert_eq!(idx.find(65).unwrap().1.offset, 40 + 63);
    }

    #[test]
    #[should_panic(expected = "index gap")]
    fn gaps_are_refused() {
        let mut idx = StreamIndex::default();
        idx.push(0, 0, 0, 1);
        idx.push(2, 0, 0, 1);
    }

    /// A push that panics changes nothing: readers go on using the index
    /// after a writer panic (see `writer::Writer::commit_guarded`).
    #[test]
    fn a_refused_push_leaves_the_index_as_it_was() {
        let mut idx = StreamIndex::default();
        for i in 0..64u64 {
            idx.push(i, 0, 40 + i, 1);
        }
        let refused = [
            (65, 0, 0, 1),                     // gap
            (64, SEGMENT_INDEX_MAX + 1, 0, 1), // segment out of range
            (64, 0, FRAME_OFFSET_MAX + 1, 1),  // offset out of range
            (64, 0, 0, 0),                     // no records
        ];
        for (first_seq, segment, offset, count) in refused {
            let pushed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                idx.push(first_seq, segment, offset, count)
            }));
            assert!(pushed.is_err());
            assert_eq!(idx.end_seq(), 64);
            assert!(idx.checkpoints.is_empty());
            assert_eq!(idx.find(64), None);
            assert_eq!(idx.find(63).unwrap().1.offset, 40 + 63);
        }
        idx.push(64, 1, 7, 1);
        assert_eq!(idx.checkpoints, vec![64]);
        assert_eq!(idx.find(64).unwrap().1.segment, 1);
    }
}
