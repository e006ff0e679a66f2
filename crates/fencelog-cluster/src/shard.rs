//! Which shard a stream belongs to: FNV-1a 64 of its name mod S. Stable
//! forever and across versions and platforms (never `DefaultHasher`),
//! because S is fixed at cluster creation and a stream must never move.

use crate::ids::ShardId;

/// Most shards a cluster may have.
pub const SHARDS_MAX: u32 = 256;
/// Shards when `--shards` is not given.
pub const SHARDS_DEFAULT: u32 = 8;

/// FNV-1a, 64 bits.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET, |h, b| (h ^ *b as u64).wrapping_mul(PRIME))
}

/// The shard of `stream` among `shards`.
pub fn shard_of(stream: &str, shards: u32) -> ShardId {
    assert!(
        (1..=SHARDS_MAX).contains(&shards),
        "shards {shards} out of range"
    );
    ShardId::try_from(fnv1a64(stream.as_bytes()) % u64::from(shards))
        .expect("the remainder is below `shards`, a u32")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Published FNV-1a 64 test vectors: the function must never change.
    #[test]
    fn fnv1a64_matches_the_reference_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn shard_of_is_the_hash_mod_s() {
        assert_eq!(shard_of("a", 8), (0xaf63_dc4c_8601_ec8c_u64 % 8) as u32);
        assert_eq!(shard_of("anything", 1), 0);
    }
}
