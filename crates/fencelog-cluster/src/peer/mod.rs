//! How nodes reach each other, above the node and the admin side (which
//! see only [`crate::rpc::Transport`]): `answer` is what a node answers to
//! a peer's RPC (the `member` RPC by the admin side, every other by the
//! node); the peer stream has its frames (`frame`, pure), its calling side
//! (`stream`) and its serving side (`serve`, the upgrade route, which
//! answers through `answer`); the HTTP transport sends over the stream or
//! plain HTTP (`http_transport`); and the in-process router the tests use
//! delivers through `answer` too (`router`).

pub(crate) mod answer;
pub(crate) mod frame;
pub(crate) mod http_transport;
pub(crate) mod router;
pub(crate) mod serve;
pub(crate) mod stream;

pub use answer::answer;
pub use frame::{put_answer, put_request, take_answer, take_request, Answer, FrameError, Request};
pub use http_transport::{HttpTransport, PeerRpc, PeerTls};
pub use router::Router;
pub use stream::{STALL, STREAM_PATH, UPGRADE_PROTOCOL};
