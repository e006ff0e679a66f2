//! Review: every engine limit has a hard cap the format and the runtime can
//! honour (ARCHITECTURE.md invariant 8), so a bad setting is an OpenError,
//! never a writer panic after a sync or a panic inside `open`.

use fencelog_engine::{Config, Engine, OpenError};

/// A group larger than ~2 GiB can place frame starts past the index's
/// 32-bit offset field (a fresh segment takes a group of any size), which
/// panics the writer after the group's fdatasync.
#[test]
fn group_bytes_beyond_what_the_index_can_address_is_refused() {
    let c = Config {
        group_bytes_max: usize::MAX,
        ..Config::default()
    };
    assert!(c.validate().is_err());
    let c = Config {
        group_bytes_max: 4 << 30,
        ..Config::default()
    };
    assert!(c.validate().is_err());
    assert!(Config::default().validate().is_ok());
}

/// tokio's bounded channel panics above `usize::MAX >> 3`; `open` must
/// refuse the setting instead.
#[test]
fn a_huge_queue_depth_is_a_config_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let c = Config {
        queue_depth_max: usize::MAX,
        ..Config::default()
    };
    let opened = std::panic::catch_unwind(|| Engine::open_with(dir.path(), c));
    match opened {
        Ok(Err(OpenError::Config(_))) => {}
        Ok(Err(e)) => panic!("wrong error: {e}"),
        Ok(Ok(_)) => panic!("opened with queue_depth_max = usize::MAX"),
        Err(_) => panic!("open panicked on queue_depth_max = usize::MAX"),
    }
}
