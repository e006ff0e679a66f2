//! The fencing rule, pure: no I/O, no clocks, no locks.
//!
//! Everything that decides whether a write may change a stream goes through
//! this module: the writer applies it to pending state in arrival order,
//! the caller's side to durable state ([`check_durable`], the rejection
//! fast path, which a cluster node also runs before it proposes), and
//! recovery replays every frame through [`check_replay`], the same rule
//! read backwards. All of them compute the next state with [`advance`], so
//! the state a restart rebuilds is the state the writer acknowledged.
//!
//! The rule, in check order:
//! 1. token 0 → [`Refusal::ZeroToken`], for every write that carries one;
//! 2. an idempotent producer's duplicate → [`Verdict::Duplicate`], before the
//!    token, so a fenced-out owner can learn its write landed;
//! 3. a sealed stream: append, fence, trim and a config with a token →
//!    [`Refusal::Sealed`] whatever the token; a seal on a sealed stream is
//!    idempotent with the highest token, raises the token (a seal frame)
//!    with a higher one, and is stale with a lower one;
//! 4. the token: below the highest → [`Refusal::Stale`]; on a tombstone
//!    even an equal token is stale (a stale owner can never resurrect the
//!    stream), and a higher one recreates it — by an append or a fence; a
//!    trim, seal, delete or config of a stream that does not exist (or of
//!    a tombstone) is [`Refusal::NotFound`];
//! 5. idempotent producer sequence: an unknown producer below the token
//!    floor is fenced; a known one must continue at its last seq + 1;
//! 6. `match_seq_num` ≠ `next_seq` → [`Refusal::SeqMismatch`];
//! 7. a deadline the writer's timestamp passes → [`Refusal::DeadlineExceeded`].

/// The part of a stream's state the rule looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FenceState {
    /// The stream exists (a tombstone exists too); `false` with all else 0
    /// for a name nobody has written.
    pub exists: bool,
    /// Highest token ever accepted; 0 means nobody has written yet.
    pub highest_token: u64,
    /// Sequence number the next record will get.
    pub next_seq: u64,
    /// The first readable seq: records below it are trimmed.
    pub first_seq: u64,
    /// No more appends, fences or trims, ever.
    pub sealed: bool,
    /// A tombstone: the records are gone, the token stays.
    pub deleted: bool,
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
    /// The stream is sealed.
    Sealed,
    /// The stream does not exist, or is a tombstone.
    NotFound,
    /// An unknown producer below the stream's producer token floor.
    ProducerFenced {
        floor: u64,
    },
    /// The producer's seq is below its last applied one.
    ProducerSeqStale {
        last: u64,
    },
    /// The producer's seq skips ahead.
    ProducerSeqGap {
        expected: u64,
    },
    /// The writer's timestamp is past the write's deadline.
    DeadlineExceeded {
        writer_ms: u64,
    },
    /// A cursor commit past the stream's `next_seq`.
    CursorOutOfRange {
        seq: u64,
        next_seq: u64,
    },
}

/// What an accepted write does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Write a frame of this kind; the fields are the frame's.
    Frame(Change),
    /// Accepted, nothing changes (a re-fence, a seal of a sealed stream, a
    /// trim below the trim point with the current token).
    Nothing,
}

/// A change to a stream, as one frame records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Append {
        count: u32,
    },
    Fence,
    /// `first_seq`: the new first seq (clamped, never lower).
    Trim {
        first_seq: u64,
        retention: bool,
    },
    Seal,
    Delete,
    Config,
}

/// The producer part of an idempotent append: its id's last applied seq
/// on this stream, if known, and the stream's floor for unknown ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerCheck {
    pub seq: u64,
    /// The producer's last applied seq on the stream, if it is known.
    pub last: Option<u64>,
    pub floor: u64,
}

/// An accepted append's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Write it.
    Apply,
    /// The producer's last applied append again: answer its ack, write
    /// nothing.
    Duplicate,
}

fn stale(state: FenceState, token: u64) -> Refusal {
    Refusal::Stale {
        presented: token,
        highest: state.highest_token,
        next_seq: state.next_seq,
    }
}

/// Rule 4 for a write that may create or recreate the stream (append,
/// fence): below the highest is stale, and on a tombstone equal is too.
fn token_may_create(state: FenceState, token: u64) -> Result<(), Refusal> {
    if token < state.highest_token || (state.deleted && token == state.highest_token) {
        return Err(stale(state, token));
    }
    Ok(())
}

