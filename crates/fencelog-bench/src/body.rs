//! Record bodies that name their writer, so verification can regenerate
//! the exact bytes any acknowledged record must have.
//!
//! Layout: `cccccccc.nnnnnnnnnnnn.iiii.` (client, counter, index in batch,
//! lowercase hex), then filler letters that depend on the counter and the
//! position, so a record swapped with its neighbour or shifted by a byte
//! does not compare equal. Plain ASCII keeps the JSON text form usable.

use bytes::Bytes;

const HEADER_BYTES: usize = 8 + 1 + 12 + 1 + 4 + 1;
pub const RECORD_BYTES_MIN: usize = HEADER_BYTES;

/// Who wrote a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BodyId {
    pub client: u32,
    pub counter: u64,
    pub index: u16,
}

pub fn encode(id: BodyId, len_bytes: usize) -> Bytes {
    let mut out = Vec::with_capacity(len_bytes.max(HEADER_BYTES));
    encode_into(id, len_bytes, &mut out);
    Bytes::from(out)
}

/// [`encode`] into `out` (cleared first), without formatting machinery: the
/// session workload makes 150k of these a second on the load generator's
/// share of the machine.
#[allow(
    clippy::cast_possible_truncation,
    reason = "the seed only mixes bits, so a 32-bit target may drop the counter's high ones; a letter's offset is below 26"
)]
pub fn encode_into(id: BodyId, len_bytes: usize, out: &mut Vec<u8>) {
    out.clear();
    hex(out, id.client as u64, 8);
    out.push(b'.');
    hex(out, id.counter & 0xffff_ffff_ffff, 12);
    out.push(b'.');
    hex(out, id.index as u64, 4);
    out.push(b'.');
    let seed = id.counter as usize ^ (id.client as usize).wrapping_mul(31) ^ id.index as usize;
    for pos in HEADER_BYTES..len_bytes {
        out.push(b'a' + ((seed + pos) % 26) as u8);
    }
}

/// `value` as `digits` lowercase hex digits.
fn hex(out: &mut Vec<u8>, value: u64, digits: u32) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for i in (0..digits).rev() {
        out.push(DIGITS[((value >> (4 * i)) & 15) as usize]);
    }
}

/// The writer named at the start of a body, if it has our layout.
pub fn decode(body: &[u8]) -> Option<BodyId> {
    if body.len() < HEADER_BYTES {
        return None;
    }
    let text = std::str::from_utf8(&body[..HEADER_BYTES]).ok()?;
    let mut parts = text.split('.');
    let client = u32::from_str_radix(parts.next()?, 16).ok()?;
    let counter = u64::from_str_radix(parts.next()?, 16).ok()?;
    let index = u16::from_str_radix(parts.next()?, 16).ok()?;
    Some(BodyId {
        client,
        counter,
        index,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_differs_by_writer() {
        let a = BodyId {
            client: 7,
            counter: 12345,
            index: 3,
        };
        let b = BodyId {
            counter: 12346,
            ..a
        };
        let ea = encode(a, 100);
        assert_eq!(ea.len(), 100);
        assert_eq!(decode(&ea), Some(a));
        assert_ne!(ea, encode(b, 100));
        assert_eq!(encode(a, HEADER_BYTES).len(), HEADER_BYTES);
        // What the formatting machinery writes.
        let head = format!("{:08x}.{:012x}.{:04x}.", 7, 12345, 3);
        assert_eq!(&ea[..HEADER_BYTES], head.as_bytes());
    }
}
