//! Running a member command where it belongs: on a given node (this one
//! at once, a peer over the transport), or on a shard's leader, following
//! leadership until it is answered or the operation's deadline passes.

use super::cmd::{addr, left, send_at, MemberAnswer, MemberCmd, POLL};
use super::handle::handle;
use crate::ids::{NodeId, ShardId};
use crate::node::Node;
use std::time::{Duration, Instant};

/// Why an admin operation failed, as its HTTP answer classes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminError {
    /// The request is wrong (400).
    BadRequest(String),
    /// Not done in time, or a peer could not be reached (503): the change
    /// may be partly done; every step is idempotent, so run it again.
    Unavailable(String),
}

/// Runs `cmd` for shard `k` on node `to` at `addr`: a peer over the
/// transport, this node at once.
pub(crate) async fn call_at(
    node: &Node,
    to: NodeId,
    addr: &str,
    k: ShardId,
    cmd: &MemberCmd,
    timeout: Duration,
) -> Result<MemberAnswer, String> {
    if to == node.id() {
        return Ok(Box::pin(handle(node, k, cmd.clone())).await);
    }
    send_at(node, to, addr, k, cmd, timeout).await
}

/// Runs `cmd` for shard `k` on node `to`, whose address shard `k`'s
/// membership holds.
pub(crate) async fn call(
    node: &Node,
    to: NodeId,
    k: ShardId,
    cmd: &MemberCmd,
    timeout: Duration,
) -> Result<MemberAnswer, String> {
    call_at(node, to, &addr(node, to, k)?, k, cmd, timeout).await
}

/// Runs `cmd` on shard `k`'s leader, following leadership, until it is
/// answered (anything but "not leader" or "retry") or `deadline` passes.
pub(crate) async fn on_leader(
    node: &Node,
    k: ShardId,
    cmd: &MemberCmd,
    deadline: Instant,
) -> Result<MemberAnswer, AdminError> {
    let mut why = format!("shard {k} has no leader");
    loop {
        if let Some(l) = node.leader_of(k) {
            match call(node, l, k, cmd, left(deadline).max(POLL)).await {
                Ok(MemberAnswer::Refused(m)) => return Err(AdminError::BadRequest(m)),
                Ok(MemberAnswer::NotLeader(_)) => {
                    why = format!("node {l} no longer leads shard {k}")
                }
                Ok(MemberAnswer::Retry(m)) => why = m,
                Ok(a) => return Ok(a),
                Err(m) => why = m,
            }
        }
        if Instant::now() >= deadline {
            return Err(AdminError::Unavailable(format!(
                "shard {k}: not done in time: {why}"
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}
