//! The CHECKPOINT file (`docs/design.md`, "CHECKPOINT"): every stream's
//! fencing state, so that segments holding the frames that carried it can
//! be deleted. A 64-byte header, the applied section (a shard engine's
//! Raft position in cluster mode), one length- and CRC-framed entry per
//! stream in name order, and a trailer
//! that proves nothing was cut off.
//!
//! Encoding is streaming ([`CheckpointEncoder`]) so a checkpoint of many
//! streams never needs one buffer; decoding ([`CheckpointDecoder`]) checks
//! every CRC, length, bound and the name order before handing an entry out.

use super::payload::{
    decode_retention, encode_retention, CURSOR_NAME_BYTES_MAX, MEMBERSHIP_BYTES_MAX,
    PRODUCER_ID_BYTES_MAX,
};
use super::{check_crc, check_short_name, u32_at, u64_at, BytesIn, DecodeError, FORMAT_VERSION};
use crate::name::validate_stream_name_bytes;
use fencelog_types::{CursorEntry, FenceBy, FenceEvent, ProducerEntry, Retention};

pub const CHECKPOINT_MAGIC: [u8; 8] = *b"FLCKPT02";
pub const CHECKPOINT_END_MAGIC: [u8; 8] = *b"FLCKPTND";
pub const CHECKPOINT_HEADER_BYTES: usize = 64;
pub const CHECKPOINT_TRAILER_BYTES: usize = 24;
/// Fence history entries kept per stream (what `Engine::fence_history`
/// answers), newest last.
pub const FENCE_HISTORY_MAX: usize = 64;
/// Largest entry the decoder believes (a stream with the most producers
/// and cursors the counts allow stays far below it).
pub const CHECKPOINT_ENTRY_BYTES_MAX: usize = 32 << 20;

const SEALED: u16 = 1;
const DELETED: u16 = 1 << 1;
const AGE_SET: u16 = 1 << 2;
const BYTES_SET: u16 = 1 << 3;
const RESPECT_CURSORS: u16 = 1 << 4;

/// One stream's fencing state, as a checkpoint keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamEntry {
    pub name: String,
    pub sealed: bool,
    /// A tombstone: the records are gone, the token stays.
    pub deleted: bool,
    pub retention_age_s: Retention,
    pub retention_bytes: Retention,
    pub respect_cursors: bool,
    /// The last group that changed this stream before it was captured.
    pub as_of_group: u64,
    pub highest_token: u64,
    pub next_seq: u64,
    pub first_seq: u64,
    pub last_timestamp_ms: u64,
    pub producer_token_floor: u64,
    pub producers: Vec<ProducerEntry>,
    /// Oldest first, at most [`FENCE_HISTORY_MAX`].
    pub history: Vec<FenceEvent>,
    pub cursors: Vec<CursorEntry>,
}

/// The applied Raft position of a shard engine (cluster mode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedState {
    /// The Raft term of the LogId.
    pub term: u64,
    /// The leader node id of the LogId.
    pub node_id: u64,
    /// The Raft log index of the LogId.
    pub index: u64,
    /// The last membership that changed; empty if none was ever recorded.
    pub membership: Vec<u8>,
}

/// The header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointHeader {
    pub generation: u64,
    /// Every group up to this one was published when the capture started.
    pub covered_group_id: u64,
    pub stream_count: u64,
    /// The next group id the writer would have used (a hint, checked
    /// against the log at open).
    pub next_group_id: u64,
}

impl StreamEntry {
    /// The entry's payload (without its length and CRC).
    pub fn encode(&self, out: &mut Vec<u8>) {
        assert!(self.history.len() <= FENCE_HISTORY_MAX);
        let producers = u16::try_from(self.producers.len())
            .expect("producers per stream are capped at PRODUCERS_PER_STREAM_LIMIT (u16::MAX)");
        let cursors = u16::try_from(self.cursors.len())
            .expect("cursors per stream are capped at CURSORS_PER_STREAM_MAX (u16::MAX)");
        let name_len = u16::try_from(self.name.len())
            .expect("stream names are at most STREAM_NAME_BYTES_MAX (255) bytes");
        let (age_set, age) = encode_retention(self.retention_age_s);
        let (bytes_set, bytes) = encode_retention(self.retention_bytes);
        let flags = (self.sealed as u16 * SEALED)
            | (self.deleted as u16 * DELETED)
            | (age_set as u16 * AGE_SET)
            | (bytes_set as u16 * BYTES_SET)
            | (self.respect_cursors as u16 * RESPECT_CURSORS);
        out.extend_from_slice(&name_len.to_le_bytes());
        out.extend_from_slice(self.name.as_bytes());
        out.extend_from_slice(&flags.to_le_bytes());
        for v in [
            self.as_of_group,
            self.highest_token,
            self.next_seq,
            self.first_seq,
            self.last_timestamp_ms,
            age,
            bytes,
            self.producer_token_floor,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&producers.to_le_bytes());
        encode_producers(&self.producers, out);
        encode_history(&self.history, out);
        out.extend_from_slice(&cursors.to_le_bytes());
        encode_cursors(&self.cursors, out);
    }

