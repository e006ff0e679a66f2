//! Running a suite with one test-only mutation switched on.

use fencelog_engine::{set_mutation, Mutation};

/// Switches the thread's mutation off again when dropped, even if the
/// suite panicked.
struct Off;

impl Drop for Off {
    fn drop(&mut self) {
        set_mutation(Mutation::None);
    }
}

/// Runs `f` with mutation `m` on, and switches it off afterwards even if
/// `f` panics.
pub fn with_mutation<T>(m: Mutation, f: impl FnOnce() -> T) -> T {
    let _off = Off;
    set_mutation(m);
    f()
}
