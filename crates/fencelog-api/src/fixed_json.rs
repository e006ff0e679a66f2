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
    let numbers = [presented, highest, next_seq];
    stale_body_with(out, stream, numbers, |out| write_message(out, message));
}

/// [`write_stale_body`] with the engine's own message for a stale token,
/// the text `WriteError::StaleToken` displays, written without
/// `core::fmt`: it is fixed text around three numbers and never needs
/// escaping, and formatting it was about a seventh of a stale rejection's
/// instructions on the server (docs/benchmark-history.md, "instructions
/// per request on the HTTP path"). A test holds the two to the same
/// bytes.
pub fn write_stale_refusal(
    out: &mut Vec<u8>,
    stream: &str,
    presented: u64,
    highest: u64,
    next_seq: u64,
) {
    let numbers = [presented, highest, next_seq];
    stale_body_with(out, stream, numbers, |out| {
        out.extend_from_slice(b"fencing token ");
        number(out, presented);
        out.extend_from_slice(b" is below the stream's highest accepted token ");
        number(out, highest);
        out.extend_from_slice(b" (next_seq ");
        number(out, next_seq);
        out.push(b')');
    });
}

/// The stale refusal's body around a message `write_message` writes
/// (unquoted, already escaped); `numbers` are presented, highest and
/// next_seq.
fn stale_body_with(
    out: &mut Vec<u8>,
    stream: &str,
    [presented, highest, next_seq]: [u64; 3],
    write_message: impl FnOnce(&mut Vec<u8>),
) {
    // Keys in sorted order, as `ErrorBody`'s serialiser writes them.
    out.extend_from_slice(b"{\"error\":\"");
    out.extend_from_slice(ErrorCode::StaleFencingToken.as_str().as_bytes());
    out.push(b'"');
    key(out, Field::HighestToken);
    number(out, highest);
    out.extend_from_slice(b",\"message\":\"");
    write_message(out);
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

/// `message`, escaped. Why not straight through the escaper: a message is
/// written in many short pieces (text, numbers, text), each too short for
/// its eight-byte steps, and it almost never needs escaping; so it is
/// written plainly and checked whole, and written again escaped if the
/// check finds a byte that needs it.
fn write_message(out: &mut Vec<u8>, message: &dyn fmt::Display) {
    let at = out.len();
    // Writing into a Vec cannot fail.
    let _ = write!(Plain(out), "{message}");
    if needs_escape(&out[at..]) {
        out.truncate(at);
        let _ = write!(Escaped(out), "{message}");
    }
}

/// Text copied as it is.
struct Plain<'a>(&'a mut Vec<u8>);

impl fmt::Write for Plain<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// Whether any byte of `bytes` needs escaping in a JSON string.
fn needs_escape(bytes: &[u8]) -> bool {
    let mut words = bytes.chunks_exact(8);
    let any_word = words
        .by_ref()
        .any(|w| any_needs_escape(u64::from_le_bytes(w.try_into().expect("eight bytes"))));
    any_word || words.remainder().iter().any(|&b| short_escape(b).is_some())
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

/// `n` in decimal, as serde_json writes a `u64`.
pub(crate) fn number(out: &mut Vec<u8>, n: u64) {
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
        let bytes = s.as_bytes();
        // `start` is the first byte not yet copied; runs that need no
        // escape are copied whole, eight bytes tested at a time (testing
        // each byte alone cost ~15 instructions a byte). A stream name is
        // written here on every answer; a message only when
        // `write_message` found something to escape.
        let (mut start, mut i) = (0, 0);
        while i < bytes.len() {
            if let Some(word) = bytes.get(i..i + 8) {
                let word = u64::from_le_bytes(word.try_into().expect("eight bytes"));
                if !any_needs_escape(word) {
                    i += 8;
                    continue;
                }
            }
            if let Some(short) = short_escape(bytes[i]) {
                self.0.extend_from_slice(&bytes[start..i]);
                push_escape(self.0, bytes[i], short);
                start = i + 1;
            }
            i += 1;
        }
        self.0.extend_from_slice(&bytes[start..]);
        Ok(())
    }
}

