//! The compact binary append body, `application/vnd.fencelog.batch`: the
//! fencing token and optional `Match-Seq-Num` travel in HTTP headers, the
//! body is one or more records. Records become slices of the request body,
//! so a batch costs no per-record copy or decode on its way to the engine.
//! All integers are little-endian.
//!
//! Version 1 (no `version` parameter, or `version=1`): each record is a
//! `u32` length followed by that many bytes.
//!
//! Version 2 (`application/vnd.fencelog.batch; version=2`), for records
//! with headers; each record is
//!
//! | size | field |
//! |---:|---|
//! | 2 | `header_count` (u16) |
//! | per header: 2 | `name_len` (u16) |
//! | per header: `name_len` | name |
//! | per header: 4 | `value_len` (u32) |
//! | per header: `value_len` | value |
//! | 4 | `body_len` (u32) |
//! | `body_len` | body |
//!
//! the same layout a record has on disk in a frame with headers. The
//! framing is checked here; the header limits (64 per record, 8 KiB of
//! names and values, names 1..=255 bytes) are the engine's rule,
//! `fencelog_engine::validate_headers`.

use bytes::Bytes;
use fencelog_types::{Header, RecordIn};

/// The media type of a batch, version 1.
pub const CONTENT_TYPE: &str = "application/vnd.fencelog.batch";
/// The media type of a batch whose records carry headers (version 2).
pub const CONTENT_TYPE_V2: &str = "application/vnd.fencelog.batch; version=2";

const LEN_BYTES: usize = 4;

/// Why a body is not a well-formed batch, with where it went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchError {
    Empty,
    /// Fewer than four bytes left where a record length should start.
    TrailingBytes {
        offset: usize,
        remaining: usize,
    },
    /// A length that runs past the end of the body.
    Truncated {
        record: usize,
        offset: usize,
        declared: u32,
        remaining: usize,
    },
    /// Version 2: a record's headers run past the end of the body.
    TruncatedHeaders {
        record: usize,
        offset: usize,
    },
    /// A `version` parameter this server does not know.
    UnknownVersion(String),
}

impl std::fmt::Display for BatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let message = match *self {
            BatchError::Empty => format!(
                "the {CONTENT_TYPE} body is empty: it needs at least one record \
                 (a u32 little-endian length, then that many bytes)"
            ),
            BatchError::TrailingBytes { offset, remaining } => format!(
                "the {CONTENT_TYPE} body has {remaining} trailing bytes at offset {offset}: \
                 a record length needs 4"
            ),
            BatchError::Truncated {
                record,
                offset,
                declared,
                remaining,
            } => format!(
                "the {CONTENT_TYPE} body is truncated: record {record} at offset {offset} \
                 declares {declared} bytes but only {remaining} follow"
            ),
            BatchError::TruncatedHeaders { record, offset } => format!(
                "the {CONTENT_TYPE} body is truncated: the headers of record {record} \
                 (from offset {offset}) run past its end"
            ),
            BatchError::UnknownVersion(ref v) => format!(
                "{CONTENT_TYPE} version {v:?} is not supported: use 1 (records only) or 2 \
                 (records with headers)"
            ),
        };
        f.write_str(&message)
    }
}

impl std::error::Error for BatchError {}

/// Checks the framing of the whole body and counts its records, without
/// allocating: the count is bounded against the engine's limit before any
/// per-record storage is set aside.
pub fn count_records(body: &[u8]) -> Result<usize, BatchError> {
    if body.is_empty() {
        return Err(BatchError::Empty);
    }
    let mut offset = 0;
    let mut count = 0;
    while offset < body.len() {
        let remaining = body.len() - offset;
        let Some(prefix) = body.get(offset..offset + LEN_BYTES) else {
            return Err(BatchError::TrailingBytes { offset, remaining });
        };
        let declared = u32::from_le_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
        let after = remaining - LEN_BYTES;
        // Compared as u64 so a length near u32::MAX cannot wrap on a 32-bit
        // usize before the check.
        if declared as u64 > after as u64 {
            return Err(BatchError::Truncated {
                record: count,
                offset,
                declared,
                remaining: after,
            });
        }
        offset += LEN_BYTES + declared as usize;
        count += 1;
    }
    Ok(count)
}

/// The records of a batch body, as zero-copy slices of it.
pub fn split_records(body: &Bytes) -> Result<Vec<Bytes>, BatchError> {
    // Validating first means the loop below cannot index out of bounds, and
    // the Vec is sized once.
    let count = count_records(body)?;
    let mut records = Vec::with_capacity(count);
    let mut offset = 0;
    while offset < body.len() {
        let prefix = &body[offset..offset + LEN_BYTES];
        let len = u32::from_le_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
        let start = offset + LEN_BYTES;
        records.push(body.slice(start..start + len));
        offset = start + len;
    }
    Ok(records)
}

