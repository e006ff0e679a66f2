//! A cluster node's `GET /metrics`. A node runs one engine per shard, so
//! the single node's engine families come once per shard: they are merged
//! here into one family each, every sample labelled `shard="k"` (the
//! OpenMetrics text format allows a family once; sum by shard to get the
//! node's). The Raft groups' own figures follow, per shard, then the
//! node's WAL. The merge works on the text prometheus-client writes, so
//! the engine keeps one encoder; it is pure and unit-tested.
//!
//! A shard engine's counters start again at zero when a snapshot install
//! replaces the engine: a counter reset, which `rate()` already handles.

use crate::ids::ShardId;
use crate::node::Node;
use std::fmt::Write;

/// One metric family: its `# HELP`/`# TYPE`/`# UNIT` lines and samples.
struct Family {
    name: String,
    header: Vec<String>,
    samples: Vec<String>,
}

/// `sample` (`name value` or `name{labels} value`) with `shard="k"` as
/// its first label.
fn with_shard(sample: &str, k: ShardId) -> String {
    let label = format!("shard=\"{k}\"");
    match sample.find(['{', ' ']) {
        Some(at) if sample[at..].starts_with("{}") => {
            format!("{}{{{label}}}{}", &sample[..at], &sample[at + 2..])
        }
        Some(at) if sample[at..].starts_with('{') => {
            format!("{}{{{label},{}", &sample[..at], &sample[at + 1..])
        }
        Some(at) => format!("{}{{{label}}}{}", &sample[..at], &sample[at..]),
        None => sample.to_string(),
    }
}

