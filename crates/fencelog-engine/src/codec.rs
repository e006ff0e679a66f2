//! The on-disk format: segment headers and frames. Pure: bytes in, values out.
//!
//! All integers are fixed-width little-endian. Every length is bounded before
//! it is used, and the CRC (crc32fast, IEEE polynomial) covers every byte that
//! recovery trusts, so a frame either decodes to exactly what was encoded or
//! is reported corrupt.
//!
//! # Segment header (40 bytes, at offset 0 of every segment file)
//!
//! | offset | size | field            | notes                                        |
//! |-------:|-----:|------------------|----------------------------------------------|
//! | 0      | 8    | magic            | `b"FENCELOG"`                                |
//! | 8      | 4    | format version   | u32, currently 1                             |
//! | 12     | 4    | reserved         | must be 0                                    |
//! | 16     | 8    | segment index    | u64, equals the number in the file name      |
//! | 24     | 8    | first group id   | u64, id the first group in this file carries |
//! | 32     | 4    | reserved         | must be 0                                    |
//! | 36     | 4    | crc32            | over bytes 0..36                             |
//!
//! # Frame (56-byte header + name + records)
//!
//! | offset | size | field         | notes                                              |
//! |-------:|-----:|---------------|----------------------------------------------------|
//! | 0      | 4    | magic         | u32 `0x4652_4D31` ("1MRF" on disk); resync marker  |
//! | 4      | 4    | crc32         | over bytes 8..frame_len                            |
//! | 8      | 4    | frame_len     | u32, whole frame incl. magic and crc               |
//! | 12     | 1    | kind          | 1 = records, 2 = fence                             |
//! | 13     | 1    | flags         | bit 0: last frame of its group; others must be 0   |
//! | 14     | 2    | name_len      | u16, 1..=255                                       |
//! | 16     | 8    | group_id      | u64, the write group (one fdatasync) it belongs to |
//! | 24     | 8    | first_seq     | u64, seq of the first record (fence: next_seq)     |
//! | 32     | 8    | fencing_token | u64, >= 1                                          |
//! | 40     | 8    | timestamp_ms  | u64, Unix milliseconds, assigned by the writer     |
//! | 48     | 4    | record_count  | u32, 0 for a fence, >= 1 for records               |
//! | 52     | 4    | reserved      | must be 0                                          |
//! | 56     | n    | stream name   | `name_len` bytes, validated like a client's name   |
//! | 56+n   | ...  | records       | `record_count` × (u32 body_len, body bytes)        |
//!
//! A frame is one whole batch of one stream, so a batch is atomic on disk: its
//! single CRC either passes or the frame is not there.

use crate::name::{validate_stream_name_bytes, STREAM_NAME_BYTES_MAX};
use bytes::Bytes;
use std::fmt;

/// The first 8 bytes of every segment file.
pub const SEGMENT_MAGIC: [u8; 8] = *b"FENCELOG";
/// The format version this code writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// Bytes of a segment header; the first frame starts here.
pub const SEGMENT_HEADER_BYTES: usize = 40;

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

/// Flags bit 0: the last frame of its group.
pub const FLAG_LAST_IN_GROUP: u8 = 1;

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameKind {
    /// One append: 1..=4096 records.
    Records = 1,
    /// A fence: the stream's new highest token, no records.
    Fence = 2,
}

/// The decoded fixed part of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Records or fence.
    pub kind: FrameKind,
    /// The last frame of its group (flags bit 0).
    pub last_in_group: bool,
    /// The group (one `sync_data`) the frame was written in.
    pub group_id: u64,
    /// Seq of the first record; for a fence, the stream's `next_seq`.
    pub first_seq: u64,
    /// The token of the append or fence, at least 1.
    pub fencing_token: u64,
    /// Unix ms assigned by the writer.
    pub timestamp_ms: u64,
    /// Records in the frame: 0 for a fence.
    pub record_count: u32,
}

/// A decoded frame. `name` and record bodies borrow from the input buffer so
/// reads out of a memory map copy nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The fixed part.
    pub header: FrameHeader,
    /// Bytes of the whole frame, where the next one starts.
    pub frame_len: usize,
    /// The stream's name, validated like a client's.
    pub name: &'a str,
    records_bytes: &'a [u8],
}

