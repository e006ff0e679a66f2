//! The fencing rule, pure: no I/O, no clocks, no locks.
//!
//! Everything that decides whether a write may change a stream goes through
//! [`check_append`] or [`check_fence`], on the writer thread against pending
//! state and on the caller's side against durable state (the fast path);
//! the writer computes the state after an accepted frame with [`advance`].
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
    fn refencing_with_the_same_token_writes_nothing() {
        assert!(fence_needs_frame(st(0, 0), 5, false));
        assert!(fence_needs_frame(st(5, 0), 6, true));
        assert!(!fence_needs_frame(st(5, 0), 5, true));
    }
}
