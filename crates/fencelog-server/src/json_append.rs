//! Decoding a JSON append body: the typed fast path ([`crate::fast_json`])
//! when it can decide, and the reference `Value` parser here, which owns
//! every rule and every error message of the JSON body. The tests below
//! hold the two to agreement, as the fuzz target does.

use crate::append_body::AppendBody;
use crate::error::ApiError;
use crate::fast_json;
use crate::params::{seq_from_json, token_from_json};
use bytes::Bytes;
use fencelog_api::record::{BodyError, BodyJson, BODY, BODY_BASE64};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::fmt::Display;

/// Parses a JSON append body: the fast path when it can decide, the
/// reference parser (and its error messages) otherwise.
pub(crate) fn parse(body: &Bytes) -> Result<AppendBody, ApiError> {
    match fast_json::parse(body) {
        Some(append) => Ok(append),
        None => parse_value(body),
    }
}

/// The reference JSON append parser. Also a fuzz target
/// (`fuzz::http_append_body`), which checks the fast path against it.
pub(crate) fn parse_value(bytes: &[u8]) -> Result<AppendBody, ApiError> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    };
    let token = token_from_json(obj.get("fencing_token"))?;
    let match_seq_num = seq_from_json("match_seq_num", obj.get("match_seq_num"))?;
    let not_after_ms = seq_from_json("not_after_ms", obj.get("not_after_ms"))?;
    let producer = producer_from_json(&obj)?;
    let items = match obj.get("records") {
        None | Some(Value::Null) => return Err(ApiError::bad_request("records is required")),
        Some(Value::Array(items)) if items.is_empty() => {
            return Err(ApiError::bad_request("records must not be empty"))
        }
        Some(Value::Array(items)) => items,
        Some(_) => return Err(ApiError::bad_request("records must be an array")),
    };
    let mut records = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        records.push(parse_record(i, item)?);
    }
    Ok(AppendBody {
        token,
        records,
        match_seq_num,
        producer,
        not_after_ms,
    })
}

/// `producer_id` (a string) and `producer_seq`: both or neither.
fn producer_from_json(obj: &Map<String, Value>) -> Result<Option<(String, u64)>, ApiError> {
    let seq = seq_from_json("producer_seq", obj.get("producer_seq"))?;
    let id = match obj.get("producer_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(id.clone()),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "producer_id must be a string, got {other}"
            )))
        }
    };
    match (id, seq) {
        (Some(id), Some(seq)) => Ok(Some((id, seq))),
        (None, None) => Ok(None),
        (Some(_), None) => Err(ApiError::bad_request("producer_id needs producer_seq")),
        (None, Some(_)) => Err(ApiError::bad_request("producer_seq needs producer_id")),
    }
}

/// One record object: exactly one field, `body` or `body_base64`, a
/// string (the api crate's rule, with its messages).
pub(crate) fn parse_record(i: usize, item: &Value) -> Result<Bytes, ApiError> {
    let bad = |what: &dyn Display| ApiError::bad_request(format!("records[{i}] {what}"));
    let Value::Object(obj) = item else {
        return Err(bad(&"must be an object"));
    };
    record_bytes(obj).map_err(|e| bad(&e))
}

