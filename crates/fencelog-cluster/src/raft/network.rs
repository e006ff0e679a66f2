//! openraft's network for one shard: [`NetFactory`] makes a [`Conn`] per
//! peer, which sends AppendEntries and votes as [`crate::rpc`] messages
//! over the node's [`Transport`], and streams a snapshot's files in
//! chunks, resuming a transfer that was cut short.

use super::types::{Snapshot, SnapshotMeta, TypeConfig, Vote};
use crate::ids::{NodeId, ShardId};
use crate::rpc::{decode, encode, RpcKind, Transport, TransportError};
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
use std::sync::Arc;

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
                let n = usize::try_from(f.len - offset).map_or(CHUNK_BYTES, |n| n.min(CHUNK_BYTES));
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
