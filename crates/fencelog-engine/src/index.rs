//! Per-stream index from seq to the frame that holds it.
//!
//! One 12-byte entry per batch frame: a packed `u64` — segment (low 20
//! bits of it) | offset (32 bits) | record_count − 1 (12 bits) — and a
//! `u32` holding the frame's length (27 bits, frames are at most 64 MiB)
//! and the segment's 5 high bits, so a log can roll 2^25 times. Plus one
//! `u64` checkpoint (the first seq) for every 64 frames, so a lookup is a
//! binary search plus a scan of at most 64 counts. The frame lengths give
//! exact live bytes per stream and per segment without touching the disk.
//! A stream with one batch keeps its entry inline and allocates nothing.
//!
//! Trimming drops entries from the front in amortised O(dropped): a head
//! index moves forward, and the dropped entries are compacted away once
//! they are at least half of the vector.

/// Frames per checkpoint: the scan length a lookup pays after its binary
/// search, traded against 8 bytes of checkpoint per this many frames.
const CHECKPOINT_FRAMES: usize = 64;

const SEGMENT_LOW_BITS: u32 = 20;
const SEGMENT_HIGH_BITS: u32 = 5;
pub const OFFSET_BITS: u32 = 32;
pub const COUNT_BITS: u32 = 12;
const LEN_BITS: u32 = 27;
/// Segments an index entry can name.
pub const SEGMENT_INDEX_MAX: u64 = (1 << (SEGMENT_LOW_BITS + SEGMENT_HIGH_BITS)) - 1;
/// Frames must start below this offset within their segment.
pub const FRAME_OFFSET_MAX: u64 = (1 << OFFSET_BITS) - 1;
/// Longest frame an entry can describe.
pub const FRAME_LEN_MAX: u64 = (1 << LEN_BITS) - 1;

/// Where one batch frame lives and how many records it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameLoc {
    pub segment: u64,
    pub offset: u64,
    pub first_seq: u64,
    pub record_count: u32,
    /// Bytes of the whole frame.
    pub len: u32,
}

impl FrameLoc {
    /// The seq after its last record.
    pub fn end_seq(&self) -> u64 {
        self.first_seq + self.record_count as u64
    }
}

/// One packed entry: 12 bytes, 4-byte aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, packed(4))]
struct Entry {
    lo: u64,
    hi: u32,
}

fn pack(segment: u64, offset: u64, count: u32, len: u32) -> Entry {
    assert!(
        segment <= SEGMENT_INDEX_MAX,
        "segment {segment} over index range"
    );
    assert!(
        offset <= FRAME_OFFSET_MAX,
        "offset {offset} over index range"
    );
    assert!((1..=1 << COUNT_BITS).contains(&count), "count {count}");
    assert!(len as u64 <= FRAME_LEN_MAX, "frame length {len}");
    let low = segment & ((1 << SEGMENT_LOW_BITS) - 1);
    let high = u32::try_from(segment >> SEGMENT_LOW_BITS)
        .expect("asserted segment <= SEGMENT_INDEX_MAX: 5 high bits");
    Entry {
        lo: (low << (OFFSET_BITS + COUNT_BITS)) | (offset << COUNT_BITS) | (count as u64 - 1),
        hi: high << LEN_BITS | len,
    }
}

fn unpack(e: Entry) -> (u64, u64, u32, u32) {
    let (lo, hi) = (e.lo, e.hi);
    let count = (lo & ((1 << COUNT_BITS) - 1)) as u32 + 1;
    let offset = (lo >> COUNT_BITS) & FRAME_OFFSET_MAX;
    let segment =
        (lo >> (OFFSET_BITS + COUNT_BITS)) | ((hi >> LEN_BITS) as u64) << SEGMENT_LOW_BITS;
    (segment, offset, count, hi & ((1 << LEN_BITS) - 1))
}

/// A stream's frames. Most streams in a many-stream workload hold one batch,
/// so one entry lives inline and costs no allocation; a vector appears at
/// the second.
#[derive(Debug, Default)]
enum Entries {
    #[default]
    Empty,
    One(Entry),
    Many(Vec<Entry>),
}

