use super::*;

#[test]
fn entries_are_12_bytes_and_pack_round_trips_at_the_edges() {
    assert_eq!(std::mem::size_of::<Entry>(), 12);
    for &(s, o, c, l) in &[
        (0, 0, 1, 57),
        (
            SEGMENT_INDEX_MAX,
            FRAME_OFFSET_MAX,
            4096,
            u32::try_from(FRAME_LEN_MAX).unwrap(),
        ),
        (3, 12345, 17, 1000),
        (1 << 20, 7, 1, 64 << 20),
    ] {
        assert_eq!(unpack(pack(s, o, c, l)), (s, o, c, l));
    }
}

#[test]
fn finds_every_seq_across_many_checkpoints() {
    let mut idx = StreamIndex::default();
    let mut seq = 0;
    let mut frames = Vec::new();
    for i in 0..1000u64 {
        let count = u32::try_from(i % 7 + 1).unwrap();
        idx.push(
            seq,
            i / 100,
            i * 1000,
            count,
            60 + u32::try_from(i).unwrap(),
        );
        frames.push((seq, count, i));
        seq += count as u64;
    }
    assert_eq!(idx.end_seq(), seq);
    assert_eq!(idx.bytes(), (0..1000u64).map(|i| 60 + i).sum::<u64>());
    for &(first, count, i) in &frames {
        for s in first..first + count as u64 {
            let (at, loc) = idx.find(s).unwrap();
            assert_eq!(at as u64, i);
            assert_eq!(
                loc,
                FrameLoc {
                    segment: i / 100,
                    offset: i * 1000,
                    first_seq: first,
                    record_count: count,
                    len: 60 + u32::try_from(i).unwrap(),
                }
            );
        }
    }
    assert_eq!(idx.find(seq), None);
    let (at, loc) = idx.find(0).unwrap();
    let (at2, loc2) = idx.next_after(at, &loc).unwrap();
    assert_eq!((at2, loc2.first_seq, loc2.record_count), (1, 1, 2));
    assert_eq!(idx.iter().count(), 1000);
}

#[test]
fn one_batch_allocates_nothing_and_checkpoints_start_after_a_block() {
    let mut idx = StreamIndex::default();
    assert_eq!(idx.find(0), None);
    idx.push(0, 0, 40, 3, 80);
    assert_eq!(idx.heap_bytes(), 0);
    assert_eq!(idx.find(2).unwrap().1.offset, 40);
    for i in 1..64u64 {
        idx.push(idx.end_seq(), 0, 40 + i, 1, 60);
    }
    assert!(idx.checkpoints.is_empty());
    idx.push(idx.end_seq(), 1, 7, 1, 60);
    assert_eq!(idx.checkpoints, vec![66]);
    assert_eq!(idx.find(66).unwrap().1.segment, 1);
    assert_eq!(idx.find(65).unwrap().1.offset, 40 + 63);
}

#[test]
#[should_panic(expected = "index gap")]
fn gaps_are_refused() {
    let mut idx = StreamIndex::default();
    idx.push(0, 0, 0, 1, 60);
    idx.push(2, 0, 0, 1, 60);
}

/// A push that panics changes nothing: readers go on using the index
/// after a writer panic (see `writer::Writer::commit_guarded`).
#[test]
fn a_refused_push_leaves_the_index_as_it_was() {
    let mut idx = StreamIndex::default();
    for i in 0..64u64 {
        idx.push(i, 0, 40 + i, 1, 60);
    }
    let refused = [
        (65, 0, 0, 1, 60),                     // gap
        (64, SEGMENT_INDEX_MAX + 1, 0, 1, 60), // segment out of range
        (64, 0, FRAME_OFFSET_MAX + 1, 1, 60),  // offset out of range
        (64, 0, 0, 0, 60),                     // no records
        (64, 0, 0, 1, 1 << 27),                // frame too long
    ];
    for (first_seq, segment, offset, count, len) in refused {
        let pushed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            idx.push(first_seq, segment, offset, count, len)
        }));
        assert!(pushed.is_err());
        assert_eq!((idx.end_seq(), idx.bytes()), (64, 64 * 60));
        assert!(idx.checkpoints.is_empty());
        assert_eq!(idx.find(64), None);
        assert_eq!(idx.find(63).unwrap().1.offset, 40 + 63);
    }
    idx.push(64, 1, 7, 1, 60);
    assert_eq!(idx.checkpoints, vec![64]);
    assert_eq!(idx.find(64).unwrap().1.segment, 1);
}

