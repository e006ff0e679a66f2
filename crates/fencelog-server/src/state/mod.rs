//! What every handler shares, and below the handlers and the connection
//! front alike: [`AppState`] (`app_state.rs`) and what it holds — the
//! request-level limits (`limits.rs`), the global memory budget for
//! responses and uploads (`budget.rs`), the HTTP layer's metrics
//! (`http_metrics.rs`), the audit log (`audit.rs`) and the shutdown
//! signal with each connection's hold on the drain (`shutdown.rs`). None
//! of it knows a route: the route table is above, and what it needs of
//! it (a request's route label) is found there.

mod app_state;
pub(crate) mod audit;
pub(crate) mod budget;
pub(crate) mod http_metrics;
mod limits;
pub(crate) mod shutdown;

/// The server's deliberate bugs (tests only), read when an [`AppState`]
/// is made.
#[cfg(feature = "mutations")]
pub use crate::mutation::{set_mutation, Mutation};
pub use app_state::AppState;
pub use budget::{Lease, MemoryBudget, Pool};
pub use http_metrics::HttpMetrics;
pub use limits::HttpLimits;
