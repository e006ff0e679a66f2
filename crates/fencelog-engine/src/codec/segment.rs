//! The segment header: 40 bytes at offset 0 of every segment file
//! (`docs/design.md`, "Segment header"). Same layout in versions 1 and 2;
//! the version says which frames the segment may hold.

use super::{check_crc, u32_at, u64_at, DecodeError, FORMAT_VERSION, FORMAT_VERSION_V1};

/// The first 8 bytes of every segment file.
pub const SEGMENT_MAGIC: [u8; 8] = *b"FENCELOG";
/// Bytes of a segment header; the first frame starts here.
pub const SEGMENT_HEADER_BYTES: usize = 40;

/// The decoded segment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// 1 (kinds 1–2 only) or 2. The writer creates version 2 only.
    pub version: u32,
    /// Equals the number in the file name.
    pub segment_index: u64,
    /// The id of the first group written to this segment.
    pub first_group_id: u64,
}

impl SegmentHeader {
    /// A header of a segment the writer creates now.
    pub fn new(segment_index: u64, first_group_id: u64) -> Self {
        SegmentHeader {
            version: FORMAT_VERSION,
            segment_index,
            first_group_id,
        }
    }
}

/// The 40 bytes of `h`.
pub fn encode_segment_header(h: &SegmentHeader) -> [u8; SEGMENT_HEADER_BYTES] {
    assert!(h.version == FORMAT_VERSION || h.version == FORMAT_VERSION_V1);
    let mut out = [0u8; SEGMENT_HEADER_BYTES];
    out[0..8].copy_from_slice(&SEGMENT_MAGIC);
    out[8..12].copy_from_slice(&h.version.to_le_bytes());
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
    check_crc(&buf[0..36], u32_at(buf, 36))?;
    let version = u32_at(buf, 8);
    if version != FORMAT_VERSION && version != FORMAT_VERSION_V1 {
        return Err(DecodeError::BadVersion(version));
    }
    if u32_at(buf, 12) != 0 || u32_at(buf, 32) != 0 {
        return Err(DecodeError::BadReserved);
    }
    Ok(SegmentHeader {
        version,
        segment_index: u64_at(buf, 16),
        first_group_id: u64_at(buf, 24),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_both_versions_and_every_flip_is_detected() {
        for version in [FORMAT_VERSION_V1, FORMAT_VERSION] {
            let h = SegmentHeader {
                version,
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

    #[test]
    fn an_unknown_version_is_refused_even_with_a_valid_crc() {
        let mut b = encode_segment_header(&SegmentHeader::new(0, 1));
        b[8..12].copy_from_slice(&3u32.to_le_bytes());
        let crc = crc32fast::hash(&b[0..36]);
        b[36..40].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(decode_segment_header(&b), Err(DecodeError::BadVersion(3)));
    }
}
