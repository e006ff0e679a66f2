//! `fencelog serve --node-id N --join HOST:PORT --listen ADDR`: a node that
//! joins a running cluster. It bootstraps nothing: its shard groups stay
//! uninitialized until `fencelog cluster add N ADDR` (any node) adds it
//! as a learner to every shard, it catches up (by snapshot when it is
//! behind the others' purge point), and is promoted to voter. Its shard
//! count comes from the cluster; once its data directory exists, from
//! there (a restart needs no reachable peer).

use super::cmd::{MemberAnswer, MemberCmd};
use crate::node::META_FILE;
use crate::rpc::{decode, encode, RpcKind, Transport};
use crate::shard::SHARDS_MAX;
use std::path::Path;
use std::time::Duration;

/// The shard count a joining node runs with: its data directory's
/// `cluster.meta` if it has one, else the count of the node at `join`
/// (`given`, the `--shards` flag, must agree). The node at `join` is
/// asked with the peer `member` RPC (`Whoami`) through `transport` (the
/// node's own: its peer secret, https when the nodes serve TLS), so a cluster with access tokens (whose
/// admin routes need an operator's token) answers a joining node too.
pub async fn shard_count(
    data_dir: &Path,
    join: &str,
    given: Option<u32>,
    timeout: Duration,
    transport: &dyn Transport,
) -> Result<u32, String> {
    let meta = data_dir.join(META_FILE);
    if let Ok(text) = std::fs::read_to_string(&meta) {
        let stored = text
            .lines()
            .find_map(|l| l.strip_prefix("shards "))
            .and_then(|n| n.parse().ok());
        return stored.ok_or(format!("{} holds no shard count", meta.display()));
    }
    // Shard 0 exists in every cluster; the node's id is not known yet (0).
    let call = transport.call(
        0,
        join,
        0,
        RpcKind::Member,
        encode(&MemberCmd::Whoami),
        timeout,
    );
    let asked = format!("join: asking the node at {join} for its shard count");
    let bytes = call.await.map_err(|e| format!("{asked}: {e}"))?;
    let shards = match decode(&bytes) {
        Ok(MemberAnswer::Whoami { shards, .. }) if (1..=SHARDS_MAX).contains(&shards) => shards,
        other => return Err(format!("{asked}: answered {other:?}")),
    };
    match given {
        Some(g) if g != shards => Err(format!(
            "join: the cluster has {shards} shards, shards says {g}"
        )),
        _ => Ok(shards),
    }
}
