//! What is live where: one walk over every stream's index gives the live
//! bytes of each segment. Exact by construction — an index entry is what
//! makes a frame live — so a segment with no entry holds nothing anyone
//! can read, and costs no counting on the append path.

use crate::locks;
use crate::segment::Segment;
use crate::shared::Shared;
use std::collections::HashMap;

/// A sealed segment as of the walk.
pub(super) struct Sealed {
    pub segment: Segment,
    /// Bytes of the file.
    pub len: u64,
    /// The last group in it.
    pub last_group: u64,
    /// Bytes of the live frames in it.
    pub live: u64,
}

/// The segments as of one walk.
pub(super) struct Live {
    /// Every segment but the active one, oldest first.
    pub sealed: Vec<Sealed>,
    /// Live bytes everywhere, the active segment included.
    pub total: u64,
}

/// Walks every index. The segment list is read first: frames only ever
/// leave a sealed segment (trims, deletes, relocation to the active one),
/// so a sealed segment the walk finds nothing in holds nothing live from
/// then on.
pub(super) fn walk(shared: &Shared) -> Live {
    let list = locks::read(&shared.segments).list.clone();
    let mut live: HashMap<u64, u64> = HashMap::new();
    shared.each_stream(|_, s| {
        let inner = locks::lock(&s.inner);
        for loc in inner.index.iter() {
            *live.entry(loc.segment).or_default() += loc.len as u64;
        }
    });
    let sealed = list
        .windows(2)
        .map(|w| Sealed {
            len: w[0].sealed.as_ref().map_or(0, |v| v.len() as u64),
            last_group: w[1].first_group_id - 1,
            live: live.get(&w[0].index).copied().unwrap_or(0),
            segment: w[0].clone(),
        })
        .collect();
    Live {
        sealed,
        total: live.values().sum(),
    }
}

impl Live {
    /// Sealed segments without a live frame.
    pub(super) fn deletable(&self) -> Vec<&Sealed> {
        self.sealed.iter().filter(|s| s.live == 0).collect()
    }

    pub(super) fn publish_gauges(&self, shared: &Shared) {
        let m = &shared.metrics;
        m.live_bytes.set(self.total as i64);
        m.disk_bytes.set(shared.disk_bytes() as i64);
        m.segments
            .set(locks::read(&shared.segments).list.len() as i64);
    }
}
