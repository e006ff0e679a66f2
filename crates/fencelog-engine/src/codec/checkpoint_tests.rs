use super::*;

fn entries() -> Vec<StreamEntry> {
    vec![
        StreamEntry {
            name: "a.tomb".into(),
            deleted: true,
            as_of_group: 12,
            highest_token: 9,
            next_seq: 40,
            first_seq: 40,
            last_timestamp_ms: 1_700_000_000_000,
            history: vec![
                FenceEvent {
                    token: 3,
                    first_seq: 0,
                    timestamp_ms: 1,
                    by: FenceBy::Append,
                },
                FenceEvent {
                    token: 9,
                    first_seq: 40,
                    timestamp_ms: 5,
                    by: FenceBy::Delete,
                },
            ],
            ..Default::default()
        },
        StreamEntry {
            name: "b:sealed".into(),
            sealed: true,
            retention_age_s: Retention::Limit(604_800),
            retention_bytes: Retention::Unlimited,
            respect_cursors: true,
            as_of_group: 30,
            highest_token: 5,
            next_seq: 10,
            first_seq: 4,
            last_timestamp_ms: 7,
            producer_token_floor: 3,
            producers: vec![ProducerEntry {
                id: "p-1".into(),
                producer_seq: 8,
                first_seq: 6,
                last_seq: 9,
                token: 5,
                timestamp_ms: 7,
                last_used_group: 29,
            }],
            history: vec![FenceEvent {
                token: 5,
                first_seq: 0,
                timestamp_ms: 2,
                by: FenceBy::Seal,
            }],
            cursors: vec![CursorEntry {
                name: "c1".into(),
                token: 2,
                seq: 10,
                timestamp_ms: 6,
            }],
            ..Default::default()
        },
        StreamEntry {
            name: "c".into(),
            highest_token: 1,
            as_of_group: 1,
            ..Default::default()
        },
    ]
}

fn applied() -> AppliedState {
    AppliedState {
        term: 4,
        node_id: 2,
        index: 99,
        membership: b"m".to_vec(),
    }
}

fn encode(entries: &[StreamEntry], applied: Option<&AppliedState>) -> Vec<u8> {
    let (mut enc, section) = CheckpointEncoder::new(applied);
    let mut body = section;
    for e in entries {
        enc.entry(e, &mut body);
    }
    let header = CheckpointHeader {
        generation: 3,
        covered_group_id: 50,
        stream_count: 0,
        next_group_id: 61,
    };
    let (trailer, head) = enc.finish(header);
    [head.to_vec(), body, trailer].concat()
}

type Decoded = (CheckpointHeader, Option<AppliedState>, Vec<StreamEntry>);

fn decode(b: &[u8]) -> Result<Decoded, (u64, DecodeError)> {
    let mut d = CheckpointDecoder::new(b)?;
    let mut out = Vec::new();
    while let Some((_, e)) = d.next_entry()? {
        out.push(e);
    }
    Ok((d.header, d.applied.clone(), out))
}

#[test]
fn round_trip_with_and_without_applied() {
    for a in [Some(applied()), None] {
        let b = encode(&entries(), a.as_ref());
        let (h, got_applied, got) = decode(&b).unwrap();
        assert_eq!(
            h,
            CheckpointHeader {
                generation: 3,
                covered_group_id: 50,
                stream_count: 3,
                next_group_id: 61
            }
        );
        assert_eq!(got_applied, a);
        assert_eq!(got, entries());
    }
    let empty = encode(&[], None);
    assert_eq!(decode(&empty).unwrap().2, vec![]);
}

#[test]
fn every_flip_and_every_truncation_is_refused_inside_the_file() {
    let b = encode(&entries(), Some(&applied()));
    for i in 0..b.len() {
        for bit in 0..8 {
            let mut bad = b.clone();
            bad[i] ^= 1 << bit;
            match decode(&bad) {
                Ok(_) => panic!("flip of bit {bit} in byte {i} went unnoticed"),
                Err((at, _)) => assert!(at <= b.len() as u64),
            }
        }
    }
    for cut in 0..b.len() {
        assert!(decode(&b[..cut]).is_err(), "cut at {cut}");
    }
}

