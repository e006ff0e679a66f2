//! The binary read format: a page of records as bytes instead of JSON,
//! asked for with `Accept: application/vnd.fencelog.batch` on
//! `GET /v1/streams/{stream}/records`. Bodies go out as they are (no
//! escaping, no base64), so a consumer reads at close to the speed the
//! server can copy bytes.
//!
//! The body is the records one after another; each is the version 2
//! batch record (see [`crate::batch`]) after three fixed fields. All
//! integers are little-endian:
//!
//! | size | field |
//! |---:|---|
//! | 8 | `seq` (u64) |
//! | 8 | `fencing_token` (u64) |
//! | 8 | `timestamp_ms` (u64) |
//! | 2 | `header_count` (u16) |
//! | per header: 2 | `name_len` (u16) |
//! | per header: `name_len` | name |
//! | per header: 4 | `value_len` (u32) |
//! | per header: `value_len` | value |
//! | 4 | `body_len` (u32) |
//! | `body_len` | body |
//!
//! What the JSON page says besides its records travels in response
//! headers: `Next-Start-Seq`, `Next-Seq`, and `Stream-Sealed: true` when
//! sealed. An empty page is an empty body. Refusals (400, 404, 416, ...)
//! are the usual JSON error bodies with `Content-Type: application/json`.

use bytes::Bytes;
use fencelog_types::{Header, Record};

/// What a consumer sends in `Accept` to get this format.
pub const ACCEPT: &str = crate::batch::CONTENT_TYPE;
/// The `Content-Type` of a page in this format.
pub const CONTENT_TYPE: &str = "application/vnd.fencelog.batch; layout=read";
/// Response header: the seq the next page starts at.
pub const NEXT_START_SEQ: &str = "next-start-seq";
/// Response header: the stream's tail when the read ran.
pub const NEXT_SEQ: &str = "next-seq";
/// Response header, present (`true`) when the stream is sealed.
pub const SEALED: &str = "stream-sealed";

/// Bytes of a record's fixed fields before its header count.
const FIXED_BYTES: usize = 24;

/// Whether `accept` (an `Accept` header's value) asks for this format.
pub fn accepts(accept: &str) -> bool {
    accept
        .split(',')
        .filter_map(|t| t.split(';').next())
        .any(|t| t.trim().eq_ignore_ascii_case(ACCEPT))
}

/// Bytes `r` takes in this format.
pub fn record_bytes(r: &Record) -> usize {
    let headers: usize = r
        .headers
        .iter()
        .map(|h| 6 + h.name.len() + h.value.len())
        .sum();
    FIXED_BYTES + 2 + headers + 4 + r.body.len()
}

/// Everything of `r` before its body: fixed fields, headers, `body_len`.
#[allow(
    clippy::cast_possible_truncation,
    reason = "the engine holds headers to 64 per record, names to 255 bytes, all headers to 8 KiB and a body to one 64 MiB frame"
)]
fn write_prefix(out: &mut Vec<u8>, r: &Record) {
    out.extend_from_slice(&r.seq.to_le_bytes());
    out.extend_from_slice(&r.fencing_token.to_le_bytes());
    out.extend_from_slice(&r.timestamp_ms.to_le_bytes());
    out.extend_from_slice(&(r.headers.len() as u16).to_le_bytes());
    for h in &r.headers {
        out.extend_from_slice(&(h.name.len() as u16).to_le_bytes());
        out.extend_from_slice(&h.name);
        out.extend_from_slice(&(h.value.len() as u32).to_le_bytes());
        out.extend_from_slice(&h.value);
    }
    out.extend_from_slice(&(r.body.len() as u32).to_le_bytes());
}

/// A page of records in this format, written piece by piece by
/// [`RecordFrames::write`] so a server never holds the page's bytes whole.
#[derive(Debug)]
pub struct RecordFrames {
    records: Vec<Record>,
    next: usize,
    /// How much of the current record's body is written, once its prefix is.
    in_body: Option<usize>,
}

impl RecordFrames {
    pub fn new(records: Vec<Record>) -> Self {
        RecordFrames {
            records,
            next: 0,
            in_body: None,
        }
    }

    pub fn is_done(&self) -> bool {
        self.next == self.records.len()
    }

    /// Appends to `out` until it holds `limit` bytes or every record is
    /// written; a record's prefix (at most 24 + 2 + 64 × 6 bytes and its
    /// 8 KiB of headers, plus 4) may overshoot `limit`, a body never does.
    /// Returns whether the page is complete.
    pub fn write(&mut self, out: &mut Vec<u8>, limit: usize) -> bool {
        while out.len() < limit {
            let Some(r) = self.records.get(self.next) else {
                break;
            };
            let at = match self.in_body {
                Some(at) => at,
                None => {
                    write_prefix(out, r);
                    0
                }
            };
            let take = (r.body.len() - at).min(limit.saturating_sub(out.len()));
            out.extend_from_slice(&r.body[at..at + take]);
            if at + take == r.body.len() {
                self.next += 1;
                self.in_body = None;
            } else {
                self.in_body = Some(at + take);
            }
        }
        self.is_done()
    }
}

