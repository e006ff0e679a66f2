//! One test per row of the rule table (the rule in check order, `fence.rs`),
//! and replay read backwards.

use super::*;

fn live(highest_token: u64, next_seq: u64) -> FenceState {
    FenceState {
        exists: true,
        highest_token,
        next_seq,
        ..Default::default()
    }
}

fn sealed(highest_token: u64, next_seq: u64) -> FenceState {
    FenceState {
        sealed: true,
        ..live(highest_token, next_seq)
    }
}

fn tomb(highest_token: u64, next_seq: u64) -> FenceState {
    FenceState {
        deleted: true,
        first_seq: next_seq,
        ..live(highest_token, next_seq)
    }
}

const ABSENT: FenceState = FenceState {
    exists: false,
    highest_token: 0,
    next_seq: 0,
    first_seq: 0,
    sealed: false,
    deleted: false,
};

fn stale(presented: u64, highest: u64, next_seq: u64) -> Refusal {
    Refusal::Stale {
        presented,
        highest,
        next_seq,
    }
}

fn append(s: FenceState, token: u64) -> Result<Verdict, Refusal> {
    check_append(s, token, None, None, None)
}

/// Row 1: token 0, for every write that carries one.
#[test]
fn row1_zero_is_never_a_token() {
    let s = live(0, 0);
    assert_eq!(append(ABSENT, 0), Err(Refusal::ZeroToken));
    assert_eq!(check_fence(s, 0), Err(Refusal::ZeroToken));
    assert_eq!(check_trim(s, 0, 0), Err(Refusal::ZeroToken));
    assert_eq!(check_seal(s, 0), Err(Refusal::ZeroToken));
    assert_eq!(check_delete(s, 0), Err(Refusal::ZeroToken));
    assert_eq!(check_config(s, Some(0)), Err(Refusal::ZeroToken));
    assert_eq!(check_cursor(s, None, 0, 0), Err(Refusal::ZeroToken));
    // Even on a sealed stream, zero is the first answer.
    assert_eq!(check_fence(sealed(3, 0), 0), Err(Refusal::ZeroToken));
}

/// Row 2: a producer's duplicate answers before the token and the seal,
/// so a fenced-out owner learns its write landed.
#[test]
fn row2_a_duplicate_is_answered_before_the_token_and_the_seal() {
    let p = ProducerCheck {
        seq: 7,
        last: Some(7),
        floor: 0,
    };
    for s in [live(9, 4), sealed(9, 4)] {
        assert_eq!(
            check_append(s, 2, None, Some(p), None),
            Ok(Verdict::Duplicate)
        );
        assert_eq!(
            check_append(s, 9, Some(0), Some(p), None),
            Ok(Verdict::Duplicate)
        );
    }
    assert_eq!(
        check_append(live(9, 4), 0, None, Some(p), None),
        Err(Refusal::ZeroToken)
    );
}

/// Row 3: a sealed stream refuses appends, fences, trims and configs with
/// a token whatever the token; a seal again is idempotent with an accepted
/// token and stale with a lower one; an operator's config and a delete go
/// through.
#[test]
fn row3_sealed() {
    let s = sealed(5, 3);
    for token in [4, 5, 6, u64::MAX] {
        assert_eq!(append(s, token), Err(Refusal::Sealed));
        assert_eq!(check_fence(s, token), Err(Refusal::Sealed));
        assert_eq!(check_trim(s, token, 1), Err(Refusal::Sealed));
        assert_eq!(check_config(s, Some(token)), Err(Refusal::Sealed));
    }
    assert_eq!(check_seal(s, 5), Ok(Effect::Nothing));
    // A higher token is written, so no delete below it can follow.
    assert_eq!(check_seal(s, 6), Ok(Effect::Frame(Change::Seal)));
    assert_eq!(check_seal(s, 4), Err(stale(4, 5, 3)));
    assert_eq!(check_config(s, None), Ok(5));
    assert_eq!(check_delete(s, 5), Ok(Effect::Frame(Change::Delete)));
    assert_eq!(check_delete(s, 4), Err(stale(4, 5, 3)));
    // Retention keeps working on a sealed stream.
    assert_eq!(
        check_retention(s, 2),
        Effect::Frame(Change::Trim {
            first_seq: 2,
            retention: true
        })
    );
}