impl<'a> Frame<'a> {
    /// Record bodies in order. Decoding already proved every length fits.
    pub fn records(&self) -> RecordIter<'a> {
        RecordIter {
            rest: self.records_bytes,
            left: self.header.record_count,
        }
    }

    /// Byte range of the records area inside the frame, for zero-copy slicing
    /// of a `Bytes` that holds the frame.
    pub fn records_range(&self) -> std::ops::Range<usize> {
        let start = FRAME_HEADER_BYTES + self.name.len();
        start..self.frame_len
    }
}

/// The record bodies of a [`Frame`], in order.
pub struct RecordIter<'a> {
    rest: &'a [u8],
    left: u32,
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let len = u32::from_le_bytes(self.rest[..4].try_into().unwrap()) as usize;
        let body = &self.rest[4..4 + len];
        self.rest = &self.rest[4 + len..];
        Some(body)
    }
}

/// Why bytes are not a valid frame or header. Values, not I/O: the caller
/// adds the file and offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than the header or the declared length needs.
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Bytes there.
        available: usize,
    },
    /// The magic is not the frame (or segment) magic.
    BadMagic,
    /// The frame length is outside what the format allows.
    BadLength {
        /// The length field.
        frame_len: u64,
    },
    /// The CRC does not match the bytes.
    BadChecksum {
        /// The CRC in the bytes.
        stored: u32,
        /// The CRC of the bytes.
        computed: u32,
    },
    /// An unknown frame kind.
    BadKind(u8),
    /// Flag bits other than last-in-group.
    BadFlags(u8),
    /// The stream name is not a valid name.
    BadName(String),
    /// A record count outside the kind's range.
    BadRecordCount(u32),
    /// A reserved field is not 0.
    BadReserved,
    /// A segment header of another format version.
    BadVersion(u32),
    /// A fencing token of 0.
    ZeroToken,
    /// Record lengths do not add up to the frame length.
    BadRecordLayout,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated { needed, available } => {
                write!(f, "truncated: needs {needed} bytes, {available} present")
            }
            DecodeError::BadMagic => write!(f, "bad magic"),
            DecodeError::BadLength { frame_len } => write!(f, "implausible length {frame_len}"),
            DecodeError::BadChecksum { stored, computed } => write!(
                f,
                "checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"
            ),
            DecodeError::BadKind(k) => write!(f, "unknown frame kind {k}"),
            DecodeError::BadFlags(x) => write!(f, "unknown flags {x:#04x}"),
            DecodeError::BadName(why) => write!(f, "bad stream name: {why}"),
            DecodeError::BadRecordCount(n) => write!(f, "bad record count {n}"),
            DecodeError::BadReserved => write!(f, "reserved field is not zero"),
            DecodeError::BadVersion(v) => write!(f, "unsupported format version {v}"),
            DecodeError::ZeroToken => write!(f, "fencing token 0 on disk"),
            DecodeError::BadRecordLayout => write!(f, "record lengths do not fill the frame"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// What a frame will carry, before encoding.
#[derive(Debug, Clone, Copy)]
pub struct FrameSpec<'a> {
    /// Records or fence.
    pub kind: FrameKind,
    /// Whether it closes its group.
    pub last_in_group: bool,
    /// The group it belongs to.
    pub group_id: u64,
    /// Seq of the first record; for a fence, the stream's `next_seq`.
    pub first_seq: u64,
    /// At least 1.
    pub fencing_token: u64,
    /// Unix ms.
    pub timestamp_ms: u64,
    /// A valid stream name.
    pub name: &'a str,
}

/// Bytes a frame with this name and these bodies occupies.
pub fn frame_len<B: AsRef<[u8]>>(name: &str, bodies: &[B]) -> usize {
    FRAME_HEADER_BYTES + name.len() + bodies.iter().map(|b| 4 + b.as_ref().len()).sum::<usize>()
}

