//! One connection per peer for every shard's Raft RPCs.
//!
//! Each RPC over HTTP cost a request of its own: reqwest building and
//! parsing it (its URL included), hyper and the router on the peer, and
//! a wake-up on each side; with S shards and one entry in flight each,
//! that is S × (AppendEntries + the commit heartbeat that follows it) per
//! round per follower. A peer stream is one long-lived connection per
//! peer, opened by an HTTP upgrade (`GET /_cluster/raft/stream`,
//! `Upgrade: fencelog-raft-v1`, the peer secret like any `/_cluster/`
//! path, TLS when the nodes serve it) and then carrying the frames of
//! [`super::frame`]: requests from every shard, answers in any order.
//! The writer task takes every frame waiting and writes them at once, so
//! the RPCs of shards that replicate together share a syscall and a
//! wake-up on each side.
//!
//! Outcomes are the HTTP transport's ([`TransportError`]): a call that
//! could not be queued on a live connection (connection refused, the
//! upgrade refused, the queue full until the deadline) is `Unreachable`,
//! nothing having been sent; once queued, anything but an answer is
//! `Lost` (the peer may have acted on it). A connection ends on a write
//! or read error, a protocol error, the peer closing it, or [`STALL`]
//! with a call outstanding and nothing read (a partition: TCP alone would
//! hold it for minutes); its waiting calls are then `Lost`, and the next
//! call opens a new one. A call that times out alone (a slow RPC, a busy
//! peer) is `Lost` and leaves the connection to every other call.
//! A peer without the route (an older node during a rolling upgrade)
//! answers 404 to the upgrade: its RPCs go over HTTP for
//! [`HTTP_FALLBACK`], then the stream is tried again. Snapshots always go
//! over HTTP (one large body would hold up every shard's RPCs behind it).

use super::frame::{put_request, take_answer, Answer};
use crate::ids::{NodeId, ShardId};
use crate::rpc::{RpcKind, TransportError};
use bytes::BytesMut;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{timeout_at, Instant};

/// The route of the upgrade.
pub const STREAM_PATH: &str = "/_cluster/raft/stream";
/// The `Upgrade` protocol a peer stream speaks.
pub const UPGRADE_PROTOCOL: &str = "fencelog-raft-v1";
/// Most bytes of a frame after its length field: the largest RPC body
/// the HTTP route takes, plus the header.
pub const FRAME_BYTES_MAX: usize = crate::rpc::RPC_BODY_BYTES_MAX + 64;
/// How long RPCs to a peer without the stream route go over HTTP before
/// the stream is tried again.
pub const HTTP_FALLBACK: Duration = Duration::from_secs(60);
/// A connection that has read nothing for this long while a call was
/// outstanding is closed as stalled (a partition: TCP alone would hold it
/// for minutes). Far above a busy peer's slowest answer (every peer
/// answers each shard's heartbeat every 100 ms), so a slow peer costs
/// timeouts, not a reconnect.
pub const STALL: Duration = Duration::from_secs(2);
/// Longest an upgrade may take (connect, TLS, the 101).
pub const UPGRADE_TIMEOUT: Duration = Duration::from_secs(3);
/// Frames waiting for a connection's writer (per peer).
const QUEUE_FRAMES_MAX: usize = 1024;
/// The streams' locks (the slot map, a slot's fallback time, a
/// connection's waiting calls) are held for one lookup or update, none of
/// which panics.
const UNPOISONED: &str = "no thread panics while holding a peer stream's lock";
/// Most bytes the writer gathers into one write.
pub(crate) const WRITE_BYTES_MAX: usize = 1 << 20;
/// Bytes reserved ahead of each read.
pub(crate) const READ_CHUNK_BYTES: usize = 64 << 10;

type Waiter = oneshot::Sender<Result<Vec<u8>, TransportError>>;

/// The node's peer streams, one per peer, opened on first use.
pub(crate) struct PeerStreams {
    upgrader: Arc<Upgrader>,
    slots: Mutex<HashMap<NodeId, Arc<Slot>>>,
}

/// What opening a stream needs.
struct Upgrader {
    client: reqwest::Client,
    peer_secret: Option<String>,
    scheme: &'static str,
}

/// One peer's connection (if open) and its HTTP fallback.
struct Slot {
    addr: String,
    /// Held while a connection is opened (by the opening task, so a call
    /// that gives up does not cancel it).
    link: Arc<tokio::sync::Mutex<Option<Link>>>,
    http_until: Mutex<Option<Instant>>,
}