/// Bytes one block test looks at: the test is written so that it compiles
/// to a handful of vector instructions per block (no early exit inside).
const BLOCK_BYTES: usize = 32;

/// The bytes at the start of a string that need no escape in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PlainRun {
    pub len: usize,
    /// Every byte of the run is ASCII (so it is UTF-8 without a check).
    pub ascii: bool,
}

/// The run of `bytes` that needs no escape, found 32 bytes at a time and
/// then byte by byte in the block that has one. A read's JSON copies every
/// record body through this, on both sides, so it is the page encoder's
/// and decoder's inner loop (tested byte by byte, it was half the server's
/// CPU for a JSON read of 1 KiB records).
pub(crate) fn plain_run(bytes: &[u8]) -> PlainRun {
    let mut i = 0;
    let mut high = 0u8;
    while let Some(block) = bytes.get(i..i + BLOCK_BYTES) {
        let (escape, block_high) = block_flags(block.try_into().expect("a whole block"));
        if escape {
            break;
        }
        high |= block_high;
        i += BLOCK_BYTES;
    }
    let rest = &bytes[i..];
    let n = rest
        .iter()
        .position(|&b| short_escape(b).is_some())
        .unwrap_or(rest.len());
    high |= rest[..n].iter().fold(0, |h, &b| h | b);
    PlainRun {
        len: i + n,
        ascii: high & 0x80 == 0,
    }
}

/// [`plain_run`]'s length.
pub(crate) fn plain_run_len(bytes: &[u8]) -> usize {
    plain_run(bytes).len
}

/// Whether `bytes` are UTF-8: ASCII found a block at a time, the general
/// check only for text that has other bytes.
pub(crate) fn is_utf8(bytes: &[u8]) -> bool {
    let blocks = bytes.chunks_exact(BLOCK_BYTES);
    let tail = blocks.remainder().iter().fold(0, |h, &b| h | b);
    let high = blocks.fold(tail, |h, block| {
        h | block_flags(block.try_into().expect("a whole block")).1
    });
    high & 0x80 == 0 || std::str::from_utf8(bytes).is_ok()
}

/// Whether a block has a byte that needs escaping, and the OR of its
/// bytes' high bits (non-zero: not all ASCII).
#[inline]
fn block_flags(block: &[u8; BLOCK_BYTES]) -> (bool, u8) {
    let (mut escape, mut high) = (false, 0u8);
    for &b in block {
        escape |= (b < 0x20) | (b == b'"') | (b == b'\\');
        high |= b & 0x80;
    }
    (escape, high)
}

/// Whether any of the eight bytes of `word` is a control character, `"`
/// or `\`. Exact as to presence (the classic "has a byte below n" and "has
/// a zero byte" tricks; bytes of 0x80 and above never match).
fn any_needs_escape(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below = |v: u64, n: u8| v.wrapping_sub(ONES * u64::from(n)) & !v & HIGH;
    let control = below(word, 0x20);
    let quote = below(word ^ (ONES * u64::from(b'"')), 1);
    let backslash = below(word ^ (ONES * u64::from(b'\\')), 1);
    control | quote | backslash != 0
}

/// The letter after `\` for a byte that needs escaping (`u` for the
/// `\u00XX` form), `None` for one that does not.
fn short_escape(b: u8) -> Option<u8> {
    Some(match b {
        b'"' => b'"',
        b'\\' => b'\\',
        b'\n' => b'n',
        b'\r' => b'r',
        b'\t' => b't',
        0x08 => b'b',
        0x0c => b'f',
        0x00..=0x1f => b'u',
        _ => return None,
    })
}

