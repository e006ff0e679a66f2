//! The cluster admin API (`/_cluster/admin/…`), as JSON values:
//! `fencelog cluster status|add|remove|transfer` prints them. Any node
//! answers; the membership operations wait until done (or their timeout).

use crate::request::Req;
use crate::{Client, ClientError};
use serde_json::{json, Value};

impl Client {
    /// `GET /_cluster/admin/status`: the node's view of every shard.
    pub async fn cluster_status(&self) -> Result<Value, ClientError> {
        let url = format!("{}/_cluster/admin/status", self.base);
        self.send_idempotent(Req::get(url)).await
    }

    async fn cluster_admin(&self, op: &str, body: Value) -> Result<Value, ClientError> {
        let url = format!("{}/_cluster/admin/{op}", self.base);
        self.send_once(Req::post(url).json(&body)).await
    }

    /// Adds node `node_id` (started with `--join`, reachable at `addr`)
    /// to every shard: learner, caught up, voter.
    pub async fn cluster_add(&self, node_id: u64, addr: &str) -> Result<Value, ClientError> {
        self.cluster_admin("add", json!({ "node_id": node_id, "addr": addr }))
            .await
    }

    /// Removes node `node_id` from every shard.
    pub async fn cluster_remove(&self, node_id: u64) -> Result<Value, ClientError> {
        self.cluster_admin("remove", json!({ "node_id": node_id }))
            .await
    }

    /// Moves shard `shard`'s leadership to node `to`.
    pub async fn cluster_transfer(&self, shard: u32, to: u64) -> Result<Value, ClientError> {
        self.cluster_admin("transfer", json!({ "shard": shard, "to": to }))
            .await
    }
}
