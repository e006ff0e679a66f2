//! A cluster node's `GET /metrics` (docs/operations.md, "A cluster node's
//! metrics"), against three real processes: every engine family comes
//! once, each shard's samples labelled; every replica counts every
//! append; exactly one node leads each shard; the Raft families are the
//! documented ones.

use crate::cluster_support::{settled_even_if_unknown, ProcCluster};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

const SHARDS: u32 = 3;

async fn metrics(c: &ProcCluster, id: usize) -> String {
    let r = c
        .http
        .get(format!("{}/metrics", c.url(id)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let kind = r.headers()["content-type"].to_str().unwrap().to_string();
    assert!(kind.starts_with("application/openmetrics-text"), "{kind}");
    r.text().await.unwrap()
}

/// The value of every sample of `name` (with its labels), by label set:
/// a count (`u64`) or seconds (`f64`).
fn samples<T: std::str::FromStr>(text: &str, name: &str) -> BTreeMap<String, T> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (key, value) = l.rsplit_once(' ')?;
            let (n, labels) = key.split_once('{').unwrap_or((key, ""));
            (n == name).then(|| (labels.trim_end_matches('}').to_string(), value.parse().ok()))
        })
        .map(|(k, v)| {
            let v = v.unwrap_or_else(|| panic!("{name}{{{k}}} does not read"));
            (k, v)
        })
        .collect()
}

/// The families of `text`, each of which must come once, counters with
/// the `_total` of their samples.
fn families(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for l in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let (name, kind) = l.split_once(' ').unwrap();
        let name = match kind {
            "counter" => format!("{name}_total"),
            _ => name.to_string(),
        };
        assert!(seen.insert(name.clone()), "{name} comes twice");
    }
    seen
}

/// The metric names a table of docs/operations.md lists: `single` the
/// single node's, or the cluster's own.
fn documented(single: bool) -> BTreeSet<String> {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operations.md"),
    )
    .unwrap();
    let (before, after) = doc.split_once("### A cluster node's metrics").unwrap();
    let cluster = after.split("\n### ").next().unwrap();
    let section = if single { before } else { cluster };
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `fencelog_"))
        .map(|l| format!("fencelog_{}", l.split('`').next().unwrap()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_nodes_metrics_label_every_shard_and_show_its_raft_groups() {
    let c = ProcCluster::start(3, SHARDS, &[]);
    let ids = [1, 2, 3];
    let streams = ["m-a", "m-b", "m-c", "m-d", "m-e", "m-f"];
    for (i, stream) in streams.iter().enumerate() {
        for _ in 0..=i {
            let url = format!("{}/v1/streams/{stream}/records", c.url(ids[i % 3]));
            let body = json!({"fencing_token": 1, "records": [{"body": "x"}]});
            // A 503 `unavailable` (no quorum in time on a loaded host) is
            // asked again, even one whose outcome is unknown: what landed
            // is counted from the streams below.
            let (s, v) = settled_even_if_unknown(|| c.http.post(&url).json(&body)).await;
            assert_eq!(s, 200, "{v}");
        }
    }
    for k in 0..SHARDS {
        c.converged(k, &ids).await;
    }
    let mut appends = 0;
    for stream in streams {
        let (s, v) = c.get(1, &format!("/v1/streams/{stream}")).await;
        assert_eq!(s, 200, "{v}");
        appends += v["next_seq"].as_u64().unwrap();
    }
    assert!(appends >= 21, "{appends}");
    // The nodes are scraped one after the other while the rebalancer may
    // still move a leader (and its new term commits an entry): the view
    // across nodes is asked again until it is one moment's.
    let one: BTreeMap<String, u64> = (0..SHARDS).map(|k| (format!("shard=\"{k}\""), 1)).collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let mut leaders: BTreeMap<String, u64> = BTreeMap::new();
        let mut applied: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
        // Each shard's leader, and only it, says a majority answered it
        // within the last few heartbeats.
        let mut acked: BTreeMap<String, u64> = BTreeMap::new();
        for id in ids {
            let text = metrics(&c, id).await;
            check_node(&text, id, appends);
            for (k, v) in samples::<u64>(&text, "fencelog_raft_leader") {
                *leaders.entry(k).or_default() += v;
            }
            for (k, v) in samples::<u64>(&text, "fencelog_raft_applied_index") {
                applied.entry(k).or_default().insert(v);
            }
            for (k, age) in samples::<f64>(&text, "fencelog_raft_quorum_ack_age_seconds") {
                *acked.entry(k).or_default() += u64::from(age < 5.0);
            }
        }
        let alike = applied.values().all(|at| at.len() == 1);
        if leaders == one && alike && acked == one {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "leaders {leaders:?} (one per shard), applied {applied:?} (alike), \
             acknowledged leaders {acked:?} (one per shard)"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// What one node's text must hold whenever it is scraped: the documented
/// families, once each; every append in its stream's shard; the WAL's.
fn check_node(text: &str, id: usize, appends: u64) {
    assert_eq!(text.matches("# EOF").count(), 1, "{text}");
    assert!(text.ends_with("# EOF\n"), "{text}");
    let served = families(text);
    let single = documented(true);
    let raft = documented(false);
    assert!(!raft.is_empty() && single.is_disjoint(&raft));
    let expected: BTreeSet<String> = single.union(&raft).cloned().collect();
    assert_eq!(served, expected, "node {id}");
    let accepted = samples::<u64>(text, "fencelog_appends_accepted_total");
    let shards: BTreeSet<String> = (0..SHARDS).map(|k| format!("shard=\"{k}\"")).collect();
    assert_eq!(accepted.keys().cloned().collect::<BTreeSet<_>>(), shards);
    let sum: u64 = accepted.values().sum();
    assert_eq!(sum, appends, "node {id}: {accepted:?}");
    // Every alert rule's metrics are here, the cluster's own included
    // (docs/prometheus/fencelog-alerts.yml), as samples; the quorum-ack
    // age only as a family on a node that leads no shard.
    let mut exposed = crate::ops_dashboard::exposed(text);
    let leaders_only = "fencelog_raft_quorum_ack_age_seconds";
    assert!(served.contains(leaders_only), "node {id}");
    exposed.insert(leaders_only.to_string());
    let mut raft_alerts = 0;
    for q in crate::ops_dashboard::alert_queries() {
        for name in crate::ops_dashboard::metric_names(&q) {
            raft_alerts += usize::from(name.starts_with(crate::ops_dashboard::RAFT_FAMILIES));
            assert!(
                crate::ops_dashboard::PROMETHEUS_OWN.contains(&name.as_str())
                    || exposed.contains(&name),
                "node {id}: alert query {q} names {name}, not served"
            );
        }
    }
    assert!(
        raft_alerts >= 4,
        "{raft_alerts} alert queries on the Raft families"
    );
    let fsyncs = samples::<u64>(text, "fencelog_raft_wal_fsyncs_total");
    assert!(fsyncs[""] > 0, "node {id}: {fsyncs:?}");
    assert_eq!(samples::<u64>(text, "fencelog_raft_wal_healthy")[""], 1);
}
