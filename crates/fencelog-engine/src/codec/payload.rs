//! Frame payloads after the stream name (`docs/design.md`, "Payloads"):
//! the records area (with its optional producer trailer and per-record
//! headers), the stream config, the cursor name and the Applied marker.
//! Each has a validating decoder, so that once a frame decoded, walking its
//! payload cannot fail, and an encoder that writes exactly what the decoder
//! accepts.

use super::narrow::{len_u16, len_u32, len_u8};
use super::{check_short_name, BytesIn, DecodeError};
use fencelog_types::{Retention, StreamConfig};

/// Longest idempotent producer id, `[A-Za-z0-9._:-]`.
pub const PRODUCER_ID_BYTES_MAX: usize = 64;
/// Longest consumer cursor name, the stream-name charset.
pub const CURSOR_NAME_BYTES_MAX: usize = 64;
/// Most headers one record carries.
pub const HEADERS_PER_RECORD_MAX: usize = 64;
/// Most header bytes (names plus values) one record carries.
pub const HEADER_BYTES_PER_RECORD_MAX: usize = 8 << 10;
/// Longest header name.
pub const HEADER_NAME_BYTES_MAX: usize = 255;
/// Largest membership blob an Applied marker carries (cluster mode).
pub const MEMBERSHIP_BYTES_MAX: usize = 1 << 20;
/// Bytes of a Config payload.
pub const CONFIG_PAYLOAD_BYTES: usize = 24;
/// Bytes of an Applied payload before the membership blob.
pub const APPLIED_FIXED_BYTES: usize = 28;
/// `u64::MAX` in a retention value: no limit.
pub const RETENTION_UNLIMITED: u64 = u64::MAX;

const CONFIG_AGE_SET: u32 = 1;
const CONFIG_BYTES_SET: u32 = 1 << 1;
const CONFIG_RESPECT_CURSORS: u32 = 1 << 2;

/// The idempotent-producer trailer of a records frame (flag PRODUCER).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerTrailer<'a> {
    /// 1..=64 bytes of `[A-Za-z0-9._:-]`.
    pub id: &'a str,
    /// The producer's own sequence number for this append.
    pub seq: u64,
}

/// A retention setting as Config payloads and checkpoint entries store it:
/// (set, value), `u64::MAX` for unlimited.
pub(super) fn encode_retention(r: Retention) -> (bool, u64) {
    match r {
        Retention::Default => (false, 0),
        Retention::Unlimited => (true, RETENTION_UNLIMITED),
        Retention::Limit(v) => {
            assert!(v != RETENTION_UNLIMITED, "u64::MAX means unlimited");
            (true, v)
        }
    }
}

/// The setting stored as (set, value).
pub(super) fn decode_retention(set: bool, value: u64) -> Result<Retention, DecodeError> {
    match (set, value) {
        (false, 0) => Ok(Retention::Default),
        (false, _) => Err(DecodeError::BadField(
            "a retention value that is not set must be 0",
        )),
        (true, RETENTION_UNLIMITED) => Ok(Retention::Unlimited),
        (true, v) => Ok(Retention::Limit(v)),
    }
}

/// Appends the 24-byte payload of a Config frame: a stream's retention
/// settings.
pub fn encode_config(c: &StreamConfig, out: &mut Vec<u8>) {
    let (age_set, age) = encode_retention(c.retention_age_s);
    let (bytes_set, bytes) = encode_retention(c.retention_bytes);
    let flags = (age_set as u32 * CONFIG_AGE_SET)
        | (bytes_set as u32 * CONFIG_BYTES_SET)
        | (c.respect_cursors as u32 * CONFIG_RESPECT_CURSORS);
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&age.to_le_bytes());
    out.extend_from_slice(&bytes.to_le_bytes());
}

/// Decodes and checks a Config frame's 24-byte payload.
pub fn decode_config(payload: &[u8]) -> Result<StreamConfig, DecodeError> {
    let mut r = BytesIn::new(payload);
    let flags = r.u32()?;
    if flags & !(CONFIG_AGE_SET | CONFIG_BYTES_SET | CONFIG_RESPECT_CURSORS) != 0 {
        return Err(DecodeError::BadField("unknown config flags"));
    }
    if r.u32()? != 0 {
        return Err(DecodeError::BadReserved);
    }
    let age = r.u64()?;
    let bytes = r.u64()?;
    r.finish()?;
    Ok(StreamConfig {
        retention_age_s: decode_retention(flags & CONFIG_AGE_SET != 0, age)?,
        retention_bytes: decode_retention(flags & CONFIG_BYTES_SET != 0, bytes)?,
        respect_cursors: flags & CONFIG_RESPECT_CURSORS != 0,
    })
}