/// Rule 4 for a write to an existing, live stream (trim, seal, delete,
/// config): stale first, then not found.
fn token_on_live(state: FenceState, token: u64) -> Result<(), Refusal> {
    token_may_create(state, token)?;
    if !state.exists || state.deleted {
        return Err(Refusal::NotFound);
    }
    Ok(())
}

fn nonzero(token: u64) -> Result<(), Refusal> {
    if token == 0 {
        return Err(Refusal::ZeroToken);
    }
    Ok(())
}

/// The rejection fast path: rule 4 on a stream's *durable* state, before
/// the writer. A token below the durable highest is stale whatever is
/// queued ahead of it (the highest only rises), except on a sealed stream,
/// where rule 3 answers first whatever the token. The other rules, and an
/// equal token on a tombstone, are left to the writer.
pub fn check_durable(state: FenceState, token: u64) -> Result<(), Refusal> {
    if token < state.highest_token && !state.sealed {
        return Err(stale(state, token));
    }
    Ok(())
}

/// Rule 7: a write carrying `not_after_ms` is accepted only if the
/// timestamp the writer assigns is not past it.
pub fn check_deadline(not_after_ms: Option<u64>, writer_ms: u64) -> Result<(), Refusal> {
    match not_after_ms {
        Some(deadline) if deadline < writer_ms => Err(Refusal::DeadlineExceeded { writer_ms }),
        _ => Ok(()),
    }
}

/// Rules 2 and 5 for an idempotent producer. [`check_append`] asks for
/// the duplicate (rule 2) before anything else may refuse, and for the
/// rest (rule 5) after the token.
pub fn check_producer(p: ProducerCheck, token: u64) -> Result<Verdict, Refusal> {
    match p.last {
        Some(last) if p.seq == last => Ok(Verdict::Duplicate),
        Some(last) if p.seq < last => Err(Refusal::ProducerSeqStale { last }),
        Some(last) if p.seq > last + 1 => Err(Refusal::ProducerSeqGap { expected: last + 1 }),
        Some(_) => Ok(Verdict::Apply),
        None if token < p.floor => Err(Refusal::ProducerFenced { floor: p.floor }),
        None => Ok(Verdict::Apply),
    }
}

/// An append of `count` records. Accept iff the token is at least the
/// highest (equal tokens: one owner writing many batches) and, when given,
/// `match_seq_num == next_seq`. The token is checked before the seq: a
/// stale writer must learn it lost ownership, not that it raced.
pub fn check_append(
    state: FenceState,
    token: u64,
    match_seq_num: Option<u64>,
    producer: Option<ProducerCheck>,
    deadline: Option<(u64, u64)>,
) -> Result<Verdict, Refusal> {
    nonzero(token)?;
    if producer.is_some_and(|p| p.last == Some(p.seq)) {
        return Ok(Verdict::Duplicate);
    }
    if state.sealed {
        return Err(Refusal::Sealed);
    }
    token_may_create(state, token)?;
    if let Some(p) = producer {
        check_producer(p, token)?;
    }
    match match_seq_num {
        Some(expected) if expected != state.next_seq => {
            return Err(Refusal::SeqMismatch {
                expected,
                next_seq: state.next_seq,
            })
        }
        _ => {}
    }
    if let Some((not_after, writer_ms)) = deadline {
        check_deadline(Some(not_after), writer_ms)?;
    }
    Ok(Verdict::Apply)
}

/// A fence: the token rule, never seqs. Re-fencing with the current token
/// changes nothing, so it costs no disk work, except on a stream that does
/// not exist yet (or a tombstone): the fence creates it.
pub fn check_fence(state: FenceState, token: u64) -> Result<Effect, Refusal> {
    nonzero(token)?;
    if state.sealed {
        return Err(Refusal::Sealed);
    }
    token_may_create(state, token)?;
    if state.exists && !state.deleted && token == state.highest_token {
        return Ok(Effect::Nothing);
    }
    Ok(Effect::Frame(Change::Fence))
}

/// A trim to `trim_seq`: `first_seq` becomes `min(trim_seq, next_seq)` and
/// never moves back. A lower `trim_seq` with the current token is a no-op;
/// with a higher token the trim only raises the token (a frame whose
/// first_seq is the current one).
pub fn check_trim(state: FenceState, token: u64, trim_seq: u64) -> Result<Effect, Refusal> {
    nonzero(token)?;
    if state.sealed {
        return Err(Refusal::Sealed);
    }
    token_on_live(state, token)?;
    let first_seq = trim_seq.min(state.next_seq).max(state.first_seq);
    if first_seq == state.first_seq && token == state.highest_token {
        return Ok(Effect::Nothing);
    }
    Ok(Effect::Frame(Change::Trim {
        first_seq,
        retention: false,
    }))
}

