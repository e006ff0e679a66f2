//! How nodes reach each other: the HTTP transport, the peer stream's
//! frames and both its sides, and the in-process router.

pub(crate) mod answer;
pub(crate) mod frame;
pub(crate) mod http_transport;
pub(crate) mod router;
pub(crate) mod serve;
pub(crate) mod stream;

pub use answer::answer;
pub use frame::{put_answer, put_request, take_answer, take_request, Request};
pub use http_transport::{HttpTransport, PeerRpc, PeerTls};
pub use router::Router;
pub use stream::{STALL, STREAM_PATH, UPGRADE_PROTOCOL};
