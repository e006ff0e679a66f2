//! Raft RPCs between nodes. Every message is bytes on the wire — one
//! version byte, then postcard — whether it crosses HTTP
//! (`POST /_cluster/raft/{shard}/{kind}`) or the in-process router the
//! tests use, so both exercise the same encoding. A [`Transport`] moves
//! bytes to a peer; [`crate::node::Node::handle_rpc`] answers them.

use super::types::{NodeId, ShardId, Snapshot, SnapshotMeta, TypeConfig, Vote};
use crate::snapshot::dir::{Chunk, Manifest, SnapFile, CHUNK_BYTES};
use openraft::error::{
    Fatal, NetworkError, RPCError, RaftError, RemoteError, ReplicationClosed, StreamingError,
    Unreachable,
};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{BasicNode, OptionalSend, RaftNetwork, RaftNetworkFactory};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

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
    /// ([`crate::admin::membership::MemberCmd`]).
    Member,
    /// One chunk of a snapshot file ([`crate::snapshot::dir::Chunk`]).
    SnapshotChunk,
    /// Which files of a snapshot transfer arrived, and how much of each
    /// ([`ResumeAsk`]): where a new attempt of it starts.
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

    /// The kind's byte in a peer stream's frame ([`crate::peer::stream`]).
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

/// openraft's network factory for one (node, shard).
pub struct NetFactory {
    /// The transport shared by all shards of the node.
    pub transport: Arc<dyn Transport>,
    /// The shard (openraft 0.9 has no group id of its own).
    pub shard: ShardId,
    /// This node (a snapshot's chunks name their sender).
    pub from: NodeId,
    /// The shard's snapshot transfers under way from this node.
    pub sends: Arc<super::snapshot_trigger::Sends>,
}

/// A connection handle to one peer for one shard.
pub struct Conn {
    transport: Arc<dyn Transport>,
    from: NodeId,
    target: NodeId,
    addr: String,
    shard: ShardId,
    sends: Arc<super::snapshot_trigger::Sends>,
}

impl RaftNetworkFactory<TypeConfig> for NetFactory {
    type Network = Conn;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Self::Network {
        Conn {
            transport: self.transport.clone(),
            from: self.from,
            target,
            addr: node.addr.clone(),
            shard: self.shard,
            sends: self.sends.clone(),
        }
    }
}

type RpcErr<E = openraft::error::Infallible> = RPCError<NodeId, BasicNode, RaftError<NodeId, E>>;

impl Conn {
    async fn call<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        kind: RpcKind,
        req: &Req,
        timeout: std::time::Duration,
    ) -> Result<Resp, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call_bytes(kind, encode(req), timeout).await
    }

    /// [`Conn::call`] with a body already encoded.
    async fn call_bytes<Resp: DeserializeOwned>(
        &self,
        kind: RpcKind,
        body: Vec<u8>,
        timeout: std::time::Duration,
    ) -> Result<Resp, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let fut = self
            .transport
            .call(self.target, &self.addr, self.shard, kind, body, timeout);
        match fut.await {
            Ok(bytes) => decode(&bytes).map_err(|e| RPCError::Network(NetworkError::new(&err(e)))),
            Err(TransportError::Unreachable(m)) => {
                Err(RPCError::Unreachable(Unreachable::new(&err(m))))
            }
            Err(TransportError::Lost(m)) => Err(RPCError::Network(NetworkError::new(&err(m)))),
        }
    }
}

fn err(m: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(m.to_string())
}

impl RaftNetwork<TypeConfig> for Conn {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RpcErr> {
        let r: Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>> =
            self.call(RpcKind::Append, &rpc, option.hard_ttl()).await?;
        r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RpcErr> {
        let r: Result<VoteResponse<NodeId>, RaftError<NodeId>> =
            self.call(RpcKind::Vote, &rpc, option.hard_ttl()).await?;
        r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }

