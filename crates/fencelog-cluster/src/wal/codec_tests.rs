//! Replay's rules, byte by byte (the corruption suite over a real WAL is
//! `wal_corruption` in `tests/it/wal_crash.rs`).

use super::*;
use crate::raft::types::LogId;

fn rec(shard: u32) -> WalRecord {
    WalRecord::Truncate { shard, since: 7 }
}

fn committed(shard: u32) -> WalRecord {
    WalRecord::Committed {
        shard,
        committed: Some(LogId::default()),
    }
}

/// A file of `n` groups of one record each; group i's durable_below is
/// `durable(i)`. Answers the bytes and each group's start.
fn file(n: u64, durable: impl Fn(u64) -> u64) -> (Vec<u8>, Vec<usize>) {
    let mut b = file_header(0xfeed, 10).to_vec();
    let mut starts = Vec::new();
    for i in 0..n {
        starts.push(b.len());
        put_group(
            &mut b,
            0xfeed,
            10 + i,
            durable(10 + i),
            &encode_record(&rec(u32::try_from(i).unwrap())),
        );
    }
    (b, starts)
}

#[test]
fn whole_groups_replay_in_order_with_the_next_number() {
    let (mut b, _) = file(3, |s| s);
    let len = b.len();
    b.extend_from_slice(&[0; 100]);
    let r = replay(&b, false).unwrap();
    assert_eq!(
        (r.version, r.valid, r.zero_tail, r.next_seq, r.salt),
        (2, len, true, 13, 0xfeed)
    );
    let shards: Vec<u32> = r.records.iter().map(|r| r.shard()).collect();
    assert_eq!(shards, [0, 1, 2]);
}

#[test]
fn a_torn_last_group_is_cut() {
    let (mut b, starts) = file(3, |s| s);
    let last = starts[2];
    b.truncate(b.len() - 3);
    let r = replay(&b, false).unwrap();
    assert_eq!(
        (r.valid, r.zero_tail, r.records.len(), r.next_seq),
        (last, false, 2, 12)
    );
}

#[test]
fn unsynced_groups_after_a_torn_one_are_cut_with_it() {
    // Groups 11 and 12 were written after group 10's sync had not yet
    // returned (durable_below 10): 11 torn, 12 whole by chance.
    let (mut b, starts) = file(3, |_| 10);
    b[starts[1] + GROUP_HEADER_BYTES] ^= 1;
    let r = replay(&b, false).unwrap();
    assert_eq!((r.valid, r.records.len(), r.next_seq), (starts[1], 1, 11));
}

#[test]
fn a_bad_group_with_a_later_one_written_after_its_sync_is_damage() {
    let (mut b, starts) = file(3, |s| s);
    b[starts[1] + GROUP_HEADER_BYTES] ^= 1;
    let d = replay(&b, false).unwrap_err();
    assert_eq!(d.offset, starts[1] as u64);
    assert!(d.reason.contains("group 11 does not read whole"), "{d}");
    // The mutation reads it as a torn tail, as version 1 did.
    assert_eq!(replay(&b, true).unwrap().records.len(), 1);
}

#[test]
fn a_zeroed_durable_group_is_damage() {
    let (mut b, starts) = file(3, |s| s);
    b[starts[1]..starts[2]].fill(0);
    assert_eq!(replay(&b, false).unwrap_err().offset, starts[1] as u64);
}

#[test]
fn a_group_out_of_sequence_is_damage() {
    let mut b = file_header(1, 0).to_vec();
    put_group(&mut b, 1, 0, 0, &encode_record(&rec(0)));
    put_group(&mut b, 1, 2, 1, &encode_record(&rec(0)));
    assert!(replay(&b, false)
        .unwrap_err()
        .reason
        .contains("group 2 where group 1 belongs"));
}

#[test]
fn a_group_under_another_salt_is_not_a_group() {
    // A body holding a whole group of another file (or a forged one)
    // never makes replay refuse a torn tail.
    let (mut b, starts) = file(2, |s| s);
    let mut forged = Vec::new();
    put_group(&mut forged, 0xbad, 99, 99, &encode_record(&rec(0)));
    b[starts[1] + GROUP_HEADER_BYTES] ^= 1;
    b.extend_from_slice(&forged);
    let r = replay(&b, false).unwrap();
    assert_eq!((r.valid, r.records.len()), (starts[1], 1));
}

#[test]
fn a_damaged_file_header_is_refused_and_a_short_one_too() {
    let (mut b, _) = file(1, |s| s);
    b[13] ^= 1;
    assert!(replay(&b, false)
        .unwrap_err()
        .reason
        .contains("header's CRC"));
    assert!(replay(&FILE_MAGIC, false)
        .unwrap_err()
        .reason
        .contains("cut short"));
    let mut other = file_header(1, 0);
    other[8] = 3;
    let crc = crc32fast::hash(&other[..28]);
    other[28..].copy_from_slice(&crc.to_le_bytes());
    assert!(replay(&other, false)
        .unwrap_err()
        .reason
        .contains("version 3"));
    let mut magic_gone = b.clone();
    magic_gone[..8].fill(0);
    let d = replay(&magic_gone, false).unwrap_err();
    assert!(d.reason.contains("magic is damaged"), "{d}");
}

#[test]
fn a_whole_group_that_does_not_decode_is_refused() {
    let mut b = file_header(1, 0).to_vec();
    put_group(&mut b, 1, 0, 0, &[1, 0, 0, 0, 0xff]);
    assert!(replay(&b, false)
        .unwrap_err()
        .reason
        .contains("do not decode"));
}

#[test]
fn nothing_at_all_is_an_empty_file() {
    for b in [vec![], vec![0; 64]] {
        let r = replay(&b, false).unwrap();
        assert_eq!((r.version, r.records.len(), r.zero_tail), (0, 0, true));
    }
}

#[test]
fn version_1_replays_up_to_its_first_bad_record() {
    let mut b = Vec::new();
    for k in 0..3 {
        b.extend_from_slice(&encode_v1_record(&committed(k)));
    }
    let whole = b.len();
    b.extend_from_slice(&encode_v1_record(&committed(9))[..5]);
    let r = replay(&b, false).unwrap();
    assert_eq!(
        (r.version, r.valid, r.records.len(), r.zero_tail),
        (1, whole, 3, false)
    );
}

#[test]
fn a_version_1_file_whose_first_record_is_torn_reads_as_empty() {
    let mut b = encode_v1_record(&committed(0));
    let last = b.len() - 1;
    b[last] ^= 0xff;
    b.extend_from_slice(&[0; 40]);
    let r = replay(&b, false).unwrap();
    assert_eq!(
        (r.version, r.valid, r.records.len(), r.zero_tail),
        (1, 0, 0, false)
    );
}
