//! Segment files: naming, and the in-memory list readers look frames up in.

use crate::codec::{encode_segment_header, SegmentHeader};
use crate::storage::{Storage, StorageFile};
use bytes::Bytes;
use std::sync::Arc;

/// Digits in a segment file name: zero-padded so names sort in log order.
const SEGMENT_NAME_DIGITS: usize = 20;
const SEGMENT_SUFFIX: &str = ".seg";

/// The file name of segment `index`: 20 digits and `.seg`.
pub fn segment_name(index: u64) -> String {
    format!(
        "{index:0width$}{SEGMENT_SUFFIX}",
        width = SEGMENT_NAME_DIGITS
    )
}

/// The index in a segment file name, or `None` for any other name.
pub fn parse_segment_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(SEGMENT_SUFFIX)?;
    if digits.len() != SEGMENT_NAME_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// One segment as readers see it.
#[derive(Clone)]
pub struct Segment {
    pub index: u64,
    pub name: String,
    pub file: Arc<dyn StorageFile>,
    /// The format version its header names: which frames it may hold.
    pub version: u32,
    /// The id of the first group written to it (from its header).
    pub first_group_id: u64,
    /// Set once the segment is sealed (no more appends): a memory map of the
    /// whole file. The active segment is read with positional reads.
    pub sealed: Option<Bytes>,
}

/// All segments, oldest first; indices ascend, with gaps where segments
/// were deleted.
#[derive(Clone, Default)]
pub struct Segments {
    pub list: Vec<Segment>,
}

impl Segments {
    pub fn get(&self, index: u64) -> Option<&Segment> {
        let i = self.list.binary_search_by_key(&index, |s| s.index).ok()?;
        self.list.get(i)
    }

    pub fn active(&self) -> &Segment {
        self.list.last().expect("there is always an active segment")
    }

    /// The indices, for a MANIFEST.
    pub fn indices(&self) -> impl Iterator<Item = u64> + '_ {
        self.list.iter().map(|s| s.index)
    }
}

/// Creates a segment and makes it and its directory entry durable before
/// anything may depend on it.
pub fn create_segment(
    storage: &dyn Storage,
    index: u64,
    first_group_id: u64,
) -> std::io::Result<Arc<dyn StorageFile>> {
    let name = segment_name(index);
    let file = storage.create(&name)?;
    let header = encode_segment_header(&SegmentHeader::new(index, first_group_id));
    file.write_all_at(&header, 0)?;
    file.sync_data()?;
    if !mutated!(SkipDirSync) {
        storage.sync_dir()?;
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_in_log_order_and_round_trip() {
        assert_eq!(segment_name(7), "00000000000000000007.seg");
        assert!(segment_name(9) < segment_name(10));
        assert_eq!(parse_segment_name(&segment_name(123)), Some(123));
        assert_eq!(parse_segment_name("7.seg"), None);
        assert_eq!(parse_segment_name("0000000000000000000a.seg"), None);
        assert_eq!(parse_segment_name("00000000000000000007.log"), None);
    }
}
