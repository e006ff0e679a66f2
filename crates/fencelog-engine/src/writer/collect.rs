//! Taking a group off the queue: the one routine both the normal loop and
//! the shutdown drain use, so every group has the same bounds.

use super::protocol::{Msg, Reply, Request};
use crate::config::Config;
use std::collections::VecDeque;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// Longest gap between arrivals the writer waits out while callers of the
/// last group come back (see [`collect`]).
const LINGER_QUIET_MAX: Duration = Duration::from_micros(30);

/// The bounds of one group (one `sync_data`).
#[derive(Clone, Copy)]
pub(super) struct GroupLimits {
    requests_max: usize,
    bytes_max: usize,
}

impl GroupLimits {
    pub(super) fn of(config: &Config) -> Self {
        GroupLimits {
            requests_max: config.group_requests_max,
            bytes_max: config.group_bytes_max,
        }
    }
}

/// What the last group tells the next one about who is coming back.
pub(super) struct Linger {
    /// Requests already queued when the last group was answered, plus the
    /// ones it answered.
    pub expected: usize,
    /// How long the last group's commit took: bounds the wait.
    pub last_sync: Duration,
}

impl Linger {
    /// Nobody is expected: take what is queued and stop. The first group,
    /// and the shutdown drain (the queue is closed, nobody can come back).
    pub(super) const NONE: Linger = Linger {
        expected: 0,
        last_sync: Duration::ZERO,
    };
}

/// The messages met while collecting that are not writes: answered after
/// the group they arrived with is committed (so everything queued before
/// them is in it or an earlier group).
#[derive(Default)]
pub(super) struct Control {
    pub shutdown: Vec<oneshot::Sender<()>>,
    pub flushes: Vec<Reply<()>>,
}

/// Moves `first` (if any) and then whatever is queued into `group`, until
/// the group is full or the queue is empty and nobody is worth waiting for.
/// Shutdown and flush requests met on the way go to `control`.
///
/// Callers answered by the last group usually send again within
/// microseconds. Starting the sync before they arrive splits them into two
/// cohorts that alternate, each waiting two syncs per append. So wait for
/// them, but only while they keep arriving (a quiet gap ends it) and never
/// long next to a sync.
pub(super) fn collect(
    rx: &mut mpsc::Receiver<Msg>,
    first: Option<Msg>,
    limits: GroupLimits,
    linger: &Linger,
    group: &mut VecDeque<Request>,
    control: &mut Control,
) {
    assert!(group.is_empty(), "the last group was not committed");
    let mut bytes = 0;
    let full = |group: &VecDeque<Request>, bytes: usize| {
        group.len() >= limits.requests_max || bytes >= limits.bytes_max
    };
    if let Some(m) = first {
        take(m, group, &mut bytes, control);
    }
    let quiet = (linger.last_sync / 16).min(LINGER_QUIET_MAX);
    let give_up = Instant::now() + linger.last_sync / 2;
    let mut last_arrival = Instant::now();
    while !full(group, bytes) {
        match rx.try_recv() {
            Ok(m) => {
                take(m, group, &mut bytes, control);
                last_arrival = Instant::now();
            }
            Err(mpsc::error::TryRecvError::Empty)
                if group.len() < linger.expected
                    && last_arrival.elapsed() < quiet
                    && Instant::now() < give_up =>
            {
                std::thread::yield_now()
            }
            Err(_) => break,
        }
    }
}

fn take(m: Msg, group: &mut VecDeque<Request>, bytes: &mut usize, control: &mut Control) {
    match m {
        Msg::Write(r) => {
            *bytes += r.encoded_len();
            group.push_back(r);
        }
        Msg::Shutdown(tx) => control.shutdown.push(tx),
        Msg::Flush(tx) => control.flushes.push(tx),
    }
}