/// The whole page of `records` at once (tests, small pages).
pub fn encode(records: &[Record]) -> Vec<u8> {
    let mut out = Vec::with_capacity(records.iter().map(record_bytes).sum());
    for r in records {
        write_prefix(&mut out, r);
        out.extend_from_slice(&r.body);
    }
    out
}

/// Why a body is not a well-formed page: the record and offset where its
/// framing runs past the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FramesError {
    pub record: usize,
    pub offset: usize,
}

impl std::fmt::Display for FramesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the {CONTENT_TYPE} page is truncated: record {} (from offset {}) runs past its end",
            self.record, self.offset
        )
    }
}

impl std::error::Error for FramesError {}

/// A cursor over `body` that fails when a field runs past its end.
struct Fields<'a> {
    body: &'a Bytes,
    at: usize,
}

impl Fields<'_> {
    fn take(&mut self, n: usize) -> Option<Bytes> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.body.len())?;
        let b = self.body.slice(self.at..end);
        self.at = end;
        Some(b)
    }

    fn uint<const N: usize>(&mut self) -> Option<u64> {
        let end = self.at.checked_add(N).filter(|&e| e <= self.body.len())?;
        let mut le = [0u8; 8];
        le[..N].copy_from_slice(&self.body[self.at..end]);
        self.at = end;
        Some(u64::from_le_bytes(le))
    }

    /// A count or length field of `N` bytes (at most 4: it fits a usize).
    fn len<const N: usize>(&mut self) -> Option<usize> {
        usize::try_from(self.uint::<N>()?).ok()
    }

    fn record(&mut self) -> Option<Record> {
        let (seq, fencing_token, timestamp_ms) =
            (self.uint::<8>()?, self.uint::<8>()?, self.uint::<8>()?);
        let count = self.len::<2>()?;
        // Bounded by what is left: every header takes at least six bytes.
        let mut headers = Vec::with_capacity(count.min((self.body.len() - self.at) / 6));
        for _ in 0..count {
            let name_len = self.len::<2>()?;
            let name = self.take(name_len)?;
            let value_len = self.len::<4>()?;
            let value = self.take(value_len)?;
            headers.push(Header { name, value });
        }
        let body_len = self.len::<4>()?;
        let body = self.take(body_len)?;
        Some(Record {
            seq,
            fencing_token,
            timestamp_ms,
            headers,
            body,
        })
    }
}

/// Appends to `records` every whole record of `body`; returns the bytes
/// they took (what is left is the start of a record not yet complete).
fn decode_whole(body: &Bytes, records: &mut Vec<Record>) -> usize {
    let mut fields = Fields { body, at: 0 };
    loop {
        let start = fields.at;
        if start == body.len() {
            return start;
        }
        match fields.record() {
            Some(r) => records.push(r),
            None => return start,
        }
    }
}

/// The bytes the record at the start of `b` takes, once `b` holds its
/// header count and every header's lengths.
fn record_len(b: &[u8]) -> Option<usize> {
    let u = |at: usize, n: usize| -> Option<usize> {
        let mut le = [0u8; 8];
        le[..n].copy_from_slice(b.get(at..at + n)?);
        usize::try_from(u64::from_le_bytes(le)).ok()
    };
    let mut at = FIXED_BYTES + 2;
    for _ in 0..u(FIXED_BYTES, 2)? {
        at += 2 + u(at, 2)?;
        at += 4 + u(at, 4)?;
    }
    Some(at + 4 + u(at, 4)?)
}

/// A page decoded as its pieces arrive, so a reader never joins them into
/// one buffer: whole records are slices of the piece they arrived in, and
/// only a record cut by a piece boundary is copied (into `pending`).
#[derive(Debug, Default)]
pub struct PageDecoder {
    pending: bytes::BytesMut,
    records: Vec<Record>,
    /// Bytes of the page before `pending`, for errors.
    offset: usize,
}