/// Encodes records as a batch body; what clients and the load generator send.
pub fn encode<'a>(records: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        let len = u32::try_from(r.len()).expect("a record over 4 GiB cannot be framed");
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(r);
    }
    out
}

/// The batch version a `Content-Type` value names: its `version`
/// parameter, 1 when there is none. The caller has matched the essence.
pub fn version(content_type: &str) -> Result<u8, BatchError> {
    for param in content_type.split(';').skip(1) {
        let (key, value) = param.split_once('=').unwrap_or((param, ""));
        if key.trim().eq_ignore_ascii_case("version") {
            let value = value.trim().trim_matches('"');
            return match value {
                "1" => Ok(1),
                "2" => Ok(2),
                other => Err(BatchError::UnknownVersion(other.to_string())),
            };
        }
    }
    Ok(1)
}

fn u16_at(b: &[u8], at: usize) -> Option<usize> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?) as usize)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Where record `record` of a version 2 body, starting at `offset`, puts
/// its headers (as `(name, value)` ranges, handed to `each`) and its body;
/// returns the body's range. Checks only the framing.
fn walk_record_v2(
    body: &[u8],
    record: usize,
    offset: usize,
    mut each: impl FnMut(std::ops::Range<usize>, std::ops::Range<usize>),
) -> Result<std::ops::Range<usize>, BatchError> {
    let truncated = BatchError::TruncatedHeaders { record, offset };
    let count = u16_at(body, offset).ok_or_else(|| truncated.clone())?;
    let mut at = offset + 2;
    for _ in 0..count {
        let name_len = u16_at(body, at).ok_or_else(|| truncated.clone())?;
        let name = at + 2..at + 2 + name_len;
        let value_len = u32_at(body, name.end).ok_or_else(|| truncated.clone())? as usize;
        let value_start = name.end + 4;
        // Compared before adding, so a huge length cannot overflow.
        if value_len > body.len().saturating_sub(value_start) {
            return Err(truncated);
        }
        each(name, value_start..value_start + value_len);
        at = value_start + value_len;
    }
    let remaining = body.len() - at;
    let Some(declared) = u32_at(body, at) else {
        return Err(BatchError::TrailingBytes {
            offset: at,
            remaining,
        });
    };
    if declared as u64 > (remaining - LEN_BYTES) as u64 {
        return Err(BatchError::Truncated {
            record,
            offset: at,
            declared,
            remaining: remaining - LEN_BYTES,
        });
    }
    let start = at + LEN_BYTES;
    Ok(start..start + declared as usize)
}

/// [`count_records`] for a version 2 body: checks all of its framing
/// without allocating.
pub fn count_records_v2(body: &[u8]) -> Result<usize, BatchError> {
    if body.is_empty() {
        return Err(BatchError::Empty);
    }
    let (mut offset, mut count) = (0, 0);
    while offset < body.len() {
        offset = walk_record_v2(body, count, offset, |_, _| {})?.end;
        count += 1;
    }
    Ok(count)
}

/// The records of a version 2 body; bodies, names and values are
/// zero-copy slices of it.
pub fn split_records_v2(body: &Bytes) -> Result<Vec<RecordIn>, BatchError> {
    let count = count_records_v2(body)?;
    let mut records = Vec::with_capacity(count);
    let mut offset = 0;
    while offset < body.len() {
        let mut headers = Vec::new();
        let range = walk_record_v2(body, records.len(), offset, |n, v| {
            headers.push(Header::new(body.slice(n), body.slice(v)));
        })?;
        offset = range.end;
        records.push(RecordIn {
            body: body.slice(range),
            headers,
        });
    }
    Ok(records)
}

