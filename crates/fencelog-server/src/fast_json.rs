//! The fast path for JSON appends: the common, valid body decoded in one
//! pass straight into record `Bytes`, without building a `serde_json::Value`
//! tree. It only ever says "here is the append" or "I cannot tell": any
//! input it does not accept goes to the `Value` parser in
//! [`crate::json_append`], which owns every error message. So it must accept a
//! subset of what that parser accepts, with identical results; the fuzz
//! target `http_append_body` and the corpus test check exactly that.
//!
//! Visitors are written by hand instead of derived because a derived struct
//! also accepts a JSON array in place of an object, which the `Value`
//! parser refuses.

use crate::append_body::AppendBody;
use bytes::Bytes;
use fencelog_api::record::{decode_base64, BODY, BODY_BASE64};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::fmt;

/// `Some` only when the `Value` parser would return the very same append.
pub(crate) fn parse(body: &Bytes) -> Option<AppendBody> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let append = de.deserialize_map(AppendVisitor { body }).ok()?;
    // Trailing non-whitespace is an error for the `Value` parser too.
    de.end().ok()?;
    Some(append)
}

/// A body string, borrowed from the request when it has no escapes.
struct Text<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(s.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

/// Object keys, matched on their unescaped text (as the `Value` parser
/// sees them) without allocating.
enum Key {
    Token,
    MatchSeqNum,
    Records,
    Body,
    BodyBase64,
    Other,
}

impl<'de> de::Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Key, E> {
                Ok(match s {
                    "fencing_token" => Key::Token,
                    "match_seq_num" => Key::MatchSeqNum,
                    "records" => Key::Records,
                    BODY => Key::Body,
                    BODY_BASE64 => Key::BodyBase64,
                    _ => Key::Other,
                })
            }
        }
        d.deserialize_str(V)
    }
}

/// Bails out with an error the caller never shows: it only means "ask the
/// `Value` parser".
fn undecided<E: de::Error>() -> E {
    E::custom("not on the fast path")
}

struct AppendVisitor<'b> {
    body: &'b Bytes,
}

impl<'de> Visitor<'de> for AppendVisitor<'_> {
    type Value = AppendBody;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an append object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AppendBody, A::Error> {
        let mut token: Option<u64> = None;
        let mut match_seq_num: Option<Option<u64>> = None;
        let mut records: Option<Vec<Bytes>> = None;
        while let Some(key) = map.next_key::<Key>()? {
            // A repeated key means "last one wins" to the `Value` parser; rare
            // enough to leave to it.
            match key {
                Key::Token if token.is_none() => token = Some(map.next_value()?),
                Key::MatchSeqNum if match_seq_num.is_none() => {
                    match_seq_num = Some(map.next_value()?)
                }
                Key::Records if records.is_none() => {
                    records = Some(map.next_value_seed(RecordsSeed { body: self.body })?)
                }
                Key::Token | Key::MatchSeqNum | Key::Records => return Err(undecided()),
                // Unknown top-level fields are ignored by the `Value` parser
                // too, once they parse as JSON.
                Key::Body | Key::BodyBase64 | Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        match (token, records) {
            (Some(token), Some(records)) if token >= 1 && !records.is_empty() => Ok(AppendBody {
                token,
                records,
                match_seq_num: match_seq_num.flatten(),
            }),
            _ => Err(undecided()),
        }
    }
}

struct RecordsSeed<'b> {
    body: &'b Bytes,
}

impl<'de> DeserializeSeed<'de> for RecordsSeed<'_> {
    type Value = Vec<Bytes>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Bytes>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for RecordsSeed<'_> {
    type Value = Vec<Bytes>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of records")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Bytes>, A::Error> {
        // serde_json gives no length hint; small batches are the common case.
        let mut out = Vec::with_capacity(16);
        while let Some(record) = seq.next_element_seed(RecordSeed { body: self.body })? {
            out.push(record);
        }
        Ok(out)
    }
}

struct RecordSeed<'b> {
    body: &'b Bytes,
}

impl<'de> DeserializeSeed<'de> for RecordSeed<'_> {
    type Value = Bytes;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Bytes, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RecordSeed<'_> {
    type Value = Bytes;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a record object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Bytes, A::Error> {
        let bytes = match map.next_key::<Key>()? {
            Some(Key::Body) => {
                let Text(text) = map.next_value()?;
                match text {
                    // The text is the request body's own bytes: share them.
                    Cow::Borrowed(s) => self.body.slice_ref(s.as_bytes()),
                    Cow::Owned(s) => Bytes::from(s),
                }
            }
            Some(Key::BodyBase64) => {
                let Text(b64) = map.next_value()?;
                Bytes::from(decode_base64(b64.as_bytes()).map_err(|_| undecided())?)
            }
            _ => return Err(undecided()),
        };
        // Exactly one field per record; anything more is the slow path's to
        // explain.
        if map.next_key::<Key>()?.is_some() {
            return Err(undecided());
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json_append::{parse as parse_json_append, parse_value as parse_json_append_value};

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
