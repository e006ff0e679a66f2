//! The two answers of the hot path written straight to bytes, without
//! serde: the stale-fencing-token refusal and the append acknowledgement.
//!
//! A flood of stale writers is the workload fencelog exists for, and the
//! general [`ErrorBody`](crate::ErrorBody) costs a map of owned keys and
//! values per answer (about ten allocations) to say the same five things
//! every time. These write the identical JSON — same keys, same order,
//! same escaping — into one buffer; tests hold each to the bytes serde
//! writes for the general type.

use crate::append::AppendAck;
use crate::error::{ErrorCode, Field};
use std::fmt::{self, Write as _};

/// The longest body [`write_stale_body`] writes for a stream name of
/// `stream_bytes` bytes and a message of `message_bytes` (escaping
/// excepted): the fixed text, three u64s of at most 20 digits.
pub const fn stale_body_bytes(stream_bytes: usize, message_bytes: usize) -> usize {
    128 + 3 * 20 + stream_bytes + message_bytes
}

/// Appends to `out` exactly what serialising
/// `ErrorBody::new(StaleFencingToken, message)` with `stream`,
/// `presented_token`, `highest_token` and `next_seq` writes.
pub fn write_stale_body(
    out: &mut Vec<u8>,
    stream: &str,
    message: &dyn fmt::Display,
    presented: u64,
    highest: u64,
    next_seq: u64,
) {
    // Keys in sorted order, as `ErrorBody`'s serialiser writes them.
    out.extend_from_slice(b"{\"error\":\"");
    out.extend_from_slice(ErrorCode::StaleFencingToken.as_str().as_bytes());
    out.push(b'"');
    key(out, Field::HighestToken);
    number(out, highest);
    out.extend_from_slice(b",\"message\":\"");
    // Writing into a Vec through the escaper cannot fail.
    let _ = write!(Escaped(out), "{message}");
    out.push(b'"');
    key(out, Field::NextSeq);
    number(out, next_seq);
    key(out, Field::PresentedToken);
    number(out, presented);
    key(out, Field::Stream);
    out.push(b'"');
    let _ = Escaped(out).write_str(stream);
    out.extend_from_slice(b"\"}");
}

/// The longest [`write_append_ack`] writes for a stream name of
/// `stream_bytes` bytes (escaping excepted), a duplicate's flag included.
pub const fn append_ack_bytes(stream_bytes: usize) -> usize {
    96 + 18 + 5 * 20 + stream_bytes
}

/// Appends to `out` exactly what `serde_json::to_vec(ack)` writes.
pub fn write_append_ack(out: &mut Vec<u8>, ack: &AppendAck) {
    // Field order as the struct declares it, which is serde's.
    out.extend_from_slice(b"{\"stream\":\"");
    let _ = Escaped(out).write_str(&ack.stream);
    out.push(b'"');
    for (name, value) in [
        ("first_seq", ack.first_seq),
        ("last_seq", ack.last_seq),
        ("next_seq", ack.next_seq),
        ("fencing_token", ack.fencing_token),
        ("timestamp_ms", ack.timestamp_ms),
    ] {
        out.extend_from_slice(b",\"");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\":");
        number(out, value);
    }
    // Serde skips the flag when false, as the struct's attribute says.
    if ack.duplicate {
        out.extend_from_slice(b",\"duplicate\":true");
    }
    out.push(b'}');
}

/// `,"name":` after the previous value.
fn key(out: &mut Vec<u8>, field: Field) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(field.as_str().as_bytes());
    out.extend_from_slice(b"\":");
}

fn number(out: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// A JSON string's contents, escaped as serde_json escapes them: `"`, `\`
/// and the control characters, the short forms where JSON has them.
struct Escaped<'a>(&'a mut Vec<u8>);