/// Appends one frame to `out` and returns its offset within `out`.
///
/// The caller has validated the name and bounded the batch; these asserts are
/// the last line against writing something recovery would refuse.
pub fn encode_frame<B: AsRef<[u8]>>(
    out: &mut Vec<u8>,
    spec: &FrameSpec<'_>,
    bodies: &[B],
) -> usize {
    let len = frame_len(spec.name, bodies);
    assert!(
        len <= FRAME_BYTES_MAX,
        "frame of {len} bytes over the format limit"
    );
    assert!(bodies.len() <= FRAME_RECORDS_MAX);
    assert!(spec.fencing_token != 0);
    assert!(!spec.name.is_empty() && spec.name.len() <= STREAM_NAME_BYTES_MAX);
    assert_eq!(spec.kind == FrameKind::Fence, bodies.is_empty());

    let start = out.len();
    out.reserve(len);
    out.extend_from_slice(&FRAME_MAGIC.to_le_bytes());
    out.extend_from_slice(&[0; 4]); // crc, filled below
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.push(spec.kind as u8);
    out.push(if spec.last_in_group {
        FLAG_LAST_IN_GROUP
    } else {
        0
    });
    out.extend_from_slice(&(spec.name.len() as u16).to_le_bytes());
    out.extend_from_slice(&spec.group_id.to_le_bytes());
    out.extend_from_slice(&spec.first_seq.to_le_bytes());
    out.extend_from_slice(&spec.fencing_token.to_le_bytes());
    out.extend_from_slice(&spec.timestamp_ms.to_le_bytes());
    out.extend_from_slice(&(bodies.len() as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(spec.name.as_bytes());
    for body in bodies {
        let body = body.as_ref();
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(body);
    }
    debug_assert_eq!(out.len() - start, len);
    let crc = crc32fast::hash(&out[start + 8..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
    start
}

/// Sets or clears the last-in-group flag of an already encoded frame and
/// re-seals its CRC. The writer learns which frame is last only after it has
/// encoded the whole group.
pub fn set_last_in_group(frame: &mut [u8], last: bool) {
    frame[13] = if last { FLAG_LAST_IN_GROUP } else { 0 };
    let crc = crc32fast::hash(&frame[8..]);
    frame[4..8].copy_from_slice(&crc.to_le_bytes());
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
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

/// Decodes the frame at the start of `buf` (which may hold more after it).
pub fn decode_frame(buf: &[u8]) -> Result<Frame<'_>, DecodeError> {
    let len = peek_frame_len(buf)?;
    if buf.len() < len {
        return Err(DecodeError::Truncated {
            needed: len,
            available: buf.len(),
        });
    }
    let f = &buf[..len];
    let stored = u32_at(f, 4);
    let computed = crc32fast::hash(&f[8..]);
    if stored != computed {
        return Err(DecodeError::BadChecksum { stored, computed });
    }
    // The CRC passed, so what follows guards against our own bugs and
    // against a well-formed frame from a future format.
    let kind = match f[12] {
        1 => FrameKind::Records,
        2 => FrameKind::Fence,
        k => return Err(DecodeError::BadKind(k)),
    };
    let flags = f[13];
    if flags & !FLAG_LAST_IN_GROUP != 0 {
        return Err(DecodeError::BadFlags(flags));
    }
    if u32_at(f, 52) != 0 {
        return Err(DecodeError::BadReserved);
    }
    let name_len = u16_at(f, 14) as usize;
    if FRAME_HEADER_BYTES + name_len > len {
        return Err(DecodeError::BadRecordLayout);
    }
    let name_bytes = &f[FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + name_len];
    validate_stream_name_bytes(name_bytes).map_err(|e| DecodeError::BadName(e.to_string()))?;
    // Validated as ASCII above.
    let name = std::str::from_utf8(name_bytes).expect("validated ascii");
    let header = FrameHeader {
        kind,
        last_in_group: flags & FLAG_LAST_IN_GROUP != 0,
        group_id: u64_at(f, 16),
        first_seq: u64_at(f, 24),
        fencing_token: u64_at(f, 32),
        timestamp_ms: u64_at(f, 40),
        record_count: u32_at(f, 48),
    };
    if header.fencing_token == 0 {
        return Err(DecodeError::ZeroToken);
    }
    let count = header.record_count as usize;
    let count_ok = match kind {
        FrameKind::Fence => count == 0,
        FrameKind::Records => (1..=FRAME_RECORDS_MAX).contains(&count),
    };
    if !count_ok {
        return Err(DecodeError::BadRecordCount(header.record_count));
    }
    let records_bytes = &f[FRAME_HEADER_BYTES + name_len..];
    check_record_layout(records_bytes, count)?;
    Ok(Frame {
        header,
        frame_len: len,
        name,
        records_bytes,
    })
}

/// Checks that `count` records (u32 body length, body) fill `records_bytes`
/// exactly, so [`Frame::records`] can slice without checking again.
fn check_record_layout(records_bytes: &[u8], count: usize) -> Result<(), DecodeError> {
    let mut rest = records_bytes;
    for _ in 0..count {
        if rest.len() < 4 {
            return Err(DecodeError::BadRecordLayout);
        }
        let body_len = u32_at(rest, 0) as usize;
        if rest.len() - 4 < body_len {
            return Err(DecodeError::BadRecordLayout);
        }
        rest = &rest[4 + body_len..];
    }
    if !rest.is_empty() {
        return Err(DecodeError::BadRecordLayout);
    }
    Ok(())
}

/// The decoded segment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Equals the number in the file name.
    pub segment_index: u64,
    /// The id of the first group written to this segment.
    pub first_group_id: u64,
}

pub fn encode_segment_header(h: &SegmentHeader) -> [u8; SEGMENT_HEADER_BYTES] {
    let mut out = [0u8; SEGMENT_HEADER_BYTES];
    out[0..8].copy_from_slice(&SEGMENT_MAGIC);
    out[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    out[16..24].copy_from_slice(&h.segment_index.to_le_bytes());
    out[24..32].copy_from_slice(&h.first_group_id.to_le_bytes());
    let crc = crc32fast::hash(&out[0..36]);
    out[36..40].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes and checks the segment header at the start of `buf`.
pub fn decode_segment_header(buf: &[u8]) -> Result<SegmentHeader, DecodeError> {
    if buf.len() < SEGMENT_HEADER_BYTES {
        return Err(DecodeError::Truncated {
            needed: SEGMENT_HEADER_BYTES,
            available: buf.len(),
        });
    }
    if buf[0..8] != SEGMENT_MAGIC {
        return Err(DecodeError::BadMagic);
    }
    let stored = u32_at(buf, 36);
    let computed = crc32fast::hash(&buf[0..36]);
    if stored != computed {
        return Err(DecodeError::BadChecksum { stored, computed });
    }
    let version = u32_at(buf, 8);
    if version != FORMAT_VERSION {
        return Err(DecodeError::BadVersion(version));
    }
    if u32_at(buf, 12) != 0 || u32_at(buf, 32) != 0 {
        return Err(DecodeError::BadReserved);
    }
    Ok(SegmentHeader {
        segment_index: u64_at(buf, 16),
        first_group_id: u64_at(buf, 24),
    })
}

/// Decodes one frame out of a shared buffer and returns the record bodies as
/// zero-copy slices of it.
pub fn frame_bodies(buf: &Bytes, frame: &Frame<'_>, frame_start: usize) -> Vec<Bytes> {
    let range = frame.records_range();
    let mut at = frame_start + range.start;
    let mut out = Vec::with_capacity(frame.header.record_count as usize);
    for body in frame.records() {
        at += 4;
        out.push(buf.slice(at..at + body.len()));
        at += body.len();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> FrameSpec<'_> {
        FrameSpec {
            kind: FrameKind::Records,
            last_in_group: true,
            group_id: 7,
            first_seq: 11,
            fencing_token: 42,
            timestamp_ms: 1_700_000_000_000,
            name,
        }
    }

    fn sample() -> Vec<u8> {
        let mut out = Vec::new();
        encode_frame(
            &mut out,
            &spec("orders"),
            &[&b"alpha"[..], b"", b"\xff\x00"],
        );
        out
    }

    #[test]
    fn round_trip() {
        let buf = sample();
        let f = decode_frame(&buf).unwrap();
        assert_eq!(f.frame_len, buf.len());
        assert_eq!(f.name, "orders");
        assert_eq!(
            f.header,
            FrameHeader {
                kind: FrameKind::Records,
                last_in_group: true,
                group_id: 7,
                first_seq: 11,
                fencing_token: 42,
                timestamp_ms: 1_700_000_000_000,
                record_count: 3,
            }
        );
        let bodies: Vec<&[u8]> = f.records().collect();
        assert_eq!(bodies, vec![&b"alpha"[..], b"", b"\xff\x00"]);
        let shared = Bytes::from(buf.clone());
        let zero_copy = frame_bodies(&shared, &f, 0);
        assert_eq!(zero_copy, vec![&b"alpha"[..], b"", b"\xff\x00"]);
    }

    #[test]
    fn fence_round_trip_and_flag_reseal() {
        let mut out = vec![9u8; 3]; // frames need not start at 0
        let s = FrameSpec {
            kind: FrameKind::Fence,
            last_in_group: false,
            ..spec("s")
        };
        let at = encode_frame::<&[u8]>(&mut out, &s, &[]);
        assert_eq!(at, 3);
        let f = decode_frame(&out[3..]).unwrap();
        assert_eq!(f.header.kind, FrameKind::Fence);
        assert!(!f.header.last_in_group);
        assert_eq!(f.records().count(), 0);
        set_last_in_group(&mut out[3..], true);
        assert!(decode_frame(&out[3..]).unwrap().header.last_in_group);
    }

    /// Every byte of a frame is covered: flipping any bit of it is detected.
    #[test]
    fn every_single_bit_flip_is_detected() {
        let buf = sample();
        for i in 0..buf.len() {
            for bit in 0..8 {
                let mut bad = buf.clone();
                bad[i] ^= 1 << bit;
                assert!(
                    decode_frame(&bad).is_err(),
                    "flip of bit {bit} in byte {i} went unnoticed"
                );
            }
        }
    }

    #[test]
    fn every_truncation_is_detected() {
        let buf = sample();
        for cut in 0..buf.len() {
            assert!(decode_frame(&buf[..cut]).is_err(), "cut at {cut}");
        }
    }

    /// A frame whose CRC is valid but whose fields are inconsistent is still
    /// refused: the checks after the CRC are not decoration.
    #[test]
    fn resealed_bad_fields_are_refused() {
        let reseal = |mut b: Vec<u8>| {
            let crc = crc32fast::hash(&b[8..]);
            b[4..8].copy_from_slice(&crc.to_le_bytes());
            b
        };
        let cases: Vec<(usize, Vec<u8>, DecodeError)> = vec![
            (12, vec![3], DecodeError::BadKind(3)),
            (13, vec![2], DecodeError::BadFlags(2)),
            (52, vec![1], DecodeError::BadReserved),
            (32, vec![0; 8], DecodeError::ZeroToken),
            (
                48,
                0u32.to_le_bytes().to_vec(),
                DecodeError::BadRecordCount(0),
            ),
            (
                48,
                2u32.to_le_bytes().to_vec(),
                DecodeError::BadRecordLayout,
            ),
            (
                48,
                4u32.to_le_bytes().to_vec(),
                DecodeError::BadRecordLayout,
            ),
            (
                56,
                vec![b'/'],
                DecodeError::BadName(
                    "'/' is not allowed in a stream name (at byte 0; allowed are A-Z a-z 0-9 . _ : -)".into(),
                ),
            ),
        ];
        for (at, bytes, want) in cases {
            let mut b = sample();
            b[at..at + bytes.len()].copy_from_slice(&bytes);
            assert_eq!(decode_frame(&reseal(b)).unwrap_err(), want, "field at {at}");
        }
        // A fence that claims records.
        let mut out = Vec::new();
        let s = FrameSpec {
            kind: FrameKind::Fence,
            ..spec("s")
        };
        encode_frame::<&[u8]>(&mut out, &s, &[]);
        out[48..52].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(
            decode_frame(&reseal(out)).unwrap_err(),
            DecodeError::BadRecordCount(1)
        );
    }

    #[test]
    fn lengths_are_bounded_before_use() {
        let mut b = sample();
        b[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            decode_frame(&b).unwrap_err(),
            DecodeError::BadLength {
                frame_len: u32::MAX as u64
            }
        );
        b[8..12].copy_from_slice(&10u32.to_le_bytes());
        assert_eq!(
            decode_frame(&b).unwrap_err(),
            DecodeError::BadLength { frame_len: 10 }
        );
    }

    #[test]
    fn segment_header_round_trip_and_flips() {
        let h = SegmentHeader {
            segment_index: 3,
            first_group_id: 99,
        };
        let b = encode_segment_header(&h);
        assert_eq!(decode_segment_header(&b), Ok(h));
        for i in 0..b.len() {
            for bit in 0..8 {
                let mut bad = b;
                bad[i] ^= 1 << bit;
                assert!(decode_segment_header(&bad).is_err(), "byte {i} bit {bit}");
            }
        }
        assert!(decode_segment_header(&b[..39]).is_err());
    }
}
