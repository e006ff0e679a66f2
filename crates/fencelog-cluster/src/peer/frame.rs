//! The frames of a peer stream ([`super::stream`]): pure, no I/O, so
//! they are unit-tested at every cut.
//!
//! Little-endian, fixed width. A request, calling node to peer:
//!
//! ```text
//! u32 len | u64 id | u32 shard | u8 kind | body      (len = 13 + body)
//! ```
//!
//! An answer, peer to calling node, in any order (matched by `id`):
//!
//! ```text
//! u32 len | u64 id | u8 outcome | body               (len = 9 + body)
//! ```
//!
//! `kind` is [`RpcKind::code`]; `body` the RPC's bytes of
//! [`crate::rpc`] (version byte, then postcard). `outcome` 0: `body`
//! is the RPC's answer; 1: the peer refused the request and `body` is why
//! (UTF-8), as the HTTP route's 400 would say. A frame longer than the
//! bound, an unknown kind or outcome is a protocol error: the connection
//! is closed, never resynchronised.

use crate::ids::ShardId;
use crate::rpc::RpcKind;
use bytes::{Buf, Bytes, BytesMut};

/// Bytes of a request's header after its length field.
const REQUEST_FIXED_BYTES: usize = 8 + 4 + 1;
/// Bytes of an answer's header after its length field.
const ANSWER_FIXED_BYTES: usize = 8 + 1;
/// The length field.
const LEN_BYTES: usize = 4;

/// One request read off a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The caller's id for the answer.
    pub id: u64,
    /// The shard the RPC is for.
    pub shard: ShardId,
    /// The RPC.
    pub kind: RpcKind,
    /// The RPC's bytes.
    pub body: Bytes,
}

/// One answer read off a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The request's id.
    pub id: u64,
    /// The RPC's answer, or why the peer refused the request.
    pub outcome: Result<Bytes, String>,
}

/// Why a stream's bytes are not a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// Longer than the bound (bytes after the length field).
    TooLong(usize),
    /// Shorter than its fixed header.
    TooShort(usize),
    /// No such RPC kind.
    Kind(u8),
    /// No such outcome.
    Outcome(u8),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::TooLong(n) => write!(f, "a frame of {n} bytes is over the bound"),
            FrameError::TooShort(n) => write!(f, "a frame of {n} bytes is shorter than its header"),
            FrameError::Kind(k) => write!(f, "no RPC kind {k}"),
            FrameError::Outcome(o) => write!(f, "no outcome {o}"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Appends a request frame to `out`.
pub fn put_request(out: &mut Vec<u8>, id: u64, shard: ShardId, kind: RpcKind, body: &[u8]) {
    let len = u32::try_from(REQUEST_FIXED_BYTES + body.len()).expect("RPC bodies are bounded");
    out.reserve(LEN_BYTES + len as usize);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&shard.to_le_bytes());
    out.push(kind.code());
    out.extend_from_slice(body);
}

/// Appends an answer frame to `out`.
pub fn put_answer(out: &mut Vec<u8>, id: u64, outcome: Result<&[u8], &str>) {
    let (code, body) = match outcome {
        Ok(b) => (0u8, b),
        Err(why) => (1u8, why.as_bytes()),
    };
    let len = u32::try_from(ANSWER_FIXED_BYTES + body.len()).expect("RPC answers are bounded");
    out.reserve(LEN_BYTES + len as usize);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&id.to_le_bytes());
    out.push(code);
    out.extend_from_slice(body);
}

/// The next whole frame's bytes after its length field, taken off `buf`;
/// `None` until all of it is there. `fixed` is the frame kind's header.
fn take_frame(buf: &mut BytesMut, fixed: usize, max: usize) -> Result<Option<Bytes>, FrameError> {
    let Some(head) = buf.get(..LEN_BYTES) else {
        return Ok(None);
    };
    let len = u32::from_le_bytes(head.try_into().expect("four bytes")) as usize;
    if len > max {
        return Err(FrameError::TooLong(len));
    }
    if len < fixed {
        return Err(FrameError::TooShort(len));
    }
    if buf.len() < LEN_BYTES + len {
        // Room for the rest at once: one allocation, not one per read.
        buf.reserve(LEN_BYTES + len - buf.len());
        return Ok(None);
    }
    buf.advance(LEN_BYTES);
    Ok(Some(buf.split_to(len).freeze()))
}