/// Row 4: below the highest is stale for every write, equal is fine on a
/// live stream.
#[test]
fn row4_token_below_is_stale_equal_and_higher_pass() {
    let s = live(42, 3);
    assert_eq!(append(s, 42), Ok(Verdict::Apply));
    assert_eq!(append(s, u64::MAX), Ok(Verdict::Apply));
    assert_eq!(append(s, 41), Err(stale(41, 42, 3)));
    assert_eq!(check_fence(s, 1), Err(stale(1, 42, 3)));
    assert_eq!(check_trim(s, 41, 2), Err(stale(41, 42, 3)));
    assert_eq!(check_seal(s, 41), Err(stale(41, 42, 3)));
    assert_eq!(check_delete(s, 41), Err(stale(41, 42, 3)));
    assert_eq!(check_config(s, Some(41)), Err(stale(41, 42, 3)));
    assert_eq!(check_fence(s, 42), Ok(Effect::Nothing));
    assert_eq!(check_fence(s, 43), Ok(Effect::Frame(Change::Fence)));
    assert_eq!(check_seal(s, 42), Ok(Effect::Frame(Change::Seal)));
    assert_eq!(check_delete(s, 42), Ok(Effect::Frame(Change::Delete)));
    assert_eq!(check_config(s, Some(43)), Ok(43));
    assert_eq!(check_config(s, None), Ok(42));
}

/// Row 4 on a tombstone: equal is stale too (no resurrection with the old
/// token); a higher append or fence recreates the stream at next_seq; the
/// other writes find no stream.
#[test]
fn row4_tombstones() {
    let t = tomb(9, 40);
    for token in [1, 8, 9] {
        assert_eq!(append(t, token), Err(stale(token, 9, 40)));
        assert_eq!(check_fence(t, token), Err(stale(token, 9, 40)));
        assert_eq!(check_trim(t, token, 50), Err(stale(token, 9, 40)));
        assert_eq!(check_seal(t, token), Err(stale(token, 9, 40)));
        assert_eq!(check_delete(t, token), Err(stale(token, 9, 40)));
        assert_eq!(check_config(t, Some(token)), Err(stale(token, 9, 40)));
    }
    assert_eq!(append(t, 10), Ok(Verdict::Apply));
    assert_eq!(check_fence(t, 10), Ok(Effect::Frame(Change::Fence)));
    assert_eq!(check_trim(t, 10, 50), Err(Refusal::NotFound));
    assert_eq!(check_seal(t, 10), Err(Refusal::NotFound));
    assert_eq!(check_delete(t, 10), Err(Refusal::NotFound));
    assert_eq!(check_config(t, Some(10)), Err(Refusal::NotFound));
    assert_eq!(check_config(t, None), Err(Refusal::NotFound));
    assert_eq!(check_retention(t, 60), Effect::Nothing);
    // Recreated at next_seq: seqs are never reused.
    let again = advance(t, Change::Append { count: 2 }, 10);
    assert_eq!(
        again,
        FenceState {
            first_seq: 40,
            next_seq: 42,
            ..live(10, 42)
        }
    );
    let fenced = advance(t, Change::Fence, 11);
    assert_eq!(
        fenced,
        FenceState {
            first_seq: 40,
            ..live(11, 40)
        }
    );
}

/// Row 4 on a stream nobody wrote: appends and fences create it, the rest
/// find nothing.
#[test]
fn row4_absent_streams() {
    assert_eq!(append(ABSENT, 1), Ok(Verdict::Apply));
    assert_eq!(check_fence(ABSENT, 1), Ok(Effect::Frame(Change::Fence)));
    assert_eq!(check_trim(ABSENT, 1, 0), Err(Refusal::NotFound));
    assert_eq!(check_seal(ABSENT, 1), Err(Refusal::NotFound));
    assert_eq!(check_delete(ABSENT, 1), Err(Refusal::NotFound));
    assert_eq!(check_config(ABSENT, Some(1)), Err(Refusal::NotFound));
    assert_eq!(check_config(ABSENT, None), Err(Refusal::NotFound));
    assert_eq!(check_cursor(ABSENT, None, 1, 0), Err(Refusal::NotFound));
    assert!(takes_effect(ABSENT, 1));
}

/// Row 5: producer sequence.
#[test]
fn row5_producer_sequence() {
    let s = live(5, 0);
    let p = |seq, last, floor| Some(ProducerCheck { seq, last, floor });
    assert_eq!(
        check_append(s, 5, None, p(3, Some(5), 0), None),
        Err(Refusal::ProducerSeqStale { last: 5 })
    );
    assert_eq!(
        check_append(s, 5, None, p(7, Some(5), 0), None),
        Err(Refusal::ProducerSeqGap { expected: 6 })
    );
    assert_eq!(
        check_append(s, 5, None, p(6, Some(5), 0), None),
        Ok(Verdict::Apply)
    );
    // Unknown: below the floor it may be a retry of an evicted producer's
    // applied write; above it any seq may start.
    assert_eq!(
        check_append(s, 5, None, p(0, None, 6), None),
        Err(Refusal::ProducerFenced { floor: 6 })
    );
    assert_eq!(
        check_append(live(6, 0), 6, None, p(99, None, 6), None),
        Ok(Verdict::Apply)
    );
    // The token is checked before the producer's seq.
    assert_eq!(
        check_append(s, 4, None, p(9, Some(5), 0), None),
        Err(stale(4, 5, 0))
    );
}