/// The payload of an Applied marker (cluster mode): openraft's LogId of the
/// last Raft entry the group applies, and the membership when it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppliedMark<'a> {
    /// The Raft term of the LogId.
    pub term: u64,
    /// The leader node id of the LogId.
    pub node_id: u64,
    /// The Raft log index of the LogId.
    pub index: u64,
    /// The cluster crate's encoding; empty when unchanged.
    pub membership: &'a [u8],
}

impl AppliedMark<'_> {
    /// Bytes of the payload.
    pub fn encoded_len(&self) -> usize {
        APPLIED_FIXED_BYTES + self.membership.len()
    }

    /// Appends the payload.
    pub fn encode(&self, out: &mut Vec<u8>) {
        assert!(self.membership.len() <= MEMBERSHIP_BYTES_MAX);
        out.extend_from_slice(&self.term.to_le_bytes());
        out.extend_from_slice(&self.node_id.to_le_bytes());
        out.extend_from_slice(&self.index.to_le_bytes());
        out.extend_from_slice(&len_u32(self.membership.len()).to_le_bytes());
        out.extend_from_slice(self.membership);
    }

    /// Decodes and checks a payload.
    pub fn decode(payload: &[u8]) -> Result<AppliedMark<'_>, DecodeError> {
        let mut r = BytesIn::new(payload);
        let term = r.u64()?;
        let node_id = r.u64()?;
        let index = r.u64()?;
        let len = r.u32()? as usize;
        if len > MEMBERSHIP_BYTES_MAX {
            return Err(DecodeError::BadField("membership over 1 MiB"));
        }
        let membership = r.take(len)?;
        r.finish()?;
        Ok(AppliedMark {
            term,
            node_id,
            index,
            membership,
        })
    }
}

/// A cursor frame's payload: `u8 name_len, name`.
pub fn encode_cursor_name(out: &mut Vec<u8>, name: &str) {
    assert!(!name.is_empty() && name.len() <= CURSOR_NAME_BYTES_MAX);
    out.push(len_u8(name.len()));
    out.extend_from_slice(name.as_bytes());
}

pub fn decode_cursor_name(payload: &[u8]) -> Result<&str, DecodeError> {
    let mut r = BytesIn::new(payload);
    let len = r.u8()? as usize;
    let name = r.take(len)?;
    r.finish()?;
    check_short_name(name, CURSOR_NAME_BYTES_MAX)?;
    Ok(std::str::from_utf8(name).expect("validated ascii"))
}

/// One record to encode with headers.
#[derive(Debug, Clone, Copy)]
pub struct RecordSpec<'a> {
    /// (name, value) pairs, in order.
    pub headers: &'a [(&'a [u8], &'a [u8])],
    /// The record's body.
    pub body: &'a [u8],
}

/// Bytes the records area takes: the trailer, then each record.
pub fn records_area_len(
    producer: Option<&ProducerTrailer<'_>>,
    records: &[RecordSpec<'_>],
) -> usize {
    let headers = records.iter().any(|r| !r.headers.is_empty());
    let trailer = producer.map_or(0, |p| 1 + p.id.len() + 8);
    trailer
        + records
            .iter()
            .map(|r| {
                let h: usize = r
                    .headers
                    .iter()
                    .map(|(n, v)| 2 + n.len() + 4 + v.len())
                    .sum();
                (if headers { 2 + h } else { 0 }) + 4 + r.body.len()
            })
            .sum::<usize>()
}

/// Writes the records area. Headers are written for every record exactly
/// when at least one record has one (flag HEADERS), so the encoding is
/// canonical.
pub fn encode_records_area(
    out: &mut Vec<u8>,
    producer: Option<&ProducerTrailer<'_>>,
    records: &[RecordSpec<'_>],
) {
    if let Some(p) = producer {
        assert!(!p.id.is_empty() && p.id.len() <= PRODUCER_ID_BYTES_MAX);
        out.push(len_u8(p.id.len()));
        out.extend_from_slice(p.id.as_bytes());
        out.extend_from_slice(&p.seq.to_le_bytes());
    }
    let headers = records.iter().any(|r| !r.headers.is_empty());
    for r in records {
        if headers {
            assert!(r.headers.len() <= HEADERS_PER_RECORD_MAX);
            out.extend_from_slice(&len_u16(r.headers.len()).to_le_bytes());
            for (name, value) in r.headers {
                assert!(!name.is_empty() && name.len() <= HEADER_NAME_BYTES_MAX);
                out.extend_from_slice(&len_u16(name.len()).to_le_bytes());
                out.extend_from_slice(name);
                out.extend_from_slice(&len_u32(value.len()).to_le_bytes());
                out.extend_from_slice(value);
            }
        }
        out.extend_from_slice(&len_u32(r.body.len()).to_le_bytes());
        out.extend_from_slice(r.body);
    }
}

/// Reads the producer trailer at the front of a records area.
pub(super) fn decode_producer<'a>(r: &mut BytesIn<'a>) -> Result<ProducerTrailer<'a>, DecodeError> {
    let len = r.u8()? as usize;
    let id = r.take(len)?;
    check_short_name(id, PRODUCER_ID_BYTES_MAX)?;
    let seq = r.u64()?;
    Ok(ProducerTrailer {
        id: std::str::from_utf8(id).expect("validated ascii"),
        seq,
    })
}