/// Every shard's engine text merged: each family once, in the order
/// first seen, with its header from the first shard that has it and
/// every shard's samples labelled. No `# EOF`.
pub fn merge_shards(texts: &[(ShardId, String)]) -> String {
    let mut families: Vec<Family> = Vec::new();
    for (k, text) in texts {
        let mut current: Option<usize> = None;
        // Families this text brought: their header lines are its own.
        let mut brought: Vec<usize> = Vec::new();
        for line in text.lines() {
            if line == "# EOF" || line.is_empty() {
                continue;
            }
            let mut words = line.split(' ');
            if let (Some("#"), Some("HELP" | "TYPE" | "UNIT"), Some(name)) =
                (words.next(), words.next(), words.next())
            {
                let at = match families.iter().position(|f| f.name == name) {
                    Some(at) => at,
                    None => {
                        families.push(Family {
                            name: name.to_string(),
                            header: Vec::new(),
                            samples: Vec::new(),
                        });
                        brought.push(families.len() - 1);
                        families.len() - 1
                    }
                };
                if brought.contains(&at) {
                    families[at].header.push(line.to_string());
                }
                current = Some(at);
                continue;
            }
            if let Some(at) = current {
                families[at].samples.push(with_shard(line, *k));
            }
        }
    }
    let mut out = String::new();
    for f in families {
        for line in f.header.iter().chain(&f.samples) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// One gauge family of a value per shard.
fn gauge(out: &mut String, name: &str, help: &str, values: &[(ShardId, u64)]) {
    let _ = writeln!(out, "# HELP {name} {help}.");
    let _ = writeln!(out, "# TYPE {name} gauge");
    for (k, v) in values {
        let _ = writeln!(out, "{name}{{shard=\"{k}\"}} {v}");
    }
}

/// Whether `m` says this node leads its group now. Not `current_leader`
/// alone: a group that stopped (a poisoned WAL stops every group of the
/// node) keeps its last metrics, its leader and a fresh-looking quorum
/// age among them, with only its state set to `Shutdown`.
pub(crate) fn leads(
    m: &openraft::RaftMetrics<crate::ids::NodeId, openraft::BasicNode>,
    me: crate::ids::NodeId,
) -> bool {
    m.current_leader == Some(me)
        && m.state == openraft::ServerState::Leader
        && m.running_state.is_ok()
}

/// How long ago a majority last acknowledged this node as leader, for the
/// shards it leads. openraft 0.9 keeps a leader cut off from its
/// followers leading (it steps down only on a higher vote), so
/// `fencelog_raft_leader` alone cannot tell a shard with no working
/// leader; this age can. openraft refreshes it at every turn of the
/// group's loop, ticks included, so it is current when scraped.
fn quorum_ack_ages(
    out: &mut String,
    metrics: &[(
        ShardId,
        openraft::RaftMetrics<crate::ids::NodeId, openraft::BasicNode>,
    )],
    me: crate::ids::NodeId,
) {
    let name = "fencelog_raft_quorum_ack_age_seconds";
    let _ = writeln!(
        out,
        "# HELP {name} Seconds since a majority last acknowledged this node as the shard's leader (shards it leads)."
    );
    let _ = writeln!(out, "# TYPE {name} gauge");
    for (k, m) in metrics {
        let Some(ms) = m.millis_since_quorum_ack else {
            continue;
        };
        if leads(m, me) {
            let _ = writeln!(out, "{name}{{shard=\"{k}\"}} {:.3}", ms as f64 / 1000.0);
        }
    }
}

/// The Raft groups' and the WAL's families (OpenMetrics text, no
/// `# EOF`).
pub fn raft_families(node: &Node) -> String {
    let shards: Vec<ShardId> = (0..node.shard_count()).collect();
    let metrics: Vec<_> = shards
        .iter()
        .map(|k| (*k, node.raft(*k).metrics().borrow().clone()))
        .collect();
    let of = |f: &dyn Fn(
        &openraft::RaftMetrics<crate::ids::NodeId, openraft::BasicNode>,
    ) -> u64|
     -> Vec<(ShardId, u64)> { metrics.iter().map(|(k, m)| (*k, f(m))).collect() };
    let index = |l: Option<crate::raft::types::LogId>| l.map_or(0, |l| l.index);
    let mut out = String::new();
    let me = node.id();
    gauge(
        &mut out,
        "fencelog_raft_leader",
        "1 while this node leads the shard's Raft group",
        &of(&|m| u64::from(leads(m, me))),
    );
    quorum_ack_ages(&mut out, &metrics, me);
    gauge(
        &mut out,
        "fencelog_raft_term",
        "The shard's Raft term as this node knows it",
        &of(&|m| m.current_term),
    );
    gauge(
        &mut out,
        "fencelog_raft_last_log_index",
        "Index of the last entry in this node's Raft log of the shard",
        &of(&|m| m.last_log_index.unwrap_or(0)),
    );
    gauge(
        &mut out,
        "fencelog_raft_applied_index",
        "Index of the last entry this node applied to the shard",
        &of(&|m| index(m.last_applied)),
    );
    gauge(
        &mut out,
        "fencelog_raft_snapshot_index",
        "Index of the shard's current snapshot on this node",
        &of(&|m| index(m.snapshot)),
    );
    gauge(
        &mut out,
        "fencelog_raft_purged_index",
        "Index up to which this node purged the shard's Raft log",
        &of(&|m| index(m.purged)),
    );
    gauge(
        &mut out,
        "fencelog_raft_snapshot_sends",
        "Snapshot transfers of the shard this node is making now",
        &shards
            .iter()
            .map(|k| (*k, node.snapshot_sends(*k) as u64))
            .collect::<Vec<_>>(),
    );
    wal_families(&mut out, node);
    out
}

/// The node's Raft WAL: its fdatasyncs and whether it accepts writes.
fn wal_families(out: &mut String, node: &Node) {
    let _ = writeln!(
        out,
        "# HELP fencelog_raft_wal_fsyncs fdatasyncs of the node's Raft WAL."
    );
    let _ = writeln!(out, "# TYPE fencelog_raft_wal_fsyncs counter");
    let _ = writeln!(
        out,
        "fencelog_raft_wal_fsyncs_total {}",
        node.wal().fsyncs()
    );
    let _ = writeln!(
        out,
        "# HELP fencelog_raft_wal_healthy 1 while the node's Raft WAL accepts writes, 0 once a failed write or fdatasync poisoned it."
    );
    let _ = writeln!(out, "# TYPE fencelog_raft_wal_healthy gauge");
    let healthy = u64::from(node.wal().poisoned().is_none());
    let _ = writeln!(out, "fencelog_raft_wal_healthy {healthy}");
}

/// The node's whole text: the HTTP layer's families (`http`, without
/// `# EOF`), every shard engine's, the Raft groups', then `# EOF`.
pub fn encode(node: &Node, http: String) -> String {
    let texts: Vec<(ShardId, String)> = (0..node.shard_count())
        .map(|k| {
            let engine = node.engine(k);
            // Sampled at the scrape, as the single node does.
            let m = engine.metrics();
            m.queue_depth.set(engine.queue_depth() as i64);
            m.healthy.set(i64::from(engine.is_healthy()));
            (k, m.encode())
        })
        .collect();
    let mut out = http;
    out.push_str(&merge_shards(&texts));
    out.push_str(&raft_families(node));
    out.push_str("# EOF\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHARD: &str = "# HELP fencelog_appends_accepted Appends.\n\
# TYPE fencelog_appends_accepted counter\n\
fencelog_appends_accepted_total 3\n\
# HELP fencelog_fsync_seconds Latency.\n\
# TYPE fencelog_fsync_seconds histogram\n\
# UNIT fencelog_fsync_seconds seconds\n\
fencelog_fsync_seconds_sum 0.5\n\
fencelog_fsync_seconds_bucket{le=\"0.001\"} 2\n\
fencelog_fsync_seconds_bucket{le=\"+Inf\"} 3\n\
# EOF\n";

    /// A stopped group keeps its last metrics, leader and quorum age
    /// included: only a running leader counts as leading.
    #[test]
    fn only_a_running_leader_leads() {
        let mut m = openraft::RaftMetrics::new_initial(2);
        m.current_leader = Some(2);
        m.state = openraft::ServerState::Leader;
        m.millis_since_quorum_ack = Some(40);
        assert!(leads(&m, 2));
        assert!(!leads(&m, 3));
        let mut out = String::new();
        quorum_ack_ages(&mut out, &[(4, m.clone())], 2);
        assert!(
            out.ends_with("fencelog_raft_quorum_ack_age_seconds{shard=\"4\"} 0.040\n"),
            "{out}"
        );
        m.state = openraft::ServerState::Shutdown;
        assert!(!leads(&m, 2));
        let mut out = String::new();
        quorum_ack_ages(&mut out, &[(4, m.clone())], 2);
        assert!(!out.contains("shard="), "{out}");
        m.state = openraft::ServerState::Leader;
        m.running_state = Err(openraft::error::Fatal::Stopped);
        assert!(!leads(&m, 2));
        m.running_state = Ok(());
        m.state = openraft::ServerState::Follower;
        assert!(!leads(&m, 2));
    }

    #[test]
    fn a_sample_gets_the_shard_as_its_first_label() {
        assert_eq!(with_shard("a_total 3", 2), "a_total{shard=\"2\"} 3");
        assert_eq!(
            with_shard("a_bucket{le=\"1\"} 3", 0),
            "a_bucket{shard=\"0\",le=\"1\"} 3"
        );
        assert_eq!(with_shard("a{} 3", 1), "a{shard=\"1\"} 3");
    }

    #[test]
    fn each_family_comes_once_with_every_shards_samples() {
        let merged = merge_shards(&[(0, SHARD.to_string()), (1, SHARD.replace(" 3\n", " 7\n"))]);
        assert_eq!(
            merged,
            "# HELP fencelog_appends_accepted Appends.\n\
# TYPE fencelog_appends_accepted counter\n\
fencelog_appends_accepted_total{shard=\"0\"} 3\n\
fencelog_appends_accepted_total{shard=\"1\"} 7\n\
# HELP fencelog_fsync_seconds Latency.\n\
# TYPE fencelog_fsync_seconds histogram\n\
# UNIT fencelog_fsync_seconds seconds\n\
fencelog_fsync_seconds_sum{shard=\"0\"} 0.5\n\
fencelog_fsync_seconds_bucket{shard=\"0\",le=\"0.001\"} 2\n\
fencelog_fsync_seconds_bucket{shard=\"0\",le=\"+Inf\"} 3\n\
fencelog_fsync_seconds_sum{shard=\"1\"} 0.5\n\
fencelog_fsync_seconds_bucket{shard=\"1\",le=\"0.001\"} 2\n\
fencelog_fsync_seconds_bucket{shard=\"1\",le=\"+Inf\"} 7\n"
        );
    }
}
