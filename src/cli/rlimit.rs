//! The file-descriptor limit: raised from soft to hard at start (a
//! default soft limit of 1024 or 256 is far below what a server with many
//! connections needs, while the hard limit is usually much higher), and
//! the default connection cap derived from it, so that accepting
//! connections never takes the descriptors the writer needs to roll a
//! segment.

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// Descriptors kept out of the connection cap for the log (one per
/// segment file), the log's writer, the listeners and the runtime.
pub const RESERVED_FDS: u64 = 64;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; returns the soft
/// limit before and after (the caller logs both in its startup line).
pub fn raise_nofile() -> (u64, u64) {
    let limit = getrlimit(Resource::Nofile);
    let soft = limit.current.unwrap_or(u64::MAX);
    let Some(hard) = limit.maximum else {
        return (soft, soft);
    };
    if soft >= hard {
        return (soft, soft);
    }
    match setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(hard),
            maximum: Some(hard),
        },
    ) {
        Ok(()) => (soft, hard),
        Err(e) => {
            tracing::warn!(soft, hard, error = %e, "cannot raise the file-descriptor limit");
            (soft, soft)
        }
    }
}

/// The default `--connections-max`: half the descriptors, after the
/// reserve, so segments have room to grow into the other half.
pub fn connections_for(nofile: u64) -> usize {
    let usable = nofile.saturating_sub(RESERVED_FDS) / 2;
    usable.clamp(16, 1 << 20) as usize
}
