//! The router: every route of [`crate::routes::table::ROUTES`] with the handler
//! it carries, behind the access check it declares (and, for the writes a
//! backend may redirect, the redirect layer), and the one middleware in
//! front of them all ([`track`]).

use crate::auth;
use crate::decode::header_view::HeaderView;
use crate::routes::table::{REDIRECTED, ROUTES};
use crate::routes::{ops, writes};
use crate::state::http_metrics::{method_label, UNMATCHED_ROUTE};
use crate::state::AppState;
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::{from_fn_with_state, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use std::time::Instant;

/// The whole API as a router, built from [`ROUTES`]: each route behind
/// the access check (`auth::check`) with the access it declares.
pub fn app(state: AppState) -> Router {
    let mut router = Router::new();
    for route in ROUTES {
        let guard = from_fn_with_state((state.auth.clone(), route.access), auth::check);
        let mut handler = (route.handler)();
        if REDIRECTED.contains(&route.operation_id) {
            let redirect = from_fn_with_state(state.clone(), writes::redirect_writes);
            handler = handler.route_layer(redirect);
        }
        router = router.route(route.path, handler.route_layer(guard));
    }
    router
        .fallback(ops::not_found)
        .method_not_allowed_fallback(ops::method_not_allowed)
        .layer(from_fn_with_state(state.clone(), track))
        .with_state(state)
}

/// Middleware, the only one in front of the router: counts and times
/// every request by its route and status, and refuses headers over the
/// limit (one layer for both, because every layer costs each request a
/// boxed future and a clone of the service behind it).
async fn track(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = route_label(&request);
    let method = method_label(request.method());
    let over = state
        .limits
        .headers_over_limit(request.headers().size_bytes());
    let response = match over {
        Some(refused) => refused.into_response(),
        None => next.run(request).await,
    };
    state
        .http_metrics
        .answered(method, route, response.status().as_u16(), started);
    response
}

/// The route table's own copy of a matched path: the label, unallocated.
fn route_label(request: &Request) -> &'static str {
    let Some(matched) = request.extensions().get::<MatchedPath>() else {
        return UNMATCHED_ROUTE;
    };
    let path = matched.as_str();
    ROUTES
        .iter()
        .find(|r| r.path == path)
        .map_or(UNMATCHED_ROUTE, |r| r.path)
}
