//! Frames of the active segment that some reader holds right now, shared:
//! concurrent readers of one frame (a thousand live tails) get one copy of
//! it instead of each reading its own. The read path ([`crate::reader`])
//! fills it; the engine's shared state holds it.

use bytes::Bytes;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// Most frames the cache tracks; past it, new frames are read privately.
const FRAME_CACHE_ENTRIES_MAX: usize = 4096;

/// Frames of the active segment by (segment, offset), held weakly: an
/// entry lives exactly as long as some reader holds the frame's bytes, so
/// the cache shares copies without keeping any. Frames never change once
/// published (segments are append-only, indices never reused), so a copy
/// read once is right for every later reader.
#[derive(Default)]
pub(crate) struct FrameCache {
    frames: HashMap<(u64, u64), Weak<Vec<u8>>>,
}

/// A frame's bytes shared by its readers.
struct SharedFrame(Arc<Vec<u8>>);

impl AsRef<[u8]> for SharedFrame {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl FrameCache {
    /// The frame at `key`: a live copy if a reader holds one, else `read`
    /// (under the cache's lock, so concurrent readers of a new frame wait
    /// for one read instead of each making their own copy).
    pub(crate) fn get_or_read<E>(
        &mut self,
        key: (u64, u64),
        read: impl FnOnce() -> Result<Vec<u8>, E>,
    ) -> Result<Bytes, E> {
        if let Some(live) = self.frames.get(&key).and_then(|w| w.upgrade()) {
            return Ok(Bytes::from_owner(SharedFrame(live)));
        }
        let frame = Arc::new(read()?);
        if self.frames.len() >= FRAME_CACHE_ENTRIES_MAX {
            self.frames.retain(|_, w| w.strong_count() > 0);
        }
        if self.frames.len() < FRAME_CACHE_ENTRIES_MAX {
            self.frames.insert(key, Arc::downgrade(&frame));
        }
        Ok(Bytes::from_owner(SharedFrame(frame)))
    }
}
