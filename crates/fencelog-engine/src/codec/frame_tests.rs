use super::*;
use crate::codec::payload::HEADER_BYTES_PER_RECORD_MAX;
use fencelog_types::Retention;

fn spec(kind: FrameKind, name: &str) -> FrameSpec<'_> {
    FrameSpec {
        kind,
        flags: 0,
        group_id: 7,
        first_seq: 11,
        fencing_token: 42,
        timestamp_ms: 1_700_000_000_000,
        name,
    }
}

fn sample() -> Vec<u8> {
    let mut out = Vec::new();
    encode_frame(
        &mut out,
        &FrameSpec {
            flags: FLAG_LAST_IN_GROUP,
            ..spec(FrameKind::Records, "orders")
        },
        &[&b"alpha"[..], b"", b"\xff\x00"],
    );
    out
}

fn reseal(mut b: Vec<u8>) -> Vec<u8> {
    let crc = crc32fast::hash(&b[8..]);
    b[4..8].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Encoded frames, each with what it is.
type Named = Vec<(&'static str, Vec<u8>)>;

/// One frame of every kind and flag combination the format allows.
fn every_kind() -> Named {
    let mut out = Vec::new();
    plain_kinds(&mut out);
    records_with_payloads(&mut out);
    state_kinds(&mut out);
    out
}

/// Adds the frame `f` encodes, named `what`.
fn add(out: &mut Named, what: &'static str, f: impl FnOnce(&mut Vec<u8>)) {
    let mut b = Vec::new();
    f(&mut b);
    out.push((what, b));
}

/// Records without a payload beyond their bodies, and the kinds without one.
fn plain_kinds(out: &mut Named) {
    add(out, "records", |b| {
        encode_frame(b, &spec(FrameKind::Records, "s"), &[&b"x"[..]]);
    });
    add(out, "records relocated", |b| {
        let f = FrameSpec {
            flags: FLAG_RELOCATED,
            ..spec(FrameKind::Records, "s")
        };
        encode_frame(b, &f, &[&b"x"[..], b"yz"]);
    });
    for kind in [
        FrameKind::Fence,
        FrameKind::Trim,
        FrameKind::Seal,
        FrameKind::Delete,
    ] {
        add(out, "empty payload", move |b| {
            encode_frame::<&[u8]>(b, &spec(kind, "s"), &[]);
        });
    }
    add(out, "retention trim", |b| {
        let f = FrameSpec {
            flags: FLAG_RETENTION | FLAG_LAST_IN_GROUP,
            ..spec(FrameKind::Trim, "s")
        };
        encode_frame::<&[u8]>(b, &f, &[]);
    });
}

/// Records with headers, a producer trailer, or both.
fn records_with_payloads(out: &mut Named) {
    let h: &[(&[u8], &[u8])] = &[(b"content-type", b"text/plain"), (b"k", b"")];
    let recs = [
        RecordSpec {
            headers: h,
            body: b"one",
        },
        RecordSpec {
            headers: &[],
            body: b"",
        },
    ];
    add(out, "records with headers and producer", |b| {
        let producer = Some(ProducerTrailer { id: "p-1", seq: 9 });
        encode_frame_with(
            b,
            &spec(FrameKind::Records, "s"),
            &PayloadSpec::Records {
                producer,
                records: &recs,
            },
        );
    });
    add(out, "records with producer only", |b| {
        let plain = [RecordSpec {
            headers: &[],
            body: b"b",
        }];
        let producer = Some(ProducerTrailer {
            id: "p",
            seq: u64::MAX,
        });
        encode_frame_with(
            b,
            &spec(FrameKind::Records, "s"),
            &PayloadSpec::Records {
                producer,
                records: &plain,
            },
        );
    });
    add(out, "records with headers only", |b| {
        encode_frame_with(
            b,
            &spec(FrameKind::Records, "s"),
            &PayloadSpec::Records {
                producer: None,
                records: &recs,
            },
        );
    });
}

/// Config, Cursor and Applied frames.
fn state_kinds(out: &mut Named) {
    add(out, "config", |b| {
        let c = StreamConfig {
            retention_age_s: Retention::Limit(604_800),
            retention_bytes: Retention::Unlimited,
            respect_cursors: true,
        };
        encode_frame_with(b, &spec(FrameKind::Config, "s"), &PayloadSpec::Config(c));
    });
    add(out, "config defaults", |b| {
        encode_frame_with(
            b,
            &spec(FrameKind::Config, "s"),
            &PayloadSpec::Config(StreamConfig::default()),
        );
    });
    add(out, "cursor", |b| {
        encode_frame_with(
            b,
            &spec(FrameKind::Cursor, "s"),
            &PayloadSpec::Cursor("reader.1"),
        );
    });
    for (term, membership) in [(3u64, &b"{voters:[1,2,3]}"[..]), (1, b"")] {
        add(out, "applied", move |b| {
            let f = FrameSpec {
                fencing_token: 0,
                first_seq: 0,
                ..spec(FrameKind::Applied, "")
            };
            let a = AppliedMark {
                term,
                node_id: 2,
                index: 77,
                membership,
            };
            encode_frame_with(b, &f, &PayloadSpec::Applied(a));
        });
    }
}

/// The plain append is byte for byte what version 1 wrote: assembled here
/// field by field from the v1 table, not by the encoder.
#[test]
fn a_plain_append_encodes_exactly_as_version_1() {
    let mut want = Vec::new();
    want.extend_from_slice(&FRAME_MAGIC.to_le_bytes());
    want.extend_from_slice(&[0; 4]);
    want.extend_from_slice(&(56u32 + 6 + 9 + 4 + 6).to_le_bytes());
    want.extend_from_slice(&[1, 1]);
    want.extend_from_slice(&6u16.to_le_bytes());
    for v in [7u64, 11, 42, 1_700_000_000_000] {
        want.extend_from_slice(&v.to_le_bytes());
    }
    want.extend_from_slice(&3u32.to_le_bytes());
    want.extend_from_slice(&[0; 4]);
    want.extend_from_slice(b"orders");
    for body in [&b"alpha"[..], b"", b"\xff\x00"] {
        want.extend_from_slice(&u32::try_from(body.len()).unwrap().to_le_bytes());
        want.extend_from_slice(body);
    }
    assert_eq!(sample(), reseal(want));
    // And a v1 segment accepts it.
    assert!(decode_frame(&sample(), FORMAT_VERSION_V1).is_ok());
}

#[test]
fn round_trip() {
    let buf = sample();
    let f = decode_frame(&buf, FORMAT_VERSION).unwrap();
    assert_eq!(f.frame_len, buf.len());
    assert_eq!(f.name, "orders");
    assert_eq!(
        f.header,
        FrameHeader {
            kind: FrameKind::Records,
            flags: FLAG_LAST_IN_GROUP,
            group_id: 7,
            first_seq: 11,
            fencing_token: 42,
            timestamp_ms: 1_700_000_000_000,
            record_count: 3,
        }
    );
    assert!(f.header.last_in_group() && !f.header.relocated());
    let bodies: Vec<&[u8]> = f.bodies().collect();
    assert_eq!(bodies, vec![&b"alpha"[..], b"", b"\xff\x00"]);
    let shared = Bytes::from(buf.clone());
    let zero_copy = frame_bodies(&shared, &f, 0);
    assert_eq!(zero_copy, vec![&b"alpha"[..], b"", b"\xff\x00"]);
}

#[test]
fn every_kind_round_trips_and_re_encodes_identically() {
    for (what, b) in every_kind() {
        let f = decode_frame(&b, FORMAT_VERSION).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(f.frame_len, b.len(), "{what}");
        let mut again = Vec::new();
        let spec = FrameSpec {
            kind: f.header.kind,
            flags: f.header.flags,
            group_id: f.header.group_id,
            first_seq: f.header.first_seq,
            fencing_token: f.header.fencing_token,
            timestamp_ms: f.header.timestamp_ms,
            name: f.name,
        };
        type Owned<'a> = Vec<(Vec<(&'a [u8], &'a [u8])>, &'a [u8])>;
        let owned: Owned<'_> = f
            .records()
            .map(|r| (r.headers().collect(), r.body))
            .collect();
        let specs: Vec<RecordSpec<'_>> = owned
            .iter()
            .map(|(h, body)| RecordSpec { headers: h, body })
            .collect();
        match f.payload {
            Payload::Records { producer, .. }
                if producer.is_some() || f.header.flags & FLAG_HEADERS != 0 =>
            {
                let plain = FrameSpec {
                    flags: spec.flags & !(FLAG_HEADERS | FLAG_PRODUCER),
                    ..spec
                };
                encode_frame_with(
                    &mut again,
                    &plain,
                    &PayloadSpec::Records {
                        producer,
                        records: &specs,
                    },
                );
            }
            Payload::Records { .. } | Payload::Empty => {
                let bodies: Vec<&[u8]> = f.bodies().collect();
                encode_frame(&mut again, &spec, &bodies);
            }
            Payload::Config(c) => {
                encode_frame_with(&mut again, &spec, &PayloadSpec::Config(c));
            }
            Payload::Cursor(n) => {
                encode_frame_with(&mut again, &spec, &PayloadSpec::Cursor(n));
            }
            Payload::Applied(a) => {
                encode_frame_with(&mut again, &spec, &PayloadSpec::Applied(a));
            }
        }
        assert_eq!(again, b, "{what}");
    }
}

#[test]
fn headers_and_the_producer_trailer_decode_to_what_was_written() {
    let (_, b) = every_kind()
        .into_iter()
        .find(|(w, _)| *w == "records with headers and producer")
        .unwrap();
    let f = decode_frame(&b, FORMAT_VERSION).unwrap();
    assert_eq!(f.header.flags, FLAG_HEADERS | FLAG_PRODUCER);
    assert_eq!(f.producer(), Some(ProducerTrailer { id: "p-1", seq: 9 }));
    let recs: Vec<_> = f.records().collect();
    assert_eq!(recs.len(), 2);
    let h: Vec<_> = recs[0].headers().collect();
    assert_eq!(
        h,
        vec![
            (&b"content-type"[..], &b"text/plain"[..]),
            (&b"k"[..], &b""[..])
        ]
    );
    assert_eq!(
        (recs[0].body, recs[1].body, recs[1].header_count()),
        (&b"one"[..], &b""[..], 0)
    );
    // Zero-copy bodies skip the headers.
    let shared = Bytes::from(b.clone());
    assert_eq!(frame_bodies(&shared, &f, 0), vec![&b"one"[..], &b""[..]]);
}

#[test]
fn fence_round_trip_and_flag_reseal_keep_the_other_flags() {
    let mut out = vec![9u8; 3]; // frames need not start at 0
    let s = FrameSpec {
        flags: FLAG_RETENTION,
        ..spec(FrameKind::Trim, "s")
    };
    let at = encode_frame::<&[u8]>(&mut out, &s, &[]);
    assert_eq!(at, 3);
    let f = decode_frame(&out[3..], FORMAT_VERSION).unwrap();
    assert_eq!(f.header.kind, FrameKind::Trim);
    assert!(!f.header.last_in_group() && f.header.retention());
    assert_eq!(f.records().count(), 0);
    set_last_in_group(&mut out[3..], true);
    let f = decode_frame(&out[3..], FORMAT_VERSION).unwrap();
    assert_eq!(f.header.flags, FLAG_RETENTION | FLAG_LAST_IN_GROUP);
}

#[test]
fn a_relocated_copy_differs_only_in_flag_group_and_crc() {
    let orig = sample();
    let mut out = vec![1u8, 2];
    let at = encode_relocated(&mut out, &orig, 99);
    let copy = &out[at..];
    let f = decode_frame(copy, FORMAT_VERSION).unwrap();
    assert_eq!(f.header.flags, FLAG_RELOCATED);
    assert_eq!(f.header.group_id, 99);
    let o = decode_frame(&orig, FORMAT_VERSION).unwrap();
    assert_eq!(
        (
            f.name,
            f.header.first_seq,
            f.header.fencing_token,
            f.header.timestamp_ms
        ),
        (
            o.name,
            o.header.first_seq,
            o.header.fencing_token,
            o.header.timestamp_ms
        )
    );
    assert_eq!(copy[24..], orig[24..]);
    assert_eq!(copy[..4], orig[..4]);
    assert_eq!(copy[8..13], orig[8..13]);
}

/// Every byte of every kind is covered: flipping any bit is detected.
#[test]
fn every_single_bit_flip_is_detected() {
    let mut all = every_kind();
    all.push(("sample", sample()));
    for (what, buf) in all {
        for i in 0..buf.len() {
            for bit in 0..8 {
                let mut bad = buf.clone();
                bad[i] ^= 1 << bit;
                assert!(
                    decode_frame(&bad, FORMAT_VERSION).is_err(),
                    "{what}: flip of bit {bit} in byte {i} went unnoticed"
                );
            }
        }
    }
}

#[test]
fn every_truncation_is_detected() {
    for (what, buf) in every_kind() {
        for cut in 0..buf.len() {
            assert!(
                decode_frame(&buf[..cut], FORMAT_VERSION).is_err(),
                "{what}: cut at {cut}"
            );
        }
    }
}

/// A version 1 segment holds records and fences with the last-in-group
/// flag only: everything new is refused there.
#[test]
fn v2_kinds_and_flags_are_refused_in_a_v1_segment() {
    for (what, b) in every_kind() {
        let f = decode_frame(&b, FORMAT_VERSION).unwrap();
        let v1_ok = matches!(f.header.kind, FrameKind::Records | FrameKind::Fence)
            && f.header.flags & !FLAG_LAST_IN_GROUP == 0;
        let got = decode_frame(&b, FORMAT_VERSION_V1);
        assert_eq!(got.is_ok(), v1_ok, "{what}: {got:?}");
        if !v1_ok {
            assert!(
                matches!(got, Err(DecodeError::BadKind(_) | DecodeError::BadFlags(_))),
                "{what}"
            );
        }
    }
}

/// A frame whose CRC is valid but whose fields are inconsistent is still
/// refused: the checks after the CRC are not decoration.
#[test]
fn resealed_bad_fields_are_refused() {
    let cases: Vec<(usize, Vec<u8>, DecodeError)> = vec![
        (12, vec![9], DecodeError::BadKind(9)),
        (12, vec![0], DecodeError::BadKind(0)),
        (
            13,
            vec![FLAG_RETENTION],
            DecodeError::BadFlags(FLAG_RETENTION),
        ),
        (13, vec![1 << 5], DecodeError::BadFlags(1 << 5)),
        (52, vec![1], DecodeError::BadReserved),
        (32, vec![0; 8], DecodeError::ZeroToken),
        (
            48,
            0u32.to_le_bytes().to_vec(),
            DecodeError::BadRecordCount(0),
        ),
        (
            48,
            2u32.to_le_bytes().to_vec(),
            DecodeError::BadRecordLayout,
        ),
        (
            48,
            4u32.to_le_bytes().to_vec(),
            DecodeError::BadRecordLayout,
        ),
        (
            56,
            vec![b'/'],
            DecodeError::BadName(
                "'/' is not allowed in a stream name (at byte 0; allowed are A-Z a-z 0-9 . _ : -)"
                    .into(),
            ),
        ),
    ];
    for (at, bytes, want) in cases {
        let mut b = sample();
        b[at..at + bytes.len()].copy_from_slice(&bytes);
        assert_eq!(
            decode_frame(&reseal(b), FORMAT_VERSION).unwrap_err(),
            want,
            "field at {at}"
        );
    }
    // Kinds without records that claim some, and kinds without payload
    // that carry bytes.
    for kind in [FrameKind::Fence, FrameKind::Seal] {
        let mut out = Vec::new();
        encode_frame::<&[u8]>(&mut out, &spec(kind, "s"), &[]);
        let mut counted = out.clone();
        counted[48..52].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(
            decode_frame(&reseal(counted), FORMAT_VERSION).unwrap_err(),
            DecodeError::BadRecordCount(1)
        );
        out.push(0);
        let len = u32::try_from(out.len()).unwrap();
        out[8..12].copy_from_slice(&len.to_le_bytes());
        assert_eq!(
            decode_frame(&reseal(out), FORMAT_VERSION).unwrap_err(),
            DecodeError::BadRecordLayout
        );
    }
}

#[test]
fn payload_rules_hold_after_a_valid_crc() {
    let find = |w: &str| every_kind().into_iter().find(|(x, _)| *x == w).unwrap().1;
    let name_at = FRAME_HEADER_BYTES + 1; // payload of a frame named "s"
                                          // Config: unknown flag bits, reserved, a value that is not set.
    let config = find("config defaults");
    for (at, bytes) in [
        (0usize, 8u32.to_le_bytes().to_vec()),
        (4, vec![1]),
        (8, vec![5]),
    ] {
        let mut b = config.clone();
        b[name_at + at..name_at + at + bytes.len()].copy_from_slice(&bytes);
        assert!(matches!(
            decode_frame(&reseal(b), FORMAT_VERSION),
            Err(DecodeError::BadField(_) | DecodeError::BadReserved)
        ));
    }
    // Cursor: a name with a bad byte, a length that does not fit.
    let cursor = find("cursor");
    let mut b = cursor.clone();
    b[name_at + 1] = b'/';
    assert!(matches!(
        decode_frame(&reseal(b), FORMAT_VERSION),
        Err(DecodeError::BadName(_))
    ));
    let mut b = cursor.clone();
    b[name_at] = 3;
    assert_eq!(
        decode_frame(&reseal(b), FORMAT_VERSION).unwrap_err(),
        DecodeError::BadRecordLayout
    );
    // Applied: a token, a name, a membership over the bound.
    let applied = find("applied");
    let mut b = applied.clone();
    b[32] = 1;
    assert!(matches!(
        decode_frame(&reseal(b), FORMAT_VERSION),
        Err(DecodeError::BadField(_))
    ));
    let mut b = applied.clone();
    b[FRAME_HEADER_BYTES + 24..FRAME_HEADER_BYTES + 28]
        .copy_from_slice(&(2u32 << 20).to_le_bytes());
    assert!(matches!(
        decode_frame(&reseal(b), FORMAT_VERSION),
        Err(DecodeError::BadField(_))
    ));
    // HEADERS on a batch whose records carry none is not canonical.
    let mut b = find("records");
    b[13] |= FLAG_HEADERS;
    assert!(decode_frame(&reseal(b), FORMAT_VERSION).is_err());
}

#[test]
fn header_limits_are_enforced_by_the_decoder() {
    let name = vec![b'h'; 255];
    let value = vec![b'v'; HEADER_BYTES_PER_RECORD_MAX - 255 + 1];
    let h: Vec<(&[u8], &[u8])> = vec![(&name, &value)];
    let recs = [RecordSpec {
        headers: &h,
        body: b"x",
    }];
    let mut b = Vec::new();
    encode_frame_with(
        &mut b,
        &spec(FrameKind::Records, "s"),
        &PayloadSpec::Records {
            producer: None,
            records: &recs,
        },
    );
    assert_eq!(
        decode_frame(&b, FORMAT_VERSION).unwrap_err(),
        DecodeError::BadField("over 8 KiB of headers on a record")
    );
    let one: (&[u8], &[u8]) = (b"a", b"");
    let many = vec![one; 65];
    let recs = [RecordSpec {
        headers: &many[..64],
        body: b"x",
    }];
    let mut b = Vec::new();
    encode_frame_with(
        &mut b,
        &spec(FrameKind::Records, "s"),
        &PayloadSpec::Records {
            producer: None,
            records: &recs,
        },
    );
    assert!(decode_frame(&b, FORMAT_VERSION).is_ok());
    let at = FRAME_HEADER_BYTES + 1;
    b[at..at + 2].copy_from_slice(&65u16.to_le_bytes());
    assert!(decode_frame(&reseal(b), FORMAT_VERSION).is_err());
}

#[test]
fn lengths_are_bounded_before_use() {
    let mut b = sample();
    b[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(
        decode_frame(&b, FORMAT_VERSION).unwrap_err(),
        DecodeError::BadLength {
            frame_len: u32::MAX as u64
        }
    );
    b[8..12].copy_from_slice(&10u32.to_le_bytes());
    assert_eq!(
        decode_frame(&b, FORMAT_VERSION).unwrap_err(),
        DecodeError::BadLength { frame_len: 10 }
    );
}