#[test]
fn a_missing_trailer_or_a_dropped_entry_is_refused() {
    let b = encode(&entries(), None);
    // The header says 3 entries: drop the last one whole (keeping the
    // trailer) and the count no longer adds up.
    let mut two = encode(&entries()[..2], None);
    let head = encode_header(&CheckpointHeader {
        generation: 3,
        covered_group_id: 50,
        stream_count: 3,
        next_group_id: 61,
    });
    two[..CHECKPOINT_HEADER_BYTES].copy_from_slice(&head);
    assert!(decode(&two).is_err());
    // A file cut right after the last entry has no trailer.
    let cut = &b[..b.len() - CHECKPOINT_TRAILER_BYTES];
    assert!(decode(cut).is_err());
}

/// A checkpoint of raw entry payloads, framed and trailed correctly, so
/// only what the payloads say can be wrong.
fn raw_checkpoint(payloads: &[Vec<u8>]) -> Vec<u8> {
    let (_, mut body) = CheckpointEncoder::new(None);
    let mut crcs = crc32fast::Hasher::new();
    for p in payloads {
        let crc = push_framed(&mut body, p);
        crcs.update(&crc.to_le_bytes());
    }
    let mut t = CHECKPOINT_END_MAGIC.to_vec();
    t.extend_from_slice(&(payloads.len() as u64).to_le_bytes());
    t.extend_from_slice(&crcs.finalize().to_le_bytes());
    t.extend_from_slice(&[0; 4]);
    let h = CheckpointHeader {
        generation: 1,
        covered_group_id: 1,
        stream_count: payloads.len() as u64,
        next_group_id: 2,
    };
    [encode_header(&h).to_vec(), body, t].concat()
}

fn payload(e: &StreamEntry) -> Vec<u8> {
    let mut p = Vec::new();
    e.encode(&mut p);
    p
}

#[test]
fn entries_must_be_sorted_unique_and_consistent() {
    let es = entries();
    assert_eq!(
        decode(&raw_checkpoint(&[payload(&es[0]), payload(&es[1])]))
            .unwrap()
            .2
            .len(),
        2
    );
    for (what, ps) in [
        ("unsorted", vec![payload(&es[1]), payload(&es[0])]),
        ("duplicate", vec![payload(&es[0]), payload(&es[0])]),
    ] {
        let b = raw_checkpoint(&ps);
        let second_at = CHECKPOINT_HEADER_BYTES as u64 + 8 + 29 + 8 + ps[0].len() as u64;
        assert_eq!(
            decode(&b).unwrap_err(),
            (
                second_at,
                DecodeError::BadField("stream names not strictly ascending")
            ),
            "{what}"
        );
    }
    // The encoder refuses to write them out of order at all.
    assert!(std::panic::catch_unwind(|| {
        let mut swapped = entries();
        swapped.swap(0, 1);
        encode(&swapped, None)
    })
    .is_err());
    for bad in [
        StreamEntry {
            highest_token: 0,
            ..es[2].clone()
        },
        StreamEntry {
            first_seq: 5,
            next_seq: 4,
            ..es[2].clone()
        },
        StreamEntry {
            deleted: true,
            sealed: true,
            ..es[2].clone()
        },
        StreamEntry {
            history: vec![FenceEvent {
                token: 2,
                first_seq: 0,
                timestamp_ms: 0,
                by: FenceBy::Fence,
            }],
            ..es[2].clone()
        },
    ] {
        assert!(StreamEntry::decode(&payload(&bad)).is_err(), "{bad:?}");
        assert!(decode(&raw_checkpoint(&[payload(&bad)])).is_err());
    }
}