/// The records of a frame, proven well formed by [`check_records`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordsArea<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) count: u32,
    pub(super) headers: bool,
}

/// Checks that `count` records fill `bytes` exactly, with headers when
/// `headers` (and then at least one record has one), within the header
/// limits.
pub(super) fn check_records(
    bytes: &[u8],
    count: u32,
    headers: bool,
) -> Result<RecordsArea<'_>, DecodeError> {
    let mut r = BytesIn::new(bytes);
    let mut any_header = false;
    for _ in 0..count {
        if headers {
            any_header |= skip_headers(&mut r)? > 0;
        }
        let len = r.u32().map_err(|_| DecodeError::BadRecordLayout)? as usize;
        r.take(len).map_err(|_| DecodeError::BadRecordLayout)?;
    }
    r.finish()?;
    if headers && !any_header {
        return Err(DecodeError::BadField(
            "flag HEADERS on a batch without headers",
        ));
    }
    Ok(RecordsArea {
        bytes,
        count,
        headers,
    })
}

/// Validates one record's headers and returns how many it has.
fn skip_headers(r: &mut BytesIn<'_>) -> Result<u16, DecodeError> {
    let layout = |_| DecodeError::BadRecordLayout;
    let count = r.u16().map_err(layout)?;
    if usize::from(count) > HEADERS_PER_RECORD_MAX {
        return Err(DecodeError::BadField("more than 64 headers on a record"));
    }
    let mut total = 0usize;
    for _ in 0..count {
        let n = r.u16().map_err(layout)? as usize;
        if n == 0 || n > HEADER_NAME_BYTES_MAX {
            return Err(DecodeError::BadField("header name length outside 1..=255"));
        }
        r.take(n).map_err(layout)?;
        let v = r.u32().map_err(layout)? as usize;
        r.take(v).map_err(layout)?;
        total += n + v;
        if total > HEADER_BYTES_PER_RECORD_MAX {
            return Err(DecodeError::BadField("over 8 KiB of headers on a record"));
        }
    }
    Ok(count)
}

/// One record of a [`RecordsArea`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    headers: &'a [u8],
    header_count: u16,
    pub body: &'a [u8],
}

impl<'a> RecordRef<'a> {
    /// The record's (name, value) headers, in order.
    pub fn headers(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
        let mut r = BytesIn::new(self.headers);
        (0..self.header_count).map(move |_| {
            let n = r.u16().expect("checked") as usize;
            let name = r.take(n).expect("checked");
            let v = r.u32().expect("checked") as usize;
            (name, r.take(v).expect("checked"))
        })
    }

    #[cfg_attr(
        not(feature = "sim"),
        allow(
            dead_code,
            reason = "the codec's tests and fuzz targets read it; the reader walks `headers`"
        )
    )]
    pub fn header_count(&self) -> usize {
        self.header_count as usize
    }
}

/// The records of a frame, in order. Decoding already proved every length.
pub struct RecordIter<'a> {
    rest: BytesIn<'a>,
    left: u32,
    headers: bool,
}

impl<'a> RecordsArea<'a> {
    pub fn iter(&self) -> RecordIter<'a> {
        RecordIter {
            rest: BytesIn::new(self.bytes),
            left: self.count,
            headers: self.headers,
        }
    }

    /// Whether the batch carries headers (flag HEADERS).
    #[cfg_attr(
        not(feature = "sim"),
        allow(
            dead_code,
            reason = "the codec's tests and fuzz targets read it; the reader walks the headers"
        )
    )]
    pub fn has_headers(&self) -> bool {
        self.headers
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = RecordRef<'a>;
    fn next(&mut self) -> Option<RecordRef<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let (headers, header_count) = if self.headers {
            let mut probe = self.rest.clone();
            let start = probe.pos();
            let count = skip_headers(&mut probe).expect("checked");
            let len = probe.pos() - start;
            let all = self.rest.take(len).expect("checked");
            (&all[2..], count)
        } else {
            (&[][..], 0)
        };
        let len = self.rest.u32().expect("checked") as usize;
        let body = self.rest.take(len).expect("checked");
        Some(RecordRef {
            headers,
            header_count,
            body,
        })
    }
}
