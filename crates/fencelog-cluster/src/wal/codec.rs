//! The Raft WAL's bytes (pure, no I/O): its file header, its groups, and
//! replay — which decides whether a bad group is the torn tail a crash
//! leaves (cut it) or damage to a group that was durable (refuse to start).
//!
//! Version 2 (little-endian, fixed width):
//!
//! ```text
//! file header, 32 bytes at offset 0:
//!   magic "FLRAFTWL" [8] | version u32 = 2 | salt u64 | first_seq u64 | crc u32
//!   (crc = crc32 of the 28 bytes before it)
//! group, 28-byte header then payload:
//!   magic "FLWG" [4] | payload_len u32 | seq u64 | durable_below u64 | crc u32
//!   | payload = records, each u32 len | postcard(WalRecord)
//!   (crc = crc32 of salt (8 bytes LE), the header's first 24 bytes, payload)
//! ```
//!
//! Groups are numbered from the header's `first_seq`, one apart. A
//! group's `durable_below` is what its writer knew when it wrote it:
//! every group numbered below it had been synced. The writer writes a
//! group only after the previous sync returned, so replay can tell the
//! two cases apart. A bad group k (torn, zeroed, bit-flipped) with a
//! whole group after it whose `durable_below` exceeds k was durable and
//! has been damaged since: replay refuses. Without one, k is part of the
//! unsynced tail (a crash mid-write, or groups of committed ids written
//! without a sync), and replay cuts the file there. The cut loses
//! nothing anyone was told was durable: nobody hears before the sync.
//!
//! The salt is random per file, so a record body that happens to hold a
//! group's bytes cannot pass for a group when replay looks past a bad one.
//! Damage to a group numbered at or above the last group's
//! `durable_below` (the last group, and any written since the last sync
//! that group's writer knew of) is the case replay cannot tell from a
//! torn tail: it is cut like one (the media assumption of docs/design.md,
//! as for the engine's last group).
//!
//! Version 1 (before the header): records `u32 len | u32 crc32(payload) |
//! payload` from offset 0, cut at the first bad one. It is still read,
//! and a node rewrites it as version 2 when it opens it.

use super::record::WalRecord;
use std::collections::VecDeque;

/// The file header's magic.
pub const FILE_MAGIC: [u8; 8] = *b"FLRAFTWL";
/// The version this code writes.
pub const WAL_VERSION: u32 = 2;
/// The headerless layout before [`WAL_VERSION`].
pub const WAL_VERSION_V1: u32 = 1;
/// Bytes of the file header.
pub const FILE_HEADER_BYTES: usize = 32;
/// A group's magic.
pub const GROUP_MAGIC: [u8; 4] = *b"FLWG";
/// Bytes of a group's header.
pub const GROUP_HEADER_BYTES: usize = 28;
/// Largest group payload; the writer splits a larger batch into groups.
pub const GROUP_PAYLOAD_BYTES_MAX: usize = 96 << 20;
/// Largest record payload: a batch of the engine's group bound plus slack.
pub const RECORD_BYTES_MAX: usize = 80 << 20;
/// Bytes of a record's length field.
pub const RECORD_LEN_BYTES: usize = 4;
/// Bytes of a version-1 record's header (length and CRC).
const V1_RECORD_HEADER_BYTES: usize = 8;

/// Why replay refused a file: damage to something that was durable, or a
/// layout this code does not know. Never an I/O error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// Where in the file.
    pub offset: u64,
    /// What is wrong there.
    pub reason: String,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "raft WAL damaged at byte {}: {}",
            self.offset, self.reason
        )
    }
}

impl std::error::Error for Damage {}

fn damage(offset: usize, reason: impl Into<String>) -> Damage {
    Damage {
        offset: offset as u64,
        reason: reason.into(),
    }
}

