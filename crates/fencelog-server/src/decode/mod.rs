//! What a request says, read from bytes already in hand: pure parsing,
//! no I/O, no server state, each malformed value a 400 naming it. The
//! one way to read headers, from hyper's `HeaderMap` or the front's
//! buffer alike (`header_view.rs`); the path, header and query
//! parameters (`params.rs`); and the append body, decoded one way
//! only: `json_append.rs` (the reference parser, over `strict_json.rs`,
//! the one-reading rule every JSON write body follows) → `fast_json.rs`
//! (the allocation-light fast path it tries first) → `append_body.rs`
//! (the decoded append, and which encoding `Content-Type` names).
//! Reading the body off the connection is the routes' (`routes/body.rs`).

pub(crate) mod append_body;
pub(crate) mod fast_json;
pub(crate) mod header_view;
pub(crate) mod json_append;
pub(crate) mod params;
pub(crate) mod strict_json;
