//! The MANIFEST file (`docs/design.md`, "MANIFEST"): which segments must
//! exist, which checkpoint is current, and (replicated mode) how
//! far the log is known flushed. Rewritten whole, through a temp file and a
//! rename, so it is always one valid version or the previous one.

use super::{check_crc, u32_at, BytesIn, DecodeError, FORMAT_VERSION};

pub const MANIFEST_MAGIC: [u8; 8] = *b"FLMANIFS";
/// Bytes before the segment ranges.
pub const MANIFEST_HEADER_BYTES: usize = 72;
/// Most segment ranges one MANIFEST lists (compaction punches holes; each
/// hole adds one range).
pub const MANIFEST_RANGES_MAX: usize = 1 << 20;

/// How far a replicated engine's log is known durable. Local
/// mode never sets it; it is carried through every rewrite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flushed {
    pub segment: u64,
    pub end_offset: u64,
    pub group_id: u64,
}

/// The decoded MANIFEST.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Manifest {
    /// Counts up by one per rewrite.
    pub generation: u64,
    /// The current checkpoint's generation; 0 = none.
    pub checkpoint_generation: u64,
    /// Every group up to this one is in the checkpoint; 0 with no checkpoint.
    pub checkpoint_covered_group: u64,
    /// How far a replicated engine's log is known durable; `None` in local
    /// mode.
    pub flushed: Option<Flushed>,
    /// The segments that must exist: inclusive (first, last) index ranges,
    /// ascending, neither overlapping nor touching.
    pub ranges: Vec<(u64, u64)>,
}

impl Flushed {
    /// The flushed point from its three fields; all 0 is none.
    fn decode(
        segment: u64,
        end_offset: u64,
        group_id: u64,
    ) -> Result<Option<Flushed>, (u64, DecodeError)> {
        match group_id {
            0 if segment != 0 || end_offset != 0 => {
                Err((40, DecodeError::BadField("a flushed point without a group")))
            }
            0 => Ok(None),
            group_id => Ok(Some(Flushed {
                segment,
                end_offset,
                group_id,
            })),
        }
    }
}