impl PageDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next piece of the body.
    pub fn push(&mut self, mut piece: Bytes) {
        // First complete a record cut by the last boundary, copying only
        // its own bytes once its lengths are known (a little at a time
        // until they are), and decoding only when it can be whole, so a
        // large record arriving in many pieces is copied once.
        while !self.pending.is_empty() && !piece.is_empty() {
            let need = record_len(&self.pending);
            let take = need.map_or(256, |n| n.saturating_sub(self.pending.len()));
            self.pending
                .extend_from_slice(&piece.split_to(take.min(piece.len())));
            if need.is_some_and(|n| self.pending.len() < n) {
                continue;
            }
            let held = self.pending.split().freeze();
            let used = decode_whole(&held, &mut self.records);
            self.offset += used;
            self.pending.extend_from_slice(&held[used..]);
        }
        if self.pending.is_empty() {
            let used = decode_whole(&piece, &mut self.records);
            self.offset += used;
            self.pending.extend_from_slice(&piece[used..]);
        }
    }

    /// The records, or where the body stopped inside one.
    pub fn finish(self) -> Result<Vec<Record>, FramesError> {
        if self.pending.is_empty() {
            return Ok(self.records);
        }
        Err(FramesError {
            record: self.records.len(),
            offset: self.offset,
        })
    }
}

/// The records of a page; bodies, names and values are slices of `body`.
pub fn decode(body: &Bytes) -> Result<Vec<Record>, FramesError> {
    let mut d = PageDecoder::new();
    d.push(body.clone());
    d.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: u64, headers: &[(&str, &str)], body: &[u8]) -> Record {
        Record {
            seq,
            fencing_token: 7,
            timestamp_ms: 1_795_955_343_590 + seq,
            headers: headers
                .iter()
                .map(|(n, v)| Header {
                    name: Bytes::copy_from_slice(n.as_bytes()),
                    value: Bytes::copy_from_slice(v.as_bytes()),
                })
                .collect(),
            body: Bytes::copy_from_slice(body),
        }
    }

    #[test]
    fn pieces_concatenate_to_the_whole_page_for_any_limit() {
        let records = vec![
            record(3, &[], b"hello"),
            record(4, &[("k", "v"), ("trace", "")], b""),
            record(5, &[], &[0xff; 100]),
        ];
        let whole = encode(&records);
        assert_eq!(whole.len(), records.iter().map(record_bytes).sum::<usize>());
        for limit in [1, 7, 30, 64, 1000] {
            let mut frames = RecordFrames::new(records.clone());
            let mut all = Vec::new();
            loop {
                let mut piece = Vec::new();
                let done = frames.write(&mut piece, limit);
                assert!(
                    piece.len() <= limit + 64,
                    "piece of {} at {limit}",
                    piece.len()
                );
                all.extend(piece);
                if done {
                    break;
                }
            }
            assert_eq!(all, whole, "limit {limit}");
        }
        assert_eq!(decode(&Bytes::from(whole)).unwrap(), records);
    }

    #[test]
    fn pieces_of_any_size_decode_to_the_same_records() {
        let headers: Vec<(String, String)> =
            (0..40).map(|i| (format!("h{i}"), "v".repeat(i))).collect();
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        let records = vec![
            record(0, &[], b"hello"),
            record(1, &headers, b"with many headers"),
            record(2, &[], b""),
            record(3, &[("k", "v")], &[0xab; 3000]),
        ];
        let whole = Bytes::from(encode(&records));
        for size in [1, 2, 5, 26, 27, 100, 1000, whole.len()] {
            let mut d = PageDecoder::new();
            for piece in whole.chunks(size) {
                d.push(Bytes::copy_from_slice(piece));
            }
            assert_eq!(d.finish().unwrap(), records, "pieces of {size}");
        }
        // Whole records in one piece are slices of it, not copies.
        let mut d = PageDecoder::new();
        d.push(whole.clone());
        let got = d.finish().unwrap();
        assert!(whole.as_ptr_range().contains(&got[3].body.as_ptr()));
    }

    #[test]
    fn truncation_says_which_record() {
        let whole = encode(&[record(0, &[], b"ab"), record(1, &[("k", "v")], b"cd")]);
        let first = record_bytes(&record(0, &[], b"ab"));
        for cut in [1, first - 1, first + 1, whole.len() - 1] {
            let err = decode(&Bytes::copy_from_slice(&whole[..cut])).unwrap_err();
            let want = if cut < first { 0 } else { 1 };
            assert_eq!(err.record, want, "cut at {cut}");
            assert_eq!(err.offset, if want == 0 { 0 } else { first });
        }
        assert_eq!(decode(&Bytes::new()).unwrap(), vec![]);
    }

    #[test]
    fn the_accept_header() {
        assert!(accepts("application/vnd.fencelog.batch"));
        assert!(accepts("text/plain, Application/Vnd.Fencelog.Batch;q=0.9"));
        assert!(!accepts("application/json"));
        assert!(!accepts("application/vnd.fencelog.batchx"));
    }
}
