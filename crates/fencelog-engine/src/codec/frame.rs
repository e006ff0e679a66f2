//! Frames: a 56-byte header, the stream name, and a payload that depends
//! on the kind (`docs/design.md`, "Frame" and "Kinds"). A frame is one whole
//! batch, or one state change, of one stream, so it is atomic on disk: its
//! single CRC either passes or the frame is not there.

use super::narrow::{len_u16, len_u32};
use super::payload::{
    check_records, decode_config, decode_cursor_name, decode_producer, encode_config,
    encode_cursor_name, encode_records_area, records_area_len, AppliedMark, ProducerTrailer,
    RecordIter, RecordSpec, RecordsArea, CONFIG_PAYLOAD_BYTES,
};
use super::{u16_at, u32_at, u64_at, BytesIn, DecodeError, FORMAT_VERSION, FORMAT_VERSION_V1};
use crate::name::{validate_stream_name_bytes, STREAM_NAME_BYTES_MAX};
use bytes::Bytes;
use fencelog_types::StreamConfig;

/// The first 4 bytes of every frame (little-endian), the resync marker.
pub const FRAME_MAGIC: u32 = 0x4652_4D31;
/// Bytes of a frame's fixed header, before the stream name.
pub const FRAME_HEADER_BYTES: usize = 56;
/// Largest frame the decoder believes. Bounds what a corrupt length field can
/// make recovery read; the engine's batch limit is capped well below it.
pub const FRAME_BYTES_MAX: usize = 64 << 20;
/// Largest record count per frame the decoder believes. The in-memory index
/// packs `record_count - 1` into 12 bits, hence 4096.
pub const FRAME_RECORDS_MAX: usize = 4096;

/// Flags bit 0: the last frame of its group. Any kind.
pub const FLAG_LAST_IN_GROUP: u8 = 1;
/// Flags bit 1: a byte-identical copy of an older records frame, written
/// by compaction. Indexed (the later copy wins), never applied as state.
pub const FLAG_RELOCATED: u8 = 1 << 1;
/// Flags bit 2: every record of the batch carries a header list.
pub const FLAG_HEADERS: u8 = 1 << 2;
/// Flags bit 3: the records area starts with a producer trailer.
pub const FLAG_PRODUCER: u8 = 1 << 3;
/// Flags bit 4: a trim made by retention rather than by a client.
pub const FLAG_RETENTION: u8 = 1 << 4;

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameKind {
    /// One append: 1..=4096 records.
    Records = 1,
    /// A fence: the stream's new highest token, no records.
    Fence = 2,
    /// The stream's new first readable seq.
    Trim = 3,
    /// No more appends, fences or trims, ever.
    Seal = 4,
    /// A tombstone: records gone, the highest token kept forever.
    Delete = 5,
    /// The stream's retention settings.
    Config = 6,
    /// A named consumer position (a fenced cursor).
    Cursor = 7,
    /// The applied Raft log id of a shard engine (cluster mode); no stream.
    Applied = 8,
}

impl FrameKind {
    fn from_u8(k: u8) -> Option<FrameKind> {
        Some(match k {
            1 => FrameKind::Records,
            2 => FrameKind::Fence,
            3 => FrameKind::Trim,
            4 => FrameKind::Seal,
            5 => FrameKind::Delete,
            6 => FrameKind::Config,
            7 => FrameKind::Cursor,
            8 => FrameKind::Applied,
            _ => return None,
        })
    }

    /// The flags this kind may carry.
    pub fn allowed_flags(self) -> u8 {
        FLAG_LAST_IN_GROUP
            | match self {
                FrameKind::Records => FLAG_RELOCATED | FLAG_HEADERS | FLAG_PRODUCER,
                FrameKind::Trim => FLAG_RETENTION,
                _ => 0,
            }
    }

    /// Whether a segment of `version` may hold this kind.
    fn in_version(self, version: u32) -> bool {
        version == FORMAT_VERSION || matches!(self, FrameKind::Records | FrameKind::Fence)
    }
}

/// The decoded fixed part of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// What the frame carries.
    pub kind: FrameKind,
    /// Every flag bit (`FLAG_*`).
    pub flags: u8,
    /// The group (one `sync_data`) the frame was written in.
    pub group_id: u64,
    /// Per kind: seq of the first record, the new first_seq (trim), the
    /// cursor's seq, 0 (applied), else the stream's `next_seq`.
    pub first_seq: u64,
    /// The token of the write, at least 1; 0 only in an Applied marker.
    pub fencing_token: u64,
    /// Unix ms assigned by the writer.
    pub timestamp_ms: u64,
    /// Records in the frame: 0 unless kind Records.
    pub record_count: u32,
}

