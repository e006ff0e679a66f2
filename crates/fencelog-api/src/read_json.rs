//! The client's side of [`crate::chunks`]: a JSON read page in exactly
//! the bytes the server writes, read without a JSON parser, every record
//! body a slice of the page (no copy). Only the common shape is taken —
//! records without headers whose bodies are text with nothing escaped;
//! anything else is `None`, and the caller parses the page in general
//! (serde), so this changes how fast a page is read, never what it says.
//!
//! Why: serde read each body into a `String` and the client then copied
//! it into `Bytes`; for 1 KiB records that was most of a JSON consumer's
//! CPU.

use crate::fixed_json::{plain_run, Reader};
use bytes::Bytes;
use fencelog_types::Record;

/// A read page's records and positions (`ReadPage`'s fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlainPage {
    pub records: Vec<Record>,
    pub next_start_seq: u64,
    pub next_seq: u64,
    pub sealed: bool,
}

/// The page in `body` when it has the common shape (see the module);
/// `None` otherwise, including for anything that is not JSON at all.
pub fn read_plain_page(body: &Bytes) -> Option<PlainPage> {
    let mut r = Reader(body);
    r.expect(b"{\"records\":[")?;
    let mut records = Vec::new();
    if r.expect(b"]").is_none() {
        loop {
            records.push(plain_record(&mut r, body)?);
            if r.expect(b"]").is_some() {
                break;
            }
            r.expect(b",")?;
        }
    }
    let next_start_seq = r.number_field("next_start_seq")?;
    let next_seq = r.number_field("next_seq")?;
    let sealed = r.expect(b",\"sealed\":true").is_some();
    r.expect(b"}")?;
    r.0.is_empty().then_some(PlainPage {
        records,
        next_start_seq,
        next_seq,
        sealed,
    })
}

