//! The operator's monitoring kit against a real server: every metric the
//! Grafana dashboard (`docs/grafana/`) and the alert rules
//! (`docs/prometheus/`) query is in the `/metrics` of the real binary, and
//! Prometheus' own `promtool` accepts the example scrape configuration and
//! the rules and passes the rules' unit tests.
//!
//! `promtool` is Debian's `prometheus` package (`cargo xtask test`
//! installs it); without it those checks say `SKIPPED` loudly, or fail
//! under `cargo xtask test` (`fencelog_testkit::deps`).

use crate::support::serve;
use fencelog_testkit::deps;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn docs(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs")
        .join(path)
}

/// Series names Prometheus makes itself, not the server.
pub(crate) const PROMETHEUS_OWN: &[&str] = &["up"];

/// Every PromQL expression in the dashboard: panel targets and the
/// template variables' queries.
fn dashboard_queries(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("expr" | "definition", Value::String(q)) => out.push(q.clone()),
                    _ => dashboard_queries(value, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| dashboard_queries(i, out)),
        _ => {}
    }
}

/// The metric names a query mentions: identifiers that start with
/// `fencelog_`, and Prometheus' own series, outside quoted label values.
pub(crate) fn metric_names(query: &str) -> BTreeSet<String> {
    let mut unquoted = String::new();
    let mut in_quote = false;
    for c in query.chars() {
        if c == '"' {
            in_quote = !in_quote;
        } else if !in_quote {
            unquoted.push(c);
        }
    }
    unquoted
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|w| w.starts_with("fencelog_") || PROMETHEUS_OWN.contains(w))
        .map(str::to_string)
        .collect()
}

/// Sample names in an exposition (`name{labels} value` / `name value`).
pub(crate) fn exposed(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect()
}

/// The prefix of the families only a cluster node serves.
pub(crate) const RAFT_FAMILIES: &str = "fencelog_raft_";

/// The PromQL expression of every alert rule.
pub(crate) fn alert_queries() -> Vec<String> {
    let alerts = std::fs::read_to_string(docs("prometheus/fencelog-alerts.yml")).unwrap();
    alerts
        .lines()
        .filter_map(|l| l.trim().strip_prefix("expr: "))
        .map(str::to_string)
        .collect()
}

async fn scrape() -> String {
    let tmp = tempfile::tempdir().unwrap();
    let server = serve().data_dir(tmp.path().join("data")).start();
    let http = reqwest::Client::new();
    let post = |path: &str, body: &str| {
        http.post(format!("{}{path}", server.url()))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
    };
    // One of each outcome the dashboard draws.
    let append = r#"{"fencing_token": 2, "records": [{"body": "x"}]}"#;
    let stale = append.replace('2', "1");
    for (path, body, status) in [
        ("/v1/streams/s/records", append, 200),
        ("/v1/streams/s/records", stale.as_str(), 409),
        ("/v1/streams/s/fence", r#"{"fencing_token": 3}"#, 200),
    ] {
        assert_eq!(
            post(path, body).await.unwrap().status(),
            status,
            "{path} {body}"
        );
    }
    let metrics = http.get(format!("{}/metrics", server.url())).send();
    metrics.await.unwrap().text().await.unwrap()
}

#[tokio::test]
async fn every_metric_the_dashboard_and_the_alerts_query_is_served() {
    let text = scrape().await;
    let served = exposed(&text);
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(docs("grafana/fencelog-dashboard.json")).unwrap(),
    )
    .unwrap();
    let mut queries = Vec::new();
    dashboard_queries(&dashboard, &mut queries);
    assert!(
        queries.len() >= 15,
        "the dashboard has {} queries",
        queries.len()
    );
    queries.extend(alert_queries());
    let mut queried = BTreeSet::new();
    for q in &queries {
        let names = metric_names(q);
        assert!(!names.is_empty(), "a query without a metric: {q}");
        queried.extend(names);
    }
    // The Raft families are a cluster node's: `cluster_metrics.rs` checks
    // the alerts' queries against one.
    let missing: Vec<&String> = queried
        .iter()
        .filter(|n| !PROMETHEUS_OWN.contains(&n.as_str()) && !n.starts_with(RAFT_FAMILIES))
        .filter(|n| !served.contains(*n))
        .collect();
    assert!(
        missing.is_empty(),
        "queried but not served: {missing:?}\n{text}"
    );
    // The dashboard covers the health gauge, the histograms and the counters.
    for name in [
        "fencelog_healthy",
        "fencelog_fsync_seconds_bucket",
        "fencelog_group_records_sum",
        "fencelog_stale_rejections_total",
        "fencelog_appends_accepted_total",
    ] {
        assert!(queried.contains(name), "the dashboard does not use {name}");
    }
}

fn promtool(args: &[&str]) -> Option<String> {
    let Some(bin) = deps::find_program("promtool") else {
        deps::missing(
            "ops_dashboard promtool",
            "promtool is not on PATH (Debian: apt-get install prometheus)",
        );
        return None;
    };
    let out = Command::new(bin)
        .args(args)
        .current_dir(docs("prometheus"))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?}:\n{text}");
    Some(text)
}

#[test]
fn promtool_accepts_the_scrape_config_and_the_rules_and_their_tests_pass() {
    let Some(config) = promtool(&["check", "config", "prometheus.yml"]) else {
        return;
    };
    assert!(config.contains("SUCCESS: 1 rule files found"), "{config}");
    let rules = promtool(&["check", "rules", "fencelog-alerts.yml"]).unwrap();
    assert!(rules.contains("SUCCESS: 9 rules found"), "{rules}");
    let tests = promtool(&["test", "rules", "fencelog-alerts.test.yml"]).unwrap();
    assert!(tests.contains("SUCCESS"), "{tests}");
}