impl Manifest {
    /// The ranges of `indices` (ascending, distinct).
    pub fn ranges_of(indices: impl IntoIterator<Item = u64>) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for i in indices {
            match out.last_mut() {
                Some((_, last)) if *last + 1 == i => *last = i,
                Some((_, last)) => {
                    assert!(i > *last, "segment indices out of order");
                    out.push((i, i));
                }
                None => out.push((i, i)),
            }
        }
        out
    }

    /// Every listed segment index, in order.
    pub fn indices(&self) -> impl Iterator<Item = u64> + '_ {
        self.ranges.iter().flat_map(|&(a, b)| a..=b)
    }

    /// The highest listed index.
    pub fn last_index(&self) -> Option<u64> {
        self.ranges.last().map(|r| r.1)
    }

    /// Whether segment `index` is listed.
    pub fn contains(&self, index: u64) -> bool {
        let i = self.ranges.partition_point(|r| r.1 < index);
        self.ranges.get(i).is_some_and(|r| r.0 <= index)
    }

    /// The file's bytes (see the table in `docs/design.md`).
    pub fn encode(&self) -> Vec<u8> {
        assert!(self.ranges.len() <= MANIFEST_RANGES_MAX);
        assert!(check_ranges(&self.ranges).is_ok());
        assert!(self.checkpoint_generation != 0 || self.checkpoint_covered_group == 0);
        let mut out = Vec::with_capacity(MANIFEST_HEADER_BYTES + 16 * self.ranges.len() + 4);
        out.extend_from_slice(&MANIFEST_MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        let f = self.flushed.unwrap_or(Flushed {
            segment: 0,
            end_offset: 0,
            group_id: 0,
        });
        for v in [
            self.generation,
            self.checkpoint_generation,
            self.checkpoint_covered_group,
            f.segment,
            f.end_offset,
            f.group_id,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        let count = u32::try_from(self.ranges.len()).expect("asserted at most MANIFEST_RANGES_MAX");
        out.extend_from_slice(&count.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        for &(a, b) in &self.ranges {
            out.extend_from_slice(&a.to_le_bytes());
            out.extend_from_slice(&b.to_le_bytes());
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes a whole MANIFEST file; `Err` carries the offset of the bad
    /// field.
    pub fn decode(buf: &[u8]) -> Result<Manifest, (u64, DecodeError)> {
        let mut r = BytesIn::new(buf);
        let at = |r: &BytesIn<'_>| r.pos() as u64;
        let err = |r: &BytesIn<'_>, e| (at(r), e);
        if r.take(8).map_err(|e| (0, e))? != MANIFEST_MAGIC {
            return Err((0, DecodeError::BadMagic));
        }
        // The CRC first: nothing after it is trusted before.
        if buf.len() < MANIFEST_HEADER_BYTES + 4 {
            return Err((
                0,
                DecodeError::Truncated {
                    needed: MANIFEST_HEADER_BYTES + 4,
                    available: buf.len(),
                },
            ));
        }
        let count = u32_at(buf, 64) as usize;
        if count > MANIFEST_RANGES_MAX {
            return Err((
                64,
                DecodeError::BadField("more segment ranges than the format allows"),
            ));
        }
        let end = MANIFEST_HEADER_BYTES + 16 * count;
        if buf.len() != end + 4 {
            return Err((
                64,
                DecodeError::BadLength {
                    frame_len: buf.len() as u64,
                },
            ));
        }
        check_crc(&buf[..end], u32_at(buf, end)).map_err(|e| (end as u64, e))?;
        let version = r.u32().map_err(|e| err(&r, e))?;
        if version != FORMAT_VERSION {
            return Err((8, DecodeError::BadVersion(version)));
        }
        if r.u32().map_err(|e| err(&r, e))? != 0 {
            return Err((12, DecodeError::BadReserved));
        }
        let mut v = [0u64; 6];
        for x in &mut v {
            *x = r.u64().map_err(|e| err(&r, e))?;
        }
        let [generation, checkpoint_generation, checkpoint_covered_group, seg, off, group] = v;
        if checkpoint_generation == 0 && checkpoint_covered_group != 0 {
            return Err((
                32,
                DecodeError::BadField("a covered group without a checkpoint"),
            ));
        }
        let flushed = Flushed::decode(seg, off, group)?;
        r.u32().map_err(|e| err(&r, e))?;
        if r.u32().map_err(|e| err(&r, e))? != 0 {
            return Err((68, DecodeError::BadReserved));
        }
        let ranges = decode_ranges(&mut r, count)?;
        Ok(Manifest {
            generation,
            checkpoint_generation,
            checkpoint_covered_group,
            flushed,
            ranges,
        })
    }
}

/// `Err(i)` names the first range that is empty, or overlaps or touches
/// the one before.
fn check_ranges(ranges: &[(u64, u64)]) -> Result<(), usize> {
    for (i, &(a, b)) in ranges.iter().enumerate() {
        if a > b || (i > 0 && a <= ranges[i - 1].1.saturating_add(1)) {
            return Err(i);
        }
    }
    Ok(())
}

/// The `count` segment ranges after the header, checked ascending and apart.
fn decode_ranges(r: &mut BytesIn<'_>, count: usize) -> Result<Vec<(u64, u64)>, (u64, DecodeError)> {
    let err = |r: &BytesIn<'_>, e| (r.pos() as u64, e);
    let mut ranges = Vec::with_capacity(count);
    for _ in 0..count {
        ranges.push((
            r.u64().map_err(|e| err(r, e))?,
            r.u64().map_err(|e| err(r, e))?,
        ));
    }
    check_ranges(&ranges).map_err(|i| {
        (
            (MANIFEST_HEADER_BYTES + 16 * i) as u64,
            DecodeError::BadField("segment ranges not ascending and apart"),
        )
    })?;
    Ok(ranges)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        Manifest {
            generation: 9,
            checkpoint_generation: 4,
            checkpoint_covered_group: 1234,
            flushed: Some(Flushed {
                segment: 7,
                end_offset: 4096,
                group_id: 1300,
            }),
            ranges: vec![(0, 0), (3, 5), (7, 7)],
        }
    }

    #[test]
    fn round_trip_and_layout() {
        for m in [
            sample(),
            Manifest {
                ranges: vec![(0, 0)],
                ..Default::default()
            },
        ] {
            let b = m.encode();
            assert_eq!(b.len(), MANIFEST_HEADER_BYTES + 16 * m.ranges.len() + 4);
            assert_eq!(Manifest::decode(&b), Ok(m));
        }
        let m = sample();
        assert_eq!(m.indices().collect::<Vec<_>>(), vec![0, 3, 4, 5, 7]);
        assert!(m.contains(4) && !m.contains(6) && !m.contains(8));
        assert_eq!(Manifest::ranges_of([0, 3, 4, 5, 7]), m.ranges);
        assert_eq!(m.last_index(), Some(7));
    }

    #[test]
    fn every_flip_and_truncation_is_refused() {
        let b = sample().encode();
        for i in 0..b.len() {
            for bit in 0..8 {
                let mut bad = b.clone();
                bad[i] ^= 1 << bit;
                assert!(Manifest::decode(&bad).is_err(), "byte {i} bit {bit}");
            }
        }
        for cut in 0..b.len() {
            assert!(Manifest::decode(&b[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn resealed_bad_fields_are_refused_with_their_offset() {
        let reseal = |mut b: Vec<u8>| {
            let end = b.len() - 4;
            let crc = crc32fast::hash(&b[..end]);
            b[end..].copy_from_slice(&crc.to_le_bytes());
            b
        };
        let cases: Vec<(usize, Vec<u8>, u64)> = vec![
            (8, 1u32.to_le_bytes().to_vec(), 8),
            (12, vec![1], 12),
            (24, 0u64.to_le_bytes().to_vec(), 32),
            (56, 0u64.to_le_bytes().to_vec(), 40),
            (68, vec![1], 68),
            // Range 1 starts inside range 0, range 2 touches range 1.
            (88, 0u64.to_le_bytes().to_vec(), 88),
            (104, 6u64.to_le_bytes().to_vec(), 104),
        ];
        for (at, bytes, offset) in cases {
            let mut b = sample().encode();
            b[at..at + bytes.len()].copy_from_slice(&bytes);
            let got = Manifest::decode(&reseal(b));
            assert_eq!(
                got.as_ref().map_err(|e| e.0),
                Err(offset),
                "field at {at}: {got:?}"
            );
        }
    }
}