/// Retention's trim to `first_seq` (no token: the stream's current one).
/// Applies to sealed streams too; never to a tombstone.
pub fn check_retention(state: FenceState, first_seq: u64) -> Effect {
    let first_seq = first_seq.min(state.next_seq);
    if !state.exists || state.deleted || first_seq <= state.first_seq {
        return Effect::Nothing;
    }
    Effect::Frame(Change::Trim {
        first_seq,
        retention: true,
    })
}

/// A seal. Sealing a sealed stream with the highest token is idempotent
/// (nothing written); a lower token is stale. A higher one is written: an
/// accepted token must be the stream's from then on, or a delete carrying
/// a token between the two could still change the stream (a refinement of
/// the design's "idempotent success", recorded in docs/design.md,
/// "Refinements made while implementing the format").
pub fn check_seal(state: FenceState, token: u64) -> Result<Effect, Refusal> {
    nonzero(token)?;
    token_on_live(state, token)?;
    if state.sealed && token == state.highest_token {
        return Ok(Effect::Nothing);
    }
    Ok(Effect::Frame(Change::Seal))
}

/// A delete: a tombstone that keeps the token. A sealed stream may be
/// deleted.
pub fn check_delete(state: FenceState, token: u64) -> Result<Effect, Refusal> {
    nonzero(token)?;
    token_on_live(state, token)?;
    Ok(Effect::Frame(Change::Delete))
}

/// A config change. With a token it is fenced like a trim (and refused on
/// a sealed stream); without one (an operator's) it carries the stream's
/// current token and is accepted on a sealed stream. Returns the frame's
/// token.
pub fn check_config(state: FenceState, token: Option<u64>) -> Result<u64, Refusal> {
    match token {
        Some(t) => {
            nonzero(t)?;
            if state.sealed {
                return Err(Refusal::Sealed);
            }
            token_on_live(state, t)?;
            Ok(t)
        }
        None if !state.exists || state.deleted => Err(Refusal::NotFound),
        None => Ok(state.highest_token),
    }
}

/// The cursor rule: a cursor's token never goes down, it moves
/// backwards only with a strictly higher token, and never past the tail.
pub fn check_cursor(
    state: FenceState,
    cursor: Option<(u64, u64)>,
    token: u64,
    seq: u64,
) -> Result<(), Refusal> {
    nonzero(token)?;
    if !state.exists || state.deleted {
        return Err(Refusal::NotFound);
    }
    if let Some((c_token, c_seq)) = cursor {
        if token < c_token || (seq < c_seq && token == c_token) {
            return Err(Refusal::Stale {
                presented: token,
                highest: c_token,
                next_seq: c_seq,
            });
        }
    }
    if seq > state.next_seq {
        return Err(Refusal::CursorOutOfRange {
            seq,
            next_seq: state.next_seq,
        });
    }
    Ok(())
}

/// Whether a write with `token` makes a token take effect (fence history):
/// it creates or recreates the stream, or raises its highest token.
pub fn takes_effect(state: FenceState, token: u64) -> bool {
    !state.exists || state.deleted || token > state.highest_token
}

/// The state after a change the rule accepted, with `token` (for a trim by
/// retention, the current highest). The writer plans with it and recovery
/// replays with it.
pub fn advance(state: FenceState, change: Change, token: u64) -> FenceState {
    debug_assert!(token >= state.highest_token);
    let mut next = FenceState {
        exists: true,
        highest_token: token,
        ..state
    };
    match change {
        Change::Append { count } => {
            next.deleted = false;
            next.next_seq += count as u64;
        }
        Change::Fence => next.deleted = false,
        Change::Trim { first_seq, .. } => next.first_seq = state.first_seq.max(first_seq),
        Change::Seal => next.sealed = true,
        Change::Delete => {
            next.deleted = true;
            next.sealed = false;
            next.first_seq = state.next_seq;
        }
        Change::Config => {}
    }
    next
}

