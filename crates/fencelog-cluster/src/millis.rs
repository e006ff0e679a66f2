//! Durations and the wall clock in whole milliseconds, as entries, member
//! commands and the engine's retention carry them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `d` in whole milliseconds; a duration past `u64::MAX` ms (584 million
/// years) saturates instead of wrapping.
pub(crate) fn of(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The wall clock in milliseconds since 1970 (0 for a clock set before it).
pub(crate) fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, of)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_milliseconds_and_saturation() {
        assert_eq!(of(Duration::from_micros(2_999)), 2);
        assert_eq!(of(Duration::MAX), u64::MAX);
        assert!(unix_now() > 1_600_000_000_000);
    }
}