/// `{"seq":N,"fencing_token":N,"timestamp_ms":N,"body":"text"}`, the body
/// sliced out of `page` (which `r` reads).
fn plain_record(r: &mut Reader<'_>, page: &Bytes) -> Option<Record> {
    r.expect(b"{\"seq\":")?;
    let seq = r.number()?;
    let fencing_token = r.number_field("fencing_token")?;
    let timestamp_ms = r.number_field("timestamp_ms")?;
    r.expect(b",\"body\":\"")?;
    let plain = plain_run(r.0);
    let run = plain.len;
    // The run must end at the closing quote: an escape or a control byte
    // (not JSON inside a string) is for serde to judge.
    if r.0.get(run) != Some(&b'"') {
        return None;
    }
    // JSON text is UTF-8; serde would refuse a page that is not.
    if !plain.ascii {
        std::str::from_utf8(&r.0[..run]).ok()?;
    }
    let at = page.len() - r.0.len();
    let body = page.slice(at..at + run);
    r.0 = &r.0[run + 1..];
    r.expect(b"}")?;
    Some(Record {
        seq,
        fencing_token,
        timestamp_ms,
        headers: Vec::new(),
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunks::RecordArray;
    use crate::read::ReadPage;
    use fencelog_types::Header;

    fn record(seq: u64, body: &[u8], headers: bool) -> Record {
        Record {
            seq,
            fencing_token: 3 + seq / 2,
            timestamp_ms: 1_700_000_000_000 + (seq % 1000) * 1_000_003,
            headers: if headers {
                vec![Header {
                    name: Bytes::from_static(b"k"),
                    value: Bytes::from_static(b"v"),
                }]
            } else {
                Vec::new()
            },
            body: Bytes::copy_from_slice(body),
        }
    }

    /// The page as the server streams it (`records::page_response`).
    fn page(records: &[Record], next_seq: u64, sealed: bool) -> Bytes {
        let next_start = records.last().map_or(7, |r| r.seq + 1);
        let mut out = b"{\"records\":".to_vec();
        let mut array = RecordArray::new(records.to_vec());
        loop {
            let limit = out.len() + 4096;
            if array.write(&mut out, limit) {
                break;
            }
        }
        let sealed = if sealed { ",\"sealed\":true" } else { "" };
        let tail = format!(",\"next_start_seq\":{next_start},\"next_seq\":{next_seq}{sealed}}}");
        out.extend_from_slice(tail.as_bytes());
        Bytes::from(out)
    }

    /// What the general path makes of `body`.
    fn by_serde(body: &Bytes) -> Option<PlainPage> {
        let wire: ReadPage = serde_json::from_slice(body).ok()?;
        let records = wire.records.into_iter().map(|r| r.into_record());
        Some(PlainPage {
            records: records.collect::<Result<_, _>>().ok()?,
            next_start_seq: wire.next_start_seq,
            next_seq: wire.next_seq,
            sealed: wire.sealed,
        })
    }

    #[test]
    fn plain_pages_read_as_serde_reads_them_with_bodies_borrowed() {
        let long = "x".repeat(10_000);
        let bodies: [&[u8]; 6] = [
            b"",
            b"a",
            b"12345678",
            "ü€𝄞 text".as_bytes(),
            long.as_bytes(),
            b"{}[],:",
        ];
        for n in [0, 1, 2, 6] {
            for sealed in [false, true] {
                let records: Vec<Record> = (0..n)
                    .map(|i| record(u64::MAX - 10 + i as u64, bodies[i % 6], false))
                    .collect();
                let body = page(&records, u64::MAX, sealed);
                let fast = read_plain_page(&body).expect("the common shape");
                assert_eq!(Some(&fast), by_serde(&body).as_ref());
                assert_eq!(fast.records, records);
                for r in &fast.records {
                    let inside = body.as_ptr_range();
                    assert!(r.body.is_empty() || inside.contains(&r.body.as_ptr()));
                }
            }
        }
    }

    #[test]
    fn other_shapes_are_left_to_serde() {
        let escaped: [&[u8]; 4] = [b"say \"hi\"", b"a\\b", b"line\n", b"\x01"];
        for body in escaped {
            let page = page(&[record(0, body, false)], 1, false);
            assert_eq!(read_plain_page(&page), None, "{body:?}");
            assert_eq!(by_serde(&page).unwrap().records[0].body, body);
        }
        for page in [
            page(&[record(0, b"h", true)], 1, false),
            page(&[record(0, &[0xff, 0], false)], 1, false),
        ] {
            assert_eq!(read_plain_page(&page), None);
            assert!(by_serde(&page).is_some());
        }
    }

    /// Pages of random records (text and not, escapes, headers, empty
    /// bodies) with up to three random edits (a byte changed, inserted or
    /// removed): the fast reader agrees with serde or declines, and
    /// declines only pages outside its shape.
    #[test]
    #[allow(
        clippy::cast_possible_truncation,
        reason = "`next(n)` is below `n`, and every `n` here fits the type it is cast to"
    )]
    fn random_pages_and_edits_never_read_differently() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let alphabet = b"ab \"\\\n\x01\x7f\xc3\xa9\xff{}";
        for _ in 0..3000 {
            let n = next(4) as usize;
            let records: Vec<Record> = (0..n)
                .map(|i| {
                    let len = next(40) as usize;
                    let body: Vec<u8> = (0..len)
                        .map(|_| {
                            let plain = next(4) != 0;
                            if plain {
                                b'a' + next(26) as u8
                            } else {
                                alphabet[next(alphabet.len() as u64) as usize]
                            }
                        })
                        .collect();
                    record(i as u64 * next(1000), &body, next(5) == 0)
                })
                .collect();
            let whole = page(&records, next(u64::MAX), next(2) == 0);
            let mut bytes = whole.to_vec();
            for _ in 0..next(4) {
                let at = next(bytes.len() as u64 + 1) as usize;
                let b = b"0\"\\,:}]a "[next(9) as usize];
                match next(3) {
                    0 if at < bytes.len() => bytes[at] = b,
                    1 => bytes.insert(at, b),
                    _ if at < bytes.len() => drop(bytes.remove(at)),
                    _ => {}
                }
            }
            let bytes = Bytes::from(bytes);
            let fast = read_plain_page(&bytes);
            if let Some(fast) = &fast {
                assert_eq!(
                    Some(fast),
                    by_serde(&bytes).as_ref(),
                    "{:?}",
                    String::from_utf8_lossy(&bytes)
                );
            }
            let plain = records.iter().all(|r| {
                r.headers.is_empty()
                    && std::str::from_utf8(&r.body).is_ok()
                    && crate::fixed_json::plain_run(&r.body).len == r.body.len()
            });
            if bytes == whole && plain {
                assert!(fast.is_some(), "{:?}", String::from_utf8_lossy(&bytes));
            }
        }
    }

    /// Any cut or changed byte of a page is read as serde reads it, or
    /// left to serde: never another answer, never a panic.
    #[test]
    fn damaged_pages_never_read_differently() {
        let records: Vec<Record> = (0..3).map(|i| record(i, b"body-1234", false)).collect();
        let whole = page(&records, 3, true);
        for cut in 0..whole.len() {
            let cut = whole.slice(..cut);
            assert_eq!(read_plain_page(&cut), None);
        }
        let odd = [b'0', b'9', b'"', b'\\', b',', b'}', b']', b' ', 0x80, b'-'];
        for at in 0..whole.len() {
            for b in odd {
                let mut bytes = whole.to_vec();
                bytes[at] = b;
                let bytes = Bytes::from(bytes);
                if let Some(fast) = read_plain_page(&bytes) {
                    assert_eq!(Some(fast), by_serde(&bytes), "byte {at} as {b:#x}");
                }
            }
        }
    }
}
