//! Records as JSON in bounded pieces: the same bytes as serialising
//! `RecordJson::all(records)` (a JSON array), written a few kilobytes at a
//! time, so a server streams an 8 MiB read without ever holding its JSON
//! whole. Bodies are escaped (text) or base64-encoded (binary) piece by
//! piece: text is split only at character boundaries, base64 only at
//! multiples of three bytes, so the pieces concatenate to exactly the
//! whole.

use crate::fixed_json::{is_utf8, number, plain_run_len};
use crate::record::{BODY, BODY_BASE64};
use crate::record_headers::HeadersJson;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use fencelog_types::Record;
use std::io::Write;

/// Where the encoder is in the current record's body.
#[derive(Debug, Clone, Copy)]
struct InBody {
    at: usize,
    text: bool,
}

/// A JSON array of records, written piece by piece by [`RecordArray::write`].
#[derive(Debug)]
pub struct RecordArray {
    records: Vec<Record>,
    /// The record being written.
    next: usize,
    body: Option<InBody>,
    opened: bool,
    closed: bool,
}

impl RecordArray {
    pub fn new(records: Vec<Record>) -> Self {
        RecordArray {
            records,
            next: 0,
            body: None,
            opened: false,
            closed: false,
        }
    }

    pub fn is_done(&self) -> bool {
        self.closed
    }

    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// Appends to `out` until it holds at least `limit` bytes or the array
    /// is complete; overshoots `limit` by at most one record's fixed fields
    /// and one escaped character. Returns whether the array is complete.
    pub fn write(&mut self, out: &mut Vec<u8>, limit: usize) -> bool {
        if !self.opened {
            out.push(b'[');
            self.opened = true;
        }
        while !self.closed && out.len() < limit {
            let Some(r) = self.records.get(self.next) else {
                out.push(b']');
                self.closed = true;
                break;
            };
            let state = match self.body {
                Some(s) => s,
                None => {
                    let text = is_utf8(&r.body);
                    let field = if text { BODY } else { BODY_BASE64 };
                    if self.next > 0 {
                        out.push(b',');
                    }
                    // Pushed, not formatted: `write!` cost ~10% of a JSON
                    // read of 1 KiB records.
                    for (key, n) in [
                        (&b"{\"seq\":"[..], r.seq),
                        (b",\"fencing_token\":", r.fencing_token),
                        (b",\"timestamp_ms\":", r.timestamp_ms),
                    ] {
                        out.extend_from_slice(key);
                        number(out, n);
                    }
                    out.push(b',');
                    // Headers are small (a few KiB at most, by the
                    // engine's limits): written whole, as serde does.
                    if let Some(h) = HeadersJson::encode(&r.headers) {
                        write!(out, r#""{}":"#, h.field()).expect("writing to a Vec cannot fail");
                        serde_json::to_writer(&mut *out, &h).expect("headers serialise to a Vec");
                        out.push(b',');
                    }
                    out.push(b'"');
                    out.extend_from_slice(field.as_bytes());
                    out.extend_from_slice(b"\":\"");
                    InBody { at: 0, text }
                }
            };
            let at = if state.text {
                escape_text(&r.body, state.at, out, limit)
            } else {
                encode_base64(&r.body, state.at, out, limit)
            };
            if at == r.body.len() {
                out.extend_from_slice(b"\"}");
                self.next += 1;
                self.body = None;
            } else {
                self.body = Some(InBody { at, ..state });
            }
        }
        self.closed
    }
}

/// JSON-escapes UTF-8 `body[from..]` into `out` the way serde_json does
/// (`\"`, `\\`, `\b \f \n \r \t`, other control bytes as `\u00xx`), until
/// `out` reaches `limit`; returns where it stopped (a char boundary).
fn escape_text(body: &[u8], from: usize, out: &mut Vec<u8>, limit: usize) -> usize {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut i = from;
    while i < body.len() {
        // Stop only between characters: continuation bytes are 0b10xxxxxx.
        if out.len() >= limit && (body[i] & 0xC0) != 0x80 {
            break;
        }
        let b = body[i];
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0C => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0..0x20 => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(b >> 4) as usize]);
                out.push(HEX[(b & 15) as usize]);
            }
            _ => {
                // A run of bytes that need no escape, copied at once.
                let run = plain_run_len(&body[i..]);
                let room = limit.saturating_sub(out.len()).max(1);
                let mut end = i + run.min(room);
                while end < body.len() && (body[end] & 0xC0) == 0x80 {
                    end += 1;
                }
                out.extend_from_slice(&body[i..end]);
                i = end;
                continue;
            }
        }
        i += 1;
    }
    i
}

