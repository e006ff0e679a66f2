//! The fast path for JSON appends: the common, valid body decoded in one
//! pass straight into record `Bytes`, without building a `serde_json::Value`
//! tree. It only ever says "here is the append" or "I cannot tell": any
//! input it does not accept goes to the `Value` parser in
//! `json_append`, which owns every error message. So it must accept a
//! subset of what that parser accepts, with identical results; the fuzz
//! target `http_append_body` and the corpus test check exactly that.
//!
//! Visitors are written by hand instead of derived because a derived struct
//! also accepts a JSON array in place of an object, which the `Value`
//! parser refuses.

use crate::decode::append_body::AppendBody;
use bytes::Bytes;
use fencelog_api::record::{decode_base64, BODY, BODY_BASE64};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
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
    NotAfterMs,
    ProducerId,
    ProducerSeq,
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
                    "not_after_ms" => Key::NotAfterMs,
                    "producer_id" => Key::ProducerId,
                    "producer_seq" => Key::ProducerSeq,
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
        let mut not_after_ms: Option<Option<u64>> = None;
        let mut producer_id: Option<Option<Text<'de>>> = None;
        let mut producer_seq: Option<Option<u64>> = None;
        while let Some(key) = map.next_key::<Key>()? {
            // A repeated or unknown key is a 400 the reference parser
            // explains.
            match key {
                Key::Token if token.is_none() => token = Some(map.next_value()?),
                Key::MatchSeqNum if match_seq_num.is_none() => {
                    match_seq_num = Some(map.next_value()?)
                }
                Key::NotAfterMs if not_after_ms.is_none() => not_after_ms = Some(map.next_value()?),
                Key::ProducerId if producer_id.is_none() => producer_id = Some(map.next_value()?),
                Key::ProducerSeq if producer_seq.is_none() => {
                    producer_seq = Some(map.next_value()?)
                }
                Key::Records if records.is_none() => {
                    records = Some(map.next_value_seed(RecordsSeed { body: self.body })?)
                }
                Key::Token
                | Key::MatchSeqNum
                | Key::NotAfterMs
                | Key::ProducerId
                | Key::ProducerSeq
                | Key::Records
                | Key::Body
                | Key::BodyBase64
                | Key::Other => return Err(undecided()),
            }
        }
        // Both or neither; one alone is the `Value` parser's to explain.
        let producer = match (producer_id.flatten(), producer_seq.flatten()) {
            (Some(Text(id)), Some(seq)) => Some((id.into_owned(), seq)),
            (None, None) => None,
            _ => return Err(undecided()),
        };
        match (token, records) {
            (Some(token), Some(records)) if token >= 1 && !records.is_empty() => Ok(AppendBody {
                token,
                records,
                headers: None,
                match_seq_num: match_seq_num.flatten(),
                producer,
                not_after_ms: not_after_ms.flatten(),
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
