//! A stream's own retention settings: each limit unset (the server's
//! default applies), unlimited, or a limit; and whether retention stops at
//! cursors.

/// One retention setting of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Retention {
    /// Not set on the stream: the server's default applies.
    #[default]
    Default,
    /// Set, without a limit.
    Unlimited,
    /// Set to this limit (seconds or bytes).
    Limit(u64),
}

impl Retention {
    /// The limit in force, with the server's `default` where unset.
    pub fn effective(self, default: Option<u64>) -> Option<u64> {
        match self {
            Retention::Default => default,
            Retention::Unlimited => None,
            Retention::Limit(v) => Some(v),
        }
    }
}

/// A stream's retention settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamConfig {
    /// Records older than this many seconds are trimmed.
    pub retention_age_s: Retention,
    /// Records are trimmed from the front while the stream holds more bytes.
    pub retention_bytes: Retention,
    /// Retention never trims past a cursor.
    pub respect_cursors: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_in_force_is_the_stream_s_unless_unset() {
        assert_eq!(Retention::Default.effective(Some(60)), Some(60));
        assert_eq!(Retention::Default.effective(None), None);
        assert_eq!(Retention::Unlimited.effective(Some(60)), None);
        assert_eq!(Retention::Limit(5).effective(Some(60)), Some(5));
        assert_eq!(Retention::Limit(5).effective(None), Some(5));
    }
}