fn push_escape(out: &mut Vec<u8>, b: u8, short: u8) {
    out.push(b'\\');
    out.push(short);
    if short == b'u' {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        out.extend_from_slice(b"00");
        out.push(HEX[(b >> 4) as usize]);
        out.push(HEX[(b & 0xf) as usize]);
    }
}

/// What [`read_stale_body`] finds in a stale refusal: its fields, the
/// strings borrowed from the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaleBody<'a> {
    pub stream: &'a str,
    pub message: &'a str,
    pub presented: u64,
    pub highest: u64,
    pub next_seq: u64,
}

impl StaleBody<'_> {
    /// The general body it is, equal to what [`ErrorBody::decode`]
    /// makes of the same bytes.
    ///
    /// [`ErrorBody::decode`]: crate::ErrorBody::decode
    pub fn to_error_body(&self) -> crate::ErrorBody {
        crate::ErrorBody::new(ErrorCode::StaleFencingToken, self.message)
            .with(Field::HighestToken, self.highest)
            .with(Field::NextSeq, self.next_seq)
            .with(Field::PresentedToken, self.presented)
            .with(Field::Stream, self.stream)
    }
}

/// The client's side of [`write_stale_body`]: the fields of exactly the
/// bytes it writes, without a JSON parser. `None` for anything else (other
/// keys or order, escapes, spaces): the caller parses those in general.
pub fn read_stale_body(body: &[u8]) -> Option<StaleBody<'_>> {
    let mut r = Reader(body);
    r.expect(b"{\"error\":\"")?;
    r.expect(ErrorCode::StaleFencingToken.as_str().as_bytes())?;
    r.expect(b"\"")?;
    let highest = r.number_field(Field::HighestToken.as_str())?;
    r.expect(b",\"message\":\"")?;
    let message = r.plain_string()?;
    let next_seq = r.number_field(Field::NextSeq.as_str())?;
    let presented = r.number_field(Field::PresentedToken.as_str())?;
    r.key(Field::Stream.as_str())?;
    r.expect(b"\"")?;
    let stream = r.plain_string()?;
    r.expect(b"}")?;
    r.0.is_empty().then_some(StaleBody {
        stream,
        message,
        presented,
        highest,
        next_seq,
    })
}

/// The client's side of [`write_append_ack`]: the ack in exactly the bytes
/// it writes, read without a JSON parser (the stream's name is the one
/// allocation). `None` for anything else, which the caller parses in
/// general.
pub fn read_append_ack(body: &[u8]) -> Option<AppendAck> {
    let mut r = Reader(body);
    r.expect(b"{\"stream\":\"")?;
    let stream = r.plain_string()?;
    let mut numbers = [0u64; 5];
    let names = [
        "first_seq",
        "last_seq",
        "next_seq",
        "fencing_token",
        "timestamp_ms",
    ];
    for (slot, name) in numbers.iter_mut().zip(names) {
        *slot = r.number_field(name)?;
    }
    let duplicate = r.expect(b",\"duplicate\":true").is_some();
    r.expect(b"}")?;
    let [first_seq, last_seq, next_seq, fencing_token, timestamp_ms] = numbers;
    r.0.is_empty().then(|| AppendAck {
        stream: stream.to_string(),
        first_seq,
        last_seq,
        next_seq,
        fencing_token,
        timestamp_ms,
        duplicate,
    })
}

/// The rest of a body being read.
pub(crate) struct Reader<'a>(pub(crate) &'a [u8]);

impl<'a> Reader<'a> {
    pub(crate) fn expect(&mut self, text: &[u8]) -> Option<()> {
        self.0 = self.0.strip_prefix(text)?;
        Some(())
    }

    /// `,"name":`
    fn key(&mut self, name: &str) -> Option<()> {
        self.expect(b",\"")?;
        self.expect(name.as_bytes())?;
        self.expect(b"\":")
    }

