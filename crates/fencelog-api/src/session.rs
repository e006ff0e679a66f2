//! The pipelined append session (`GET /v1/streams/{stream}/session`, a
//! WebSocket): one binary message per append from the client, one binary
//! message per answer from the server, answers in the order the appends
//! were sent. All integers are little-endian; the layouts are fixed so
//! neither side parses anything but the error bodies.
//!
//! Client → server, an append of one record:
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 1 | kind: 1 (append) |
//! | 1 | 1 | flags: bit 0 set when `match_seq_num` applies; others 0 |
//! | 2 | 8 | `fencing_token` (u64) |
//! | 10 | 8 | `match_seq_num` (u64; 0 when bit 0 is clear) |
//! | 18 | rest | the record's body |
//!
//! and, once it has sent everything, the one-byte message `2` (end): the
//! server answers every append before it, then closes the WebSocket
//! (1000). A WebSocket close from the client ends the session at once —
//! no answer can follow a close — so answers still owed are lost.
//!
//! Server → client, the answer to append number `n` (0 for the first
//! append of the session):
//!
//! | kind | layout |
//! |---|---|
//! | 1 accepted | `n` u64, `first_seq`, `last_seq`, `next_seq`, `fencing_token`, `timestamp_ms` (u64 each): the single-request ack's fields |
//! | 2 refused | `n` u64, HTTP status u16, the single-request route's JSON error body |
//! | 3 session error | `n` u64 (the first append NOT applied: every later message was never read), HTTP status u16, a JSON error body; a close follows |

use bytes::Bytes;
use fencelog_types::Ack;

/// The path under `/v1/streams/{stream}` of the session.
pub const SESSION_PATH: &str = "/session";
/// The WebSocket subprotocol a client asks for and the server selects.
pub const SUBPROTOCOL: &str = "fencelog.append.v1";
/// Response headers of the upgrade: the server's bounds on one session.
pub const APPENDS_MAX_HEADER: &str = "fencelog-session-appends-max";
pub const BYTES_MAX_HEADER: &str = "fencelog-session-bytes-max";

/// Bytes of an append message before the body.
pub const APPEND_HEADER_BYTES: usize = 18;
/// Bytes of an accepted answer.
pub const ACK_BYTES: usize = 1 + 6 * 8;
/// Bytes of a refusal or session error before its JSON body.
pub const ERROR_HEADER_BYTES: usize = 1 + 8 + 2;

const KIND_APPEND: u8 = 1;
const KIND_END: u8 = 2;
const KIND_ACK: u8 = 1;
const KIND_REFUSED: u8 = 2;
const KIND_FATAL: u8 = 3;
const FLAG_MATCH_SEQ_NUM: u8 = 1;

/// One append as the client sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionAppend {
    pub fencing_token: u64,
    pub match_seq_num: Option<u64>,
    /// A slice of the message: no copy.
    pub body: Bytes,
}

/// Why a message is not an append, in the words the session error says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    TooShort {
        len: usize,
    },
    UnknownKind(u8),
    UnknownFlags(u8),
    /// `match_seq_num` bytes set without the flag that says they apply.
    StrayMatchSeqNum,
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::TooShort { len } => write!(
                f,
                "an append message is at least {APPEND_HEADER_BYTES} bytes, got {len}"
            ),
            FrameError::UnknownKind(k) => {
                write!(f, "unknown message kind {k} (1 is an append, 2 the end)")
            }
            FrameError::UnknownFlags(b) => write!(
                f,
                "unknown flags {b:#04x} (only bit 0, match_seq_num, is defined)"
            ),
            FrameError::StrayMatchSeqNum => {
                f.write_str("match_seq_num is set but flag bit 0 is clear")
            }
        }
    }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Writes one append message into `out` (cleared first).
pub fn encode_append(out: &mut Vec<u8>, token: u64, match_seq_num: Option<u64>, body: &[u8]) {
    out.clear();
    out.reserve(APPEND_HEADER_BYTES + body.len());
    out.push(KIND_APPEND);
    out.push(if match_seq_num.is_some() {
        FLAG_MATCH_SEQ_NUM
    } else {
        0
    });
    out.extend_from_slice(&token.to_le_bytes());
    out.extend_from_slice(&match_seq_num.unwrap_or(0).to_le_bytes());
    out.extend_from_slice(body);
}

/// The client's end message: no more appends.
pub const END: [u8; 1] = [KIND_END];

/// Whether a message is the client's end message.
pub fn is_end(message: &[u8]) -> bool {
    message == END
}

/// The append a message carries; the body is a slice of `message`.
pub fn decode_append(message: &Bytes) -> Result<SessionAppend, FrameError> {
    let b = &message[..];
    if b.len() < APPEND_HEADER_BYTES {
        return Err(FrameError::TooShort { len: b.len() });
    }
    if b[0] != KIND_APPEND {
        return Err(FrameError::UnknownKind(b[0]));
    }
    if b[1] & !FLAG_MATCH_SEQ_NUM != 0 {
        return Err(FrameError::UnknownFlags(b[1]));
    }
    let seq = u64_at(b, 10);
    let match_seq_num = if b[1] & FLAG_MATCH_SEQ_NUM != 0 {
        Some(seq)
    } else if seq != 0 {
        return Err(FrameError::StrayMatchSeqNum);
    } else {
        None
    };
    Ok(SessionAppend {
        fencing_token: u64_at(b, 2),
        match_seq_num,
        body: message.slice(APPEND_HEADER_BYTES..),
    })
}

