//! What a node answers to a peer's RPC, whichever way it came (the HTTP
//! route, the peer stream, the in-process router): the `member` RPC by
//! the admin side, which runs membership changes and leadership
//! transfers on top of the node, and every Raft kind by the node itself.

use crate::ids::ShardId;
use crate::node::Node;
use crate::rpc::{decode, encode, RpcKind};

/// Answers a peer's RPC of `kind` for shard `k`: the answer's bytes, or
/// why there is none (a shard out of range, a body that does not
/// decode).
pub async fn answer(
    node: &Node,
    k: ShardId,
    kind: RpcKind,
    body: &[u8],
) -> Result<Vec<u8>, String> {
    match kind {
        RpcKind::Member => {
            node.shard_in_range(k)?;
            let cmd = decode(body)?;
            Ok(encode(&crate::admin::handle::handle(node, k, cmd).await))
        }
        kind => node.handle_rpc(k, kind, body).await,
    }
}
