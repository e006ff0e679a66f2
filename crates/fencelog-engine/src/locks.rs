//! Taking the engine's std locks without the poisoning cascade.
//!
//! A std lock is poisoned when a thread panics while holding it, and a plain
//! `lock().unwrap()` then panics in every later holder: one writer panic
//! would turn into a panic in every reader of that stream. The engine
//! instead keeps the data behind each lock consistent at every point a
//! panic can happen (checks before mutations; see `StreamIndex::push`) and
//! takes its locks through these helpers, which ignore the poison flag. The
//! writer panic itself is not ignored: it poisons the engine (see
//! `writer::Writer::commit_guarded`).

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Locks `m`, also when a panicking thread held it last.
pub(crate) fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Read-locks `l`, also when a panicking thread held it last.
pub(crate) fn read<T: ?Sized>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

/// Write-locks `l`, also when a panicking thread held it last.
pub(crate) fn write<T: ?Sized>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_poisoned_by_a_panic_still_serves_its_data() {
        let m = Mutex::new(7);
        let l = RwLock::new(8);
        let _ = std::panic::catch_unwind(|| {
            let _m = m.lock().unwrap();
            let _l = l.write().unwrap();
            panic!("poisons both");
        });
        assert!(m.is_poisoned() && l.is_poisoned());
        assert_eq!(*lock(&m), 7);
        assert_eq!(*read(&l), 8);
        *write(&l) = 9;
        assert_eq!(*read(&l), 9);
    }
}