    /// Streams the snapshot's files in chunks of at most [`CHUNK_BYTES`]
    /// (one in memory at a time), then its manifest, which installs it.
    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot,
        cancel: impl Future<Output = ReplicationClosed> + OptionalSend + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<NodeId>, StreamingError<TypeConfig, Fatal<NodeId>>> {
        tokio::select! {
            r = self.send_snapshot(vote, snapshot, option.hard_ttl()) => r,
            closed = cancel => Err(StreamingError::Closed(closed)),
        }
    }
}

type SnapshotErr = StreamingError<TypeConfig, Fatal<NodeId>>;

fn streaming(e: RPCError<NodeId, BasicNode, RaftError<NodeId>>) -> SnapshotErr {
    match e {
        RPCError::Unreachable(u) => StreamingError::Unreachable(u),
        RPCError::Network(n) => StreamingError::Network(n),
        other => StreamingError::Network(NetworkError::new(&err(other))),
    }
}

fn net_err(e: impl std::fmt::Display) -> SnapshotErr {
    StreamingError::Network(NetworkError::new(&err(e)))
}

impl Conn {
    async fn send_snapshot(
        &self,
        vote: Vote,
        snapshot: Snapshot,
        ttl: std::time::Duration,
    ) -> Result<SnapshotResponse<NodeId>, SnapshotErr> {
        use tokio::io::AsyncReadExt;
        // Holds the shard's next snapshot back until this one is installed
        // or has failed (see `snapshot_trigger`).
        let mut sending = self.sends.start(self.target);
        let Snapshot { meta, snapshot } = snapshot;
        let dir = snapshot
            .dir
            .as_ref()
            .ok_or_else(|| net_err("an empty snapshot handle"))?;
        let arrived = self.arrived(&meta.snapshot_id, ttl).await;
        for f in &snapshot.files {
            // A file that arrived whole is not sent again; one cut short
            // goes on from its end (every chunk before it was checked).
            let mut offset = match arrived.get(&f.name) {
                Some(len) if *len == f.len => continue,
                Some(len) if *len < f.len => *len,
                _ => 0,
            };
            let mut file = tokio::fs::File::open(dir.path().join(&f.name))
                .await
                .map_err(net_err)?;
            if offset > 0 {
                use tokio::io::AsyncSeekExt;
                file.seek(std::io::SeekFrom::Start(offset))
                    .await
                    .map_err(net_err)?;
            }
            // At least one chunk per file, so an empty file exists too.
            loop {
                let n = (f.len - offset).min(CHUNK_BYTES as u64) as usize;
                let mut data = vec![0; n];
                file.read_exact(&mut data).await.map_err(net_err)?;
                let chunk = Chunk {
                    from: self.from,
                    snapshot_id: meta.snapshot_id.clone(),
                    name: f.name.clone(),
                    offset,
                    crc32: crc32fast::hash(&data),
                    data,
                };
                let r: Result<(), String> = self
                    .call_bytes(RpcKind::SnapshotChunk, chunk.to_wire(), ttl)
                    .await
                    .map_err(streaming)?;
                r.map_err(net_err)?;
                sending.reached();
                offset += n as u64;
                if offset >= f.len {
                    break;
                }
            }
        }
        let manifest = Manifest {
            from: self.from,
            files: snapshot.files.clone(),
        };
        let r: Result<SnapshotResponse<NodeId>, Fatal<NodeId>> = self
            .call(RpcKind::Snapshot, &(vote, meta, manifest), ttl)
            .await
            .map_err(streaming)?;
        // Answered (every file may have arrived in an earlier attempt).
        sending.reached();
        r.map_err(|e| StreamingError::RemoteError(RemoteError::new(self.target, e)))
    }
}

/// A snapshot as it crosses the wire.
pub type SnapshotRpc = (Vote, SnapshotMeta, Manifest);

/// [`RpcKind::SnapshotResume`]'s question: what arrived of this sender's
/// transfer of this snapshot. The answer is `Result<Vec<SnapFile>,
/// String>`, empty when that transfer is not the one under way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeAsk {
    /// The sending node.
    pub from: NodeId,
    /// The snapshot (ids are unique to a capture: see `ShardSm`).
    pub snapshot_id: String,
}

impl Conn {
    /// The files of `snapshot_id` the target already holds, by name. Any
    /// failure (a node of the version before resume answers 404) is
    /// answered as nothing: the transfer starts from its first chunk, as
    /// it did before.
    async fn arrived(
        &self,
        snapshot_id: &str,
        ttl: std::time::Duration,
    ) -> std::collections::BTreeMap<String, u64> {
        let ask = ResumeAsk {
            from: self.from,
            snapshot_id: snapshot_id.to_owned(),
        };
        let r: Result<Result<Vec<SnapFile>, String>, _> =
            self.call(RpcKind::SnapshotResume, &ask, ttl).await;
        match r {
            Ok(Ok(files)) => files.into_iter().map(|f| (f.name, f.len)).collect(),
            Ok(Err(m)) => {
                tracing::warn!(target_node = self.target, "snapshot resume refused: {m}");
                Default::default()
            }
            Err(e) => {
                tracing::debug!(
                    target_node = self.target,
                    "snapshot resume not answered: {e}"
                );
                Default::default()
            }
        }
    }
}