impl Entries {
    fn as_slice(&self) -> &[Entry] {
        match self {
            Entries::Empty => &[],
            Entries::One(e) => std::slice::from_ref(e),
            Entries::Many(v) => v,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [Entry] {
        match self {
            Entries::Empty => &mut [],
            Entries::One(e) => std::slice::from_mut(e),
            Entries::Many(v) => v,
        }
    }

    /// Changes `self` in place, never through a moved-out state, so no
    /// point inside can leave the entries half gone.
    fn push(&mut self, e: Entry) {
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
    /// Entries before this position are trimmed away (not yet compacted).
    head: usize,
    /// `checkpoints[k]` is the first seq of `entries[(k + 1) * CHECKPOINT_FRAMES]`
    /// (positions in the vector, head or not).
    checkpoints: Vec<u64>,
    /// Seq of the first record of `entries[head]`.
    base_seq: u64,
    /// Seq after the last indexed record.
    end_seq: u64,
    /// Sum of the frame lengths of the live entries.
    bytes: u64,
}

impl StreamIndex {
    fn live(&self) -> &[Entry] {
        &self.entries.as_slice()[self.head..]
    }

    /// Records a batch frame. Frames must arrive in seq order without gaps.
    ///
    /// Every check comes before the first change, so a push that panics
    /// leaves the index as it was: the writer's panic handling relies on
    /// that (readers keep using the index afterwards).
    pub fn push(&mut self, first_seq: u64, segment: u64, offset: u64, count: u32, len: u32) {
        let len_all = self.entries.as_slice().len();
        if self.head < len_all {
            assert_eq!(first_seq, self.end_seq, "index gap");
        } else {
            assert!(first_seq >= self.end_seq, "index goes back");
        }
        let entry = pack(segment, offset, count, len);
        if self.head == len_all {
            // Empty (or everything trimmed): start afresh at this frame.
            self.clear();
            self.base_seq = first_seq;
        } else if len_all.is_multiple_of(CHECKPOINT_FRAMES) {
            self.checkpoints.push(first_seq);
        }
        self.entries.push(entry);
        self.end_seq = first_seq + count as u64;
        self.bytes += len as u64;
    }

    /// Forgets every entry (a tombstone, or a trim past the end).
    pub fn clear(&mut self) {
        self.entries = Entries::Empty;
        self.head = 0;
        self.checkpoints = Vec::new();
        self.bytes = 0;
        self.base_seq = self.end_seq;
    }

    /// Drops every entry whose records all lie below `first_seq`; returns
    /// the entries dropped (for live-byte accounting).
    pub fn trim_to(&mut self, first_seq: u64) -> Vec<FrameLoc> {
        let mut dropped = Vec::new();
        while let Some((_, loc)) = self.first() {
            if loc.end_seq() > first_seq {
                break;
            }
            self.head += 1;
            self.base_seq = loc.end_seq();
            self.bytes -= loc.len as u64;
            dropped.push(loc);
        }
        if self.live().is_empty() {
            let end = self.end_seq;
            self.clear();
            self.end_seq = end;
            self.base_seq = end;
        } else if self.head >= CHECKPOINT_FRAMES && self.head * 2 >= self.entries.as_slice().len() {
            self.compact();
        }
        dropped
    }

    /// Moves the live entries to the front and rebuilds the checkpoints.
    fn compact(&mut self) {
        let live: Vec<Entry> = self.live().to_vec();
        let (base, end, bytes) = (self.base_seq, self.end_seq, self.bytes);
        self.clear();
        self.end_seq = base;
        for e in live {
            let (segment, offset, count, len) = unpack(e);
            let first = self.end_seq;
            self.push(first, segment, offset, count, len);
        }
        debug_assert_eq!((self.end_seq, self.bytes), (end, bytes));
        if let Entries::Many(v) = &mut self.entries {
            v.shrink_to_fit();
        }
    }

    /// The seq after the last indexed record.
    #[cfg(test)]
    pub fn end_seq(&self) -> u64 {
        self.end_seq
    }

    /// The seq of the first indexed record.
    #[cfg(test)]
    pub fn base_seq(&self) -> u64 {
        self.base_seq
    }

    /// Bytes of the indexed frames.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Indexed frames.
    pub fn len(&self) -> usize {
        self.live().len()
    }

    /// The first indexed frame.
    pub fn first(&self) -> Option<(usize, FrameLoc)> {
        let e = *self.live().first()?;
        let (segment, offset, record_count, len) = unpack(e);
        Some((
            self.head,
            FrameLoc {
                segment,
                offset,
                first_seq: self.base_seq,
                record_count,
                len,
            },
        ))
    }

    /// The frame holding `seq`, if indexed.
    pub fn find(&self, seq: u64) -> Option<(usize, FrameLoc)> {
        let entries = self.entries.as_slice();
        if self.live().is_empty() || seq >= self.end_seq || seq < self.base_seq {
            return None;
        }
        let block = self.checkpoints.partition_point(|&s| s <= seq);
        let mut start = block * CHECKPOINT_FRAMES;
        let mut first = match block {
            0 => self.base_seq,
            b => self.checkpoints[b - 1],
        };
        if start < self.head {
            start = self.head;
            first = self.base_seq;
        }
        for (i, &e) in entries[start..].iter().enumerate() {
            let (segment, offset, count, len) = unpack(e);
            if seq < first + count as u64 {
                return Some((
                    start + i,
                    FrameLoc {
                        segment,
                        offset,
                        first_seq: first,
                        record_count: count,
                        len,
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
        let (segment, offset, count, len) = unpack(e);
        Some((
            i + 1,
            FrameLoc {
                segment,
                offset,
                first_seq: loc.end_seq(),
                record_count: count,
                len,
            },
        ))
    }

    /// Points the frame starting at `first_seq` at a copy of it, if it
    /// still points at (`old_segment`, `old_offset`). Returns whether it
    /// did.
    pub fn repoint(&mut self, first_seq: u64, old: (u64, u64), new: (u64, u64)) -> bool {
        let Some((i, loc)) = self.find(first_seq) else {
            return false;
        };
        if loc.first_seq != first_seq || (loc.segment, loc.offset) != old {
            return false;
        }
        let entry = pack(new.0, new.1, loc.record_count, loc.len);
        self.entries.as_mut_slice()[i] = entry;
        true
    }

    /// Every indexed frame, in seq order.
    pub fn iter(&self) -> impl Iterator<Item = FrameLoc> + '_ {
        let mut first = self.base_seq;
        self.live().iter().map(move |&e| {
            let (segment, offset, record_count, len) = unpack(e);
            let loc = FrameLoc {
                segment,
                offset,
                first_seq: first,
                record_count,
                len,
            };
            first += record_count as u64;
            loc
        })
    }

    /// Heap bytes held, for memory accounting.
    #[cfg(test)]
    pub fn heap_bytes(&self) -> usize {
        let entries = match &self.entries {
            Entries::Many(v) => v.capacity() * std::mem::size_of::<Entry>(),
            _ => 0,
        };
        entries + self.checkpoints.capacity() * 8
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
#[path = "index_tests.rs"]
mod tests;