/// Encodes records with their headers as a version 2 body.
pub fn encode_v2(records: &[RecordIn]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        let count = u16::try_from(r.headers.len()).expect("over 65535 headers cannot be framed");
        out.extend_from_slice(&count.to_le_bytes());
        for h in &r.headers {
            let name = u16::try_from(h.name.len()).expect("a header name over 64 KiB");
            out.extend_from_slice(&name.to_le_bytes());
            out.extend_from_slice(&h.name);
            let value = u32::try_from(h.value.len()).expect("a header value over 4 GiB");
            out.extend_from_slice(&value.to_le_bytes());
            out.extend_from_slice(&h.value);
        }
        let len = u32::try_from(r.body.len()).expect("a record over 4 GiB cannot be framed");
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&r.body);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(body: &[u8]) -> Result<Vec<Bytes>, BatchError> {
        split_records(&Bytes::copy_from_slice(body))
    }

    #[test]
    fn round_trips_including_empty_records() {
        let records: [&[u8]; 4] = [b"a", b"", b"\x00\xff binary", b"last"];
        let body = encode(records);
        let got = split(&body).unwrap();
        assert_eq!(got.iter().map(|b| &b[..]).collect::<Vec<_>>(), records);
    }

    #[test]
    fn slices_share_the_request_buffer() {
        let body = Bytes::from(encode([&b"abc"[..], b"de"]));
        let got = split_records(&body).unwrap();
        assert_eq!(got[0].as_ptr(), body[4..].as_ptr());
        assert_eq!(got[1].as_ptr(), body[11..].as_ptr());
    }

    #[test]
    fn malformed_framing_says_where() {
        assert_eq!(split(b""), Err(BatchError::Empty));
        assert_eq!(
            split(b"\x01\x00"),
            Err(BatchError::TrailingBytes {
                offset: 0,
                remaining: 2
            })
        );
        assert_eq!(
            split(b"\x05\x00\x00\x00abc"),
            Err(BatchError::Truncated {
                record: 0,
                offset: 0,
                declared: 5,
                remaining: 3
            })
        );
        assert_eq!(
            split(b"\x01\x00\x00\x00a\x00"),
            Err(BatchError::TrailingBytes {
                offset: 5,
                remaining: 1
            })
        );
        assert_eq!(
            split(b"\x01\x00\x00\x00a\xff\xff\xff\xffxyz"),
            Err(BatchError::Truncated {
                record: 1,
                offset: 5,
                declared: u32::MAX,
                remaining: 3
            })
        );
    }

    #[test]
    fn version_2_round_trips_headers_as_slices() {
        let records = vec![
            RecordIn::new("a")
                .with_header("trace-id", "abc")
                .with_header("k", ""),
            RecordIn::new(""),
            RecordIn::new(&b"\xff"[..]).with_header(&b"\x00bin"[..], &b"\xfe"[..]),
        ];
        let body = Bytes::from(encode_v2(&records));
        // 2 + (2+8+4+3) + (2+1+4+0) + 4+1 for the first record.
        assert_eq!(&body[..4], b"\x02\x00\x08\x00");
        assert_eq!(count_records_v2(&body), Ok(3));
        let got = split_records_v2(&body).unwrap();
        assert_eq!(got, records);
        assert_eq!(got[0].headers[0].name.as_ptr(), body[4..].as_ptr());
    }

    #[test]
    fn version_2_malformed_framing_says_where() {
        let body = encode_v2(&[RecordIn::new("ab").with_header("n", "vv")]);
        // Every cut inside the record is refused, none panics.
        for cut in 1..body.len() {
            let e = count_records_v2(&body[..cut]).unwrap_err();
            assert!(
                matches!(
                    e,
                    BatchError::TruncatedHeaders {
                        record: 0,
                        offset: 0
                    } | BatchError::TrailingBytes { .. }
                        | BatchError::Truncated { record: 0, .. }
                ),
                "cut {cut}: {e:?}"
            );
        }
        assert_eq!(count_records_v2(b""), Err(BatchError::Empty));
        // A value length near u32::MAX.
        let huge = b"\x01\x00\x01\x00n\xff\xff\xff\xff";
        assert_eq!(
            count_records_v2(huge),
            Err(BatchError::TruncatedHeaders {
                record: 0,
                offset: 0
            })
        );
        assert_eq!(
            BatchError::TruncatedHeaders {
                record: 1,
                offset: 9
            }
            .to_string(),
            "the application/vnd.fencelog.batch body is truncated: the headers of record 1 \
             (from offset 9) run past its end"
        );
    }

    #[test]
    fn the_version_parameter() {
        assert_eq!(version(CONTENT_TYPE), Ok(1));
        assert_eq!(version(CONTENT_TYPE_V2), Ok(2));
        assert_eq!(
            version("application/vnd.fencelog.batch;charset=x; Version=\"2\""),
            Ok(2)
        );
        assert_eq!(version("application/vnd.fencelog.batch; version=1"), Ok(1));
        assert_eq!(
            version("application/vnd.fencelog.batch; version=3")
                .unwrap_err()
                .to_string(),
            "application/vnd.fencelog.batch version \"3\" is not supported: use 1 (records \
             only) or 2 (records with headers)"
        );
    }
}
