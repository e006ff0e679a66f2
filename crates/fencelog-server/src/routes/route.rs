//! What a route of the API is, as data: how the router serves it (its
//! method, path, handler and access) and how the OpenAPI document
//! describes it (parameters, body, answers). The table of them is
//! `table.rs`; the document is rendered from it by `openapi.rs`.

use crate::auth::Access;
use crate::state::AppState;
use axum::routing::MethodRouter;
use fencelog_api::ErrorCode;

/// One route of the API: how the router serves it and how the document
/// describes it.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    /// The method, lowercase as OpenAPI writes it; `handler` serves it.
    pub method: &'static str,
    pub path: &'static str,
    pub operation_id: &'static str,
    pub summary: &'static str,
    /// Who may call it: every route says, so a new route cannot be added
    /// without deciding its scope (the auth test walks this table).
    pub access: Access,
    /// The handler, on `method`.
    pub handler: fn() -> MethodRouter<AppState>,
    pub query: &'static [Param],
    pub headers: &'static [Param],
    pub request_body: Option<RequestBody>,
    pub responses: &'static [Answer],
}

/// A query or header parameter; never required.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    pub name: &'static str,
    pub description: &'static str,
    pub schema: Schema,
}

/// The schema of a [`Param`].
#[derive(Debug, Clone, Copy)]
pub enum Schema {
    String,
    Boolean,
    Integer,
    IntegerFrom(u64),
}

/// A documented answer of a route.
#[derive(Debug, Clone, Copy)]
pub enum Answer {
    /// `(status, description, schema name or "")`.
    Ok(u16, &'static str, &'static str),
    /// An error body with this code (and so its status), and what it means
    /// here ("" when the code says it all).
    Error(ErrorCode, &'static str),
}

/// A route's request body, as the document describes it.
#[derive(Debug, Clone, Copy)]
pub enum RequestBody {
    /// An append's: JSON, the binary batch (both versions) or one raw
    /// record.
    Append,
    /// JSON of this schema of the document's components, required or not.
    Json(&'static str, bool),
}

impl Param {
    pub const fn new(name: &'static str, description: &'static str, schema: Schema) -> Param {
        Param {
            name,
            description,
            schema,
        }
    }
}