    /// Decodes and checks one entry's payload.
    pub fn decode(payload: &[u8]) -> Result<StreamEntry, DecodeError> {
        let mut r = BytesIn::new(payload);
        let name_len = r.u16()? as usize;
        let name = r.take(name_len)?;
        validate_stream_name_bytes(name).map_err(|e| DecodeError::BadName(e.to_string()))?;
        let flags = r.u16()?;
        if flags & !(SEALED | DELETED | AGE_SET | BYTES_SET | RESPECT_CURSORS) != 0 {
            #[allow(
                clippy::cast_possible_truncation,
                reason = "`BadFlags` holds one byte; it reports an entry's 16 flag bits by their low byte"
            )]
            return Err(DecodeError::BadFlags(flags as u8));
        }
        let mut v = [0u64; 8];
        for x in &mut v {
            *x = r.u64()?;
        }
        let [as_of_group, highest_token, next_seq, first_seq, last_timestamp_ms, age, bytes, floor] =
            v;
        let mut e = StreamEntry {
            name: std::str::from_utf8(name)
                .expect("validated ascii")
                .to_string(),
            sealed: flags & SEALED != 0,
            deleted: flags & DELETED != 0,
            retention_age_s: decode_retention(flags & AGE_SET != 0, age)?,
            retention_bytes: decode_retention(flags & BYTES_SET != 0, bytes)?,
            respect_cursors: flags & RESPECT_CURSORS != 0,
            as_of_group,
            highest_token,
            next_seq,
            first_seq,
            last_timestamp_ms,
            producer_token_floor: floor,
            ..Default::default()
        };
        e.producers = decode_producers(&mut r)?;
        e.history = decode_history(&mut r)?;
        e.cursors = decode_cursors(&mut r)?;
        r.finish()?;
        e.check()?;
        Ok(e)
    }

    /// What must hold of any state the writer could have published.
    fn check(&self) -> Result<(), DecodeError> {
        let fail = |why| Err(DecodeError::BadField(why));
        if self.highest_token == 0 || self.as_of_group == 0 {
            return fail("a stream without a token or a group");
        }
        if self.first_seq > self.next_seq {
            return fail("first_seq above next_seq");
        }
        if self.deleted && (self.sealed || self.first_seq != self.next_seq) {
            return fail("a tombstone that is sealed or holds records");
        }
        if self.deleted && !(self.producers.is_empty() && self.cursors.is_empty()) {
            return fail("a tombstone with producers or cursors");
        }
        let tokens_rise = self.history.windows(2).all(|w| w[0].token < w[1].token);
        if !tokens_rise
            || self
                .history
                .last()
                .is_some_and(|h| h.token != self.highest_token)
        {
            return fail("fence history does not rise to the highest token");
        }
        if self
            .cursors
            .iter()
            .any(|c| c.seq > self.next_seq || c.token == 0)
        {
            return fail("a cursor past next_seq or without a token");
        }
        Ok(())
    }
}

