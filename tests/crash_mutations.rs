//! Issue 4 §8: tests of the tests. Each deliberate bug in
//! `fencelog::mutation` must make the suite that guards against it report
//! a violation. The switch is process-wide, so this binary holds only
//! these tests and runs them one at a time.

mod crash_support;
use crash_support::corruption::{corruption, CorruptionSuite};
use crash_support::crash::{crash_points, CrashSuite};
use crash_support::faults::{fault_points, FaultSuite};
use fencelog::mutation::{self, Mutation};
use std::sync::Mutex;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Switches the mutation on for the duration of `f`, and off again even if
/// `f` panics.
fn with_mutation<T>(m: Mutation, f: impl FnOnce() -> T) -> T {
    struct Off;
    impl Drop for Off {
        fn drop(&mut self) {
            mutation::set(Mutation::None);
        }
    }
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let _off = Off;
    mutation::set(m);
    f()
}

fn crash_suite() -> CrashSuite {
    CrashSuite {
        seed: 0x5EED_0001,
        steps: 40,
        segment_bytes: 4096,
        random_when_many: 16,
        random_extra: 1,
        stride: 1,
    }
}

fn fault_suite() -> FaultSuite {
    FaultSuite {
        seed: 0xFA17_0001,
        steps: 20,
        segment_bytes: 4096,
        stride: 1,
        recovery_disks: 0,
    }
}

fn corruption_suite() -> CorruptionSuite {
    CorruptionSuite {
        seed: 0xC0_0001,
        steps: 60,
        segment_bytes: 4096,
        flips: 300,
    }
}

fn assert_caught<T: std::fmt::Debug>(m: Mutation, r: Result<T, String>) {
    match r {
        Ok(stats) => panic!("mutation {m:?} was not caught ({stats:?})"),
        Err(e) => println!("{m:?} caught: {e}"),
    }
}

#[test]
fn the_suites_pass_without_a_mutation() {
    with_mutation(Mutation::None, || {
        crash_points(&crash_suite()).unwrap();
        fault_points(&fault_suite()).unwrap();
        corruption(&corruption_suite()).unwrap();
    });
}

#[test]
fn acknowledging_before_the_fsync_is_caught() {
    let m = Mutation::AckBeforeSync;
    assert_caught(m, with_mutation(m, || crash_points(&crash_suite())));
}

#[test]
fn skipping_the_directory_fsync_of_a_new_segment_is_caught() {
    let m = Mutation::SkipDirSync;
    assert_caught(m, with_mutation(m, || crash_points(&crash_suite())));
}

#[test]
fn ignoring_an_fsync_error_is_caught() {
    let m = Mutation::IgnoreSyncError;
    assert_caught(m, with_mutation(m, || fault_points(&fault_suite())));
}

#[test]
fn truncating_at_any_bad_checksum_is_caught() {
    let m = Mutation::TruncateAnyBadFrame;
    assert_caught(m, with_mutation(m, || corruption(&corruption_suite())));
}

#[test]
fn keeping_the_highest_token_only_in_memory_is_caught() {
    let m = Mutation::FenceOnlyInMemory;
    assert_caught(m, with_mutation(m, || crash_points(&crash_suite())));
}

#[test]
fn serving_unsynced_records_is_caught() {
    let m = Mutation::ServeUnsynced;
    assert_caught(m, with_mutation(m, || fault_points(&fault_suite())));
}
