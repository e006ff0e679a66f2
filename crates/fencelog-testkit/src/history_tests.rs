//! The checker must refuse each kind of violation it claims to catch; a
//! checker that passes everything proves nothing.

use super::*;

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
