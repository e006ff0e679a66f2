//! Who may do what: access tokens with scopes and a stream prefix, stored
//! as SHA-256 hashes, presented as `Authorization: Bearer <secret>`.
//!
//! Every route of [`crate::openapi::ROUTES`] declares its [`Access`]; the
//! router wraps each one in [`check`], so a route cannot exist without
//! saying which scope it needs. With no tokens configured the server runs
//! open ([`Auth::Open`]) — the CLI allows that only on a loopback address
//! or with `--insecure-no-auth`.

use crate::error::ApiError;
use crate::header_view::{visible_ascii, HeaderView};
use axum::extract::rejection::RawPathParamsRejection;
use axum::extract::{RawPathParams, Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use fencelog_api::{ErrorCode, Field};
use sha2::{Digest, Sha256};
use std::fmt;
use std::sync::Arc;

/// What a token may be allowed to do. `admin` is the operator scope
/// (`/metrics`); it grants no access to streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    Read,
    Append,
    Fence,
    Trim,
    Seal,
    Delete,
    Config,
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 8] = [
        Scope::Read,
        Scope::Append,
        Scope::Fence,
        Scope::Trim,
        Scope::Seal,
        Scope::Delete,
        Scope::Config,
        Scope::Admin,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Append => "append",
            Scope::Fence => "fence",
            Scope::Trim => "trim",
            Scope::Seal => "seal",
            Scope::Delete => "delete",
            Scope::Config => "config",
            Scope::Admin => "admin",
        }
    }

    pub fn parse(name: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.as_str() == name)
    }

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a route needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone who can reach the port (`/healthz`, the OpenAPI document).
    Open,
    /// A token with this scope; for a route with `{stream}`, also a
    /// stream prefix that covers the stream.
    Scope(Scope),
}

/// A set of scopes, one bit each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scopes(u8);

impl Scopes {
    pub fn of(scopes: &[Scope]) -> Scopes {
        Scopes(scopes.iter().fold(0, |bits, s| bits | s.bit()))
    }

    pub fn contains(self, scope: Scope) -> bool {
        self.0 & scope.bit() != 0
    }
}

/// A configured token, as the server keeps it: never the secret.
#[derive(Debug, Clone)]
pub struct Principal {
    /// Shows up in logs, metrics and 403 bodies.
    pub name: Arc<str>,
    sha256: [u8; 32],
    pub scopes: Scopes,
    /// "" covers every stream.
    pub stream_prefix: String,
}

impl Principal {
    pub fn covers(&self, stream: &str) -> bool {
        stream.starts_with(&self.stream_prefix)
    }
}

/// One `[[auth.tokens]]` stanza of the config file.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct TokenSettings {
    pub name: String,
    /// Hex SHA-256 of the secret.
    pub sha256: String,
    pub scopes: Vec<String>,
    #[serde(default)]
    pub stream_prefix: String,
}

/// The `[auth]` table of the config file.
#[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSettings {
    #[serde(default)]
    pub tokens: Vec<TokenSettings>,
}

/// Most tokens one server knows: each request compares against all of
/// them (in constant time, so without an early exit).
pub const TOKENS_MAX: usize = 1024;

/// How requests are authenticated.
#[derive(Debug, Clone)]
pub enum Auth {
    /// No tokens: every request may do everything.
    Open,
    Tokens(Arc<[Principal]>),
}

impl Auth {
    /// The tokens of the config file, checked: names unique and non-empty,
    /// hashes 64 hex digits and unique, scopes known and non-empty.
    pub fn from_settings(settings: &AuthSettings) -> Result<Auth, String> {
        if settings.tokens.is_empty() {
            return Ok(Auth::Open);
        }
        if settings.tokens.len() > TOKENS_MAX {
            return Err(format!("at most {TOKENS_MAX} auth.tokens"));
        }
        let mut out: Vec<Principal> = Vec::with_capacity(settings.tokens.len());
        for t in &settings.tokens {
            let p = principal(t)?;
            if out.iter().any(|o| o.name == p.name) {
                return Err(format!("auth.tokens: name {:?} appears twice", t.name));
            }
            if out.iter().any(|o| o.sha256 == p.sha256) {
                return Err(format!(
                    "auth.tokens {:?}: the same sha256 as another token",
                    t.name
                ));
            }
            out.push(p);
        }
        Ok(Auth::Tokens(out.into()))
    }

