//! Operator endpoints and the catch-all answers.

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use fencelog_api::ErrorCode;
use serde_json::json;

/// `GET /healthz`: 200 while the backend accepts writes, 503 once storage
/// has failed or shutdown has begun, so a load balancer stops sending
/// writes.
pub async fn healthz(State(state): State<AppState>) -> Response {
    match state.backend.health() {
        Ok(()) => Json(json!({ "status": "ok" })).into_response(),
        Err(e) => e.into_response(),
    }
}

/// prometheus-client writes the OpenMetrics text format (`_total`
/// suffixes, `# EOF`), so say so; Prometheus negotiates it natively.
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `GET /metrics`: OpenMetrics text from the HTTP layer's registry and
/// the backend's.
pub async fn metrics(State(state): State<AppState>) -> Response {
    let text = state
        .backend
        .metrics(state.http_metrics.encode_without_eof());
    ([(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)], text).into_response()
}

pub async fn not_found() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such route")
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        "method not allowed on this route",
    )
}