fn record_bytes(obj: &Map<String, Value>) -> Result<Bytes, BodyError> {
    if obj.len() != 1 {
        return Err(BodyError::NotOneField);
    }
    let text = |field: &str| {
        obj.get(field)
            .map(|v| v.as_str().map(Cow::Borrowed).ok_or(BodyError::NotAString))
            .transpose()
    };
    BodyJson::from_fields(text(BODY)?, text(BODY_BASE64)?)?.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::{parse as parse_json_append, parse_value as parse_json_append_value};
    use crate::fast_json::parse;
    use bytes::Bytes;

    /// The fast path either declines or agrees with the reference parser;
    /// returns whether it decided.
    fn agrees(input: &[u8]) -> bool {
        let body = Bytes::copy_from_slice(input);
        let Some(fast) = parse(&body) else {
            return false;
        };
        let reference = parse_json_append_value(input).unwrap_or_else(|e| {
            panic!(
                "fast path accepted {:?}, reference refused: {}",
                String::from_utf8_lossy(input),
                e.body.message
            )
        });
        assert_eq!(fast, reference, "{:?}", String::from_utf8_lossy(input));
        true
    }

    #[test]
    fn agrees_with_the_reference_over_the_fuzz_corpus() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/corpus/http_append_body");
        let mut decided = 0;
        let mut total = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let data = std::fs::read(entry.unwrap().path()).unwrap();
            total += 1;
            decided += agrees(&data) as usize;
        }
        eprintln!("fast path decided {decided} of {total} corpus inputs");
        // A fast path that declines everything would pass vacuously.
        assert!(decided > 0, "fast path decided none of {total} inputs");
    }

    /// Every single-byte deletion and a set of replacements of valid bodies:
    /// the near misses a hand-written decoder gets wrong.
    #[test]
    fn agrees_on_every_near_miss_of_valid_bodies() {
        let seeds: &[&str] = &[
            r#"{"fencing_token": 10, "records": [{"body": "a\"b"}, {"body_base64": "eA=="}], "match_seq_num": 3}"#,
            r#"{"records":[{"body":"x"}],"fencing_token":1,"extra":{"k":[1,2]}}"#,
            r#"{"fencing_token":18446744073709551615,"records":[{"body":""}],"match_seq_num":null}"#,
        ];
        let replacements = b"0-.e\"{}[],:\\ ntl1";
        let mut decided = 0;
        for seed in seeds {
            let seed = seed.as_bytes();
            assert!(agrees(seed));
            for i in 0..seed.len() {
                let mut cut = seed.to_vec();
                cut.remove(i);
                decided += agrees(&cut) as usize;
                for &r in replacements {
                    let mut changed = seed.to_vec();
                    changed[i] = r;
                    decided += agrees(&changed) as usize;
                }
            }
        }
        assert!(decided > 0);
    }

    #[test]
    fn declines_what_only_the_reference_can_explain() {
        let declined = [
            // token 0, negative zero, float, overflow, string
            r#"{"fencing_token": 0, "records": [{"body": "x"}]}"#,
            r#"{"fencing_token": -0, "records": [{"body": "x"}]}"#,
            r#"{"fencing_token": 1.0, "records": [{"body": "x"}]}"#,
            r#"{"fencing_token": 18446744073709551616, "records": [{"body": "x"}]}"#,
            r#"{"fencing_token": "1", "records": [{"body": "x"}]}"#,
            // arrays where objects belong (a derived struct would take them)
            r#"[1, [{"body": "x"}]]"#,
            r#"{"fencing_token": 1, "records": [["x"]]}"#,
            // both, neither, unknown and repeated record fields
            r#"{"fencing_token": 1, "records": [{"body": "x", "body_base64": "eA=="}]}"#,
            r#"{"fencing_token": 1, "records": [{}]}"#,
            r#"{"fencing_token": 1, "records": [{"body": "x", "extra": 1}]}"#,
            r#"{"fencing_token": 1, "records": [{"body": "x", "body": "y"}]}"#,
            // repeated top-level keys, empty and missing records, bad base64
            r#"{"fencing_token": 1, "fencing_token": 2, "records": [{"body": "x"}]}"#,
            r#"{"fencing_token": 1, "records": []}"#,
            r#"{"fencing_token": 1}"#,
            r#"{"fencing_token": 1, "records": [{"body_base64": "eA="}]}"#,
            r#"{"fencing_token": 1, "records": [{"body": "x"}]} x"#,
        ];
        for input in declined {
            assert!(
                parse(&Bytes::from(input)).is_none(),
                "fast path decided {input}"
            );
        }
        // A repeated record field is fine for the reference (last wins), and
        // so for the combined parser.
        let dup = Bytes::from(r#"{"fencing_token": 1, "records": [{"body": "x", "body": "y"}]}"#);
        assert_eq!(
            parse_json_append(&dup).unwrap().records,
            vec![Bytes::from("y")]
        );
    }

    #[test]
    fn unescaped_bodies_share_the_request_buffer_and_escaped_ones_decode() {
        let body = Bytes::from(
            r#"{"fencing_token": 7, "records": [{"body": "plain"}, {"body": "tab\there"}], "ignored": [1, {"a": null}]}"#,
        );
        let append = parse(&body).unwrap();
        assert_eq!(append.token, 7);
        assert_eq!(append.match_seq_num, None);
        assert_eq!(
            append.records,
            vec![Bytes::from("plain"), Bytes::from("tab\there")]
        );
        let at = body.windows(5).position(|w| w == b"plain").unwrap();
        assert_eq!(append.records[0].as_ptr(), body[at..].as_ptr());
        // Escaped keys mean the same key to both parsers.
        let escaped = Bytes::from(
            r#"{"fencing\u005ftoken": 3, "records": [{"bo\u0064y": "x"}], "match_seq_num": 9}"#,
        );
        let a = parse(&escaped).unwrap();
        assert_eq!((a.token, a.match_seq_num), (3, Some(9)));
    }
}
