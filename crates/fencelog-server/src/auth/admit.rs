//! Whether a request may do what its route does: [`check`], the
//! middleware every route of the table is wrapped in, and [`admit`], its
//! decision as a plain call (the append route in front of the router
//! calls it directly), with [`authorize`] for a principal and scope.

use crate::auth::scope::{Access, Scope};
use crate::auth::tokens::{Auth, Principal};
use crate::decode::header_view::HeaderView;
use crate::error::ApiError;
use axum::extract::rejection::RawPathParamsRejection;
use axum::extract::{RawPathParams, Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use fencelog_api::{ErrorCode, Field};

/// The 403 for `principal` lacking `scope` (on `stream`, when the route
/// names one).
fn forbidden(principal: &Principal, scope: Scope, stream: Option<&str>) -> ApiError {
    let base = ApiError::new(
        ErrorCode::Forbidden,
        match stream {
            Some(s) if principal.scopes.contains(scope) => format!(
                "token {:?} covers only streams starting with {:?}, not {s:?}",
                principal.name, principal.stream_prefix
            ),
            Some(s) => format!(
                "token {:?} lacks scope {scope} for stream {s:?}",
                principal.name
            ),
            None => format!("token {:?} lacks scope {scope}", principal.name),
        },
    )
    .with(Field::Scope, scope.as_str())
    .with(Field::Principal, &*principal.name);
    match stream {
        Some(s) => base.with(Field::Stream, s),
        None => base,
    }
}

/// Whether `principal` (`None`: an open server) may do what `scope`
/// allows, on `stream` when the route names one.
pub fn authorize(
    principal: Option<&Principal>,
    scope: Scope,
    stream: Option<&str>,
) -> Result<(), ApiError> {
    let Some(p) = principal else { return Ok(()) };
    let prefix_ok = stream.is_none_or(|s| p.covers(s));
    if p.scopes.contains(scope) && prefix_ok {
        Ok(())
    } else {
        Err(forbidden(p, scope, stream))
    }
}

/// Who made a request, as handlers see it (an extension the middleware
/// sets): the token's principal, or `None` on an open server.
#[derive(Debug, Clone, Default)]
pub struct Caller(pub Option<Principal>);

impl Caller {
    /// The name logs carry: the token's, or `-` on an open server.
    pub fn name(&self) -> &str {
        self.0.as_ref().map_or("-", |p| &p.name)
    }

    /// The stream prefix the caller is confined to ("" for all).
    pub fn stream_prefix(&self) -> &str {
        self.0.as_ref().map_or("", |p| &p.stream_prefix)
    }
}

/// The middleware every route is wrapped in, with the route's access.
pub async fn check(
    State((auth, access)): State<(Auth, Access)>,
    params: Result<RawPathParams, RawPathParamsRejection>,
    mut request: Request,
    next: Next,
) -> Response {
    let scope = match access {
        Access::Open => return next.run(request).await,
        Access::Scope(scope) => scope,
    };
    // A path the router matched but cannot decode names no stream anyone
    // may be authorized for.
    let params = params.map_err(|e| format!("bad path: {e}"));
    let stream = params
        .as_ref()
        .map(|p| p.iter().find(|(k, _)| *k == "stream").map(|(_, v)| v))
        .map_err(String::as_str);
    match admit(&auth, scope, request.headers(), stream) {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(refused) => refused,
    }
}

/// [`check`]'s decision without the middleware around it, for a route
/// that needs `scope`: who the request is from, or the answer that
/// refuses it — 401 before anything else, then the path's own 400
/// (`stream` is `Err` when the path could not be decoded), then 403. The
/// append route's fast path (`crate::routes::append_route`) calls it directly, so
/// both ways in decide alike.
#[allow(
    clippy::result_large_err,
    reason = "the refusal is the response sent as it is, once; boxing it would give every refused request an allocation to save a move"
)]
pub fn admit<H: HeaderView + ?Sized>(
    auth: &Auth,
    scope: Scope,
    headers: &H,
    stream: Result<Option<&str>, &str>,
) -> Result<Caller, Response> {
    let principal = auth.authenticate(headers).map_err(with_challenge)?;
    let stream = stream.map_err(|e| ApiError::bad_request(e).into_response())?;
    authorize(principal, scope, stream).map_err(IntoResponse::into_response)?;
    Ok(Caller(principal.cloned()))
}

/// A 401 tells the client how to authenticate (RFC 6750).
pub fn with_challenge(e: ApiError) -> Response {
    let mut r = e.into_response();
    r.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    r
}
