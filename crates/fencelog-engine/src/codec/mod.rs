//! The on-disk format, version 2: segment headers, frames of every kind,
//! the MANIFEST and the CHECKPOINT. Pure: bytes in, values out, no I/O.
//!
//! The byte tables live in `docs/design.md` ("On-disk format"), which is
//! the reference; every function here says which table it implements.
//! All integers are fixed-width little-endian. Every length is bounded
//! before it is used, and a CRC (crc32fast, IEEE polynomial) covers every
//! byte a reader trusts, so a structure either decodes to exactly what was
//! encoded or is reported corrupt.
//!
//! Version 1 segments (written before the format had a MANIFEST) still
//! decode: the decoder takes the segment's version and refuses a v2-only
//! kind or flag inside a v1 segment.

mod bytes_in;
pub mod checkpoint;
mod frame;
pub mod manifest;
mod narrow;
mod payload;
mod segment;

pub use bytes_in::BytesIn;
pub use frame::*;
pub(crate) use narrow::len_u32;
pub use payload::*;
pub use segment::*;

use std::fmt;

/// The format version of segments written before version 2.
pub const FORMAT_VERSION_V1: u32 = 1;
/// The format version this code writes. It reads 1 and 2.
pub const FORMAT_VERSION: u32 = 2;

/// Why bytes are not a valid frame, header, MANIFEST or CHECKPOINT.
/// Values, not I/O: the caller adds the file and offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than the header or the declared length needs.
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Bytes there.
        available: usize,
    },
    /// The magic is not the frame (or segment, MANIFEST, CHECKPOINT) magic.
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
    /// An unknown frame kind, or a v2 kind inside a v1 segment.
    BadKind(u8),
    /// Flag bits the kind (or the segment's version) does not allow.
    BadFlags(u8),
    /// The stream (or producer, or cursor) name is not a valid name.
    BadName(String),
    /// A record count outside the kind's range.
    BadRecordCount(u32),
    /// A reserved field is not 0.
    BadReserved,
    /// A header of a format version this code does not read.
    BadVersion(u32),
    /// A fencing token of 0 (or a nonzero one where the kind has none).
    ZeroToken,
    /// Record lengths do not add up to the frame length.
    BadRecordLayout,
    /// A field that is not what its kind requires.
    BadField(&'static str),
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
            DecodeError::BadName(why) => write!(f, "bad name: {why}"),
            DecodeError::BadRecordCount(n) => write!(f, "bad record count {n}"),
            DecodeError::BadReserved => write!(f, "reserved field is not zero"),
            DecodeError::BadVersion(v) => write!(f, "unsupported format version {v}"),
            DecodeError::ZeroToken => write!(f, "fencing token 0 on disk"),
            DecodeError::BadRecordLayout => write!(f, "record lengths do not fill the frame"),
            DecodeError::BadField(what) => write!(f, "bad field: {what}"),
        }
    }
}

impl std::error::Error for DecodeError {}

pub(crate) fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().expect("a slice of 2 bytes"))
}
pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("a slice of 4 bytes"))
}
pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("a slice of 8 bytes"))
}

/// Checks `stored` against the CRC of `bytes`.
pub(crate) fn check_crc(bytes: &[u8], stored: u32) -> Result<(), DecodeError> {
    let computed = crc32fast::hash(bytes);
    if stored != computed {
        return Err(DecodeError::BadChecksum { stored, computed });
    }
    Ok(())
}

/// The short names every name field shares (producer ids and cursor names):
/// 1..=`max` bytes of `[A-Za-z0-9._:-]`, not `.` or `..` — the stream-name
/// rule with a smaller bound.
pub(crate) fn check_short_name(name: &[u8], max: usize) -> Result<(), DecodeError> {
    if name.len() > max {
        return Err(DecodeError::BadName(format!(
            "{} bytes, the limit is {max}",
            name.len()
        )));
    }
    crate::name::validate_stream_name_bytes(name).map_err(|e| DecodeError::BadName(e.to_string()))
}
