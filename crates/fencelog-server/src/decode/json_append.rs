//! Decoding a JSON append body: the typed fast path ([`crate::decode::fast_json`])
//! when it can decide, and the reference `Value` parser here, which owns
//! every rule and every error message of the JSON body. The tests below
//! hold the two to agreement, as the fuzz target does.

use crate::decode::append_body::AppendBody;
use crate::decode::fast_json;
use crate::decode::strict_json::{self, Fields};
use crate::error::ApiError;
use bytes::Bytes;
use fencelog_api::record::{BodyError, BodyJson, BODY, BODY_BASE64};
use fencelog_api::record_headers::{self, HEADERS, HEADERS_BASE64};
use fencelog_engine::RecordIn;
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;

/// The fields of an append body.
pub(crate) const FIELDS: [&str; 6] = [
    "fencing_token",
    "match_seq_num",
    "not_after_ms",
    "producer_id",
    "producer_seq",
    "records",
];

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
/// Every key known and once ([`strict_json`]), in the body and in each
/// record.
pub(crate) fn parse_value(bytes: &[u8]) -> Result<AppendBody, ApiError> {
    let obj = strict_json::object(strict_json::document(bytes)?, "the body", &FIELDS)?;
    let token = strict_json::token(&obj, "fencing_token")?;
    let match_seq_num = strict_json::seq(&obj, "match_seq_num")?;
    let not_after_ms = strict_json::seq(&obj, "not_after_ms")?;
    let producer = producer(&obj)?;
    let items = records(&obj)?;
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        out.push(parse_record(i, item)?);
    }
    let mut body = AppendBody::with_headers(token, out, match_seq_num);
    body.producer = producer;
    body.not_after_ms = not_after_ms;
    Ok(body)
}

/// `producer_id` (a string) and `producer_seq`: both or neither.
fn producer(obj: &Fields) -> Result<Option<(String, u64)>, ApiError> {
    let seq = strict_json::seq(obj, "producer_seq")?;
    let id = match obj.get("producer_id") {
        None => None,
        Some(raw) => Some(serde_json::from_str::<String>(raw.get()).map_err(|_| {
            ApiError::bad_request(format!("producer_id must be a string, got {}", raw.get()))
        })?),
    };
    match (id, seq) {
        (Some(id), Some(seq)) => Ok(Some((id, seq))),
        (None, None) => Ok(None),
        (Some(_), None) => Err(ApiError::bad_request("producer_id needs producer_seq")),
        (None, Some(_)) => Err(ApiError::bad_request("producer_seq needs producer_id")),
    }
}

fn records<'a>(obj: &Fields<'a>) -> Result<Vec<&'a RawValue>, ApiError> {
    let raw = obj
        .get("records")
        .ok_or_else(|| ApiError::bad_request("records is required"))?;
    if !raw.get().starts_with('[') {
        return Err(ApiError::bad_request("records must be an array"));
    }
    let items: Vec<&RawValue> = serde_json::from_str(raw.get())
        .map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))?;
    if items.is_empty() {
        return Err(ApiError::bad_request("records must not be empty"));
    }
    Ok(items)
}

/// One record object: exactly one field, `body` or `body_base64`, a
/// string (the api crate's rule, with its messages), at most one of
/// `headers` and `headers_base64` ([`fencelog_api::record_headers`]), and
/// no field twice.
pub(crate) fn parse_record(i: usize, item: &RawValue) -> Result<RecordIn, ApiError> {
    let what = format!("records[{i}]");
    let fields = strict_json::object(item, &what, &[BODY, BODY_BASE64, HEADERS, HEADERS_BASE64])?;
    let header = |field: &str| -> Result<Option<Value>, ApiError> {
        fields
            .get(field)
            .map(|raw| serde_json::from_str::<Value>(raw.get()))
            .transpose()
            .map_err(|e| ApiError::bad_request(format!("{what} malformed JSON: {e}")))
    };
    let (h, h64) = (header(HEADERS)?, header(HEADERS_BASE64)?);
    let headers = record_headers::from_json_fields(h.as_ref(), h64.as_ref())
        .map_err(|e| ApiError::bad_request(format!("{what} {e}")))?;
    let header_fields = h.is_some() as usize + h64.is_some() as usize;
    if fields.len() != 1 + header_fields {
        return Err(bad(&what, BodyError::NotOneField));
    }
    let body = record_bytes(&fields).map_err(|e| bad(&what, e))?;
    Ok(RecordIn { body, headers })
}

fn bad(what: &str, e: BodyError) -> ApiError {
    ApiError::bad_request(format!("{what} {e}"))
}

fn record_bytes(obj: &Fields) -> Result<Bytes, BodyError> {
    let text = |field: &str| {
        obj.get(field)
            .map(|v| serde_json::from_str::<Cow<str>>(v.get()).map_err(|_| BodyError::NotAString))
            .transpose()
    };
    BodyJson::from_fields(text(BODY)?, text(BODY_BASE64)?)?.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::{parse as parse_json_append, parse_value as parse_json_append_value};
    use crate::decode::fast_json::parse;
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
            r#"{"records":[{"body":"x"}],"fencing_token":1}"#,
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
            // unknown top-level fields
            r#"{"fencing_token": 1, "records": [{"body": "x"}], "extra": 1}"#,
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
        // One reading: what the fast path declines, the reference refuses.
        for (input, message) in [
            (
                r#"{"fencing_token": 1, "records": [{"body": "x", "body": "y"}]}"#,
                "records[0] has the field \"body\" more than once",
            ),
            (
                r#"{"fencing_token": 1, "fencing_token": 100, "records": [{"body": "x"}]}"#,
                "the body has the field \"fencing_token\" more than once",
            ),
            (
                r#"{"fencing_token": 1, "match_seq_numb": 0, "records": [{"body": "x"}]}"#,
                "the body has an unknown field \"match_seq_numb\"; the fields are fencing_token, match_seq_num, not_after_ms, producer_id, producer_seq, records",
            ),
            (
                r#"{"fencing_token": 18446744073709551616, "records": [{"body": "x"}]}"#,
                "fencing_token must be an integer in 1..=18446744073709551615, got 18446744073709551616",
            ),
        ] {
            let err = parse_json_append(&Bytes::from(input)).unwrap_err();
            assert_eq!(err.body.message, message, "{input}");
        }
    }

    #[test]
    fn unescaped_bodies_share_the_request_buffer_and_escaped_ones_decode() {
        let body = Bytes::from(
            r#"{"fencing_token": 7, "records": [{"body": "plain"}, {"body": "tab\there"}]}"#,
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