/// Each producer of an entry, after its count.
fn encode_producers(producers: &[ProducerEntry], out: &mut Vec<u8>) {
    for p in producers {
        let id_len = u8::try_from(p.id.len())
            .expect("producer ids are at most PRODUCER_ID_BYTES_MAX (64) bytes");
        out.push(id_len);
        out.extend_from_slice(p.id.as_bytes());
        for v in [
            p.producer_seq,
            p.first_seq,
            p.last_seq,
            p.token,
            p.timestamp_ms,
            p.last_used_group,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
}

/// An entry's fence history with its count, at most [`FENCE_HISTORY_MAX`].
fn encode_history(history: &[FenceEvent], out: &mut Vec<u8>) {
    out.push(u8::try_from(history.len()).expect("asserted at most FENCE_HISTORY_MAX (64)"));
    for h in history {
        for v in [h.token, h.first_seq, h.timestamp_ms] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.push(h.by as u8);
    }
}

/// Each cursor of an entry, after its count.
fn encode_cursors(cursors: &[CursorEntry], out: &mut Vec<u8>) {
    for c in cursors {
        let name_len = u8::try_from(c.name.len())
            .expect("cursor names are at most CURSOR_NAME_BYTES_MAX (64) bytes");
        out.push(name_len);
        out.extend_from_slice(c.name.as_bytes());
        for v in [c.token, c.seq, c.timestamp_ms] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
}

fn decode_producers(r: &mut BytesIn<'_>) -> Result<Vec<ProducerEntry>, DecodeError> {
    let count = r.u16()? as usize;
    let mut out: Vec<ProducerEntry> = Vec::with_capacity(count.min(r.remaining() / 49));
    for _ in 0..count {
        let len = r.u8()? as usize;
        let id = r.take(len)?;
        check_short_name(id, PRODUCER_ID_BYTES_MAX)?;
        let id = std::str::from_utf8(id)
            .expect("validated ascii")
            .to_string();
        if out.iter().any(|p| p.id == id) {
            return Err(DecodeError::BadField("a producer listed twice"));
        }
        let mut v = [0u64; 6];
        for x in &mut v {
            *x = r.u64()?;
        }
        let [producer_seq, first_seq, last_seq, token, timestamp_ms, last_used_group] = v;
        if first_seq > last_seq || token == 0 {
            return Err(DecodeError::BadField("a producer ack that is not one"));
        }
        out.push(ProducerEntry {
            id,
            producer_seq,
            first_seq,
            last_seq,
            token,
            timestamp_ms,
            last_used_group,
        });
    }
    Ok(out)
}

/// A fence history cause as its byte stores it (`FenceBy as u8`).
fn fence_by(b: u8) -> Option<FenceBy> {
    Some(match b {
        1 => FenceBy::Append,
        2 => FenceBy::Fence,
        3 => FenceBy::Trim,
        4 => FenceBy::Seal,
        5 => FenceBy::Delete,
        6 => FenceBy::Config,
        _ => return None,
    })
}

fn decode_history(r: &mut BytesIn<'_>) -> Result<Vec<FenceEvent>, DecodeError> {
    let count = r.u8()? as usize;
    if count > FENCE_HISTORY_MAX {
        return Err(DecodeError::BadField("fence history over 64 entries"));
    }
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let token = r.u64()?;
        let first_seq = r.u64()?;
        let timestamp_ms = r.u64()?;
        let by = fence_by(r.u8()?).ok_or(DecodeError::BadField("unknown fence history cause"))?;
        out.push(FenceEvent {
            token,
            first_seq,
            timestamp_ms,
            by,
        });
    }
    Ok(out)
}

fn decode_cursors(r: &mut BytesIn<'_>) -> Result<Vec<CursorEntry>, DecodeError> {
    let count = r.u16()? as usize;
    let mut out: Vec<CursorEntry> = Vec::with_capacity(count.min(r.remaining() / 25));
    for _ in 0..count {
        let len = r.u8()? as usize;
        let name = r.take(len)?;
        check_short_name(name, CURSOR_NAME_BYTES_MAX)?;
        let name = std::str::from_utf8(name)
            .expect("validated ascii")
            .to_string();
        if out.iter().any(|c| c.name == name) {
            return Err(DecodeError::BadField("a cursor listed twice"));
        }
        let (token, seq, timestamp_ms) = (r.u64()?, r.u64()?, r.u64()?);
        out.push(CursorEntry {
            name,
            token,
            seq,
            timestamp_ms,
        });
    }
    Ok(out)
}

fn encode_applied(a: Option<&AppliedState>, out: &mut Vec<u8>) {
    let empty = AppliedState {
        term: 0,
        node_id: 0,
        index: 0,
        membership: Vec::new(),
    };
    let s = a.unwrap_or(&empty);
    assert!(s.membership.len() <= MEMBERSHIP_BYTES_MAX);
    out.push(a.is_some() as u8);
    for v in [s.term, s.node_id, s.index] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    let len =
        u32::try_from(s.membership.len()).expect("asserted at most MEMBERSHIP_BYTES_MAX (1 MiB)");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&s.membership);
}

fn decode_applied(payload: &[u8]) -> Result<Option<AppliedState>, DecodeError> {
    let mut r = BytesIn::new(payload);
    let has = r.u8()?;
    let (term, node_id, index) = (r.u64()?, r.u64()?, r.u64()?);
    let len = r.u32()? as usize;
    if len > MEMBERSHIP_BYTES_MAX {
        return Err(DecodeError::BadField("membership over 1 MiB"));
    }
    let membership = r.take(len)?.to_vec();
    r.finish()?;
    match has {
        0 if term == 0 && node_id == 0 && index == 0 && len == 0 => Ok(None),
        1 => Ok(Some(AppliedState {
            term,
            node_id,
            index,
            membership,
        })),
        _ => Err(DecodeError::BadField("applied section")),
    }
}

/// Frames `payload` as `u32 len, u32 crc, payload`.
fn push_framed(out: &mut Vec<u8>, payload: &[u8]) -> u32 {
    assert!(payload.len() <= CHECKPOINT_ENTRY_BYTES_MAX);
    let crc = crc32fast::hash(payload);
    let len =
        u32::try_from(payload.len()).expect("asserted at most CHECKPOINT_ENTRY_BYTES_MAX (32 MiB)");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(payload);
    crc
}

/// Builds a checkpoint in pieces: [`CheckpointEncoder::new`] gives the bytes
/// after the header (the applied section); each [`Self::entry`] appends an
/// entry's bytes to a buffer the caller drains to the file; [`Self::finish`]
/// returns the trailer and the header, which goes at offset 0.
pub struct CheckpointEncoder {
    count: u64,
    entry_crcs: crc32fast::Hasher,
    last_name: Option<String>,
    scratch: Vec<u8>,
}

impl CheckpointEncoder {
    /// An encoder, and the applied section to write right after the header.
    pub fn new(applied: Option<&AppliedState>) -> (CheckpointEncoder, Vec<u8>) {
        let mut payload = Vec::new();
        encode_applied(applied, &mut payload);
        let mut section = Vec::new();
        push_framed(&mut section, &payload);
        let enc = CheckpointEncoder {
            count: 0,
            entry_crcs: crc32fast::Hasher::new(),
            last_name: None,
            scratch: Vec::new(),
        };
        (enc, section)
    }

    /// Appends `e` (names strictly ascending) to `out`.
    pub fn entry(&mut self, e: &StreamEntry, out: &mut Vec<u8>) {
        assert!(
            self.last_name
                .as_deref()
                .is_none_or(|l| l < e.name.as_str()),
            "entries out of name order"
        );
        self.scratch.clear();
        e.encode(&mut self.scratch);
        let crc = push_framed(out, &self.scratch);
        self.entry_crcs.update(&crc.to_le_bytes());
        self.count += 1;
        self.last_name = Some(e.name.clone());
    }

    /// The trailer, then the header.
    pub fn finish(self, mut header: CheckpointHeader) -> (Vec<u8>, [u8; CHECKPOINT_HEADER_BYTES]) {
        header.stream_count = self.count;
        let mut trailer = Vec::with_capacity(CHECKPOINT_TRAILER_BYTES);
        trailer.extend_from_slice(&CHECKPOINT_END_MAGIC);
        trailer.extend_from_slice(&self.count.to_le_bytes());
        trailer.extend_from_slice(&self.entry_crcs.finalize().to_le_bytes());
        trailer.extend_from_slice(&0u32.to_le_bytes());
        (trailer, encode_header(&header))
    }
}

pub fn encode_header(h: &CheckpointHeader) -> [u8; CHECKPOINT_HEADER_BYTES] {
    let mut out = [0u8; CHECKPOINT_HEADER_BYTES];
    out[0..8].copy_from_slice(&CHECKPOINT_MAGIC);
    out[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    out[16..24].copy_from_slice(&h.generation.to_le_bytes());
    out[24..32].copy_from_slice(&h.covered_group_id.to_le_bytes());
    out[32..40].copy_from_slice(&h.stream_count.to_le_bytes());
    out[40..48].copy_from_slice(&h.next_group_id.to_le_bytes());
    let crc = crc32fast::hash(&out[0..60]);
    out[60..64].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Reads a whole checkpoint file. Errors carry the offset of the bad part.
pub struct CheckpointDecoder<'a> {
    buf: &'a [u8],
    pub header: CheckpointHeader,
    pub applied: Option<AppliedState>,
    at: usize,
    seen: u64,
    entry_crcs: crc32fast::Hasher,
    last_name: Option<String>,
}

type AtError = (u64, DecodeError);

impl<'a> CheckpointDecoder<'a> {
    /// Checks the header and the applied section.
    pub fn new(buf: &'a [u8]) -> Result<CheckpointDecoder<'a>, AtError> {
        if buf.len() < CHECKPOINT_HEADER_BYTES + CHECKPOINT_TRAILER_BYTES {
            return Err((
                0,
                DecodeError::Truncated {
                    needed: CHECKPOINT_HEADER_BYTES + CHECKPOINT_TRAILER_BYTES,
                    available: buf.len(),
                },
            ));
        }
        if buf[0..8] != CHECKPOINT_MAGIC {
            return Err((0, DecodeError::BadMagic));
        }
        check_crc(&buf[0..60], u32_at(buf, 60)).map_err(|e| (60, e))?;
        let version = u32_at(buf, 8);
        if version != FORMAT_VERSION {
            return Err((8, DecodeError::BadVersion(version)));
        }
        if u32_at(buf, 12) != 0 || u64_at(buf, 48) != 0 || u32_at(buf, 56) != 0 {
            return Err((12, DecodeError::BadReserved));
        }
        let header = CheckpointHeader {
            generation: u64_at(buf, 16),
            covered_group_id: u64_at(buf, 24),
            stream_count: u64_at(buf, 32),
            next_group_id: u64_at(buf, 40),
        };
        if header.generation == 0 || header.next_group_id <= header.covered_group_id {
            return Err((16, DecodeError::BadField("generation or group ids")));
        }
        let mut d = CheckpointDecoder {
            buf,
            header,
            applied: None,
            at: CHECKPOINT_HEADER_BYTES,
            seen: 0,
            entry_crcs: crc32fast::Hasher::new(),
            last_name: None,
        };
        let (at, section, _) = d.framed()?;
        d.applied = decode_applied(section).map_err(|e| (at, e))?;
        Ok(d)
    }

    /// The next framed payload and its offset; advances past it.
    fn framed(&mut self) -> Result<(u64, &'a [u8], u32), AtError> {
        let at = self.at as u64;
        let end = self.buf.len() - CHECKPOINT_TRAILER_BYTES;
        if end - self.at < 8 {
            return Err((
                at,
                DecodeError::Truncated {
                    needed: self.at + 8,
                    available: end,
                },
            ));
        }
        let len = u32_at(self.buf, self.at) as usize;
        let crc = u32_at(self.buf, self.at + 4);
        if len > CHECKPOINT_ENTRY_BYTES_MAX || end - self.at - 8 < len {
            return Err((
                at,
                DecodeError::BadLength {
                    frame_len: len as u64,
                },
            ));
        }
        let payload = &self.buf[self.at + 8..self.at + 8 + len];
        check_crc(payload, crc).map_err(|e| (at, e))?;
        self.at += 8 + len;
        Ok((at, payload, crc))
    }

    /// The next stream entry, or `None` after the last one (and then the
    /// trailer has been checked).
    pub fn next_entry(&mut self) -> Result<Option<(u64, StreamEntry)>, AtError> {
        if self.seen == self.header.stream_count {
            self.check_trailer()?;
            return Ok(None);
        }
        let (at, payload, crc) = self.framed()?;
        self.entry_crcs.update(&crc.to_le_bytes());
        let e = StreamEntry::decode(payload).map_err(|e| (at, e))?;
        if self
            .last_name
            .as_deref()
            .is_some_and(|l| l >= e.name.as_str())
        {
            return Err((
                at,
                DecodeError::BadField("stream names not strictly ascending"),
            ));
        }
        self.last_name = Some(e.name.clone());
        self.seen += 1;
        Ok(Some((at, e)))
    }

    fn check_trailer(&mut self) -> Result<(), AtError> {
        let at = self.buf.len() - CHECKPOINT_TRAILER_BYTES;
        if self.at != at {
            return Err((
                self.at as u64,
                DecodeError::BadLength {
                    frame_len: self.buf.len() as u64,
                },
            ));
        }
        let t = &self.buf[at..];
        let crcs = std::mem::take(&mut self.entry_crcs).finalize();
        let ok = t[0..8] == CHECKPOINT_END_MAGIC
            && u64_at(t, 8) == self.header.stream_count
            && u32_at(t, 16) == crcs
            && u32_at(t, 20) == 0;
        if !ok {
            return Err((at as u64, DecodeError::BadField("trailer")));
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "checkpoint_tests.rs"]
mod tests;