/// What became of opening a stream.
enum Opened {
    Link(Link),
    /// The peer has no stream route: use HTTP.
    NoStream,
}

impl PeerStreams {
    /// Streams opened with `client` (the HTTP transport's pool and TLS).
    pub(crate) fn new(
        client: reqwest::Client,
        peer_secret: Option<String>,
        scheme: &'static str,
    ) -> PeerStreams {
        PeerStreams {
            upgrader: Arc::new(Upgrader {
                client,
                peer_secret,
                scheme,
            }),
            slots: Mutex::default(),
        }
    }

    /// One RPC over `target`'s stream; `None`: the peer has no stream
    /// route, send it over HTTP.
    pub(crate) async fn call(
        &self,
        target: NodeId,
        addr: &str,
        shard: ShardId,
        kind: RpcKind,
        body: &[u8],
        timeout: Duration,
    ) -> Option<Result<Vec<u8>, TransportError>> {
        let deadline = Instant::now() + timeout;
        let slot = self.slot(target, addr);
        if slot
            .http_until
            .lock()
            .expect(UNPOISONED)
            .is_some_and(|t| Instant::now() < t)
        {
            return None;
        }
        let link = match timeout_at(deadline, self.link(&slot, target)).await {
            Ok(Ok(Opened::Link(l))) => l,
            Ok(Ok(Opened::NoStream)) => {
                *slot.http_until.lock().expect(UNPOISONED) = Some(Instant::now() + HTTP_FALLBACK);
                return None;
            }
            Ok(Err(e)) => return Some(Err(e)),
            Err(_) => {
                let m = format!("node {target}: no peer stream within {timeout:?}");
                return Some(Err(TransportError::Unreachable(m)));
            }
        };
        Some(link.call(shard, kind, body, deadline, timeout).await)
    }

    /// `target`'s slot; a new one when its address changed.
    fn slot(&self, target: NodeId, addr: &str) -> Arc<Slot> {
        let mut slots = self.slots.lock().expect(UNPOISONED);
        let fresh = || {
            Arc::new(Slot {
                addr: addr.to_string(),
                link: Arc::default(),
                http_until: Mutex::new(None),
            })
        };
        let slot = slots.entry(target).or_insert_with(fresh);
        if slot.addr != addr {
            *slot = fresh();
        }
        slot.clone()
    }

    /// The slot's live link, or a new one. The opening runs as a task of
    /// its own, bounded by [`UPGRADE_TIMEOUT`]: openraft drops a call at
    /// one heartbeat interval, and an upgrade on a busy node can take
    /// longer than that; cancelled with each call, no connection would
    /// ever open.
    async fn link(&self, slot: &Slot, target: NodeId) -> Result<Opened, TransportError> {
        let mut held = slot.link.clone().lock_owned().await;
        if let Some(l) = held.as_ref().filter(|l| !l.shared.is_closed()) {
            return Ok(Opened::Link(l.clone()));
        }
        *held = None;
        let upgrader = self.upgrader.clone();
        let addr = slot.addr.clone();
        let opening = tokio::spawn(async move {
            let upgraded = tokio::time::timeout(UPGRADE_TIMEOUT, upgrader.upgrade(target, &addr));
            let io = match upgraded.await {
                Ok(Ok(Some(io))) => io,
                Ok(Ok(None)) => return Ok(Opened::NoStream),
                Ok(Err(e)) => return Err(e),
                Err(_) => {
                    let m = format!("node {target}: no upgrade within {UPGRADE_TIMEOUT:?}");
                    return Err(TransportError::Unreachable(m));
                }
            };
            let link = Link::start(target, io);
            *held = Some(link.clone());
            Ok(Opened::Link(link))
        });
        opening.await.unwrap_or_else(|e| {
            let m = format!("node {target}: opening the stream failed: {e}");
            Err(TransportError::Unreachable(m))
        })
    }
}