/// Row 6: match_seq_num, after the token.
#[test]
fn row6_match_seq_num_after_the_token() {
    let s = live(42, 3);
    assert_eq!(
        check_append(s, 41, Some(0), None, None),
        Err(stale(41, 42, 3))
    );
    assert_eq!(
        check_append(s, 42, Some(2), None, None),
        Err(Refusal::SeqMismatch {
            expected: 2,
            next_seq: 3
        })
    );
    assert_eq!(check_append(s, 42, Some(3), None, None), Ok(Verdict::Apply));
}

/// Row 7: the deadline, last.
#[test]
fn row7_deadline() {
    let s = live(1, 0);
    assert_eq!(
        check_append(s, 1, None, None, Some((100, 100))),
        Ok(Verdict::Apply)
    );
    assert_eq!(
        check_append(s, 1, None, None, Some((99, 100))),
        Err(Refusal::DeadlineExceeded { writer_ms: 100 })
    );
    assert_eq!(
        check_append(s, 1, Some(7), None, Some((99, 100))),
        Err(Refusal::SeqMismatch {
            expected: 7,
            next_seq: 0
        })
    );
    assert_eq!(check_deadline(None, u64::MAX), Ok(()));
}

#[test]
fn trims_clamp_never_move_back_and_may_only_raise_the_token() {
    let s = FenceState {
        first_seq: 4,
        ..live(5, 10)
    };
    let trim = |first_seq| {
        Ok(Effect::Frame(Change::Trim {
            first_seq,
            retention: false,
        }))
    };
    assert_eq!(check_trim(s, 5, 7), trim(7));
    assert_eq!(check_trim(s, 5, 99), trim(10));
    assert_eq!(check_trim(s, 5, 2), Ok(Effect::Nothing));
    assert_eq!(check_trim(s, 5, 4), Ok(Effect::Nothing));
    // A lower trim_seq with a higher token: the trim point stays, the
    // token rises (like a fence).
    assert_eq!(check_trim(s, 6, 2), trim(4));
    let after = advance(
        s,
        Change::Trim {
            first_seq: 4,
            retention: false,
        },
        6,
    );
    assert_eq!(
        after,
        FenceState {
            first_seq: 4,
            ..live(6, 10)
        }
    );
    assert_eq!(check_retention(s, 3), Effect::Nothing);
    assert_eq!(
        check_retention(s, 12),
        Effect::Frame(Change::Trim {
            first_seq: 10,
            retention: true
        })
    );
}

#[test]
fn the_cursor_rule() {
    let s = live(5, 10);
    assert_eq!(check_cursor(s, None, 1, 10), Ok(()));
    assert_eq!(
        check_cursor(s, None, 1, 11),
        Err(Refusal::CursorOutOfRange {
            seq: 11,
            next_seq: 10
        })
    );
    assert_eq!(check_cursor(s, Some((3, 6)), 2, 8), Err(stale(2, 3, 6)));
    assert_eq!(check_cursor(s, Some((3, 6)), 3, 5), Err(stale(3, 3, 6)));
    assert_eq!(check_cursor(s, Some((3, 6)), 3, 6), Ok(()));
    assert_eq!(
        check_cursor(s, Some((3, 6)), 4, 2),
        Ok(()),
        "a new owner may rewind"
    );
    assert_eq!(
        check_cursor(tomb(5, 10), None, 9, 0),
        Err(Refusal::NotFound)
    );
}

#[test]
fn advance_takes_the_token_and_each_change() {
    let s = live(3, 10);
    assert_eq!(advance(s, Change::Append { count: 4 }, 3), live(3, 14));
    assert_eq!(advance(s, Change::Fence, 9), live(9, 10));
    assert_eq!(advance(s, Change::Seal, 3), sealed(3, 10));
    assert_eq!(advance(sealed(3, 10), Change::Delete, 4), tomb(4, 10));
    assert_eq!(advance(s, Change::Config, 3), s);
    assert_eq!(advance(ABSENT, Change::Fence, 1), live(1, 0));
    assert!(takes_effect(s, 4) && !takes_effect(s, 3) && takes_effect(tomb(3, 1), 4));
}

fn frame(change: Change, token: u64, first_seq: u64) -> Replayed {
    Replayed {
        change,
        token,
        first_seq,
    }
}

