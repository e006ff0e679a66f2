//! The global memory budget: bytes of response chunks on their way to
//! sockets and of request bodies being read, across every connection. A
//! chunk or body takes its bytes from the budget before it is allocated
//! and gives them back when it is dropped, so clients that stop reading (or
//! trickle uploads) make others wait — and are eventually closed by the
//! write and body timeouts — instead of growing the process.

use crate::error::{ApiError, RETRY_AFTER_S};
use bytes::Bytes;
use fencelog_api::{ErrorCode, Field};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The semaphore's own bound on permits.
const PERMITS_MAX: usize = Semaphore::MAX_PERMITS;

/// The budget's two pools, responses and uploads; cheap to clone (the
/// clones share the pools).
#[derive(Debug, Clone)]
pub struct MemoryBudget {
    responses: Arc<Semaphore>,
    uploads: Arc<Semaphore>,
    response_bytes: usize,
    upload_bytes: usize,
    /// How long to wait for budget before giving up.
    pub wait: Duration,
}

impl Default for MemoryBudget {
    fn default() -> Self {
        MemoryBudget::new(
            Self::RESPONSE_BYTES_DEFAULT,
            Self::UPLOAD_BYTES_DEFAULT,
            Self::WAIT_DEFAULT,
        )
    }
}

/// Which pool a request draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    Responses,
    Uploads,
}

/// Bytes taken from the budget; given back on drop.
#[derive(Debug)]
pub struct Lease(
    #[allow(
        dead_code,
        reason = "held only to be dropped: the drop gives the permits back"
    )]
    Option<OwnedSemaphorePermit>,
);

impl MemoryBudget {
    /// Response bytes in flight by default (64 MiB).
    pub const RESPONSE_BYTES_DEFAULT: usize = 64 << 20;
    /// Upload bytes in flight by default (64 MiB: thirty bodies of the
    /// default maximum size at once).
    pub const UPLOAD_BYTES_DEFAULT: usize = 64 << 20;
    /// How long a request waits for budget before it is answered 503
    /// `overloaded` (only before anything was sent).
    pub const WAIT_DEFAULT: Duration = Duration::from_secs(5);

    pub fn new(response_bytes: usize, upload_bytes: usize, wait: Duration) -> Self {
        let response_bytes = response_bytes.clamp(1, PERMITS_MAX);
        let upload_bytes = upload_bytes.clamp(1, PERMITS_MAX);
        MemoryBudget {
            responses: Arc::new(Semaphore::new(response_bytes)),
            uploads: Arc::new(Semaphore::new(upload_bytes)),
            response_bytes,
            upload_bytes,
            wait,
        }
    }

    fn pool(&self, pool: Pool) -> (&Arc<Semaphore>, usize) {
        match pool {
            Pool::Responses => (&self.responses, self.response_bytes),
            Pool::Uploads => (&self.uploads, self.upload_bytes),
        }
    }

    /// `bytes` from `pool`, waiting up to `wait`; `None` past it. A request
    /// for more than the whole pool takes the whole pool, so one large
    /// body can always go through on its own.
    pub async fn take(&self, pool: Pool, bytes: usize, wait: Duration) -> Option<Lease> {
        let (sem, size) = self.pool(pool);
        let n = u32::try_from(bytes.min(size)).unwrap_or(u32::MAX);
        if n == 0 {
            return Some(Lease(None));
        }
        match tokio::time::timeout(wait, sem.clone().acquire_many_owned(n)).await {
            Ok(Ok(permit)) => Some(Lease(Some(permit))),
            // The semaphore is never closed; a timeout is the only way out.
            Ok(Err(_)) | Err(_) => None,
        }
    }

    /// Bytes of `pool` free right now (for metrics and tests).
    pub fn available(&self, pool: Pool) -> usize {
        self.pool(pool).0.available_permits()
    }
}

/// The 503 for a request that could not get budget in time.
pub fn overloaded(what: &str) -> ApiError {
    ApiError::new(
        ErrorCode::Overloaded,
        format!("the server is at its memory budget for {what}; retry shortly"),
    )
    .with(Field::RetryAfterS, RETRY_AFTER_S)
}

/// Bytes that hold their lease until the last clone is dropped: hyper
/// drops a chunk once it has written it to the socket.
pub fn leased(bytes: Vec<u8>, lease: Lease) -> Bytes {
    struct Owner(
        Vec<u8>,
        #[allow(
            dead_code,
            reason = "held only to be dropped with the bytes: the drop gives the lease back"
        )]
        Lease,
    );
    impl AsRef<[u8]> for Owner {
        fn as_ref(&self) -> &[u8] {
            &self.0
        }
    }
    Bytes::from_owner(Owner(bytes, lease))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn leases_come_back_when_the_bytes_are_dropped() {
        let b = MemoryBudget::new(100, 100, Duration::from_millis(10));
        let l = b.take(Pool::Responses, 60, b.wait).await.unwrap();
        let chunk = leased(vec![1; 60], l);
        assert_eq!(b.available(Pool::Responses), 40);
        assert!(b.take(Pool::Responses, 60, b.wait).await.is_none());
        let clone = chunk.clone();
        drop(chunk);
        assert_eq!(b.available(Pool::Responses), 40, "a clone still holds it");
        drop(clone);
        assert_eq!(b.available(Pool::Responses), 100);
        // More than the pool takes the whole pool.
        let all = b.take(Pool::Uploads, 1000, b.wait).await.unwrap();
        assert_eq!(b.available(Pool::Uploads), 0);
        drop(all);
        assert_eq!(b.available(Pool::Uploads), 100);
    }
}
