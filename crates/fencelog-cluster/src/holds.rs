//! Rebalancing holds: per shard, until when the rebalancer leaves it
//! alone (a manual transfer or removal, a peer's notice, the rebalancer's
//! own back-off after a lost campaign). The node owns them, since every
//! node answers the `member` RPC's `Hold`; the admin side sets and reads
//! them.

use crate::ids::ShardId;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The longest hold, whatever a notice asks for: as long as the longest
/// admin operation may run.
pub const HOLD_MAX: Duration = Duration::from_secs(600);
/// The holds are held for one lookup or update.
const UNPOISONED: &str = "no thread panics while holding the rebalancing holds";

/// Per shard, until when the rebalancer leaves it alone.
pub struct Holds {
    until: Mutex<Vec<Option<Instant>>>,
}

impl Holds {
    pub(crate) fn new(shards: u32) -> Holds {
        Holds {
            until: Mutex::new(vec![None; shards as usize]),
        }
    }

    /// Keeps the rebalancer off shard `k` for `d` (a longer hold wins).
    pub fn hold(&self, k: ShardId, d: Duration) {
        let until = Instant::now() + d.min(HOLD_MAX);
        let mut holds = self.until.lock().expect(UNPOISONED);
        if let Some(slot) = holds.get_mut(k as usize) {
            *slot = Some(slot.map_or(until, |u| u.max(until)));
        }
    }

    /// Whether the rebalancer must leave shard `k` alone now.
    pub fn held(&self, k: ShardId) -> bool {
        let holds = self.until.lock().expect(UNPOISONED);
        holds
            .get(k as usize)
            .copied()
            .flatten()
            .is_some_and(|u| Instant::now() < u)
    }
}