#[test]
fn replay_accepts_what_the_writer_could_have_written() {
    // An append, a fence raising the token at the same next_seq, a trim,
    // a config, a seal, an operator's config on the sealed stream, a
    // retention trim, a delete, and a recreation above the tombstone.
    let steps = [
        frame(Change::Append { count: 2 }, 5, 0),
        frame(Change::Append { count: 1 }, 5, 2),
        frame(Change::Fence, 8, 3),
        frame(
            Change::Trim {
                first_seq: 0,
                retention: false,
            },
            8,
            1,
        ),
        frame(Change::Config, 9, 3),
        frame(Change::Seal, 9, 3),
        frame(Change::Config, 9, 3),
        frame(
            Change::Trim {
                first_seq: 0,
                retention: true,
            },
            9,
            2,
        ),
        frame(Change::Delete, 9, 3),
        frame(Change::Fence, 10, 3),
        frame(Change::Append { count: 1 }, 10, 3),
    ];
    let mut s = ABSENT;
    for (i, f) in steps.into_iter().enumerate() {
        s = check_replay(s, f).unwrap_or_else(|v| panic!("step {i}: {v:?}"));
    }
    assert_eq!(
        s,
        FenceState {
            first_seq: 3,
            ..live(10, 4)
        }
    );
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "a table of cases, one per refusal, read top to bottom"
)]
fn replay_refuses_what_the_writer_never_writes() {
    let s = live(8, 3);
    let cases = [
        (
            s,
            frame(Change::Append { count: 1 }, 7, 3),
            ReplayViolation::TokenBelow {
                token: 7,
                highest: 8,
            },
        ),
        (
            s,
            frame(Change::Append { count: 1 }, 7, 99),
            ReplayViolation::TokenBelow {
                token: 7,
                highest: 8,
            },
        ),
        (
            s,
            frame(Change::Append { count: 1 }, 8, 2),
            ReplayViolation::SeqGap {
                first_seq: 2,
                expected: 3,
            },
        ),
        (
            s,
            frame(Change::Fence, 9, 2),
            ReplayViolation::SeqGap {
                first_seq: 2,
                expected: 3,
            },
        ),
        (s, frame(Change::Fence, 8, 3), ReplayViolation::NoChange),
        (
            sealed(8, 3),
            frame(Change::Append { count: 1 }, 9, 3),
            ReplayViolation::Sealed,
        ),
        // A re-seal is written only with a higher token.
        (
            sealed(8, 3),
            frame(Change::Seal, 8, 3),
            ReplayViolation::NoChange,
        ),
        (
            sealed(8, 3),
            frame(Change::Config, 9, 3),
            ReplayViolation::Sealed,
        ),
        (
            sealed(8, 3),
            frame(
                Change::Trim {
                    first_seq: 0,
                    retention: false,
                },
                9,
                1,
            ),
            ReplayViolation::Sealed,
        ),
        (
            tomb(8, 3),
            frame(Change::Append { count: 1 }, 8, 3),
            ReplayViolation::TokenBelow {
                token: 8,
                highest: 8,
            },
        ),
        (
            tomb(8, 3),
            frame(Change::Seal, 9, 3),
            ReplayViolation::NoStream,
        ),
        (
            ABSENT,
            frame(
                Change::Trim {
                    first_seq: 0,
                    retention: false,
                },
                1,
                0,
            ),
            ReplayViolation::NoStream,
        ),
        (
            ABSENT,
            frame(Change::Config, 1, 0),
            ReplayViolation::NoStream,
        ),
        (
            s,
            frame(
                Change::Trim {
                    first_seq: 0,
                    retention: false,
                },
                8,
                4,
            ),
            ReplayViolation::BadTrim {
                first_seq: 4,
                current: 0,
                next_seq: 3,
            },
        ),
        (
            s,
            frame(
                Change::Trim {
                    first_seq: 0,
                    retention: false,
                },
                8,
                0,
            ),
            ReplayViolation::BadTrim {
                first_seq: 0,
                current: 0,
                next_seq: 3,
            },
        ),
        (
            s,
            frame(
                Change::Trim {
                    first_seq: 0,
                    retention: true,
                },
                9,
                2,
            ),
            ReplayViolation::TokenBelow {
                token: 9,
                highest: 8,
            },
        ),
        (
            s,
            frame(
                Change::Trim {
                    first_seq: 0,
                    retention: true,
                },
                8,
                0,
            ),
            ReplayViolation::BadTrim {
                first_seq: 0,
                current: 0,
                next_seq: 3,
            },
        ),
        (
            ABSENT,
            frame(Change::Append { count: 1 }, 0, 0),
            ReplayViolation::ZeroToken,
        ),
    ];
    for (i, (state, f, want)) in cases.into_iter().enumerate() {
        assert_eq!(
            check_replay(state, f),
            Err(want),
            "case {i}: {f:?} on {state:?}"
        );
    }
}