impl FrameHeader {
    /// Flag LAST_IN_GROUP: the frame closes its group.
    pub fn last_in_group(&self) -> bool {
        self.flags & FLAG_LAST_IN_GROUP != 0
    }
    /// Flag RELOCATED: a copy written by compaction.
    pub fn relocated(&self) -> bool {
        self.flags & FLAG_RELOCATED != 0
    }
    /// Flag RETENTION: a trim made by retention.
    pub fn retention(&self) -> bool {
        self.flags & FLAG_RETENTION != 0
    }
}

/// A decoded payload, borrowing from the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload<'a> {
    /// Kind Records.
    Records {
        /// The trailer, with flag PRODUCER.
        producer: Option<ProducerTrailer<'a>>,
        /// The records, with their headers when flag HEADERS is set.
        records: RecordsArea<'a>,
    },
    /// Kinds Fence, Trim, Seal, Delete.
    Empty,
    /// Kind Config: the stream's retention settings.
    Config(StreamConfig),
    /// The cursor's name.
    Cursor(&'a str),
    /// Kind Applied: the shard engine's applied Raft position.
    Applied(AppliedMark<'a>),
}

/// A decoded frame. `name` and payload borrow from the input buffer so
/// reads out of a memory map copy nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The fixed part.
    pub header: FrameHeader,
    /// Bytes of the whole frame, where the next one starts.
    pub frame_len: usize,
    /// The stream's name, validated like a client's; empty for Applied.
    pub name: &'a str,
    /// What follows the name.
    pub payload: Payload<'a>,
}

impl<'a> Frame<'a> {
    /// The records in order (none unless kind Records).
    pub fn records(&self) -> RecordIter<'a> {
        match &self.payload {
            Payload::Records { records, .. } => records.iter(),
            _ => RecordsArea {
                bytes: &[],
                count: 0,
                headers: false,
            }
            .iter(),
        }
    }

    /// Record bodies in order (the codec's tests and the fuzz targets;
    /// the engine's readers take bodies with their headers).
    #[cfg(any(test, feature = "fuzz"))]
    pub fn bodies(&self) -> impl Iterator<Item = &'a [u8]> {
        self.records().map(|r| r.body)
    }

    /// The producer trailer, if the frame has one.
    #[cfg_attr(
        not(feature = "sim"),
        allow(
            dead_code,
            reason = "only the codec's tests read it; the writer and recovery use the payload"
        )
    )]
    pub fn producer(&self) -> Option<ProducerTrailer<'a>> {
        match self.payload {
            Payload::Records { producer, .. } => producer,
            _ => None,
        }
    }
}

/// What a frame will carry, before encoding.
#[derive(Debug, Clone, Copy)]
pub struct FrameSpec<'a> {
    /// What the frame carries.
    pub kind: FrameKind,
    /// `FLAG_*` bits; the writer sets [`FLAG_LAST_IN_GROUP`] later with
    /// [`set_last_in_group`].
    pub flags: u8,
    /// The group (one `sync_data`) it belongs to.
    pub group_id: u64,
    /// Per kind; see [`FrameHeader::first_seq`].
    pub first_seq: u64,
    /// At least 1; 0 only for Applied.
    pub fencing_token: u64,
    /// Unix ms from the writer's clock.
    pub timestamp_ms: u64,
    /// A valid stream name; empty only for Applied.
    pub name: &'a str,
}