impl Upgrader {
    /// The upgraded connection; `None` when the peer has no such route.
    /// Every failure here is `Unreachable`: no RPC has been sent yet.
    async fn upgrade(
        &self,
        target: NodeId,
        addr: &str,
    ) -> Result<Option<reqwest::Upgraded>, TransportError> {
        let unreachable = |m: String| TransportError::Unreachable(format!("node {target}: {m}"));
        let url = format!("{}://{addr}{STREAM_PATH}", self.scheme);
        let mut req = self
            .client
            .get(url)
            .header(reqwest::header::CONNECTION, "upgrade")
            .header(reqwest::header::UPGRADE, UPGRADE_PROTOCOL);
        if let Some(secret) = &self.peer_secret {
            req = req.header(crate::http_auth::PEER_SECRET_HEADER, secret);
        }
        let resp = req.send().await.map_err(|e| unreachable(e.to_string()))?;
        let status = resp.status();
        if status == reqwest::StatusCode::SWITCHING_PROTOCOLS {
            let io = resp
                .upgrade()
                .await
                .map_err(|e| unreachable(e.to_string()))?;
            return Ok(Some(io));
        }
        if matches!(
            status,
            reqwest::StatusCode::NOT_FOUND | reqwest::StatusCode::METHOD_NOT_ALLOWED
        ) {
            return Ok(None);
        }
        let text = resp.text().await.unwrap_or_default();
        Err(unreachable(format!(
            "the peer stream's upgrade was answered {status}: {text}"
        )))
    }
}

/// The handle to one open connection. The last handle's drop closes it.
#[derive(Clone)]
struct Link {
    tx: mpsc::Sender<Vec<u8>>,
    shared: Arc<Shared>,
    _owner: Arc<Owner>,
}

/// Closes the connection when the last [`Link`] goes.
struct Owner(Arc<Shared>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.close("the transport let go of the stream".into());
    }
}

/// What a connection's reader, writer and callers share.
struct Shared {
    target: NodeId,
    /// `None` once closed, so no call can start waiting on a connection
    /// that will never answer it.
    waiting: Mutex<Option<Waiting>>,
    next_id: AtomicU64,
    closed: watch::Sender<bool>,
}

/// The calls of an open connection.
#[derive(Default)]
struct Waiting {
    /// Each call's answer, by id.
    calls: HashMap<u64, Waiter>,
    /// Since when a call has been outstanding with nothing read: set by a
    /// call when unset, cleared by each answer (set again if calls are
    /// left). A call that gave up (openraft's own timeout drops the
    /// future at one heartbeat interval) leaves it set: its frame was sent.
    unanswered_since: Option<Instant>,
}

impl Shared {
    fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }

    /// Ends the connection: every waiting call is `Lost`.
    fn close(&self, why: String) {
        let Some(waiting) = self.waiting.lock().expect(UNPOISONED).take() else {
            return;
        };
        tracing::debug!(node = self.target, %why, "peer stream closed");
        self.closed.send_replace(true);
        for (_, w) in waiting.calls {
            let m = format!("node {}: {why}", self.target);
            let _ = w.send(Err(TransportError::Lost(m)));
        }
    }

    /// Registers a call; `false` once the connection is closed.
    fn wait_for(&self, id: u64, waiter: Waiter) -> bool {
        let mut held = self.waiting.lock().expect(UNPOISONED);
        let Some(w) = held.as_mut() else {
            return false;
        };
        w.calls.insert(id, waiter);
        w.unanswered_since.get_or_insert_with(Instant::now);
        true
    }

    fn answer(&self, a: Answer) {
        let waiter = match self.waiting.lock().expect(UNPOISONED).as_mut() {
            Some(w) => {
                let waiter = w.calls.remove(&a.id);
                w.unanswered_since = (!w.calls.is_empty()).then(Instant::now);
                waiter
            }
            None => None,
        };
        let Some(w) = waiter else {
            // Its caller gave up and went.
            return;
        };
        let target = self.target;
        let _ = w.send(match a.outcome {
            Ok(bytes) => Ok(bytes.to_vec()),
            Err(why) => Err(TransportError::Lost(format!(
                "node {target} answered: {why}"
            ))),
        });
    }

    fn forget(&self, id: u64) {
        if let Some(w) = self.waiting.lock().expect(UNPOISONED).as_mut() {
            w.calls.remove(&id);
        }
    }

    /// A call has been outstanding for [`STALL`] with nothing read.
    fn stalled(&self) -> bool {
        let held = self.waiting.lock().expect(UNPOISONED);
        let since = held.as_ref().and_then(|w| w.unanswered_since);
        since.is_some_and(|t| t.elapsed() >= STALL)
    }
}

/// Forgets a call whose future is dropped before its answer (openraft
/// wraps each AppendEntries in its own timeout).
struct Forget<'a>(&'a Shared, u64);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.0.forget(self.1);
    }
}

