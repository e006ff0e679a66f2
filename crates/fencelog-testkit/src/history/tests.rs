//! The checker must refuse each kind of violation it claims to catch; a
//! checker that passes everything proves nothing.

use super::*;
use std::collections::BTreeMap;

fn append(token: u64, body: &str) -> Call {
    Call::Append {
        stream: "s".into(),
        token,
        bodies: vec![body.as_bytes().to_vec()],
    }
}

fn op(call: Call, outcome: Outcome, invoked: u64, completed: u64) -> Op {
    Op {
        call,
        outcome,
        invoked,
        completed,
    }
}

fn rec(seq: u64, token: u64, body: &str) -> Rec {
    Rec {
        seq,
        token,
        body: body.as_bytes().to_vec(),
    }
}

fn replica(records: Vec<Rec>, highest_token: u64) -> Replica {
    let next_seq = records.last().map_or(0, |r| r.seq + 1);
    let log = FinalLog {
        next_seq,
        highest_token,
        records,
        ..FinalLog::default()
    };
    BTreeMap::from([("s".to_string(), log)])
}

/// A fence to 2, an append at 2, a stale append at 1 refused citing 2, a
/// read of the whole log.
fn good() -> (Vec<Op>, Replica) {
    let fence = Call::Fence {
        stream: "s".into(),
        token: 2,
    };
    let read = Call::Read {
        stream: "s".into(),
        start: 0,
    };
    let ops = vec![
        op(append(1, "a"), Outcome::Appended { first_seq: 0 }, 0, 1),
        op(fence, Outcome::Fenced { next_seq: 1 }, 2, 3),
        op(append(2, "b"), Outcome::Appended { first_seq: 1 }, 4, 5),
        op(append(1, "c"), Outcome::Stale { highest: 2 }, 6, 7),
        op(
            read,
            Outcome::Read {
                records: vec![rec(0, 1, "a"), rec(1, 2, "b")],
                next_seq: 2,
            },
            8,
            9,
        ),
    ];
    (ops, replica(vec![rec(0, 1, "a"), rec(1, 2, "b")], 2))
}

fn refused(ops: &[Op], replicas: &[Replica], what: &str) {
    let err = check(ops, replicas).expect_err(what);
    assert!(err.contains(what), "{err}");
}

#[test]
fn a_consistent_history_passes_with_its_counts() {
    let (ops, r) = good();
    let report = check(&ops, &[r.clone(), r]).unwrap();
    assert_eq!(
        (report.acked, report.fenced, report.stale, report.reads),
        (2, 1, 1, 1)
    );
    assert_eq!((report.read_records, report.final_records), (2, 2));
}

#[test]
fn a_refused_append_in_the_log_is_caught() {
    let (mut ops, _) = good();
    let refusal = Outcome::Refused("503 unavailable, outcome_unknown false".into());
    ops.push(op(append(2, "r"), refusal, 10, 11));
    let log = vec![rec(0, 1, "a"), rec(1, 2, "b"), rec(2, 2, "r")];
    refused(
        &ops,
        &[replica(log, 2)],
        "a refused append's record is in the log",
    );
}

#[test]
fn a_refused_retry_of_an_applied_append_passes() {
    // An idempotent producer's first try is unknown and applied; its retry
    // of the same body is refused (no leader): the record is the first's.
    let (mut ops, _) = good();
    ops.push(op(
        append(2, "r"),
        Outcome::Unknown("timeout".into()),
        10,
        11,
    ));
    ops.push(op(append(2, "r"), Outcome::Refused("503".into()), 12, 13));
    let log = vec![rec(0, 1, "a"), rec(1, 2, "b"), rec(2, 2, "r")];
    let report = check(&ops, &[replica(log, 2)]).unwrap();
    assert_eq!((report.refused, report.unknown), (1, 1));
}

#[test]
fn diverging_replicas_are_caught() {
    let (ops, r) = good();
    let other = replica(vec![rec(0, 1, "a")], 2);
    refused(&ops, &[r, other], "differ");
}

#[test]
fn a_lost_acknowledged_append_is_caught() {
    let (ops, _) = good();
    refused(&ops, &[replica(vec![rec(0, 1, "a")], 2)], "lost");
}

#[test]
fn a_stale_record_in_the_log_is_caught() {
    let (ops, _) = good();
    let log = vec![rec(0, 1, "a"), rec(1, 2, "b"), rec(2, 1, "x")];
    refused(&ops, &[replica(log, 2)], "stale token accepted");
}

#[test]
fn a_write_accepted_below_an_acknowledged_token_is_caught() {
    // The log alone looks fine (tokens never fall), but the write at token
    // 1 was sent after the fence to 2 had been acknowledged.
    let (ops, _) = good();
    let fence = ops[1].clone();
    let late = op(append(1, "z"), Outcome::Appended { first_seq: 1 }, 4, 5);
    let fence = Op {
        outcome: Outcome::Fenced { next_seq: 2 },
        ..fence
    };
    let log = vec![rec(0, 1, "a"), rec(1, 1, "z")];
    refused(
        &[ops[0].clone(), fence, late],
        &[replica(log, 2)],
        "acknowledged before it was sent",
    );
}

