//! The HTTP layer's metrics on `GET /metrics`, beside the engine's:
//! requests by method, matched route and status (a path no route matches
//! is one `unmatched` label, whatever it was), their latency, what plain
//! reads returned, and live tails — exact values after a known sequence of
//! requests, one `# EOF` at the end.

use fencelog_testkit::http::TestServer;

async fn metrics_text(srv: &TestServer) -> String {
    srv.api.metrics_text().await
}

fn has(text: &str, line: &str) {
    assert!(
        text.lines().any(|l| l == line),
        "no line {line:?} in:\n{text}"
    );
}

#[tokio::test]
async fn requests_reads_and_tails_are_counted() {
    let srv = TestServer::start().await;
    let api = &srv.api;
    assert_eq!(api.append("m", 2, &["a", "bb", "ccc"]).await.0, 200);
    assert_eq!(api.append("m", 1, &["late"]).await.0, 409);
    assert_eq!(api.read("m", "start_seq=1").await.0, 200);
    for path in ["/nope", "/v1/elsewhere/42"] {
        assert_eq!(api.get(path).await.0, 404);
    }
    let mut tail = api.tail("m", "start_seq=0", None).await;
    assert_eq!(
        tail.expect("records")
            .await
            .json()
            .as_array()
            .unwrap()
            .len(),
        3
    );

    let text = metrics_text(&srv).await;
    let records = r#"route="/v1/streams/{stream}/records""#;
    for line in [
        format!(r#"fencelog_http_requests_total{{method="POST",{records},status="200"}} 1"#),
        format!(r#"fencelog_http_requests_total{{method="POST",{records},status="409"}} 1"#),
        // The read, and the tail (counted when its head was sent).
        format!(r#"fencelog_http_requests_total{{method="GET",{records},status="200"}} 2"#),
        r#"fencelog_http_requests_total{method="GET",route="unmatched",status="404"} 2"#.into(),
        format!(r#"fencelog_http_request_seconds_count{{method="POST",{records},status="409"}} 1"#),
        "fencelog_read_records_total 2".into(),
        "fencelog_read_bytes_total 5".into(),
        "fencelog_tails_live 1".into(),
        "fencelog_tail_events_total 1".into(),
        "fencelog_tail_records_total 3".into(),
        // The engine's, in the same answer.
        "fencelog_appends_accepted_total 1".into(),
    ] {
        has(&text, &line);
    }
    assert_eq!(text.matches("# EOF").count(), 1, "{text}");
    assert!(text.ends_with("# EOF\n"), "{text}");
    drop(tail);
}

/// The metric names in `text`'s `# TYPE` lines, counters with the
/// `_total` their samples carry.
fn served(text: &str) -> std::collections::BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| {
            let mut parts = l.split(' ');
            let (name, kind) = (parts.next().unwrap(), parts.next().unwrap());
            match kind {
                "counter" => format!("{name}_total"),
                _ => name.to_string(),
            }
        })
        .collect()
}

/// docs/operations.md's one table of metrics lists exactly what a server
/// serves.
#[tokio::test]
async fn the_metrics_table_lists_every_metric_served() {
    let srv = TestServer::start().await;
    let served = served(&metrics_text(&srv).await);
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/operations.md"),
    )
    .unwrap();
    // The single node's table: the section up to the cluster's.
    let single = doc.split("### A cluster node's metrics").next().unwrap();
    let documented: std::collections::BTreeSet<String> = single
        .lines()
        .filter_map(|l| l.strip_prefix("| `fencelog_"))
        .map(|l| format!("fencelog_{}", l.split('`').next().unwrap()))
        .collect();
    assert_eq!(documented, served);
}
