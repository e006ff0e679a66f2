//! The engine's integration tests, one binary so linking stays fast: the
//! public API, group commit, poisoning, recovery on real directories, and
//! the crash-point, I/O-fault, corruption, protocol-simulation and fuzz
//! corpus suites on the simulated disk. The tests of the tests (deliberate
//! bugs the suites must catch) need the `mutations` feature.

#![allow(
    clippy::unwrap_used,
    reason = "tests fail loudly on purpose: an unwrap is a failure with its line"
)]
#![allow(
    clippy::too_many_lines,
    reason = "a test scenario, or a suite's generator or checker, reads top to bottom"
)]
#![allow(
    clippy::cast_possible_truncation,
    reason = "counts and draws are bounded by the scenario, offsets lie on small disks, clock milliseconds fit, and a test byte may wrap"
)]

mod support;

mod api;
mod basic;
mod batches;
mod config_caps;
mod corruption_at_rest;
mod crash_points;
mod cursors;
mod deadlines;
mod exactly_once;
mod exactly_once_check;
mod faults_io;
mod faults_restart_after_eio;
mod fuzz_corpus;
mod groups;
mod headers;
mod lifecycle;
mod long_run;
#[cfg(feature = "mutations")]
mod mutations;
mod poison;
#[cfg(feature = "mutations")]
mod producer_mutations;
mod producers;
mod protocol_sim;
mod recovery;
mod replicated;
mod replicated_crash;
mod restart;
mod seek;
#[cfg(feature = "mutations")]
mod writer_panic;