/// What replay found.
#[derive(Debug, Default)]
pub struct Replayed {
    /// [`WAL_VERSION`], [`WAL_VERSION_V1`], or 0 for a file with nothing
    /// in it (empty, or zeros only).
    pub version: u32,
    /// Every record of the valid prefix, in file order.
    pub records: Vec<WalRecord>,
    /// Bytes of the valid prefix (header and whole groups).
    pub valid: usize,
    /// Whether everything after `valid` is zeros (the writer's
    /// preallocation); if not, the file is cut at `valid`.
    pub zero_tail: bool,
    /// Version 2: the file's salt and the number the next group takes.
    pub salt: u64,
    /// See `salt`.
    pub next_seq: u64,
    /// Version 2: where the groups no sync was known to cover start (the
    /// last whole group's `durable_below` on), up to `valid`. A process
    /// whose sync failed may have left them in the page cache alone, where
    /// no later sync reaches them; the opener writes them again before it
    /// syncs.
    pub unsynced_from: usize,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("four bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("eight bytes"))
}

// Every length a writer puts in a u32 field is checked against one of
// these first.
const _: () = assert!(RECORD_BYTES_MAX <= u32::MAX as usize);
const _: () = assert!(GROUP_PAYLOAD_BYTES_MAX <= u32::MAX as usize);

/// A record or group payload length as its u32 field holds it; the
/// caller has checked `n` against [`RECORD_BYTES_MAX`] or
/// [`GROUP_PAYLOAD_BYTES_MAX`]. Per record, so no second check here.
#[allow(
    clippy::cast_possible_truncation,
    reason = "callers check n against RECORD_BYTES_MAX or GROUP_PAYLOAD_BYTES_MAX, both below u32::MAX (asserted above)"
)]
fn len_u32(n: usize) -> u32 {
    n as u32
}

