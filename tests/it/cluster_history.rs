//! Recording what real cluster nodes answer into the shared history
//! checker (`fencelog_testkit::history`), and reading each node's final
//! logs to check it against.

use fencelog_testkit::history::{Call, FinalLog, History, Outcome, Rec, Replica};
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
        Err(e) => return Outcome::Unknown(e.to_string()),
    };
    let status = r.status().as_u16();
    let v: Value = r.json().await.unwrap_or(Value::Null);
    match (status, v["error"].as_str()) {
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
    let records: Vec<Value> = bodies.iter().map(|b| json!({ "body": b })).collect();
    let req = json!({ "fencing_token": token, "records": records });
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
        Ok(r) if r.status() == 200 => {
            let v: Value = r.json().await.unwrap_or(Value::Null);
            Outcome::Read {
                records: records_of(&v),
                next_seq: v["next_seq"].as_u64().expect("a read answers next_seq"),
            }
        }
        // 416 before the stream exists or past its end: nothing to judge.
        Ok(r) => Outcome::ReadFailed(r.status().to_string()),
        Err(e) => Outcome::ReadFailed(e.to_string()),
    };
    h.complete(at, call, outcome);
}

/// Node `url`'s final logs of `streams` (absent streams are empty).
pub async fn replica(http: &reqwest::Client, url: &str, streams: &[&str]) -> Replica {
    let mut out = Replica::new();
    for s in streams {
        let info = http
            .get(format!("{url}/v1/streams/{s}"))
            .send()
            .await
            .unwrap();
        if info.status() == 404 {
            out.insert(s.to_string(), FinalLog::default());
            continue;
        }
        let info: Value = info.json().await.unwrap();
        let page: Value = http
            .get(format!(
                "{url}/v1/streams/{s}/records?count={READ_COUNT_MAX}"
            ))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let log = FinalLog {
            next_seq: info["next_seq"].as_u64().unwrap(),
            highest_token: info["highest_token"].as_u64().unwrap(),
            records: records_of(&page),
        };
        assert_eq!(
            log.records.len() as u64,
            log.next_seq - info["first_seq"].as_u64().unwrap(),
            "{url} {s}: the final read covers the log"
        );
        out.insert(s.to_string(), log);
    }
    out
}
