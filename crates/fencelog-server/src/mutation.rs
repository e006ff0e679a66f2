//! The server's deliberate bugs, for the suites to prove they notice: each
//! a check at the spot it breaks, compiled in only with the `mutations`
//! feature (without it, [`mutated!`] is `false` at compile time and no
//! switch exists). The switch is per thread, read once when an
//! [`crate::state::AppState`] is made, so a test turns a bug on for the
//! servers it starts and runs beside every other test.

/// Whether `$switch` (a [`Switch`]) is the named deliberate bug.
#[cfg(feature = "mutations")]
macro_rules! mutated {
    ($switch:expr, $m:ident) => {
        $switch == $crate::mutation::Mutation::$m
    };
}

#[cfg(not(feature = "mutations"))]
macro_rules! mutated {
    ($switch:expr, $m:ident) => {{
        let _ = $switch;
        false
    }};
}

#[cfg(feature = "mutations")]
pub use imp::{set_mutation, Mutation};

/// The deliberate bug a part of the server was made with.
#[cfg(feature = "mutations")]
pub(crate) type Switch = Mutation;

/// Without the `mutations` feature: none.
#[cfg(not(feature = "mutations"))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Switch;

/// The calling thread's switch.
#[cfg(not(feature = "mutations"))]
pub(crate) fn current() -> Switch {
    Switch
}

#[cfg(feature = "mutations")]
pub(crate) use imp::current;

#[cfg(feature = "mutations")]
mod imp {
    use std::cell::Cell;

    /// One deliberate bug each; `tests/it/session.rs` catches both.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Mutation {
        /// No deliberate bug: the server as shipped.
        None,
        /// The append session answers each append as soon as its outcome
        /// is known instead of in the order they were sent, so a refusal
        /// decided at once overtakes earlier appends still waiting for
        /// their sync.
        SessionAckUnordered,
        /// The append session answers an append as accepted once the
        /// writer has it queued, before the engine's durable answer, with
        /// the seq it expects it to get.
        SessionAckBeforeDurable,
    }

    thread_local! {
        static ACTIVE: Cell<Mutation> = const { Cell::new(Mutation::None) };
    }

    /// Switches one deliberate bug on for the calling thread, for the
    /// server states it makes from now on (or all off with
    /// [`Mutation::None`]).
    pub fn set_mutation(m: Mutation) {
        ACTIVE.with(|a| a.set(m));
    }

    /// The calling thread's switch.
    pub(crate) fn current() -> Mutation {
        ACTIVE.with(|a| a.get())
    }
}