/// A version-2 file header.
pub fn file_header(salt: u64, first_seq: u64) -> [u8; FILE_HEADER_BYTES] {
    let mut h = [0u8; FILE_HEADER_BYTES];
    h[..8].copy_from_slice(&FILE_MAGIC);
    h[8..12].copy_from_slice(&WAL_VERSION.to_le_bytes());
    h[12..20].copy_from_slice(&salt.to_le_bytes());
    h[20..28].copy_from_slice(&first_seq.to_le_bytes());
    let crc = crc32fast::hash(&h[..28]);
    h[28..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Appends one record (length, then postcard) to a group's payload.
pub fn put_record(out: &mut Vec<u8>, rec: &WalRecord) {
    let payload = postcard::to_allocvec(rec).expect("a WAL record always encodes");
    assert!(
        payload.len() <= RECORD_BYTES_MAX,
        "WAL record over the bound"
    );
    out.extend_from_slice(&len_u32(payload.len()).to_le_bytes());
    out.extend_from_slice(&payload);
}

/// One record's bytes as `put_record` writes them into a group.
pub fn encode_record(rec: &WalRecord) -> Vec<u8> {
    let mut out = Vec::new();
    put_record(&mut out, rec);
    out
}

fn group_crc(salt: u64, head: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&salt.to_le_bytes());
    h.update(&head[..24]);
    h.update(payload);
    h.finalize()
}

/// Appends one group holding `payload` (whole records) to `out`.
pub fn put_group(out: &mut Vec<u8>, salt: u64, seq: u64, durable_below: u64, payload: &[u8]) {
    assert!(
        !payload.is_empty() && payload.len() <= GROUP_PAYLOAD_BYTES_MAX,
        "a group holds 1..=GROUP_PAYLOAD_BYTES_MAX bytes"
    );
    assert!(
        durable_below <= seq,
        "a group is never durable before it is written"
    );
    let mut head = [0u8; GROUP_HEADER_BYTES];
    head[..4].copy_from_slice(&GROUP_MAGIC);
    head[4..8].copy_from_slice(&len_u32(payload.len()).to_le_bytes());
    head[8..16].copy_from_slice(&seq.to_le_bytes());
    head[16..24].copy_from_slice(&durable_below.to_le_bytes());
    let crc = group_crc(salt, &head, payload);
    head[24..].copy_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(payload);
}

/// A whole group read at `at`: (seq, durable_below, payload range end).
struct Group {
    seq: u64,
    durable_below: u64,
    end: usize,
}

/// The group at `at` if it is whole and its CRC holds.
fn group_at(b: &[u8], at: usize, salt: u64) -> Option<Group> {
    let head = b.get(at..at + GROUP_HEADER_BYTES)?;
    if head[..4] != GROUP_MAGIC {
        return None;
    }
    let len = u32_at(head, 4) as usize;
    if len == 0 || len > GROUP_PAYLOAD_BYTES_MAX {
        return None;
    }
    let end = at + GROUP_HEADER_BYTES + len;
    let payload = b.get(at + GROUP_HEADER_BYTES..end)?;
    (group_crc(salt, head, payload) == u32_at(head, 24)).then(|| Group {
        seq: u64_at(head, 8),
        durable_below: u64_at(head, 16),
        end,
    })
}

/// The records of a group's payload; a CRC-valid group whose records do
/// not decode is a layout this code does not know, not a torn write.
fn records_of(payload: &[u8], at: usize) -> Result<Vec<WalRecord>, Damage> {
    let mut out = Vec::new();
    let mut rest = payload;
    while !rest.is_empty() {
        let bad = || damage(at, "a whole group whose records do not decode");
        let len = u32::from_le_bytes(*rest.first_chunk().ok_or_else(bad)?) as usize;
        let body = rest.get(4..4 + len).ok_or_else(bad)?;
        let (rec, left) = postcard::take_from_bytes::<WalRecord>(body).map_err(|_| bad())?;
        if len == 0 || !left.is_empty() {
            return Err(bad());
        }
        out.push(rec);
        rest = &rest[4 + len..];
    }
    Ok(out)
}

/// Replays a WAL file's bytes. `cut_damage` is the `WalCutsDamage`
/// mutation: damage read as a torn tail, the version-1 rule.
pub fn replay(b: &[u8], cut_damage: bool) -> Result<Replayed, Damage> {
    if b.iter().all(|&x| x == 0) {
        return Ok(Replayed {
            zero_tail: true,
            ..Replayed::default()
        });
    }
    if b.starts_with(&FILE_MAGIC) {
        return replay_v2(b, cut_damage);
    }
    if looks_like_v2(b) {
        return Err(damage(0, "a version-2 file whose magic is damaged"));
    }
    // Version 1, perhaps with its very first record torn (a crash in the
    // first batch ever): version 1 read that as empty, and so does this.
    Ok(replay_v1(b))
}

/// A file that is version 2 but for its magic: its version field, or a
/// group's magic where the first group starts.
fn looks_like_v2(b: &[u8]) -> bool {
    b.get(8..12) == Some(&WAL_VERSION.to_le_bytes()[..])
        || b.get(FILE_HEADER_BYTES..FILE_HEADER_BYTES + 4) == Some(&GROUP_MAGIC[..])
}

fn replay_v2(b: &[u8], cut_damage: bool) -> Result<Replayed, Damage> {
    let head = b
        .get(..FILE_HEADER_BYTES)
        .ok_or_else(|| damage(0, "a file header cut short"))?;
    if crc32fast::hash(&head[..28]) != u32_at(head, 28) {
        return Err(damage(0, "the file header's CRC does not match"));
    }
    let version = u32_at(head, 8);
    if version != WAL_VERSION {
        return Err(damage(
            8,
            format!("version {version}, this code reads {WAL_VERSION_V1} and {WAL_VERSION}"),
        ));
    }
    let salt = u64_at(head, 12);
    let mut out = Replayed {
        version,
        salt,
        next_seq: u64_at(head, 20),
        valid: FILE_HEADER_BYTES,
        ..Replayed::default()
    };
    let mut at = FILE_HEADER_BYTES;
    // The whole groups no sync was known to cover so far: (number, start),
    // from the last one's durable_below on (it only grows, so the front
    // can be dropped as it does).
    let mut uncovered: VecDeque<(u64, usize)> = VecDeque::new();
    while at < b.len() {
        match group_at(b, at, salt) {
            Some(g) if g.seq == out.next_seq => {
                uncovered.push_back((g.seq, at));
                while uncovered
                    .front()
                    .is_some_and(|(seq, _)| *seq < g.durable_below)
                {
                    uncovered.pop_front();
                }
                out.records
                    .extend(records_of(&b[at + GROUP_HEADER_BYTES..g.end], at)?);
                out.next_seq += 1;
                at = g.end;
                out.valid = at;
            }
            Some(g) if !cut_damage => {
                let want = out.next_seq;
                return Err(damage(
                    at,
                    format!("group {} where group {want} belongs", g.seq),
                ));
            }
            _ => break,
        }
    }
    out.unsynced_from = uncovered.front().map_or(out.valid, |(_, start)| *start);
    out.zero_tail = b[at..].iter().all(|&x| x == 0);
    if !out.zero_tail && !cut_damage {
        if let Some((later, g)) = durable_after(b, at, salt, out.next_seq) {
            return Err(damage(
                at,
                format!(
                    "group {} does not read whole, and group {} at byte {later} was written after it was synced",
                    out.next_seq, g.seq
                ),
            ));
        }
    }
    Ok(out)
}

/// The first whole group after `bad` written once group `k` was synced.
fn durable_after(b: &[u8], bad: usize, salt: u64, k: u64) -> Option<(usize, Group)> {
    (bad + 1..b.len().saturating_sub(GROUP_HEADER_BYTES - 1))
        .filter(|&at| b[at..at + 4] == GROUP_MAGIC && u64_at(b, at + 16) > k)
        .find_map(|at| group_at(b, at, salt).map(|g| (at, g)))
}

/// The version-1 record at `at`: (payload range, end).
fn v1_record_at(b: &[u8], at: usize) -> Option<(std::ops::Range<usize>, usize)> {
    let head = b.get(at..at + V1_RECORD_HEADER_BYTES)?;
    let (len, crc) = (u32_at(head, 0) as usize, u32_at(head, 4));
    if len == 0 || len > RECORD_BYTES_MAX {
        return None;
    }
    let payload = at + V1_RECORD_HEADER_BYTES..at + V1_RECORD_HEADER_BYTES + len;
    let end = payload.end;
    (crc32fast::hash(b.get(payload.clone())?) == crc).then_some((payload, end))
}

/// Version 1 kept no group boundaries, so it is cut at its first bad or
/// undecodable record, as the version-1 code did.
fn replay_v1(b: &[u8]) -> Replayed {
    let mut out = Replayed {
        version: WAL_VERSION_V1,
        ..Replayed::default()
    };
    while let Some((payload, end)) = v1_record_at(b, out.valid) {
        let Ok(rec) = postcard::from_bytes::<WalRecord>(&b[payload]) else {
            break;
        };
        out.records.push(rec);
        out.valid = end;
    }
    out.zero_tail = b[out.valid..].iter().all(|&x| x == 0);
    out
}

/// A version-1 record (only tests write these now: the upgrade's).
#[cfg(test)]
pub(crate) fn encode_v1_record(rec: &WalRecord) -> Vec<u8> {
    let payload = postcard::to_allocvec(rec).expect("a WAL record encodes");
    let mut out = Vec::with_capacity(V1_RECORD_HEADER_BYTES + payload.len());
    let len = u32::try_from(payload.len()).expect("a test's record is far below 4 GiB");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

#[cfg(test)]
#[path = "codec_tests.rs"]
mod tests;
