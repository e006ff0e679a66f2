//! Recording what real cluster nodes answer into the shared history
//! checker (`fencelog_testkit::history`), and reading each node's final
//! logs to check it against.

use fencelog_testkit::history::{Call, FinalLog, History, Outcome, Rec, Replica};

/// Whether `stream` is a tombstone on node `url`: listed nowhere and 404,
/// but a stale token 1 write is refused 409 (a stream that never existed
/// would be created by it, so only streams known to be written call
/// this; the probe's token 1 is below every token the tests delete with).
async fn tombstone(http: &reqwest::Client, url: &str, stream: &str) -> bool {
    let trim = format!("{url}/v1/streams/{stream}/trim");
    let body = json!({ "fencing_token": 1, "trim_seq": 0 });
    // A trim of a stream that does not exist is 404 and changes nothing;
    // of a tombstone, the fencing rule answers first. It is proposed, so
    // it may come back 503 with its outcome unknown: asked again, as a
    // trim to 0 at token 1 changes nothing a second time either.
    let (status, _) = settled_even_if_unknown(|| http.post(&trim).json(&body)).await;
    status != 404
}
use crate::cluster_support::{settled, settled_even_if_unknown};
use serde_json::{json, Value};
use std::time::Duration;

/// Longer than any commit timeout the tests give the nodes, so a node's
/// own 503 arrives before the client gives up.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// Records at most read back per request: the tests' logs are smaller.
const READ_COUNT_MAX: u64 = 10_000;

/// What a write's answer tells the checker.
async fn write_outcome(sent: reqwest::Result<reqwest::Response>, ok: &str) -> Outcome {
    let r = match sent {
        Ok(r) => r,
        // No connection, so no request: nothing can have applied. (A
        // pooled connection that breaks is not a connect error.)
        Err(e) if e.is_connect() => return Outcome::Refused(format!("not connected: {e}")),
        Err(e) => return Outcome::Unknown(e.to_string()),
    };
    let status = r.status().as_u16();
    // A node killed mid-answer cuts the body: the write may have applied.
    let v: Value = match r.bytes().await {
        Ok(b) => serde_json::from_slice(&b).unwrap_or(Value::Null),
        Err(e) => return Outcome::Unknown(format!("{status} cut short: {e}")),
    };
    match (status, v["error"].as_str()) {
        // The node says nothing was proposed: the checker holds it to
        // that (the write must not be in the final log).
        (503, Some("unavailable")) if v["outcome_unknown"] == false => {
            Outcome::Refused(format!("{status} {v}"))
        }
        (200, _) => match (ok, v[ok].as_u64()) {
            ("first_seq", Some(first_seq)) => Outcome::Appended { first_seq },
            ("next_seq", Some(next_seq)) => Outcome::Fenced { next_seq },
            _ => panic!("a 200 without {ok}: {v}"),
        },
        (409, Some("stale_fencing_token")) => Outcome::Stale {
            highest: v["highest_token"]
                .as_u64()
                .expect("a 409 cites the highest"),
        },
        (503, _) | (500..=599, _) => Outcome::Unknown(format!("{status} {v}")),
        _ => Outcome::Refused(format!("{status} {v}")),
    }
}

/// An append of `bodies` through `url`, recorded.
pub async fn append(
    h: &History,
    http: &reqwest::Client,
    url: &str,
    stream: &str,
    token: u64,
    bodies: &[String],
) -> Outcome {
    produce(h, http, url, (stream, token, None), bodies).await
}

/// An append, as an idempotent producer's `(id, seq)` when given (its
/// retry of an applied append answers the original ack), recorded.
pub async fn produce(
    h: &History,
    http: &reqwest::Client,
    url: &str,
    (stream, token, producer): (&str, u64, Option<(&str, u64)>),
    bodies: &[String],
) -> Outcome {
    let records: Vec<Value> = bodies.iter().map(|b| json!({ "body": b })).collect();
    let mut req = json!({ "fencing_token": token, "records": records });
    if let Some((id, seq)) = producer {
        req["producer_id"] = json!(id);
        req["producer_seq"] = json!(seq);
    }
    let call = Call::Append {
        stream: stream.to_string(),
        token,
        bodies: bodies.iter().map(|b| b.as_bytes().to_vec()).collect(),
    };
    let at = h.invoke();
    let sent = http
        .post(format!("{url}/v1/streams/{stream}/records"))
        .json(&req)
        .timeout(REQUEST_TIMEOUT)
        .send()
        .await;
    let outcome = write_outcome(sent, "first_seq").await;
    h.complete(at, call, outcome.clone());
    outcome
}

