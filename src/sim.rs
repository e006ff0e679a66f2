//! A simulated disk behind the [`crate::storage::Storage`] seam, for crash
//! and fault tests. (Being written; see issue 4.)
