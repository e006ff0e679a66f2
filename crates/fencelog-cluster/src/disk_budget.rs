//! The disk budget (`--data-bytes-max`) of a cluster node. A single node's
//! writer refuses an append that would take its data directory past the
//! budget, deterministically, in its plan. A replica cannot: replicas'
//! disks differ, and a refusal in apply that one replica makes and another
//! does not would make their states differ. So shard engines run without
//! a budget, and the shard's leader checks its own before it proposes an
//! append: a refusal there changes nothing anywhere (507
//! `insufficient_storage`, definitely not applied, as on a single node).
//!
//! What counts is the node's shard engines' files, as the engine's own
//! budget counts them (segments with their preallocated space, MANIFEST,
//! checkpoint), summed over its shards. The Raft WAL and snapshot
//! directories come on top: they are bounded by `--raft-snapshot-logs`,
//! not by the data. The check is the leader's, at proposal: appends in
//! flight (at most a proposer queue per shard) may take it past the
//! budget by their size, and a follower whose disk holds more than the
//! leader's is not asked. Fences, trims, seals, deletes and cursor
//! commits are never refused by it: they are how space comes back.

use crate::raft::types::OpResult;
use fencelog_engine::{BatchAction, WriteOp};

/// Bytes of records an op would add: its stream name, record bodies and
/// header names and values, summed over a batch's appends. Frame headers
/// are not counted (a few dozen bytes per append).
pub fn append_bytes(op: &WriteOp) -> u64 {
    let bodies = |r: &[bytes::Bytes]| r.iter().map(|r| r.len()).sum::<usize>();
    match op {
        WriteOp::Append {
            stream,
            records,
            headers,
            ..
        } => {
            let named: usize = headers
                .iter()
                .flatten()
                .map(|h| h.name.len() + h.value.len())
                .sum();
            (stream.len() + bodies(records) + named) as u64
        }
        WriteOp::Batch { ops, .. } => ops
            .iter()
            .filter_map(|o| match &o.action {
                BatchAction::Append { records, .. } => {
                    Some((o.stream.len() + bodies(records)) as u64)
                }
                BatchAction::Fence => None,
            })
            .sum(),
        _ => 0,
    }
}

/// The leader's answer to `op` when it would take the node's data bytes
/// past `limit`; `used` is asked for only when there is a limit and the
/// op appends, and `writes` (would the fencing rule let this append
/// write records now: [`fencelog_engine::Engine::append_would_write`])
/// only when it is over: the single node checks the rule first, so a
/// stale token, a sealed stream, a `match_seq` mismatch or a producer's
/// retry is answered as such by apply, never 507. Pure but for the two,
/// so it is unit-tested.
pub fn refusal(
    limit: Option<u64>,
    used: impl FnOnce() -> u64,
    writes: impl FnOnce() -> bool,
    op: &WriteOp,
) -> Option<OpResult> {
    let limit = limit?;
    let adds = append_bytes(op);
    if adds == 0 {
        return None;
    }
    let used = used();
    let over = used.saturating_add(adds) > limit;
    (over && writes()).then_some(OpResult::InsufficientStorage { limit, used })
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencelog_engine::{BatchOp, Header};

    fn append(stream: &str, records: &[&str]) -> WriteOp {
        WriteOp::Append {
            stream: stream.into(),
            token: 1,
            records: records
                .iter()
                .map(|r| bytes::Bytes::copy_from_slice(r.as_bytes()))
                .collect(),
            headers: vec![],
            options: Default::default(),
        }
    }

    #[test]
    fn an_append_counts_its_name_bodies_and_headers() {
        assert_eq!(append_bytes(&append("s", &["abc", "de"])), 6);
        let mut op = append("st", &["x"]);
        if let WriteOp::Append { headers, .. } = &mut op {
            *headers = vec![vec![Header::new(&b"k"[..], &b"vv"[..])]];
        }
        assert_eq!(append_bytes(&op), 6);
        let batch = WriteOp::Batch {
            ops: vec![
                BatchOp {
                    stream: "a".into(),
                    fencing_token: 1,
                    action: BatchAction::Append {
                        records: vec![bytes::Bytes::from_static(b"1234")],
                        match_seq_num: None,
                    },
                },
                BatchOp {
                    stream: "bb".into(),
                    fencing_token: 1,
                    action: BatchAction::Fence,
                },
            ],
            not_after_ms: None,
        };
        assert_eq!(append_bytes(&batch), 5, "the fence adds nothing");
    }

    #[test]
    fn refused_only_past_the_limit_and_only_appends() {
        let op = append("s", &["abcd"]);
        let writes = || true;
        assert_eq!(refusal(None, || unreachable!(), writes, &op), None);
        assert_eq!(
            refusal(Some(100), || 95, || unreachable!(), &op),
            None,
            "exactly at the limit"
        );
        assert_eq!(
            refusal(Some(100), || 96, writes, &op),
            Some(OpResult::InsufficientStorage {
                limit: 100,
                used: 96
            })
        );
        assert_eq!(
            refusal(Some(100), || 96, || false, &op),
            None,
            "the fencing rule answers it first"
        );
        let fence = WriteOp::Fence {
            stream: "s".into(),
            token: 2,
            not_after_ms: None,
        };
        assert_eq!(refusal(Some(100), || unreachable!(), writes, &fence), None);
    }
}