/// Why a frame read back from the log contradicts the frames before it:
/// the writer would never have written it, so the log is not what the
/// writer wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayViolation {
    /// The frame's token is below the stream's highest so far (or equal,
    /// on a tombstone, or not equal, for a retention trim).
    TokenBelow { token: u64, highest: u64 },
    /// Token 0 (the decoder refuses it before this is reached).
    ZeroToken,
    /// The frame does not start at the stream's `next_seq` (seqs are
    /// dense; every state frame carries the `next_seq` it was written at).
    SeqGap { first_seq: u64, expected: u64 },
    /// A write the rule refuses on a sealed stream.
    Sealed,
    /// A trim, seal, delete or config of a stream that does not exist.
    NoStream,
    /// A fence or seal that changes nothing, which the writer never writes.
    NoChange,
    /// A trim that moves the trim point back, past the tail, or nowhere.
    BadTrim {
        first_seq: u64,
        current: u64,
        next_seq: u64,
    },
}

/// A frame as replay sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replayed {
    pub change: Change,
    pub token: u64,
    /// The frame's first_seq field.
    pub first_seq: u64,
}

/// Recovery's side of the rule: `frame` replayed onto `state`. It passes
/// exactly the checks the writer applied before writing it, and returns
/// the state after it ([`advance`]).
pub fn check_replay(state: FenceState, frame: Replayed) -> Result<FenceState, ReplayViolation> {
    let Replayed {
        change,
        token,
        first_seq,
    } = frame;
    let refused = |r: Refusal| match r {
        Refusal::ZeroToken => ReplayViolation::ZeroToken,
        Refusal::Sealed => ReplayViolation::Sealed,
        Refusal::NotFound => ReplayViolation::NoStream,
        _ => ReplayViolation::TokenBelow {
            token,
            highest: state.highest_token,
        },
    };
    // The writer writes no frame for a change that changes nothing.
    let written = |e: Result<Effect, Refusal>| match e.map_err(refused)? {
        Effect::Frame(_) => Ok(()),
        Effect::Nothing => Err(ReplayViolation::NoChange),
    };
    match change {
        Change::Append { .. } => check_append(state, token, None, None, None)
            .map(drop)
            .map_err(refused)?,
        Change::Fence => written(check_fence(state, token))?,
        Change::Trim { retention, .. } => {
            replay_trim(state, token, first_seq, retention)?;
        }
        Change::Seal => written(check_seal(state, token))?,
        Change::Delete => written(check_delete(state, token))?,
        Change::Config => replay_config(state, token).map_err(refused)?,
    }
    let change = match change {
        Change::Trim { retention, .. } => Change::Trim {
            first_seq,
            retention,
        },
        c => c,
    };
    if !matches!(change, Change::Trim { .. }) && first_seq != state.next_seq {
        return Err(ReplayViolation::SeqGap {
            first_seq,
            expected: state.next_seq,
        });
    }
    Ok(advance(state, change, token))
}

/// A trim frame: by a client, the trim rule, and it must move the trim
/// point or raise the token; by retention, the stream's own token and a
/// trim point that moves.
fn replay_trim(
    state: FenceState,
    token: u64,
    first_seq: u64,
    retention: bool,
) -> Result<(), ReplayViolation> {
    let bad = ReplayViolation::BadTrim {
        first_seq,
        current: state.first_seq,
        next_seq: state.next_seq,
    };
    if retention {
        if token != state.highest_token {
            return Err(ReplayViolation::TokenBelow {
                token,
                highest: state.highest_token,
            });
        }
        return match check_retention(state, first_seq) {
            Effect::Frame(Change::Trim { first_seq: f, .. }) if f == first_seq => Ok(()),
            _ if !state.exists || state.deleted => Err(ReplayViolation::NoStream),
            _ => Err(bad),
        };
    }
    match check_trim(state, token, first_seq) {
        Ok(Effect::Frame(Change::Trim { first_seq: f, .. })) if f == first_seq => Ok(()),
        Ok(_) => Err(bad),
        Err(Refusal::Sealed) => Err(ReplayViolation::Sealed),
        Err(Refusal::NotFound) => Err(ReplayViolation::NoStream),
        Err(_) => Err(ReplayViolation::TokenBelow {
            token,
            highest: state.highest_token,
        }),
    }
}

/// A config frame: one with a token is fenced (and never on a sealed
/// stream); an operator's carries the stream's own token and may be on a
/// sealed one.
fn replay_config(state: FenceState, token: u64) -> Result<(), Refusal> {
    if state.sealed && state.exists && !state.deleted && token == state.highest_token {
        return Ok(());
    }
    check_config(state, Some(token)).map(drop)
}

#[cfg(test)]
#[path = "fence_tests.rs"]
mod tests;
