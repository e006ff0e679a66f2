//! A follower that catches up on large records is sent them in
//! AppendEntries of bounded bytes (`Timing::append_rpc_bytes_max`), not
//! in openraft's 300 entries whatever their size: an RPC that must cross
//! and sync within the heartbeat (openraft 0.9's AppendEntries timeout)
//! and that both sides hold in memory whole.

use crate::support::{append_surely, TestCluster};
use fencelog_cluster::node::Timing;

/// The bound under test, well below what the lagging follower is owed.
const BOUND_BYTES: u64 = 64 << 10;
/// Each record's body.
const RECORD_BYTES: usize = 8 << 10;
/// Records written while the follower is down: eight times the bound.
const RECORDS: u64 = 64;
/// What an RPC's encoding adds to its records' bytes (vote, ids, the
/// entries' framing): far less than one record.
const ENCODING_SLACK_BYTES: u64 = 4 << 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_follower_is_sent_bounded_append_entries() {
    lagging_follower().await;
}

#[test]
fn a_leader_that_sends_unbounded_append_entries_is_caught() {
    crate::support::fails_under_with(
        fencelog_cluster::Mutation::AppendRpcUnbounded,
        lagging_follower,
        "over the bound",
    );
}

async fn lagging_follower() {
    let timing = Timing {
        append_rpc_bytes_max: BOUND_BYTES,
        ..Timing::TEST
    };
    let c = TestCluster::start_with(3, 1, timing).await;
    let ids = c.ids();
    let leader = c.leader(0, &ids).await;
    let late = *ids.iter().find(|i| **i != leader).unwrap();
    c.stop(late).await;
    let rest: Vec<_> = ids.iter().copied().filter(|i| *i != late).collect();
    for seq in 0..RECORDS {
        let body = format!("{seq:0>RECORD_BYTES$}");
        append_surely(&c, &rest, "big", seq, &body).await;
    }
    c.boot(late).await;
    c.converged(0, &ids).await;
    let want = c.records(rest[0], "big");
    assert_eq!(want.len() as u64, RECORDS);
    assert_eq!(c.records(late, "big"), want, "the late node's records");
    let largest = c.router.largest_append_to(late) as u64;
    assert!(
        largest <= BOUND_BYTES + ENCODING_SLACK_BYTES,
        "an AppendEntries of {largest} bytes crossed to the late node, \
         over the bound of {BOUND_BYTES}"
    );
    // It was owed far more than one RPC's worth, so the bound was met by
    // splitting, not by the log being short.
    assert!(largest > BOUND_BYTES / 2, "largest AppendEntries {largest}");
}
