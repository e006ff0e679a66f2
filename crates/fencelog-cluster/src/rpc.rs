//! A peer RPC as it crosses between nodes: what it is ([`RpcKind`]), its
//! bytes — one version byte, then postcard — and the [`Transport`] seam
//! that moves them. The same bytes cross HTTP
//! (`POST /_cluster/raft/{shard}/{kind}`), the peer stream and the
//! in-process router the tests use, so all of them exercise the same
//! encoding; [`crate::peer::answer`] answers them on the receiving node.

use crate::ids::{NodeId, ShardId};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::future::Future;
use std::pin::Pin;

/// The wire format's version byte.
pub const WIRE_VERSION: u8 = 1;

/// What a peer RPC is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RpcKind {
    /// AppendEntries.
    Append,
    /// RequestVote.
    Vote,
    /// A snapshot's manifest, after its chunks: install it.
    Snapshot,
    /// A follower's write for the shard leader.
    Forward,
    /// A follower's read-index request.
    ReadIndex,
    /// A membership, transfer or rebalancing command
    /// (the admin side's `MemberCmd`).
    Member,
    /// One chunk of a snapshot file ([`crate::snapshot::dir::Chunk`]).
    SnapshotChunk,
    /// Which files of a snapshot transfer arrived, and how much of each
    /// (the network's `ResumeAsk`): where a new attempt of it starts.
    SnapshotResume,
}

impl RpcKind {
    /// The path segment.
    pub fn name(self) -> &'static str {
        match self {
            RpcKind::Append => "append",
            RpcKind::Vote => "vote",
            RpcKind::Snapshot => "snapshot",
            RpcKind::Forward => "forward",
            RpcKind::ReadIndex => "read_index",
            RpcKind::Member => "member",
            RpcKind::SnapshotChunk => "snapshot_chunk",
            RpcKind::SnapshotResume => "snapshot_resume",
        }
    }

    /// Every kind, in the order of their codes.
    pub const ALL: [RpcKind; 8] = [
        RpcKind::Append,
        RpcKind::Vote,
        RpcKind::Snapshot,
        RpcKind::Forward,
        RpcKind::ReadIndex,
        RpcKind::Member,
        RpcKind::SnapshotChunk,
        RpcKind::SnapshotResume,
    ];

    /// A snapshot's: sent as its own HTTP request, never on the peer
    /// stream, where a megabyte would hold up every shard's RPCs (and a
    /// node of the version before resume answers the HTTP route it does
    /// not know with 404, where the peer stream would close).
    pub fn is_snapshot(self) -> bool {
        matches!(
            self,
            RpcKind::Snapshot | RpcKind::SnapshotChunk | RpcKind::SnapshotResume
        )
    }

    /// The kind a path segment names.
    pub fn parse(s: &str) -> Option<RpcKind> {
        RpcKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// The kind's byte in a peer stream's frame ([`crate::peer`]).
    pub fn code(self) -> u8 {
        match self {
            RpcKind::Append => 1,
            RpcKind::Vote => 2,
            RpcKind::Snapshot => 3,
            RpcKind::Forward => 4,
            RpcKind::ReadIndex => 5,
            RpcKind::Member => 6,
            RpcKind::SnapshotChunk => 7,
            RpcKind::SnapshotResume => 8,
        }
    }

    /// The kind a frame's byte names.
    pub fn from_code(code: u8) -> Option<RpcKind> {
        RpcKind::ALL.into_iter().find(|k| k.code() == code)
    }
}

/// Why bytes did not come back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportError {
    /// Nothing was sent (connection refused, partitioned, node down).
    Unreachable(String),
    /// Sent, but no (valid) answer: the peer may have acted on it.
    Lost(String),
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TransportError::Unreachable(m) => write!(f, "unreachable: {m}"),
            TransportError::Lost(m) => write!(f, "no answer: {m}"),
        }
    }
}

impl std::error::Error for TransportError {}

/// A boxed future of a transport answer.
pub type RpcFuture = Pin<Box<dyn Future<Output = Result<Vec<u8>, TransportError>> + Send>>;

/// Moves one RPC's bytes to `target` and its answer back.
pub trait Transport: Send + Sync + 'static {
    /// Sends `body` for `(shard, kind)` to node `target` at `addr`.
    fn call(
        &self,
        target: NodeId,
        addr: &str,
        shard: ShardId,
        kind: RpcKind,
        body: Vec<u8>,
        timeout: std::time::Duration,
    ) -> RpcFuture;

    /// The URL scheme the nodes serve their client port with, `http` or
    /// `https` (a redirect's `Location` uses it).
    fn scheme(&self) -> &'static str {
        "http"
    }
}

/// Largest Raft RPC body: a request frame on the peer stream, or the body
/// of one RPC over plain HTTP.
pub const RPC_BODY_BYTES_MAX: usize = 256 << 20;

/// Encodes a message with the version byte.
pub fn encode<T: Serialize>(t: &T) -> Vec<u8> {
    let out = vec![WIRE_VERSION];
    postcard::to_extend(t, out).expect("RPC messages always encode")
}

/// Decodes a message, checking the version byte.
pub fn decode<T: DeserializeOwned>(b: &[u8]) -> Result<T, String> {
    postcard::from_bytes(payload(b)?).map_err(|e| e.to_string())
}

/// A message's bytes after its version byte, which must be ours.
pub fn payload(b: &[u8]) -> Result<&[u8], String> {
    match b.split_first() {
        Some((&WIRE_VERSION, rest)) => Ok(rest),
        Some((v, _)) => Err(format!("wire version {v}, expected {WIRE_VERSION}")),
        None => Err("an empty message".into()),
    }
}