/// One answer of the server, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionAnswer {
    /// Append `n` is durable.
    Accepted { n: u64, ack: Ack },
    /// Append `n` was refused with this status and JSON error body, the
    /// single-request route's.
    Refused { n: u64, status: u16, body: Bytes },
    /// The session ends: appends from `n` on were never applied.
    Ended { n: u64, status: u16, body: Bytes },
}

impl SessionAnswer {
    /// The number of the append this answers (for `Ended`, the first one
    /// that was not applied).
    pub fn n(&self) -> u64 {
        match self {
            SessionAnswer::Accepted { n, .. }
            | SessionAnswer::Refused { n, .. }
            | SessionAnswer::Ended { n, .. } => *n,
        }
    }
}

/// An accepted answer (on the stack: the server copies it into the
/// buffer its messages are slices of).
pub fn encode_ack(n: u64, ack: &Ack) -> [u8; ACK_BYTES] {
    let mut out = [0u8; ACK_BYTES];
    out[0] = KIND_ACK;
    let fields = [
        n,
        ack.first_seq,
        ack.last_seq,
        ack.next_seq,
        ack.fencing_token,
        ack.timestamp_ms,
    ];
    for (i, v) in fields.into_iter().enumerate() {
        out[1 + 8 * i..9 + 8 * i].copy_from_slice(&v.to_le_bytes());
    }
    out
}

/// Appends a refusal (`fatal`: the session error) to `out`.
pub fn encode_error(out: &mut Vec<u8>, fatal: bool, n: u64, status: u16, json: &[u8]) {
    out.push(if fatal { KIND_FATAL } else { KIND_REFUSED });
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&status.to_le_bytes());
    out.extend_from_slice(json);
}

/// An answer message; `None` for one this version does not know.
pub fn decode_answer(message: &Bytes) -> Option<SessionAnswer> {
    let b = &message[..];
    match *b.first()? {
        KIND_ACK if b.len() == ACK_BYTES => Some(SessionAnswer::Accepted {
            n: u64_at(b, 1),
            ack: Ack {
                first_seq: u64_at(b, 9),
                last_seq: u64_at(b, 17),
                next_seq: u64_at(b, 25),
                fencing_token: u64_at(b, 33),
                timestamp_ms: u64_at(b, 41),
                duplicate: false,
            },
        }),
        kind @ (KIND_REFUSED | KIND_FATAL) if b.len() >= ERROR_HEADER_BYTES => {
            let n = u64_at(b, 1);
            let status = u16::from_le_bytes([b[9], b[10]]);
            let body = message.slice(ERROR_HEADER_BYTES..);
            Some(if kind == KIND_FATAL {
                SessionAnswer::Ended { n, status, body }
            } else {
                SessionAnswer::Refused { n, status, body }
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_round_trip_and_bad_ones_say_why() {
        let mut out = Vec::new();
        encode_append(&mut out, 7, Some(3), b"hi");
        assert_eq!(out.len(), APPEND_HEADER_BYTES + 2);
        let m = Bytes::from(out.clone());
        let a = decode_append(&m).unwrap();
        assert_eq!(
            (a.fencing_token, a.match_seq_num, &a.body[..]),
            (7, Some(3), &b"hi"[..])
        );
        encode_append(&mut out, 1, None, b"");
        assert_eq!(
            decode_append(&Bytes::from(out.clone()))
                .unwrap()
                .match_seq_num,
            None
        );
        let bad = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut m = out.clone();
            f(&mut m);
            decode_append(&Bytes::from(m)).unwrap_err()
        };
        assert_eq!(bad(&|m| m.truncate(17)), FrameError::TooShort { len: 17 });
        assert_eq!(bad(&|m| m[0] = 9), FrameError::UnknownKind(9));
        assert_eq!(bad(&|m| m[1] = 2), FrameError::UnknownFlags(2));
        assert_eq!(bad(&|m| m[10] = 1), FrameError::StrayMatchSeqNum);
    }

    #[test]
    fn answers_round_trip() {
        let ack = Ack {
            first_seq: 4,
            last_seq: 4,
            next_seq: 5,
            fencing_token: 9,
            timestamp_ms: 1_700_000_000_000,
            duplicate: false,
        };
        let out = encode_ack(12, &ack);
        assert_eq!(
            decode_answer(&Bytes::copy_from_slice(&out)),
            Some(SessionAnswer::Accepted { n: 12, ack })
        );
        for fatal in [false, true] {
            let mut out = Vec::new();
            encode_error(&mut out, fatal, 3, 409, b"{}");
            let got = decode_answer(&Bytes::from(out)).unwrap();
            assert_eq!(
                (got.n(), matches!(got, SessionAnswer::Ended { .. })),
                (3, fatal)
            );
        }
        assert_eq!(decode_answer(&Bytes::from_static(&[1, 2])), None);
        assert_eq!(decode_answer(&Bytes::new()), None);
    }
}
