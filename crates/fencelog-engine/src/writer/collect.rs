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

/// Waits for the message that starts the next group: polls the queue for
/// up to `spin` (yielding the core between looks), then sleeps until one
/// comes. `None` once the queue is closed and empty.
///
/// Why poll: the callers the last group answered usually send again
/// within one round trip, and a sleeping writer costs each of them a
/// wake-up (see [`crate::config::WRITER_SPIN_US_DEFAULT`]).
pub(super) fn next_request(rx: &mut mpsc::Receiver<Msg>, spin: Duration) -> Option<Msg> {
    if !spin.is_zero() {
        let until = Instant::now() + spin;
        loop {
            match rx.try_recv() {
                Ok(m) => return Some(m),
                Err(mpsc::error::TryRecvError::Disconnected) => return None,
                Err(mpsc::error::TryRecvError::Empty) if Instant::now() < until => {
                    std::thread::yield_now()
                }
                Err(mpsc::error::TryRecvError::Empty) => break,
            }
        }
    }
    rx.blocking_recv()
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn msg() -> Msg {
        Msg::Shutdown(oneshot::channel().0)
    }

    /// Far longer than any test takes: a wait this long means the poll
    /// missed what it should have seen.
    const LONG: Duration = Duration::from_secs(60);

    #[test]
    fn a_queued_request_is_taken_whatever_the_spin() {
        for spin in [Duration::ZERO, Duration::from_micros(200), LONG] {
            let (tx, mut rx) = mpsc::channel(4);
            tx.try_send(msg()).unwrap();
            let started = Instant::now();
            assert!(matches!(
                next_request(&mut rx, spin),
                Some(Msg::Shutdown(_))
            ));
            assert!(
                started.elapsed() < LONG / 2,
                "{spin:?}: polled past a queued request"
            );
        }
    }

    #[test]
    fn a_closed_empty_queue_ends_the_wait_at_once() {
        for spin in [Duration::ZERO, LONG] {
            let (tx, mut rx) = mpsc::channel::<Msg>(4);
            drop(tx);
            let started = Instant::now();
            assert!(next_request(&mut rx, spin).is_none());
            assert!(
                started.elapsed() < LONG / 2,
                "{spin:?}: polled a closed queue"
            );
        }
    }

    #[test]
    fn a_request_sent_while_polling_or_while_asleep_is_taken() {
        // A long spin: the request comes while the writer polls. A spin of
        // a nanosecond: it almost always comes once the writer sleeps.
        for spin in [LONG, Duration::from_nanos(1)] {
            let (tx, mut rx) = mpsc::channel(4);
            let go = Arc::new(std::sync::Barrier::new(2));
            let sender = {
                let go = go.clone();
                std::thread::spawn(move || {
                    go.wait();
                    tx.blocking_send(msg()).unwrap();
                    tx
                })
            };
            go.wait();
            let started = Instant::now();
            assert!(matches!(
                next_request(&mut rx, spin),
                Some(Msg::Shutdown(_))
            ));
            assert!(started.elapsed() < LONG / 2, "{spin:?}");
            drop(sender.join().unwrap());
            // The sender is gone and nothing is queued: the end.
            assert!(next_request(&mut rx, spin).is_none());
        }
    }
}
