//! The audit log: structured lines an operator can alert on, target
//! `fencelog::audit`.
//!
//! - Every accepted token rise (`event="token_raised"`, by an append or a
//!   fence) at info, with the principal, the stream, the old and the new
//!   token.
//! - Stale rejections, aggregated (`event="stale_rejected"`): per stream and
//!   principal at most one line per [`STALE_WINDOW`], with how many were
//!   refused since the last line and the lowest and highest token
//!   presented. A flood of stale writers so costs a map update per
//!   rejection instead of a formatted line; the exact count is the
//!   engine's `fencelog_stale_rejections_total`.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub const TARGET: &str = "fencelog::audit";

/// At most one stale-rejection line per stream and principal this often.
pub const STALE_WINDOW: Duration = Duration::from_secs(1);
/// Streams × principals tracked at once; past it, rejections of new pairs
/// are counted under principal `*`, stream `*`, so the map never grows
/// past it.
pub const STALE_PAIRS_MAX: usize = 4096;
/// A pair with nothing to report for this long is forgotten.
const STALE_IDLE: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy)]
struct Window {
    /// Rejections since the last line.
    count: u64,
    lowest: u64,
    highest: u64,
    /// The stream's highest accepted token at the latest rejection.
    stream_highest: u64,
    last_line: Option<Instant>,
    last_seen: Instant,
}

impl Window {
    fn new(now: Instant) -> Self {
        Window {
            count: 0,
            lowest: u64::MAX,
            highest: 0,
            stream_highest: 0,
            last_line: None,
            last_seen: now,
        }
    }

    fn due(&self, now: Instant) -> bool {
        self.last_line
            .is_none_or(|t| now.duration_since(t) >= STALE_WINDOW)
    }
}

/// principal → stream → window.
type Windows = HashMap<Box<str>, HashMap<Box<str>, Window>>;

/// The aggregated stale-rejection log.
#[derive(Debug, Default)]
pub struct Audit {
    stale: Mutex<Windows>,
    pairs: Mutex<usize>,
}

/// A lock that a panic elsewhere does not poison for everyone after.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn emit(principal: &str, stream: &str, w: &Window) {
    tracing::info!(
        target: TARGET,
        event = "stale_rejected",
        principal,
        stream,
        count = w.count,
        lowest_presented_token = w.lowest,
        highest_presented_token = w.highest,
        highest_token = w.stream_highest,
        "stale fencing tokens rejected"
    );
}

/// One stale rejection counted in its pair's window, and the window's
/// line written when it is due.
fn count(
    principal: &str,
    stream: &str,
    w: &mut Window,
    presented: u64,
    highest: u64,
    now: Instant,
) {
    w.count += 1;
    w.lowest = w.lowest.min(presented);
    w.highest = w.highest.max(presented);
    w.stream_highest = highest;
    w.last_seen = now;
    if w.due(now) {
        emit(principal, stream, w);
        *w = Window {
            last_line: Some(now),
            ..Window::new(now)
        };
    }
}

impl Audit {
    /// A stale rejection of `presented` (the stream is at `highest`).
    pub fn stale(&self, principal: &str, stream: &str, presented: u64, highest: u64) {
        let now = Instant::now();
        let mut map = lock(&self.stale);
        // A known pair is found with one lookup per level and counted in
        // place; only a new pair is entered (`entry` wants owned keys, two
        // allocations, which a flood of one pair would pay every time).
        if let Some(w) = map.get_mut(principal).and_then(|m| m.get_mut(stream)) {
            return count(principal, stream, w, presented, highest, now);
        }
        let (principal, stream) = self.slot(principal, stream);
        let w = map
            .entry(principal.into())
            .or_default()
            .entry(stream.into())
            .or_insert_with(|| Window::new(now));
        count(principal, stream, w, presented, highest, now);
    }

    /// The key to count a pair not in the map under: the pair itself while
    /// there is room, else an overflow entry.
    fn slot<'a>(&self, principal: &'a str, stream: &'a str) -> (&'a str, &'a str) {
        let mut pairs = lock(&self.pairs);
        if *pairs < STALE_PAIRS_MAX {
            *pairs += 1;
            return (principal, stream);
        }
        ("*", "*")
    }

    /// Writes the lines that are due and forgets idle pairs; run every
    /// [`STALE_WINDOW`] so the end of a burst is reported too.
    pub fn flush(&self) {
        let now = Instant::now();
        let mut map = lock(&self.stale);
        let mut forgotten = 0;
        for (principal, streams) in map.iter_mut() {
            streams.retain(|stream, w| {
                if w.count > 0 && w.due(now) {
                    emit(principal, stream, w);
                    *w = Window {
                        last_line: Some(now),
                        last_seen: w.last_seen,
                        ..Window::new(now)
                    };
                }
                let keep = w.count > 0 || now.duration_since(w.last_seen) < STALE_IDLE;
                forgotten += usize::from(!keep);
                keep
            });
        }
        map.retain(|_, streams| !streams.is_empty());
        let mut pairs = lock(&self.pairs);
        *pairs = pairs.saturating_sub(forgotten);
    }

    /// An accepted write raised the stream's token from `old` to `new`.
    pub fn token_raised(&self, principal: &str, stream: &str, op: &str, old: u64, new: u64) {
        debug_assert!(new > old);
        tracing::info!(
            target: TARGET,
            event = "token_raised",
            principal,
            stream,
            op,
            old_token = old,
            new_token = new,
            "fencing token raised"
        );
    }

    /// Rejections counted but not yet written.
    #[cfg(test)]
    pub fn pending(&self) -> u64 {
        lock(&self.stale)
            .values()
            .flat_map(|m| m.values())
            .map(|w| w.count)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_writes_one_line_then_counts_until_the_window_ends() {
        let audit = Audit::default();
        for t in 1..=100 {
            audit.stale("w", "s", t, 200);
        }
        // The first rejection was written at once, the other 99 wait.
        assert_eq!(audit.pending(), 99);
        audit.flush();
        assert_eq!(audit.pending(), 99, "the window has not ended yet");
        let map = lock(&audit.stale);
        let w = map["w"]["s"];
        assert_eq!((w.lowest, w.highest, w.stream_highest), (2, 100, 200));
    }

    #[test]
    fn pairs_past_the_limit_share_an_overflow_entry() {
        let audit = Audit::default();
        for i in 0..STALE_PAIRS_MAX + 10 {
            audit.stale("p", &format!("s{i}"), 1, 2);
        }
        let map = lock(&audit.stale);
        let entries: usize = map.values().map(|m| m.len()).sum();
        assert_eq!(
            entries,
            STALE_PAIRS_MAX + 1,
            "the pairs and the overflow entry"
        );
    }
}
