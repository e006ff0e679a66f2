//! Decoding a JSON append body: the typed fast path ([`crate::fast_json`])
//! when it can decide, and the reference `Value` parser here, which owns
//! every rule and every error message of the JSON body.

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
    })
}

/// One record object: exactly one field, `body` or `body_base64`, a
/// string (the api crate's rule, with its messages).
fn parse_record(i: usize, item: &Value) -> Result<Bytes, ApiError> {
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
