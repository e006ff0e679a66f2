//! Who may do what: access tokens with scopes and a stream prefix, stored
//! as SHA-256 hashes, presented as `Authorization: Bearer <secret>`.
//!
//! Every route of [`crate::routes::ROUTES`] declares its [`Access`]; the
//! router wraps each one in `check`, so a route cannot exist without
//! saying which scope it needs. With no tokens configured the server runs
//! open ([`Auth::Open`]) — the CLI allows that only on a loopback address
//! or with `--insecure-no-auth`.
//!
//! The parts: `scope.rs` what a token may do and what a route needs,
//! `tokens.rs` the configured tokens and who a request is from, `admit.rs`
//! the per-route decision (as middleware and as a plain call), `secret.rs`
//! hashing, comparing and making secrets.

mod admit;
mod scope;
mod secret;
mod tokens;

pub(crate) use admit::{admit, check};
pub use admit::{authorize, with_challenge, Caller};
pub use scope::{Access, Scope, Scopes};
pub use secret::{constant_time_eq, generate_secret, hash_secret, to_hex};
pub use tokens::{Auth, AuthSettings, Principal, TokenSettings};

#[cfg(test)]
mod tests;