    pub(crate) fn number_field(&mut self, name: &str) -> Option<u64> {
        self.key(name)?;
        self.number()
    }

    /// A JSON number that is a `u64`, written as serde writes one.
    pub(crate) fn number(&mut self) -> Option<u64> {
        let digits = self.0.iter().take_while(|b| b.is_ascii_digit()).count();
        // JSON has no leading zeros; u64 has at most 20 digits.
        if digits == 0 || digits > 20 || (digits > 1 && self.0[0] == b'0') {
            return None;
        }
        let mut n: u64 = 0;
        for &d in &self.0[..digits] {
            n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        }
        self.0 = &self.0[digits..];
        Some(n)
    }

    /// A string's contents up to its closing quote, which it consumes;
    /// `None` if it has an escape or a control character (left to serde).
    fn plain_string(&mut self) -> Option<&'a str> {
        // One pass a block at a time: the run must end at the closing
        // quote (an escape or a control byte is left to serde).
        let run = plain_run(self.0);
        if self.0.get(run.len) != Some(&b'"') {
            return None;
        }
        let text = &self.0[..run.len];
        self.0 = &self.0[run.len + 1..];
        std::str::from_utf8(text).ok()
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
    fn the_refusal_s_own_message_is_the_engine_s() {
        let big = u64::MAX;
        for [presented, highest, next_seq] in
            [[0, 1, 0], [4, 5, 9], [9, 10, 10], [big - 1, big, big]]
        {
            let engine = fencelog_engine::WriteError::StaleToken {
                presented,
                highest,
                next_seq,
            };
            let mut want = Vec::new();
            write_stale_body(&mut want, "orders", &engine, presented, highest, next_seq);
            let mut fast = Vec::new();
            write_stale_refusal(&mut fast, "orders", presented, highest, next_seq);
            assert_eq!(
                String::from_utf8(fast).unwrap(),
                String::from_utf8(want).unwrap()
            );
        }
    }

    /// Every ASCII byte and some multi-byte characters, at every offset
    /// around the escaper's eight-byte steps, escaped as serde does.
    #[test]
    fn escapes_every_byte_at_every_offset_as_serde_does() {
        let mut specials: Vec<String> = (0u8..0x80).map(|b| char::from(b).to_string()).collect();
        specials.extend(["é", "€", "\u{10348}", "\u{7f}"].map(String::from));
        for special in &specials {
            for before in 0..18 {
                for after in [0, 1, 7, 8, 9] {
                    let text = format!("{}{special}{}", "a".repeat(before), "z".repeat(after));
                    let mut fast = Vec::new();
                    let _ = Escaped(&mut fast).write_str(&text);
                    let want = serde_json::to_string(&text).unwrap();
                    assert_eq!(
                        String::from_utf8(fast).unwrap(),
                        want[1..want.len() - 1],
                        "{text:?}"
                    );
                }
            }
        }
    }

    /// Every byte value at every offset around the 32-byte blocks: the run
    /// and the UTF-8 verdict are those of the byte-by-byte definitions.
    #[test]
    fn plain_runs_and_utf8_match_their_definitions_at_every_offset() {
        for special in 0u8..=255 {
            for before in (0..40).chain(60..70) {
                for after in [0, 1, 31, 32, 33] {
                    let mut bytes = vec![b'a'; before];
                    bytes.push(special);
                    bytes.extend(std::iter::repeat_n(b'z', after));
                    let len = bytes
                        .iter()
                        .position(|&b| b < 0x20 || b == b'"' || b == b'\\')
                        .unwrap_or(bytes.len());
                    let ascii = bytes[..len].is_ascii();
                    let what = format!("{special:#x} after {before}, {after} more");
                    assert_eq!(plain_run(&bytes), PlainRun { len, ascii }, "{what}");
                    let utf8 = std::str::from_utf8(&bytes).is_ok();
                    assert_eq!(is_utf8(&bytes), utf8, "{what}");
                }
            }
        }
        let text = "é€\u{10348}".repeat(20);
        assert!(is_utf8(text.as_bytes()));
        let run = plain_run(text.as_bytes());
        assert_eq!(
            run,
            PlainRun {
                len: text.len(),
                ascii: false
            }
        );
        assert!(!is_utf8(&text.as_bytes()[..text.len() - 1]));
    }

