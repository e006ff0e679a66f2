//! `fencelog serve --node-id N --join HOST:PORT --listen ADDR`: a node that
//! joins a running cluster. It bootstraps nothing: its shard groups stay
//! uninitialized until `fencelog cluster add N ADDR` (any node) adds it
//! as a learner to every shard, it catches up (by snapshot when it is
//! behind the others' purge point), and is promoted to voter. Its shard
//! count comes from the cluster; once its data directory exists, from
//! there (a restart needs no reachable peer).

use crate::node::META_FILE;
use crate::shard::SHARDS_MAX;
use std::path::Path;
use std::time::Duration;

/// The shard count a joining node runs with: its data directory's
/// `cluster.meta` if it has one, else the count of the node at `join`
/// (`given`, the `--shards` flag, must agree).
pub async fn shard_count(
    data_dir: &Path,
    join: &str,
    given: Option<u32>,
    timeout: Duration,
) -> Result<u32, String> {
    let meta = data_dir.join(META_FILE);
    if let Ok(text) = std::fs::read_to_string(&meta) {
        let stored = text
            .lines()
            .find_map(|l| l.strip_prefix("shards "))
            .and_then(|n| n.parse().ok());
        return stored.ok_or(format!("{} holds no shard count", meta.display()));
    }
    let url = format!("http://{join}/_cluster/admin/status");
    let status: serde_json::Value = async {
        let client = reqwest::Client::builder().timeout(timeout).build()?;
        client
            .get(&url)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await
    }
    .await
    .map_err(|e| format!("join: cannot read {url}: {e}"))?;
    let shards = status["shards"]
        .as_array()
        .map(|a| a.len() as u32)
        .filter(|n| (1..=SHARDS_MAX).contains(n))
        .ok_or(format!("join: {url} names no shards"))?;
    match given {
        Some(g) if g != shards => Err(format!(
            "join: the cluster has {shards} shards, shards says {g}"
        )),
        _ => Ok(shards),
    }
}
