//! A cluster node answers `POST /v1/streams/{stream}/records` through the
//! front's fast path (issue 13's append route, with the cluster's
//! proposer behind it: issue 14); with `--cluster-redirect` the router's
//! route answers instead. Two one-node clusters, one of each, get the same
//! requests and must answer them byte for byte alike (timestamps and the
//! leader's address masked), then hold the same records.

use crate::cluster_support::ProcCluster;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const SHARDS: u32 = 2;

fn post(path: &str, headers: &[&str], body: &[u8]) -> Vec<u8> {
    fencelog_testkit::http::raw_request("POST", path, headers, body)
}

/// `text` with what follows each `key` up to `end` replaced by `<masked>`.
fn mask(text: &str, key: &str, end: char) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(key) {
        let (head, tail) = rest.split_at(at + key.len());
        out.push_str(head);
        out.push_str("<masked>");
        rest = tail.find(end).map_or("", |e| &tail[e..]);
    }
    out.push_str(rest);
    out
}

/// The answer to `request`: status line, sorted headers (date and the
/// leader's address masked), body (timestamps masked).
async fn exchange(addr: &str, request: &[u8]) -> String {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(request).await.unwrap();
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8(raw).unwrap();
    let text = mask(&text, "\"timestamp_ms\":", ',');
    let (head, body) = text.split_once("\r\n\r\n").expect("a whole response");
    let mut lines = head.lines();
    let status = lines.next().unwrap_or_default().to_string();
    let mut headers: Vec<String> = lines
        .map(|l| {
            let lower = l.to_ascii_lowercase();
            if lower.starts_with("date:") {
                "date: <masked>".to_string()
            } else if lower.starts_with("fencelog-leader:") {
                mask(&lower, "fencelog-leader: 1=", '\n')
            } else {
                l.to_string()
            }
        })
        .collect();
    headers.sort_unstable();
    format!("{status}\n{}\n\n{body}", headers.join("\n"))
}

/// `stream`'s records on `c` as (seq, token, body).
async fn records(c: &ProcCluster, stream: &str) -> Vec<(u64, u64, String)> {
    let url = format!("{}/v1/streams/{stream}/records?start_seq=0", c.url(1));
    let page: Value = c.http.get(url).send().await.unwrap().json().await.unwrap();
    page["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["seq"].as_u64().unwrap(),
                r["fencing_token"].as_u64().unwrap(),
                r["body"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fast_path_answers_cluster_appends_as_the_router_does() {
    let fast = ProcCluster::start(1, SHARDS, &[]);
    let router = ProcCluster::start(1, SHARDS, &["--cluster-redirect"]);
    for c in [&fast, &router] {
        for k in 0..SHARDS {
            c.leader(k, &[1]).await;
        }
    }
    let path = "/v1/streams/s/records";
    let raw = "Content-Type: application/octet-stream";
    let json = "Content-Type: application/json";
    let requests = [
        (post(path, &[raw, "Fencing-Token: 5"], b"first"), 200),
        (post(path, &[raw, "Fencing-Token: 3"], b"stale"), 409),
        (post(path, &[raw], b"no token"), 400),
        (post(path, &[raw, "Fencing-Token: five"], b"bad"), 400),
        (
            post(path, &[raw, "Fencing-Token: 5", "Fencing-Token: 6"], b"2"),
            400,
        ),
        (
            post(path, &[raw, "Fencing-Token: 5", "Match-Seq-Num: 0"], b"x"),
            412,
        ),
        (
            post(path, &[raw, "Fencing-Token: 5", "Match-Seq-Num: 1"], b"m"),
            200,
        ),
        (
            post(
                path,
                &[json],
                br#"{"fencing_token": 6, "records": [{"body": "a"}, {"body": "b"}]}"#,
            ),
            200,
        ),
        (
            post(
                path,
                &[json],
                br#"{"fencing_token": 6, "records": [], "x": 1}"#,
            ),
            400,
        ),
        (post(path, &[json], b"{not json"), 400),
        (
            post("/v1/streams/a~b/records", &[raw, "Fencing-Token: 1"], b"n"),
            400,
        ),
        (
            post(
                "/v1/streams/other/records",
                &[raw, "Fencing-Token: 2"],
                b"o",
            ),
            200,
        ),
    ];
    for (req, status) in &requests {
        let a = exchange(&fast.addrs[0], req).await;
        let b = exchange(&router.addrs[0], req).await;
        assert_eq!(a, b, "request {:?}", String::from_utf8_lossy(req));
        let got: u16 = a.split(' ').nth(1).unwrap().parse().unwrap();
        assert_eq!(got, *status, "{a}");
    }
    let want: Vec<(u64, u64, String)> = [(0, 5, "first"), (1, 5, "m"), (2, 6, "a"), (3, 6, "b")]
        .into_iter()
        .map(|(s, t, b)| (s, t, b.to_string()))
        .collect();
    assert_eq!(records(&fast, "s").await, want);
    assert_eq!(records(&router, "s").await, want);
}
