//! The compact binary append body, `application/vnd.fencelog.batch`: the
//! fencing token and optional `Match-Seq-Num` travel in headers, the body
//! is one or more records, each a little-endian `u32` length followed by
//! that many bytes. Records become slices of the request body, so a batch
//! costs no per-record copy or decode on its way to the engine.

use bytes::Bytes;

pub const CONTENT_TYPE: &str = "application/vnd.fencelog.batch";

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
}