/// Base64 of `body[from..]` into `out` until `out` reaches `limit`, in
/// whole 3-byte groups except at the very end; returns where it stopped.
fn encode_base64(body: &[u8], from: usize, out: &mut Vec<u8>, limit: usize) -> usize {
    let room = limit.saturating_sub(out.len()).max(4);
    let take = ((room / 4) * 3).max(3);
    let end = if body.len() - from <= take {
        body.len()
    } else {
        from + take
    };
    let start = out.len();
    out.resize(start + (end - from).div_ceil(3) * 4, 0);
    let n = BASE64
        .encode_slice(&body[from..end], &mut out[start..])
        .expect("sized for the encoding");
    out.truncate(start + n);
    end
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RecordJson;
    use bytes::Bytes;
    use fencelog_types::Header;

    fn record(seq: u64, body: Vec<u8>) -> Record {
        Record {
            seq,
            fencing_token: 7,
            timestamp_ms: 1_700_000_000_000 + seq,
            headers: if seq % 3 == 1 {
                vec![
                    Header {
                        name: Bytes::from("trace-id"),
                        value: Bytes::from(format!("t{seq}")),
                    },
                    Header {
                        name: Bytes::from("bin"),
                        value: Bytes::from(vec![0xff, (seq & 0xff) as u8]),
                    },
                ]
            } else {
                Vec::new()
            },
            body: Bytes::from(body),
        }
    }

    fn pieces(records: &[Record], limit: usize) -> Vec<u8> {
        let mut enc = RecordArray::new(records.to_vec());
        let mut all = Vec::new();
        let mut rounds = 0;
        loop {
            let mut piece = Vec::new();
            let done = enc.write(&mut piece, limit);
            all.extend_from_slice(&piece);
            rounds += 1;
            assert!(rounds < 1_000_000, "no progress");
            if done {
                return all;
            }
        }
    }

    #[test]
    fn pieces_concatenate_to_the_whole_serialisation() {
        let mut every_byte: Vec<u8> = (0u8..=127).collect();
        every_byte.extend("é€𝄞\u{7f}".as_bytes());
        let records = vec![
            record(0, b"plain".to_vec()),
            record(1, every_byte.clone()),
            record(2, vec![0xff, 0xfe, 0, 1, 2]),
            record(3, Vec::new()),
            record(4, "\"\\\n".repeat(1000).into_bytes()),
            record(5, (0..10_000u32).map(|i| ((i * 7) & 0xff) as u8).collect()),
            record(6, "ü".repeat(5000).into_bytes()),
        ];
        let whole = serde_json::to_vec(&RecordJson::all(&records)).unwrap();
        for limit in [1, 2, 3, 5, 7, 64, 100, 1000, 4096, 1 << 20] {
            assert_eq!(
                String::from_utf8_lossy(&pieces(&records, limit)),
                String::from_utf8_lossy(&whole),
                "limit {limit}"
            );
        }
        assert_eq!(pieces(&[], 10), b"[]");
    }

    #[test]
    fn pieces_stay_near_the_limit() {
        let records = vec![record(0, "\u{1}".repeat(100_000).into_bytes())];
        let mut enc = RecordArray::new(records);
        let mut piece = Vec::new();
        enc.write(&mut piece, 4096);
        // One record's fixed fields and one escape past the limit at most.
        assert!(piece.len() < 4096 + 128, "{}", piece.len());
    }
}