/// The next request off `buf`, or `None` until it is whole. `max` bounds
/// the bytes after the length field.
pub fn take_request(buf: &mut BytesMut, max: usize) -> Result<Option<Request>, FrameError> {
    let Some(mut f) = take_frame(buf, REQUEST_FIXED_BYTES, max)? else {
        return Ok(None);
    };
    let id = f.get_u64_le();
    let shard = f.get_u32_le();
    let code = f.get_u8();
    let kind = RpcKind::from_code(code).ok_or(FrameError::Kind(code))?;
    Ok(Some(Request {
        id,
        shard,
        kind,
        body: f,
    }))
}

/// The next answer off `buf`, or `None` until it is whole.
pub fn take_answer(buf: &mut BytesMut, max: usize) -> Result<Option<Answer>, FrameError> {
    let Some(mut f) = take_frame(buf, ANSWER_FIXED_BYTES, max)? else {
        return Ok(None);
    };
    let id = f.get_u64_le();
    let outcome = match f.get_u8() {
        0 => Ok(f),
        1 => Err(String::from_utf8_lossy(&f).into_owned()),
        o => return Err(FrameError::Outcome(o)),
    };
    Ok(Some(Answer { id, outcome }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 1 << 20;

    /// Feeds `bytes` cut at `cut`, collecting every frame `take` yields.
    fn fed<T>(
        bytes: &[u8],
        cut: usize,
        take: impl Fn(&mut BytesMut) -> Result<Option<T>, FrameError>,
    ) -> Vec<T> {
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for part in [&bytes[..cut], &bytes[cut..]] {
            buf.extend_from_slice(part);
            while let Some(t) = take(&mut buf).unwrap() {
                got.push(t);
            }
        }
        assert!(buf.is_empty(), "bytes left over at cut {cut}");
        got
    }

    #[test]
    fn requests_read_back_whole_at_every_cut() {
        let mut bytes = Vec::new();
        put_request(&mut bytes, 7, 3, RpcKind::Append, b"entries");
        put_request(&mut bytes, u64::MAX, u32::MAX, RpcKind::Member, b"");
        put_request(&mut bytes, 9, 0, RpcKind::Forward, &[0u8; 300]);
        let want = vec![
            Request {
                id: 7,
                shard: 3,
                kind: RpcKind::Append,
                body: Bytes::from_static(b"entries"),
            },
            Request {
                id: u64::MAX,
                shard: u32::MAX,
                kind: RpcKind::Member,
                body: Bytes::new(),
            },
            Request {
                id: 9,
                shard: 0,
                kind: RpcKind::Forward,
                body: Bytes::from(vec![0u8; 300]),
            },
        ];
        for cut in 0..=bytes.len() {
            assert_eq!(
                fed(&bytes, cut, |b| take_request(b, MAX)),
                want,
                "cut {cut}"
            );
        }
    }

    #[test]
    fn answers_read_back_whole_at_every_cut() {
        let mut bytes = Vec::new();
        put_answer(&mut bytes, 2, Ok(b"vote"));
        put_answer(&mut bytes, 1, Err("shard 9 out of range"));
        let want = vec![
            Answer {
                id: 2,
                outcome: Ok(Bytes::from_static(b"vote")),
            },
            Answer {
                id: 1,
                outcome: Err("shard 9 out of range".into()),
            },
        ];
        for cut in 0..=bytes.len() {
            assert_eq!(fed(&bytes, cut, |b| take_answer(b, MAX)), want, "cut {cut}");
        }
    }

    #[test]
    fn every_kind_has_its_own_code() {
        for k in RpcKind::ALL {
            assert_eq!(RpcKind::from_code(k.code()), Some(k));
        }
        assert_eq!(RpcKind::from_code(0), None);
        assert_eq!(RpcKind::from_code(9), None);
    }

    #[test]
    fn bad_frames_are_errors_not_waits() {
        let mut long = BytesMut::from(&(u32::try_from(MAX).unwrap() + 1).to_le_bytes()[..]);
        assert_eq!(
            take_request(&mut long, MAX),
            Err(FrameError::TooLong(MAX + 1))
        );
        let mut short = BytesMut::from(&12u32.to_le_bytes()[..]);
        assert_eq!(take_request(&mut short, MAX), Err(FrameError::TooShort(12)));
        let mut bytes = Vec::new();
        put_request(&mut bytes, 1, 1, RpcKind::Vote, b"x");
        bytes[16] = 99;
        let mut kind = BytesMut::from(&bytes[..]);
        assert_eq!(take_request(&mut kind, MAX), Err(FrameError::Kind(99)));
        let mut bytes = Vec::new();
        put_answer(&mut bytes, 1, Ok(b"x"));
        bytes[12] = 5;
        let mut outcome = BytesMut::from(&bytes[..]);
        assert_eq!(take_answer(&mut outcome, MAX), Err(FrameError::Outcome(5)));
    }
}