impl fmt::Write for Escaped<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut start = 0;
        for (i, &b) in s.as_bytes().iter().enumerate() {
            let short = match b {
                b'"' => b'"',
                b'\\' => b'\\',
                b'\n' => b'n',
                b'\r' => b'r',
                b'\t' => b't',
                0x08 => b'b',
                0x0c => b'f',
                0x00..=0x1f => b'u',
                _ => continue,
            };
            self.0.extend_from_slice(&s.as_bytes()[start..i]);
            self.0.push(b'\\');
            self.0.push(short);
            if short == b'u' {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                self.0.extend_from_slice(b"00");
                self.0.push(HEX[(b >> 4) as usize]);
                self.0.push(HEX[(b & 0xf) as usize]);
            }
            start = i + 1;
        }
        self.0.extend_from_slice(&s.as_bytes()[start..]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorBody;

    fn general(stream: &str, message: &str, presented: u64, highest: u64, next: u64) -> Vec<u8> {
        let body = ErrorBody::new(ErrorCode::StaleFencingToken, message)
            .with(Field::Stream, stream)
            .with(Field::PresentedToken, presented)
            .with(Field::HighestToken, highest)
            .with(Field::NextSeq, next);
        serde_json::to_vec(&body).unwrap()
    }

    #[test]
    fn writes_exactly_what_the_error_body_serialises_to() {
        let cases = [
            ("orders", "fencing token 4 is below 5", 4, 5, 9),
            ("s", "", 0, 1, 0),
            ("a.b:c-d_e", "m", u64::MAX - 1, u64::MAX, u64::MAX),
            // Not valid stream names, but the writer must not depend on it.
            (
                "quote\"back\\slash",
                "tab\tnl\ncr\r\u{8}\u{c}\u{1}\u{1f}é",
                1,
                2,
                3,
            ),
            ("x", "\"leading and trailing\\", 10, 100, 1000),
        ];
        for (stream, message, presented, highest, next) in cases {
            let mut fast = Vec::new();
            write_stale_body(&mut fast, stream, &message, presented, highest, next);
            let want = general(stream, message, presented, highest, next);
            assert_eq!(
                String::from_utf8(fast.clone()).unwrap(),
                String::from_utf8(want).unwrap()
            );
            assert!(fast.len() <= stale_body_bytes(stream.len(), 2 * message.len()));
        }
    }

    #[test]
    fn writes_exactly_what_serde_writes_for_an_append_ack() {
        let acks = [
            AppendAck {
                stream: "orders".into(),
                first_seq: 0,
                last_seq: 0,
                next_seq: 1,
                fencing_token: 7,
                timestamp_ms: 1_795_955_343_590,
                duplicate: false,
            },
            // A producer's retry answered with its original ack.
            AppendAck {
                stream: "orders".into(),
                first_seq: 3,
                last_seq: 4,
                next_seq: 9,
                fencing_token: 2,
                timestamp_ms: 0,
                duplicate: true,
            },
            AppendAck {
                stream: "q\"\\\n\u{1}".into(),
                first_seq: u64::MAX - 2,
                last_seq: u64::MAX - 1,
                next_seq: u64::MAX,
                fencing_token: u64::MAX,
                timestamp_ms: 10,
                duplicate: true,
            },
        ];
        for ack in acks {
            let mut fast = Vec::new();
            write_append_ack(&mut fast, &ack);
            assert_eq!(
                String::from_utf8(fast.clone()).unwrap(),
                serde_json::to_string(&ack).unwrap()
            );
            assert!(fast.len() <= append_ack_bytes(2 * ack.stream.len()));
            let back: AppendAck = serde_json::from_slice(&fast).unwrap();
            assert_eq!(back, ack);
        }
    }

    #[test]
    fn appends_after_what_the_buffer_holds() {
        let mut out = b"prefix".to_vec();
        write_stale_body(&mut out, "s", &"m", 1, 2, 3);
        assert!(out.starts_with(b"prefix{\"error\":"));
        assert_eq!(
            ErrorBody::decode(&out[6..]).unwrap().highest_token(),
            Some(2)
        );
    }
}
