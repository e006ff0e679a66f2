//! Test doubles behind the storage seam, only with the `sim` feature: the
//! simulated disk ([`SimStorage`]: power loss, torn writes, I/O faults) and
//! [`HookedStorage`] (a real directory whose calls a test can fail or hold).

mod disk;
mod hooked;

pub use disk::*;
pub use hooked::{HookedCall, HookedStorage};
