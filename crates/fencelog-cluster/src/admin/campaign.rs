//! How a node takes a shard's leadership in openraft 0.9, which has no
//! transfer_leader: it campaigns (`trigger().elect()`) once its log holds
//! the leader's read index, again every election_min until it leads or
//! its budget is spent. See [`super::membership`] for why this is safe.

use super::cmd::{left, send, MemberAnswer, MemberCmd, HANDOVER_MAX, NOTICE_TIMEOUT, POLL};
use super::voters::voters;
use crate::ids::ShardId;
use crate::node::Node;
use crate::raft::proposer::leadership;
use openraft::ServerState;
use std::time::{Duration, Instant};

/// Campaigns for shard `k` until this node leads it or `deadline` passes.
/// Each round asks the leader for a handover first (it pauses proposing
/// until this node's log matches its own), then triggers an election: a
/// voter grants its vote only to a log at least as long as its own, and a
/// leader whose log stopped growing can grant it. `eager`: also campaign
/// when the leader cannot be reached (a manual transfer; the rebalancer
/// does not).
pub(crate) async fn campaign(
    node: &Node,
    k: ShardId,
    deadline: Instant,
    eager: bool,
) -> Result<(), String> {
    let (raft, id) = (node.raft(k), node.id());
    let timing = node.options().timing;
    // One election may take up to the longest election timeout: a round
    // never cuts its own candidacy short by starting the next term.
    let round = Duration::from_millis(timing.election_max_ms);
    let handover = MemberCmd::Handover {
        to: id,
        budget_ms: timing.election_max_ms,
    };
    loop {
        if leadership(raft, id).is_ok() {
            return Ok(());
        }
        if !voters(node, k).contains(&id) {
            return Err(format!("node {id} is not a voter of shard {k}"));
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "node {id} did not win shard {k}'s election in time"
            ));
        }
        let candidate = raft.metrics().borrow().state == ServerState::Candidate;
        let ready = match node.leader_of(k).filter(|l| *l != id) {
            _ if candidate => false,
            None => true,
            Some(l) => match send(node, l, k, &handover, HANDOVER_MAX + NOTICE_TIMEOUT).await {
                Ok(MemberAnswer::Done) => true,
                Ok(_) => false,
                Err(_) => eager,
            },
        };
        if ready {
            raft.trigger().elect().await.map_err(|e| e.to_string())?;
        }
        let wait = round.min(left(deadline)).max(POLL);
        // A timeout only ends this round.
        let _ = raft
            .wait(Some(wait))
            .metrics(|m| m.state == ServerState::Leader, "campaign")
            .await;
    }
}