#[test]
fn an_unexplained_409_is_caught() {
    let (mut ops, r) = good();
    ops[3].outcome = Outcome::Stale { highest: 3 };
    refused(&ops, std::slice::from_ref(&r), "above the final");
    ops[3].outcome = Outcome::Stale { highest: 1 };
    refused(&ops, std::slice::from_ref(&r), "not above");
    // Token 2 cited, but the only write carrying it came after the 409.
    ops[3].outcome = Outcome::Stale { highest: 2 };
    ops.truncate(4);
    ops.remove(1);
    ops[1].invoked = 20;
    refused(&ops, &[r], "no earlier unrefused write");
}

#[test]
fn reads_that_are_not_slices_or_miss_acked_appends_are_caught() {
    let (mut ops, r) = good();
    let read = |records, next_seq| Outcome::Read { records, next_seq };
    ops[4].outcome = read(vec![rec(0, 1, "a"), rec(1, 2, "q")], 2);
    refused(&ops, std::slice::from_ref(&r), "not the final log's record");
    ops[4].outcome = read(vec![rec(0, 1, "a")], 1);
    refused(&ops, std::slice::from_ref(&r), "misses appends");
    ops[4].outcome = read(vec![], 3);
    refused(&ops, &[r], "past the final");
}

#[test]
fn holes_in_the_log_are_caught() {
    let mut r = replica(vec![rec(0, 1, "a"), rec(2, 1, "b")], 1);
    r.get_mut("s").unwrap().next_seq = 3;
    refused(&[], &[r], "not dense");
}

fn life(call: fn(String, u64) -> Call, token: u64, at: u64) -> Op {
    op(
        call("s".into(), token),
        Outcome::Fenced { next_seq: 2 },
        at,
        at + 1,
    )
}

fn seal(stream: String, token: u64) -> Call {
    Call::Seal { stream, token }
}

fn delete(stream: String, token: u64) -> Call {
    Call::Delete { stream, token }
}

/// A trim to 1 makes seq 0's acknowledged record legitimately gone (and
/// a read of it from before the trim still fine); without the trim the
/// same final log loses it; a trim that left the final log untrimmed is
/// caught too.
#[test]
fn trims_explain_missing_records_and_must_show() {
    let (mut ops, _) = good();
    let trim = Call::Trim {
        stream: "s".into(),
        token: 2,
        trim_seq: 1,
    };
    let trimmed = {
        let mut r = replica(vec![rec(1, 2, "b")], 2);
        r.get_mut("s").unwrap().next_seq = 2;
        r
    };
    refused(&ops, std::slice::from_ref(&trimmed), "lost");
    ops.push(op(trim, Outcome::Fenced { next_seq: 2 }, 10, 11));
    check(&ops, std::slice::from_ref(&trimmed)).unwrap();
    let (_, untrimmed) = good();
    refused(&ops, &[untrimmed], "acknowledged trim to 1");
}

/// A retention setting lets the store trim the front by itself: seq 0
/// may then be missing, but a refused setting explains nothing, and a
/// record missing from the middle (a hole) is still caught.
#[test]
fn retention_explains_a_missing_front_and_nothing_else() {
    let (mut ops, _) = good();
    let trimmed = {
        let mut r = replica(vec![rec(1, 2, "b")], 2);
        r.get_mut("s").unwrap().next_seq = 2;
        r
    };
    let retention = || Call::Retention { stream: "s".into() };
    let refusal = Outcome::Refused("bad_request".into());
    ops.push(op(retention(), refusal, 10, 11));
    refused(&ops, std::slice::from_ref(&trimmed), "lost");
    ops.push(op(retention(), Outcome::Fenced { next_seq: 2 }, 12, 13));
    let report = check(&ops, std::slice::from_ref(&trimmed)).unwrap();
    assert_eq!((report.acked, report.fenced), (2, 2));
    let mut holed = replica(vec![rec(0, 1, "a"), rec(2, 2, "b")], 2);
    holed.get_mut("s").unwrap().next_seq = 3;
    refused(&ops, &[holed], "not dense");
}

#[test]
fn a_body_written_twice_is_caught() {
    let r = replica(vec![rec(0, 1, "a"), rec(1, 1, "a")], 1);
    refused(&[], &[r], "written twice");
}

/// Nothing is accepted after an acknowledged seal; nothing at or below an
/// acknowledged delete's token; and each shows in the final state.
#[test]
fn writes_after_a_seal_or_at_a_deleted_token_are_caught() {
    let (ops, r) = good();
    let mut sealed = ops.clone();
    sealed.insert(3, life(seal, 2, 5));
    let mut late = op(append(2, "b"), Outcome::Appended { first_seq: 1 }, 7, 8);
    sealed[2] = late.clone();
    let mut sealed_log = r.clone();
    sealed_log.get_mut("s").unwrap().sealed = true;
    refused(&sealed, std::slice::from_ref(&sealed_log), "after the seal");
    sealed.remove(2);
    sealed.truncate(3);
    refused(&sealed, std::slice::from_ref(&r), "not sealed");
    late.call = append(2, "z");
    let deleted = vec![ops[0].clone(), life(delete, 2, 2), late];
    let mut tomb = replica(vec![], 0);
    tomb.get_mut("s").unwrap().deleted = true;
    refused(&deleted, &[tomb], "after the delete with 2");
}