    /// A message with a byte to escape anywhere, in a piece of any length,
    /// is written escaped; one without is written as it is.
    #[test]
    fn a_message_is_escaped_whatever_piece_holds_the_byte() {
        for text in [
            "plain",
            "",
            "0123456789abcdef",
            "tab\there",
            "end\"",
            "\u{1}",
        ] {
            for pieces in 1..4 {
                struct Split<'a>(&'a str, usize);
                impl fmt::Display for Split<'_> {
                    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        let step = self.0.len().div_ceil(self.1).max(1);
                        for chunk in self.0.as_bytes().chunks(step) {
                            f.write_str(std::str::from_utf8(chunk).unwrap())?;
                        }
                        Ok(())
                    }
                }
                let mut out = b"x".to_vec();
                write_message(&mut out, &Split(text, pieces));
                let want = serde_json::to_string(text).unwrap();
                assert_eq!(out[1..], want.as_bytes()[1..want.len() - 1], "{text:?}");
            }
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

    #[test]
    fn reads_back_exactly_what_it_writes_and_nothing_else() {
        let ack = AppendAck {
            stream: "orders".into(),
            first_seq: 3,
            last_seq: 4,
            next_seq: u64::MAX,
            fencing_token: 2,
            timestamp_ms: 1_795_955_343_590,
            duplicate: false,
        };
        for duplicate in [false, true] {
            let ack = AppendAck {
                duplicate,
                ..ack.clone()
            };
            let mut bytes = Vec::new();
            write_append_ack(&mut bytes, &ack);
            assert_eq!(read_append_ack(&bytes), Some(ack));
        }
        for other in [
            &br#"{"stream":"s","first_seq":1}"#[..],
            br#"{"stream":"q\"","first_seq":0,"last_seq":0,"next_seq":1,"fencing_token":1,"timestamp_ms":1}"#,
            br#"{"stream":"s","first_seq":01,"last_seq":0,"next_seq":1,"fencing_token":1,"timestamp_ms":1}"#,
            br#"{"stream":"s","first_seq":18446744073709551616,"last_seq":0,"next_seq":1,"fencing_token":1,"timestamp_ms":1}"#,
            br#"{"stream":"s","first_seq":0,"last_seq":0,"next_seq":1,"fencing_token":1,"timestamp_ms":1} "#,
            br#"{"stream":"s", "first_seq":0,"last_seq":0,"next_seq":1,"fencing_token":1,"timestamp_ms":1}"#,
        ] {
            assert_eq!(read_append_ack(other), None, "{}", String::from_utf8_lossy(other));
        }
        let cases = [
            ("orders", "fencing token 4 is below 5", 4, 5, 9),
            ("a.b:c-d_e", "", 0, u64::MAX, u64::MAX),
        ];
        for (stream, message, presented, highest, next_seq) in cases {
            let mut bytes = Vec::new();
            write_stale_body(&mut bytes, stream, &message, presented, highest, next_seq);
            let read = read_stale_body(&bytes).unwrap();
            let want = StaleBody {
                stream,
                message,
                presented,
                highest,
                next_seq,
            };
            assert_eq!(read, want);
            assert_eq!(Some(read.to_error_body()), ErrorBody::decode(&bytes));
        }
        // An escaped message is left to the general parser.
        let mut bytes = Vec::new();
        write_stale_body(&mut bytes, "s", &"say \"no\"", 1, 2, 3);
        assert_eq!(read_stale_body(&bytes), None);
        assert!(ErrorBody::decode(&bytes).is_some());
    }
}
