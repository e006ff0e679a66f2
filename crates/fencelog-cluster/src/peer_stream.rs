//! One connection per peer for every shard's Raft RPCs (issue 14).
//!
//! Each RPC over HTTP cost a request of its own: reqwest building and
//! parsing it (its URL included), hyper and the router on the peer, and
//! a wake-up on each side; with S shards and one entry in flight each,
//! that is S × (AppendEntries + the commit heartbeat that follows it) per
//! round per follower. A peer stream is one long-lived connection per
//! peer, opened by an HTTP upgrade (`GET /_cluster/raft/stream`,
//! `Upgrade: fencelog-raft-v1`, the peer secret like any `/_cluster/`
//! path, TLS when the nodes serve it) and then carrying the frames of
//! [`crate::peer_frame`]: requests from every shard, answers in any order.
//! The writer task takes every frame waiting and writes them at once, so
//! the RPCs of shards that replicate together share a syscall and a
//! wake-up on each side.
//!
//! Outcomes are the HTTP transport's ([`TransportError`]): a call that
//! could not be queued on a live connection (connection refused, the
//! upgrade refused, the queue full until the deadline) is `Unreachable`,
//! nothing having been sent; once queued, anything but an answer is
//! `Lost` (the peer may have acted on it). A connection ends on a write
//! or read error, a protocol error, the peer closing it, or a call timing
//! out with no answer of any call read since it was queued (a stalled
//! connection, e.g. a partition: TCP alone would hold it for minutes); its
//! waiting calls are then `Lost`, and the next call opens a new one.
//! A peer without the route (an older node during a rolling upgrade)
//! answers 404 to the upgrade: its RPCs go over HTTP for
//! [`HTTP_FALLBACK`], then the stream is tried again. Snapshots always go
//! over HTTP (one large body would hold up every shard's RPCs behind it).

use crate::network::{RpcKind, TransportError};
use crate::peer_frame::{put_request, take_answer, Answer};
use crate::types::{NodeId, ShardId};
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
pub const FRAME_BYTES_MAX: usize = crate::http::RPC_BODY_BYTES_MAX + 64;
/// How long RPCs to a peer without the stream route go over HTTP before
/// the stream is tried again.
pub const HTTP_FALLBACK: Duration = Duration::from_secs(60);
/// Frames waiting for a connection's writer (per peer).
const QUEUE_FRAMES_MAX: usize = 1024;
/// Most bytes the writer gathers into one write.
pub(crate) const WRITE_BYTES_MAX: usize = 1 << 20;
/// Bytes reserved ahead of each read.
pub(crate) const READ_CHUNK_BYTES: usize = 64 << 10;

type Waiter = oneshot::Sender<Result<Vec<u8>, TransportError>>;

/// The node's peer streams, one per peer, opened on first use.
pub(crate) struct PeerStreams {
    client: reqwest::Client,
    peer_secret: Option<String>,
    scheme: &'static str,
    slots: Mutex<HashMap<NodeId, Arc<Slot>>>,
}

/// One peer's connection (if open) and its HTTP fallback.
struct Slot {
    addr: String,
    link: tokio::sync::Mutex<Option<Link>>,
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
            client,
            peer_secret,
            scheme,
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
            .unwrap()
            .is_some_and(|t| Instant::now() < t)
        {
            return None;
        }
        let link = match timeout_at(deadline, self.link(&slot, target)).await {
            Ok(Ok(Opened::Link(l))) => l,
            Ok(Ok(Opened::NoStream)) => {
                *slot.http_until.lock().unwrap() = Some(Instant::now() + HTTP_FALLBACK);
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
        let mut slots = self.slots.lock().unwrap();
        let fresh = || {
            Arc::new(Slot {
                addr: addr.to_string(),
                link: tokio::sync::Mutex::new(None),
                http_until: Mutex::new(None),
            })
        };
        let slot = slots.entry(target).or_insert_with(fresh);
        if slot.addr != addr {
            *slot = fresh();
        }
        slot.clone()
    }

    /// The slot's live link, or a new one.
    async fn link(&self, slot: &Slot, target: NodeId) -> Result<Opened, TransportError> {
        let mut held = slot.link.lock().await;
        if let Some(l) = held.as_ref().filter(|l| !l.shared.is_closed()) {
            return Ok(Opened::Link(l.clone()));
        }
        *held = None;
        let io = match self.upgrade(target, &slot.addr).await? {
            Some(io) => io,
            None => return Ok(Opened::NoStream),
        };
        let link = Link::start(target, io);
        *held = Some(link.clone());
        Ok(Opened::Link(link))
    }

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
    /// Calls waiting for their answer; `None` once closed, so no call can
    /// start waiting on a connection that will never answer it.
    waiting: Mutex<Option<HashMap<u64, Waiter>>>,
    next_id: AtomicU64,
    /// Answers read so far: a timed-out call tells a slow RPC on a live
    /// connection from a stalled connection by it.
    answers: AtomicU64,
    closed: watch::Sender<bool>,
}

impl Shared {
    fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }

    /// Ends the connection: every waiting call is `Lost`.
    fn close(&self, why: String) {
        let Some(waiting) = self.waiting.lock().unwrap().take() else {
            return;
        };
        tracing::debug!(node = self.target, %why, "peer stream closed");
        self.closed.send_replace(true);
        for (_, w) in waiting {
            let m = format!("node {}: {why}", self.target);
            let _ = w.send(Err(TransportError::Lost(m)));
        }
    }

    fn answer(&self, a: Answer) {
        self.answers.fetch_add(1, Ordering::Relaxed);
        let waiter = match self.waiting.lock().unwrap().as_mut() {
            Some(w) => w.remove(&a.id),
            None => None,
        };
        let Some(w) = waiter else {
            // Its caller timed out and went.
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
        if let Some(w) = self.waiting.lock().unwrap().as_mut() {
            w.remove(&id);
        }
    }
}

impl Link {
    fn start<I: AsyncRead + AsyncWrite + Send + 'static>(target: NodeId, io: I) -> Link {
        let (tx, rx) = mpsc::channel(QUEUE_FRAMES_MAX);
        let shared = Arc::new(Shared {
            target,
            waiting: Mutex::new(Some(HashMap::new())),
            next_id: AtomicU64::new(1),
            answers: AtomicU64::new(0),
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
        match s.waiting.lock().unwrap().as_mut() {
            Some(w) => w.insert(id, tx),
            None => {
                let m = format!("node {target}: the peer stream closed before the call was sent");
                return Err(TransportError::Unreachable(m));
            }
        };
        let mut frame = Vec::new();
        put_request(&mut frame, id, shard, kind, body);
        let seen = s.answers.load(Ordering::Relaxed);
        if !matches!(timeout_at(deadline, self.tx.send(frame)).await, Ok(Ok(()))) {
            // Not queued: the writer never saw it.
            s.forget(id);
            let m = format!("node {target}: the peer stream took no call within {timeout:?}");
            return Err(TransportError::Unreachable(m));
        }
        match timeout_at(deadline, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(TransportError::Lost(format!(
                "node {target}: stream closed"
            ))),
            Err(_) => {
                s.forget(id);
                if s.answers.load(Ordering::Relaxed) == seen {
                    s.close(format!("no answer in {timeout:?}: the stream is stalled"));
                }
                let m = format!("node {target}: no answer within {timeout:?}");
                Err(TransportError::Lost(m))
            }
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
        };
        match n {
            Ok(0) => return s.close("the peer closed the stream".into()),
            Ok(_) => {}
            Err(e) => return s.close(format!("reading: {e}")),
        }
    }
}