/// A payload to encode with [`encode_frame_with`]: the writer encodes
/// each kind (records with a producer trailer or headers, configs, cursor
/// commits, a shard engine's Applied markers), and so do the codec's tests
/// and the fuzz targets.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(
    not(feature = "sim"),
    allow(
        dead_code,
        reason = "some kinds are built only by the codec's tests and the fuzz targets"
    )
)]
pub enum PayloadSpec<'a> {
    /// Kind Records with a producer trailer or headers.
    Records {
        /// Sets flag PRODUCER.
        producer: Option<ProducerTrailer<'a>>,
        /// Sets flag HEADERS when any record has a header.
        records: &'a [RecordSpec<'a>],
    },
    /// Kind Config.
    Config(StreamConfig),
    /// Kind Cursor: the cursor's name.
    Cursor(&'a str),
    /// Kind Applied.
    Applied(AppliedMark<'a>),
}

/// Bytes a records (or empty-payload) frame with this name and these
/// bodies occupies.
pub fn frame_len<B: AsRef<[u8]>>(name: &str, bodies: &[B]) -> usize {
    FRAME_HEADER_BYTES + name.len() + bodies.iter().map(|b| 4 + b.as_ref().len()).sum::<usize>()
}

fn put_header(out: &mut Vec<u8>, spec: &FrameSpec<'_>, len: usize, count: usize) -> usize {
    assert!(
        len <= FRAME_BYTES_MAX,
        "frame of {len} bytes over the format limit"
    );
    assert_eq!(
        spec.flags & !spec.kind.allowed_flags(),
        0,
        "flags of {:?}",
        spec.kind
    );
    if spec.kind == FrameKind::Applied {
        assert!(spec.name.is_empty() && spec.fencing_token == 0 && spec.first_seq == 0);
    } else {
        assert!(spec.fencing_token != 0);
        assert!(!spec.name.is_empty() && spec.name.len() <= STREAM_NAME_BYTES_MAX);
    }
    let start = out.len();
    out.reserve(len);
    out.extend_from_slice(&FRAME_MAGIC.to_le_bytes());
    out.extend_from_slice(&[0; 4]); // crc, filled by `seal`
    out.extend_from_slice(&len_u32(len).to_le_bytes());
    out.push(spec.kind as u8);
    out.push(spec.flags);
    out.extend_from_slice(&len_u16(spec.name.len()).to_le_bytes());
    out.extend_from_slice(&spec.group_id.to_le_bytes());
    out.extend_from_slice(&spec.first_seq.to_le_bytes());
    out.extend_from_slice(&spec.fencing_token.to_le_bytes());
    out.extend_from_slice(&spec.timestamp_ms.to_le_bytes());
    out.extend_from_slice(&len_u32(count).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(spec.name.as_bytes());
    start
}

fn seal(out: &mut [u8], start: usize, len: usize) {
    debug_assert_eq!(out.len() - start, len);
    let crc = crc32fast::hash(&out[start + 8..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Appends one frame of kind Records without producer or headers (the
/// plain append, whose bytes are exactly version 1's), or of a kind
/// without payload (Fence, Trim, Seal, Delete) with `bodies` empty.
/// Returns its offset within `out`.
///
/// The caller has validated the name and bounded the batch; these asserts
/// are the last line against writing something recovery would refuse.
pub fn encode_frame<B: AsRef<[u8]>>(
    out: &mut Vec<u8>,
    spec: &FrameSpec<'_>,
    bodies: &[B],
) -> usize {
    let records = spec.kind == FrameKind::Records;
    assert!(
        records
            || matches!(
                spec.kind,
                FrameKind::Fence | FrameKind::Trim | FrameKind::Seal | FrameKind::Delete
            )
    );
    assert_eq!(spec.flags & (FLAG_HEADERS | FLAG_PRODUCER), 0);
    assert!(bodies.len() <= FRAME_RECORDS_MAX);
    assert_eq!(records, !bodies.is_empty());
    let len = frame_len(spec.name, bodies);
    let start = put_header(out, spec, len, bodies.len());
    for body in bodies {
        let body = body.as_ref();
        out.extend_from_slice(&len_u32(body.len()).to_le_bytes());
        out.extend_from_slice(body);
    }
    seal(out, start, len);
    start
}

/// Appends one frame with a payload [`encode_frame`] does not write: a
/// records batch with a producer trailer or headers, a Config, a Cursor
/// or an Applied marker. Sets the flags the payload implies. Returns its
/// offset within `out`.
pub fn encode_frame_with(
    out: &mut Vec<u8>,
    spec: &FrameSpec<'_>,
    payload: &PayloadSpec<'_>,
) -> usize {
    let mut spec = *spec;
    let (payload_len, count) = match payload {
        PayloadSpec::Records { producer, records } => {
            assert_eq!(spec.kind, FrameKind::Records);
            assert!(!records.is_empty() && records.len() <= FRAME_RECORDS_MAX);
            spec.flags |= producer.map_or(0, |_| FLAG_PRODUCER);
            if records.iter().any(|r| !r.headers.is_empty()) {
                spec.flags |= FLAG_HEADERS;
            }
            (records_area_len(producer.as_ref(), records), records.len())
        }
        PayloadSpec::Config(_) => (CONFIG_PAYLOAD_BYTES, 0),
        PayloadSpec::Cursor(name) => (1 + name.len(), 0),
        PayloadSpec::Applied(a) => (a.encoded_len(), 0),
    };
    let expected_kind = match payload {
        PayloadSpec::Records { .. } => FrameKind::Records,
        PayloadSpec::Config(_) => FrameKind::Config,
        PayloadSpec::Cursor(_) => FrameKind::Cursor,
        PayloadSpec::Applied(_) => FrameKind::Applied,
    };
    assert_eq!(spec.kind, expected_kind);
    let len = FRAME_HEADER_BYTES + spec.name.len() + payload_len;
    let start = put_header(out, &spec, len, count);
    match payload {
        PayloadSpec::Records { producer, records } => {
            encode_records_area(out, producer.as_ref(), records)
        }
        PayloadSpec::Config(c) => encode_config(c, out),
        PayloadSpec::Cursor(name) => encode_cursor_name(out, name),
        PayloadSpec::Applied(a) => a.encode(out),
    }
    seal(out, start, len);
    start
}

/// Sets or clears the last-in-group flag of an already encoded frame and
/// re-seals its CRC. The writer learns which frame is last only after it has
/// encoded the whole group.
pub fn set_last_in_group(frame: &mut [u8], last: bool) {
    frame[13] = (frame[13] & !FLAG_LAST_IN_GROUP) | if last { FLAG_LAST_IN_GROUP } else { 0 };
    let crc = crc32fast::hash(&frame[8..]);
    frame[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// Appends a copy of the records frame `frame` (already verified) as
/// compaction writes it: the same bytes but for the RELOCATED flag, a new
/// group id, last-in-group cleared, and the CRC. Returns its offset in
/// `out`.
pub fn encode_relocated(out: &mut Vec<u8>, frame: &[u8], group_id: u64) -> usize {
    assert_eq!(frame[12], FrameKind::Records as u8);
    assert_eq!(u32_at(frame, 8) as usize, frame.len());
    let start = out.len();
    out.extend_from_slice(frame);
    let f = &mut out[start..];
    f[13] = (f[13] | FLAG_RELOCATED) & !FLAG_LAST_IN_GROUP;
    f[16..24].copy_from_slice(&group_id.to_le_bytes());
    let crc = crc32fast::hash(&f[8..]);
    f[4..8].copy_from_slice(&crc.to_le_bytes());
    start
}

/// Reads the declared length of the frame at the start of `buf`, after
/// checking the magic and the bounds. Lets a reader fetch exactly one frame.
pub fn peek_frame_len(buf: &[u8]) -> Result<usize, DecodeError> {
    if buf.len() < 12 {
        return Err(DecodeError::Truncated {
            needed: 12,
            available: buf.len(),
        });
    }
    if u32_at(buf, 0) != FRAME_MAGIC {
        return Err(DecodeError::BadMagic);
    }
    let len = u32_at(buf, 8) as usize;
    if !(FRAME_HEADER_BYTES + 1..=FRAME_BYTES_MAX).contains(&len) {
        return Err(DecodeError::BadLength {
            frame_len: len as u64,
        });
    }
    Ok(len)
}

/// Decodes the frame at the start of `buf` (which may hold more after it),
/// found in a segment of format `version`.
pub fn decode_frame(buf: &[u8], version: u32) -> Result<Frame<'_>, DecodeError> {
    let len = peek_frame_len(buf)?;
    if buf.len() < len {
        return Err(DecodeError::Truncated {
            needed: len,
            available: buf.len(),
        });
    }
    let f = &buf[..len];
    super::check_crc(&f[8..], u32_at(f, 4))?;
    // The CRC passed, so what follows guards against our own bugs and
    // against a well-formed frame from a future format.
    let header = decode_header(f, version)?;
    let name_len = u16_at(f, 14) as usize;
    if FRAME_HEADER_BYTES + name_len > len {
        return Err(DecodeError::BadRecordLayout);
    }
    let name_bytes = &f[FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + name_len];
    if header.kind == FrameKind::Applied {
        if name_len != 0 {
            return Err(DecodeError::BadField("an Applied marker names no stream"));
        }
    } else {
        validate_stream_name_bytes(name_bytes).map_err(|e| DecodeError::BadName(e.to_string()))?;
    }
    let name = std::str::from_utf8(name_bytes).expect("validated ascii");
    let payload = decode_payload(&header, &f[FRAME_HEADER_BYTES + name_len..])?;
    Ok(Frame {
        header,
        frame_len: len,
        name,
        payload,
    })
}

/// The fixed fields after the CRC, checked against the kind's rules.
fn decode_header(f: &[u8], version: u32) -> Result<FrameHeader, DecodeError> {
    assert!(version == FORMAT_VERSION || version == FORMAT_VERSION_V1);
    let kind = FrameKind::from_u8(f[12])
        .filter(|k| k.in_version(version))
        .ok_or(DecodeError::BadKind(f[12]))?;
    let flags = f[13];
    let allowed = if version == FORMAT_VERSION {
        kind.allowed_flags()
    } else {
        FLAG_LAST_IN_GROUP
    };
    if flags & !allowed != 0 {
        return Err(DecodeError::BadFlags(flags));
    }
    if u32_at(f, 52) != 0 {
        return Err(DecodeError::BadReserved);
    }
    let header = FrameHeader {
        kind,
        flags,
        group_id: u64_at(f, 16),
        first_seq: u64_at(f, 24),
        fencing_token: u64_at(f, 32),
        timestamp_ms: u64_at(f, 40),
        record_count: u32_at(f, 48),
    };
    if kind == FrameKind::Applied {
        if header.fencing_token != 0 || header.first_seq != 0 {
            return Err(DecodeError::BadField(
                "an Applied marker carries no token and no seq",
            ));
        }
    } else if header.fencing_token == 0 {
        return Err(DecodeError::ZeroToken);
    }
    let count = header.record_count as usize;
    let count_ok = match kind {
        FrameKind::Records => (1..=FRAME_RECORDS_MAX).contains(&count),
        _ => count == 0,
    };
    if !count_ok {
        return Err(DecodeError::BadRecordCount(header.record_count));
    }
    Ok(header)
}

fn decode_payload<'a>(h: &FrameHeader, payload: &'a [u8]) -> Result<Payload<'a>, DecodeError> {
    Ok(match h.kind {
        FrameKind::Records => {
            let mut r = BytesIn::new(payload);
            let producer = match h.flags & FLAG_PRODUCER != 0 {
                true => Some(decode_producer(&mut r).map_err(|e| match e {
                    DecodeError::Truncated { .. } => DecodeError::BadRecordLayout,
                    e => e,
                })?),
                false => None,
            };
            let rest = &payload[r.pos()..];
            let records = check_records(rest, h.record_count, h.flags & FLAG_HEADERS != 0)?;
            Payload::Records { producer, records }
        }
        FrameKind::Fence | FrameKind::Trim | FrameKind::Seal | FrameKind::Delete => {
            if !payload.is_empty() {
                return Err(DecodeError::BadRecordLayout);
            }
            Payload::Empty
        }
        FrameKind::Config => Payload::Config(decode_config(payload)?),
        FrameKind::Cursor => Payload::Cursor(decode_cursor_name(payload)?),
        FrameKind::Applied => Payload::Applied(AppliedMark::decode(payload)?),
    })
}

/// The record bodies of `frame`, as zero-copy slices of `buf`, which holds
/// the same frame bytes at `frame_start` (the codec's tests; readers use
/// [`frame_slice`] for bodies and headers alike).
#[cfg(test)]
pub fn frame_bodies(buf: &Bytes, frame: &Frame<'_>, frame_start: usize) -> Vec<Bytes> {
    frame
        .bodies()
        .map(|body| frame_slice(buf, frame, frame_start, body))
        .collect()
}

/// `part` (a body, header name or value borrowed from `frame`) as a
/// zero-copy slice of `buf`, which holds the same frame bytes at
/// `frame_start`.
pub fn frame_slice(buf: &Bytes, frame: &Frame<'_>, frame_start: usize, part: &[u8]) -> Bytes {
    debug_assert!(frame_start + frame.frame_len <= buf.len());
    // Where the part sits inside the frame: the name starts at a fixed
    // offset, so its address gives the frame's.
    let frame_base = frame.name.as_ptr() as usize - FRAME_HEADER_BYTES;
    let at = part.as_ptr() as usize - frame_base;
    debug_assert!(at + part.len() <= frame.frame_len);
    buf.slice(frame_start + at..frame_start + at + part.len())
}

#[cfg(test)]
#[path = "frame_tests.rs"]
mod tests;
