//! One request, one reading: JSON write bodies are objects whose every key
//! is known and appears once. A repeated key (which a `Value` parser reads
//! as "last one wins") or a misspelled one (`match_seq_numb`, silently
//! making a conditional append unconditional) is a 400, so a body means
//! exactly one thing to every reader of it.
//!
//! Values stay raw JSON text until their field's own parser reads them, so
//! a number too large for a u64 is reported as the client wrote it, not as
//! the float a `Value` would have made of it.

use crate::error::ApiError;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::fmt;

/// The fields of a JSON object, in order, values unparsed.
pub(crate) struct Fields<'a>(Vec<(String, &'a RawValue)>);

impl<'a> Fields<'a> {
    /// The raw value of `key`, if present and not `null`.
    pub(crate) fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| *v)
            .filter(|v| v.get() != "null")
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

/// `what` (e.g. "the body", "records[3]") as an object with only the
/// `known` keys, each at most once.
pub(crate) fn object<'a>(
    raw: &'a RawValue,
    what: &str,
    known: &[&str],
) -> Result<Fields<'a>, ApiError> {
    let text = raw.get();
    if !text.starts_with('{') {
        return Err(ApiError::bad_request(format!(
            "{what} must be a JSON object"
        )));
    }
    let mut de = serde_json::Deserializer::from_str(text);
    // `raw` is valid JSON already, so the only way this fails is a bug.
    let fields = de
        .deserialize_map(FieldsVisitor)
        .map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))?;
    for (i, (key, _)) in fields.iter().enumerate() {
        if !known.contains(&key.as_str()) {
            return Err(ApiError::bad_request(format!(
                "{what} has an unknown field {key:?}; the fields are {}",
                known.join(", ")
            )));
        }
        if fields[..i].iter().any(|(k, _)| k == key) {
            return Err(ApiError::bad_request(format!(
                "{what} has the field {key:?} more than once"
            )));
        }
    }
    Ok(Fields(fields))
}

/// A whole request body as JSON text: malformed JSON and trailing bytes
/// are refused here, once.
pub(crate) fn document(bytes: &[u8]) -> Result<&RawValue, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))
}

/// Reads an object's entries without judging them (that is [`object`]'s
/// job, with messages free of serde's positions).
struct FieldsVisitor;

impl<'de> Visitor<'de> for FieldsVisitor {
    type Value = Vec<(String, &'de RawValue)>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            out.push((key, map.next_value::<&RawValue>()?));
        }
        Ok(out)
    }
}

const TOKEN_RANGE: &str = "an integer in 1..=18446744073709551615";

/// JSON integer text (digits only; JSON already forbids leading zeros).
fn integer(raw: &RawValue) -> Option<u64> {
    let t = raw.get();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

/// A required fencing token.
pub(crate) fn token(fields: &Fields, key: &str) -> Result<u64, ApiError> {
    let raw = fields
        .get(key)
        .ok_or_else(|| ApiError::bad_request(format!("{key} is required")))?;
    match integer(raw) {
        Some(t) if t >= 1 => Ok(t),
        _ => Err(ApiError::bad_request(format!(
            "{key} must be {TOKEN_RANGE}, got {}",
            raw.get()
        ))),
    }
}

/// An optional sequence number.
pub(crate) fn seq(fields: &Fields, key: &str) -> Result<Option<u64>, ApiError> {
    let Some(raw) = fields.get(key) else {
        return Ok(None);
    };
    integer(raw).map(Some).ok_or_else(|| {
        ApiError::bad_request(format!(
            "{key} must be a non-negative integer, got {}",
            raw.get()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(text: &str) -> Result<u64, String> {
        let raw = document(text.as_bytes()).map_err(|e| e.body.message)?;
        let f = object(raw, "the body", &["fencing_token"]).map_err(|e| e.body.message)?;
        token(&f, "fencing_token").map_err(|e| e.body.message)
    }

    #[test]
    fn one_reading_only() {
        assert_eq!(fields(r#"{"fencing_token": 7}"#), Ok(7));
        assert_eq!(
            fields(r#"{"fencing_token": 1, "fencing_token": 100}"#),
            Err("the body has the field \"fencing_token\" more than once".into())
        );
        assert_eq!(
            fields(r#"{"fencing_token": 1, "fencing_tokn": 2}"#),
            Err(
                "the body has an unknown field \"fencing_tokn\"; the fields are fencing_token"
                    .into()
            )
        );
        // Escaped keys are the same key.
        assert!(fields(r#"{"fencing_token": 1, "fencing\u005ftoken": 2}"#)
            .unwrap_err()
            .contains("more than once"));
    }

    #[test]
    fn out_of_range_numbers_are_quoted_as_sent() {
        assert_eq!(
            fields(r#"{"fencing_token": 18446744073709551616}"#),
            Err(format!(
                "fencing_token must be {TOKEN_RANGE}, got 18446744073709551616"
            ))
        );
        for (text, shown) in [
            ("0", "0"),
            ("-1", "-1"),
            ("1.0", "1.0"),
            ("\"1\"", "\"1\""),
            ("1e3", "1e3"),
        ] {
            assert_eq!(
                fields(&format!(r#"{{"fencing_token": {text}}}"#)),
                Err(format!("fencing_token must be {TOKEN_RANGE}, got {shown}"))
            );
        }
        assert_eq!(
            fields(r#"{"fencing_token": null}"#),
            Err("fencing_token is required".into())
        );
        assert_eq!(fields("[1]"), Err("the body must be a JSON object".into()));
        assert!(fields("{").unwrap_err().starts_with("malformed JSON"));
    }
}
