//! The fencing rule, pure: no I/O, no clocks, no locks.
//!
//! Everything that decides whether a write may change a stream goes through
//! [`check_append`] or [`check_fence`], on the writer thread against pending
//! state and on the caller's side against durable state (the fast path).
//! Recovery replays the log through [`check_replay`], the same token check
//! plus dense seqs, and both sides compute the next state with [`advance`].
//! Keeping it in one place is what lets us claim every endpoint applies the
//! same rule.

/// The part of a stream's state the rule looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FenceState {
    /// Highest token ever accepted; 0 means nobody has written yet.
    pub highest_token: u64,
    /// Sequence number the next record will get.
    pub next_seq: u64,
}

/// Why a write was refused by the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Token 0 is the floor every stream starts at; accepting it would let a
    /// client that forgot to set a token write to a fresh stream.
    ZeroToken,
    Stale {
        presented: u64,
        highest: u64,
        next_seq: u64,
    },
    SeqMismatch {
        expected: u64,
        next_seq: u64,
    },
}

/// Accept iff `token >= highest_token` (equal tokens: one owner writing many
/// batches) and, when given, `match_seq_num == next_seq`. The token is checked
/// first: a stale writer must learn it lost ownership, not that it raced.
pub fn check_append(
    state: FenceState,
    token: u64,
    match_seq_num: Option<u64>,
) -> Result<(), Refusal> {
    check_token(state, token)?;
    match match_seq_num {
        Some(expected) if expected != state.next_seq => Err(Refusal::SeqMismatch {
            expected,
            next_seq: state.next_seq,
        }),
        _ => Ok(()),
    }
}

/// A fence follows the same token rule as an append and never looks at seqs.
pub fn check_fence(state: FenceState, token: u64) -> Result<(), Refusal> {
    check_token(state, token)
}

/// Whether a fence that passed [`check_fence`] must write a frame. Re-fencing
/// with the current token changes nothing, so it costs no disk work, except on
/// a stream that does not exist yet: the fence creates it.
pub fn fence_needs_frame(state: FenceState, token: u64, stream_exists: bool) -> bool {
    !stream_exists || token > state.highest_token
}

/// The state after a frame the rule accepted: its token becomes the
/// highest, and its records (none for a fence) take the next seqs. The
/// writer plans with it and recovery replays with it, so the state a
/// restart rebuilds is the state the writer acknowledged.
pub fn advance(state: FenceState, token: u64, record_count: u32) -> FenceState {
    debug_assert!(token >= state.highest_token);
    FenceState {
        highest_token: token,
        next_seq: state.next_seq + record_count as u64,
    }
}

/// Why a frame read back from the log contradicts the frames before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayViolation {
    /// The frame's token is below the stream's highest so far: the writer
    /// would have refused it, so the log is not what the writer wrote.
    TokenBelow { token: u64, highest: u64 },
    /// Token 0 (the decoder refuses it before this is reached).
    ZeroToken,
    /// The frame does not start at the stream's `next_seq` (seqs are
    /// dense; a fence frame carries the `next_seq` it was written at).
    SeqGap { first_seq: u64, expected: u64 },
}

/// Recovery's side of the rule: a frame of `record_count` records (0 for a
/// fence) with `token`, starting at `first_seq`, replayed onto `state`.
/// Its token passes the same check the writer applied, and it must start at
/// the stream's `next_seq`. Returns the state after it ([`advance`]).
pub fn check_replay(
    state: FenceState,
    token: u64,
    first_seq: u64,
    record_count: u32,
) -> Result<FenceState, ReplayViolation> {
    match check_token(state, token) {
        Ok(()) => {}
        Err(Refusal::Stale { highest, .. }) => {
            return Err(ReplayViolation::TokenBelow { token, highest })
        }
        Err(_) => return Err(ReplayViolation::ZeroToken),
    }
    if first_seq != state.next_seq {
        return Err(ReplayViolation::SeqGap {
            first_seq,
            expected: state.next_seq,
        });
    }
    Ok(advance(state, token, record_count))
}