/// A fence through `url`, recorded.
pub async fn fence(
    h: &History,
    http: &reqwest::Client,
    url: &str,
    stream: &str,
    token: u64,
) -> Outcome {
    let call = Call::Fence {
        stream: stream.to_string(),
        token,
    };
    let at = h.invoke();
    let sent = http
        .post(format!("{url}/v1/streams/{stream}/fence"))
        .json(&json!({ "fencing_token": token }))
        .timeout(REQUEST_TIMEOUT)
        .send()
        .await;
    let outcome = write_outcome(sent, "next_seq").await;
    h.complete(at, call, outcome.clone());
    outcome
}

/// A trim, seal or delete through `url`, recorded.
pub async fn lifecycle(h: &History, http: &reqwest::Client, url: &str, call: Call) -> Outcome {
    let (stream, token) = (call.stream().to_string(), call_token(&call));
    let base = format!("{url}/v1/streams/{stream}");
    let req = match &call {
        Call::Trim { trim_seq, .. } => http
            .post(format!("{base}/trim"))
            .json(&json!({ "fencing_token": token, "trim_seq": trim_seq })),
        Call::Seal { .. } => http
            .post(format!("{base}/seal"))
            .json(&json!({ "fencing_token": token })),
        Call::Delete { .. } => http.delete(base).json(&json!({ "fencing_token": token })),
        other => panic!("not a lifecycle op: {other:?}"),
    };
    let at = h.invoke();
    let sent = req.timeout(REQUEST_TIMEOUT).send().await;
    let outcome = write_outcome(sent, "next_seq").await;
    h.complete(at, call, outcome.clone());
    outcome
}

fn call_token(call: &Call) -> u64 {
    match call {
        Call::Trim { token, .. } | Call::Seal { token, .. } | Call::Delete { token, .. } => *token,
        _ => 0,
    }
}

fn records_of(v: &Value) -> Vec<Rec> {
    let Some(a) = v["records"].as_array() else {
        return Vec::new();
    };
    a.iter()
        .map(|r| Rec {
            seq: r["seq"].as_u64().unwrap(),
            token: r["fencing_token"].as_u64().unwrap(),
            body: r["body"].as_str().unwrap().as_bytes().to_vec(),
        })
        .collect()
}

/// A read from `start` through `url`, recorded.
pub async fn read(h: &History, http: &reqwest::Client, url: &str, stream: &str, start: u64) {
    let call = Call::Read {
        stream: stream.to_string(),
        start,
    };
    let at = h.invoke();
    let sent = http
        .get(format!(
            "{url}/v1/streams/{stream}/records?start_seq={start}&count={READ_COUNT_MAX}"
        ))
        .timeout(REQUEST_TIMEOUT)
        .send()
        .await;
    let outcome = match sent {
        // A node killed mid-answer cuts the body: a failed read. A body
        // that arrived whole must be a read's answer.
        Ok(r) if r.status() == 200 => match r.bytes().await {
            Ok(b) => {
                let v: Value = serde_json::from_slice(&b).expect("a whole 200 read is JSON");
                Outcome::Read {
                    records: records_of(&v),
                    next_seq: v["next_seq"].as_u64().expect("a read answers next_seq"),
                }
            }
            Err(e) => Outcome::ReadFailed(format!("200 cut short: {e}")),
        },
        // 416 before the stream exists or past its end: nothing to judge.
        Ok(r) => {
            let status = r.status().as_u16();
            Outcome::ReadFailed(format!("{status} {}", r.text().await.unwrap_or_default()))
        }
        Err(e) => Outcome::ReadFailed(e.to_string()),
    };
    h.complete(at, call, outcome);
}

/// Node `url`'s final logs of `streams` (absent streams are empty).
pub async fn replica(http: &reqwest::Client, url: &str, streams: &[&str]) -> Replica {
    let mut out = Replica::new();
    for s in streams {
        let info_url = format!("{url}/v1/streams/{s}");
        let (status, info) = settled(|| http.get(&info_url)).await;
        if status == 404 {
            // Never created, or a tombstone: the fence history says which
            // (404 for both), so the record of a delete decides below.
            let deleted = tombstone(http, url, s).await;
            out.insert(
                s.to_string(),
                FinalLog {
                    deleted,
                    ..FinalLog::default()
                },
            );
            continue;
        }
        assert_eq!(status, 200, "{url} {s}: {info}");
        let first_seq = info["first_seq"].as_u64().unwrap();
        let page_url =
            format!("{url}/v1/streams/{s}/records?start_seq={first_seq}&count={READ_COUNT_MAX}");
        let (status, page) = settled(|| http.get(&page_url)).await;
        assert_eq!(status, 200, "{url} {s}: {page}");
        let log = FinalLog {
            next_seq: info["next_seq"].as_u64().unwrap(),
            highest_token: info["highest_token"].as_u64().unwrap(),
            records: records_of(&page),
            sealed: info["sealed"].as_bool().unwrap(),
            deleted: false,
        };
        assert_eq!(
            log.records.len() as u64,
            log.next_seq - first_seq,
            "{url} {s}: the final read covers the log"
        );
        out.insert(s.to_string(), log);
    }
    out
}