    pub fn is_open(&self) -> bool {
        matches!(self, Auth::Open)
    }

    /// The principal a request's `Authorization` header names; `None` on an
    /// open server. Two such headers are refused: which of them a request
    /// is from would depend on which one a reader takes.
    pub fn authenticate<H: HeaderView + ?Sized>(
        &self,
        headers: &H,
    ) -> Result<Option<&Principal>, ApiError> {
        let Auth::Tokens(tokens) = self else {
            return Ok(None);
        };
        let mut values = headers.values_of(&header::AUTHORIZATION);
        let value = values.next();
        if values.next().is_some() {
            return Err(unauthenticated(
                "the Authorization header appears more than once: send one, Bearer <secret>",
            ));
        }
        let Some(value) = value else {
            return Err(unauthenticated(
                "this server requires an access token: send Authorization: Bearer <secret>",
            ));
        };
        let secret = visible_ascii(value)
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| unauthenticated("the Authorization header must be Bearer <secret>"))?;
        let presented = hash_secret(secret);
        // Every token is compared, whatever matched, so the time taken says
        // nothing about which hash shares a prefix with the presented one.
        let mut found = None;
        for p in tokens.iter() {
            if constant_time_eq(&p.sha256, &presented) {
                found = Some(p);
            }
        }
        found
            .map(Some)
            .ok_or_else(|| unauthenticated("unknown access token"))
    }
}

fn principal(t: &TokenSettings) -> Result<Principal, String> {
    if t.name.is_empty() || t.name.len() > 255 {
        return Err("auth.tokens: a name must be 1-255 bytes".into());
    }
    let sha256 = parse_hex32(&t.sha256).ok_or_else(|| {
        format!(
            "auth.tokens {:?}: sha256 must be 64 hex digits (the SHA-256 of the secret)",
            t.name
        )
    })?;
    if t.scopes.is_empty() {
        return Err(format!(
            "auth.tokens {:?}: scopes must not be empty",
            t.name
        ));
    }
    let mut scopes = Vec::new();
    for s in &t.scopes {
        scopes.push(Scope::parse(s).ok_or_else(|| {
            format!(
                "auth.tokens {:?}: unknown scope {s:?} (read, append, fence, trim, seal, delete, config, admin)",
                t.name
            )
        })?);
    }
    Ok(Principal {
        name: t.name.as_str().into(),
        sha256,
        scopes: Scopes::of(&scopes),
        stream_prefix: t.stream_prefix.clone(),
    })
}

fn unauthenticated(message: &str) -> ApiError {
    ApiError::new(ErrorCode::Unauthenticated, message)
}

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
/// append route's fast path (`crate::append_route`) calls it directly, so
/// both ways in decide alike.
// The refusal is the response sent as it is, once; boxing it would give
// every refused request an allocation to save a move.
#[allow(clippy::result_large_err)]
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

/// The SHA-256 of a secret, as the config file stores it.
pub fn hash_secret(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 15) as usize] as char);
    }
    out
}