impl Link {
    fn start<I: AsyncRead + AsyncWrite + Send + 'static>(target: NodeId, io: I) -> Link {
        let (tx, rx) = mpsc::channel(QUEUE_FRAMES_MAX);
        let shared = Arc::new(Shared {
            target,
            waiting: Mutex::new(Some(Waiting::default())),
            next_id: AtomicU64::new(1),
            closed: watch::channel(false).0,
        });
        let (r, w) = tokio::io::split(io);
        let s = shared.clone();
        let closed = shared.closed.subscribe();
        tokio::spawn(async move {
            if let Err(why) = write_frames(rx, w, closed).await {
                s.close(why);
            }
        });
        tokio::spawn(read_answers(shared.clone(), r));
        Link {
            tx,
            _owner: Arc::new(Owner(shared.clone())),
            shared,
        }
    }

    async fn call(
        &self,
        shard: ShardId,
        kind: RpcKind,
        body: &[u8],
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError> {
        let s = &self.shared;
        let target = s.target;
        let id = s.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        if !s.wait_for(id, tx) {
            let m = format!("node {target}: the peer stream closed before the call was sent");
            return Err(TransportError::Unreachable(m));
        }
        let _forget = Forget(s, id);
        let mut frame = Vec::new();
        put_request(&mut frame, id, shard, kind, body);
        if !matches!(timeout_at(deadline, self.tx.send(frame)).await, Ok(Ok(()))) {
            // Not queued: the writer never saw it.
            let m = format!("node {target}: the peer stream took no call within {timeout:?}");
            return Err(TransportError::Unreachable(m));
        }
        match timeout_at(deadline, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(TransportError::Lost(format!(
                "node {target}: stream closed"
            ))),
            Err(_) => Err(TransportError::Lost(format!(
                "node {target}: no answer within {timeout:?}"
            ))),
        }
    }
}

/// Writes the frames from `rx` until it ends or `closed` fires, every
/// frame waiting gathered into one write (up to [`WRITE_BYTES_MAX`]).
/// Shared with the serving side. An error is why the connection ended.
pub(crate) async fn write_frames<W: AsyncWrite + Unpin>(
    mut rx: mpsc::Receiver<Vec<u8>>,
    mut w: W,
    mut closed: watch::Receiver<bool>,
) -> Result<(), String> {
    let mut gathered = Vec::new();
    loop {
        let first = tokio::select! {
            f = rx.recv() => f,
            _ = closed.wait_for(|c| *c) => None,
        };
        let Some(first) = first else { break };
        let single;
        let out: &[u8] = if rx.is_empty() {
            single = first;
            &single
        } else {
            gathered.clear();
            gathered.extend_from_slice(&first);
            while gathered.len() < WRITE_BYTES_MAX {
                match rx.try_recv() {
                    Ok(f) => gathered.extend_from_slice(&f),
                    Err(_) => break,
                }
            }
            &gathered
        };
        w.write_all(out)
            .await
            .map_err(|e| format!("writing: {e}"))?;
        if gathered.capacity() > 2 * WRITE_BYTES_MAX {
            // One huge frame passed through: do not keep its buffer.
            gathered = Vec::new();
        }
    }
    let _ = w.shutdown().await;
    Ok(())
}

/// Reads answers until the connection ends, handing each to its caller.
async fn read_answers<R: AsyncRead + Unpin>(s: Arc<Shared>, mut r: R) {
    let mut closed = s.closed.subscribe();
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut watchdog = tokio::time::interval(STALL / 4);
    watchdog.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        loop {
            match take_answer(&mut buf, FRAME_BYTES_MAX) {
                Ok(Some(a)) => s.answer(a),
                Ok(None) => break,
                Err(e) => return s.close(format!("a bad answer frame: {e}")),
            }
        }
        if buf.capacity() - buf.len() < READ_CHUNK_BYTES / 4 {
            buf.reserve(READ_CHUNK_BYTES);
        }
        let n = tokio::select! {
            n = r.read_buf(&mut buf) => n,
            _ = closed.wait_for(|c| *c) => return,
            _ = watchdog.tick() => {
                if s.stalled() {
                    return s.close(format!("nothing read for {STALL:?} with calls out: stalled"));
                }
                continue;
            }
        };
        match n {
            Ok(0) => return s.close("the peer closed the stream".into()),
            Ok(_) => {}
            Err(e) => return s.close(format!("reading: {e}")),
        }
    }
}