fn check_token(state: FenceState, token: u64) -> Result<(), Refusal> {
    if token == 0 {
        return Err(Refusal::ZeroToken);
    }
    if token < state.highest_token {
        return Err(Refusal::Stale {
            presented: token,
            highest: state.highest_token,
            next_seq: state.next_seq,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(highest_token: u64, next_seq: u64) -> FenceState {
        FenceState {
            highest_token,
            next_seq,
        }
    }

    #[test]
    fn zero_is_never_a_token() {
        assert_eq!(check_append(st(0, 0), 0, None), Err(Refusal::ZeroToken));
        assert_eq!(check_fence(st(0, 0), 0), Err(Refusal::ZeroToken));
    }

    #[test]
    fn equal_and_higher_tokens_pass_lower_fail() {
        assert_eq!(check_append(st(42, 3), 42, None), Ok(()));
        assert_eq!(check_append(st(42, 3), 43, None), Ok(()));
        assert_eq!(check_append(st(42, 3), u64::MAX, None), Ok(()));
        assert_eq!(
            check_append(st(42, 3), 41, None),
            Err(Refusal::Stale {
                presented: 41,
                highest: 42,
                next_seq: 3
            })
        );
        assert_eq!(
            check_fence(st(42, 3), 1),
            Err(Refusal::Stale {
                presented: 1,
                highest: 42,
                next_seq: 3
            })
        );
    }

    #[test]
    fn token_is_checked_before_seq() {
        assert_eq!(
            check_append(st(42, 3), 41, Some(0)),
            Err(Refusal::Stale {
                presented: 41,
                highest: 42,
                next_seq: 3
            })
        );
        assert_eq!(
            check_append(st(42, 3), 42, Some(2)),
            Err(Refusal::SeqMismatch {
                expected: 2,
                next_seq: 3
            })
        );
        assert_eq!(check_append(st(42, 3), 42, Some(3)), Ok(()));
    }

    #[test]
    fn advance_takes_the_token_and_the_next_seqs() {
        assert_eq!(advance(st(3, 10), 3, 4), st(3, 14));
        assert_eq!(advance(st(3, 10), 9, 0), st(9, 10));
    }

    #[test]
    fn replay_accepts_what_the_writer_could_have_written() {
        // An append with the same token, then a fence raising it at the
        // same next_seq, then an append with the raised token.
        let s = check_replay(st(0, 0), 5, 0, 2).unwrap();
        assert_eq!(s, st(5, 2));
        let s = check_replay(s, 5, 2, 1).unwrap();
        let s = check_replay(s, 8, 3, 0).unwrap();
        assert_eq!(s, st(8, 3));
        assert_eq!(check_replay(s, 8, 3, 4), Ok(st(8, 7)));
    }

    #[test]
    fn replay_refuses_a_token_going_down_before_looking_at_seqs() {
        assert_eq!(
            check_replay(st(8, 3), 7, 3, 1),
            Err(ReplayViolation::TokenBelow {
                token: 7,
                highest: 8
            })
        );
        assert_eq!(
            check_replay(st(8, 3), 7, 99, 1),
            Err(ReplayViolation::TokenBelow {
                token: 7,
                highest: 8
            })
        );
        assert_eq!(
            check_replay(st(0, 0), 0, 0, 1),
            Err(ReplayViolation::ZeroToken)
        );
    }

    #[test]
    fn replay_refuses_gaps_and_overlaps() {
        for first_seq in [2, 4, 0] {
            assert_eq!(
                check_replay(st(8, 3), 8, first_seq, 1),
                Err(ReplayViolation::SeqGap {
                    first_seq,
                    expected: 3
                })
            );
        }
        // A fence frame names the next_seq it was written at, too.
        assert_eq!(
            check_replay(st(8, 3), 9, 2, 0),
            Err(ReplayViolation::SeqGap {
                first_seq: 2,
                expected: 3
            })
        );
    }

    #[test]
    fn refencing_with_the_same_token_writes_nothing() {
        assert!(fence_needs_frame(st(0, 0), 5, false));
        assert!(fence_needs_frame(st(5, 0), 6, true));
        assert!(!fence_needs_frame(st(5, 0), 5, true));
    }
}