#[test]
fn trimming_drops_whole_frames_from_the_front_and_keeps_finding_the_rest() {
    let mut idx = StreamIndex::default();
    for i in 0..300u64 {
        idx.push(i * 2, i / 10, i, 2, 100);
    }
    // A trim inside a frame keeps it (its later record is still live).
    assert!(idx.trim_to(1).is_empty());
    let dropped = idx.trim_to(101);
    assert_eq!(dropped.len(), 50);
    assert_eq!((dropped[0].first_seq, dropped[49].end_seq()), (0, 100));
    assert_eq!(
        (idx.base_seq(), idx.len(), idx.bytes()),
        (100, 250, 250 * 100)
    );
    assert_eq!(idx.find(99), None);
    for s in 100..600 {
        let (_, loc) = idx.find(s).unwrap();
        assert_eq!(loc.first_seq, s & !1, "seq {s}");
        assert_eq!(loc.offset, s / 2);
    }
    // Past half of the vector the dropped entries are compacted away;
    // lookups and pushes carry on.
    let dropped = idx.trim_to(400);
    assert_eq!(dropped.len(), 150);
    assert_eq!(idx.head, 0, "compacted");
    assert_eq!(idx.find(400).unwrap().1.offset, 200);
    idx.push(600, 9, 9, 1, 70);
    assert_eq!(idx.find(600).unwrap().1.len, 70);
    assert_eq!(
        idx.iter().map(|l| l.first_seq).collect::<Vec<_>>().len(),
        101
    );
    // Trimming everything leaves an empty index that continues at its end.
    assert_eq!(idx.trim_to(u64::MAX).len(), 101);
    assert_eq!((idx.len(), idx.bytes(), idx.end_seq()), (0, 0, 601));
    idx.push(601, 10, 0, 1, 60);
    assert_eq!(idx.first().unwrap().1.first_seq, 601);
}

#[test]
fn repoint_moves_only_the_copy_it_names() {
    let mut idx = StreamIndex::default();
    idx.push(0, 1, 40, 2, 80);
    idx.push(2, 1, 120, 1, 70);
    assert!(idx.repoint(2, (1, 120), (5, 40)));
    assert_eq!(
        idx.find(2).unwrap().1,
        FrameLoc {
            segment: 5,
            offset: 40,
            first_seq: 2,
            record_count: 1,
            len: 70
        }
    );
    // Already moved: the old location no longer matches.
    assert!(!idx.repoint(2, (1, 120), (6, 40)));
    // Not the first seq of a frame, or not indexed at all.
    assert!(!idx.repoint(1, (1, 40), (6, 40)));
    idx.trim_to(2);
    assert!(!idx.repoint(0, (1, 40), (6, 40)));
    assert_eq!(idx.bytes(), 70);
}

#[test]
fn clear_keeps_the_end_so_a_recreated_stream_continues_its_seqs() {
    let mut idx = StreamIndex::default();
    idx.push(0, 0, 40, 5, 80);
    idx.clear();
    assert_eq!((idx.len(), idx.bytes(), idx.end_seq()), (0, 0, 5));
    assert_eq!(idx.find(0), None);
    idx.push(5, 0, 200, 1, 60);
    assert_eq!(idx.find(5).unwrap().1.offset, 200);
}