fn parse_hex32(text: &str) -> Option<[u8; 32]> {
    let text = text.as_bytes();
    if text.len() != 64 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; 32];
    for (i, pair) in text.chunks(2).enumerate() {
        out[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

/// Equal without an early exit: the loop always runs over every byte and
/// only ORs differences together, so how long it takes does not depend on
/// where the first difference is. (`black_box` keeps the optimiser from
/// turning the fold back into a short-circuiting compare.)
pub fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let mut diff = 0u8;
    for i in 0..32 {
        diff |= std::hint::black_box(a[i] ^ b[i]);
    }
    diff == 0
}

/// Bytes of randomness in a new secret: 256 bits, well over the 128 the
/// issue asks for.
pub const SECRET_BYTES: usize = 32;

/// A new secret from the operating system's random source, as 64 hex
/// digits prefixed `fl_` so it is recognisable in a leaked file.
pub fn generate_secret() -> Result<String, String> {
    let mut raw = [0u8; SECRET_BYTES];
    getrandom::fill(&mut raw).map_err(|e| format!("no randomness from the OS: {e}"))?;
    Ok(format!("fl_{}", to_hex(&raw)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderMap;

    fn settings(name: &str, secret: &str, scopes: &[&str], prefix: &str) -> TokenSettings {
        TokenSettings {
            name: name.into(),
            sha256: to_hex(&hash_secret(secret)),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            stream_prefix: prefix.into(),
        }
    }

    #[test]
    fn hex_round_trips_and_the_hash_is_sha256() {
        // SHA-256("abc"), FIPS 180-2 appendix B.1.
        assert_eq!(
            to_hex(&hash_secret("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let h = hash_secret("x");
        assert_eq!(parse_hex32(&to_hex(&h)), Some(h));
        assert_eq!(parse_hex32(&to_hex(&h).to_uppercase()), Some(h));
        assert_eq!(parse_hex32("zz"), None);
        assert!(constant_time_eq(&h, &h));
        let mut other = h;
        other[31] ^= 1;
        assert!(!constant_time_eq(&h, &other));
    }

    #[test]
    fn tokens_authenticate_and_scopes_and_prefixes_authorize() {
        let auth = Auth::from_settings(&AuthSettings {
            tokens: vec![settings("w", "s3cret", &["append", "read"], "orders-")],
        })
        .unwrap();
        let bearer = |s: &str| HeaderValue::from_str(&format!("Bearer {s}")).unwrap();
        let with = |values: &[HeaderValue]| {
            let mut headers = HeaderMap::new();
            for v in values {
                headers.append(header::AUTHORIZATION, v.clone());
            }
            headers
        };
        let good = with(&[bearer("s3cret")]);
        let p = auth.authenticate(&good).unwrap().unwrap();
        assert_eq!(&*p.name, "w");
        for bad in [
            with(&[]),
            with(&[bearer("nope")]),
            with(&[HeaderValue::from_static("Basic x")]),
            with(&[bearer("s3cret"), bearer("s3cret")]),
        ] {
            let e = auth.authenticate(&bad).unwrap_err();
            assert_eq!(e.code(), ErrorCode::Unauthenticated);
        }
        assert!(authorize(Some(p), Scope::Append, Some("orders-1")).is_ok());
        let e = authorize(Some(p), Scope::Fence, Some("orders-1")).unwrap_err();
        assert_eq!(e.body.get(Field::Scope), Some(&"fence".into()));
        let e = authorize(Some(p), Scope::Append, Some("billing")).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Forbidden);
        assert!(authorize(None, Scope::Admin, None).is_ok());
    }

    #[test]
    fn bad_stanzas_are_refused_with_the_reason() {
        let cases = [
            (settings("", "a", &["read"], ""), "name"),
            (settings("a", "a", &[], ""), "scopes must not be empty"),
            (
                settings("a", "a", &["write"], ""),
                "unknown scope \"write\"",
            ),
            (
                TokenSettings {
                    sha256: "abc".into(),
                    ..settings("a", "a", &["read"], "")
                },
                "64 hex digits",
            ),
        ];
        for (t, why) in cases {
            let e = Auth::from_settings(&AuthSettings { tokens: vec![t] }).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
        let twice = AuthSettings {
            tokens: vec![
                settings("a", "x", &["read"], ""),
                settings("a", "y", &["read"], ""),
            ],
        };
        assert!(Auth::from_settings(&twice).unwrap_err().contains("twice"));
    }

    #[test]
    fn secrets_are_random_and_long() {
        let a = generate_secret().unwrap();
        let b = generate_secret().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 3 + 2 * SECRET_BYTES);
    }
}
