//! The configured tokens: the `[auth]` settings, checked into
//! [`Auth`], and the principal a request's `Authorization` header names.

use crate::auth::scope::{Scope, Scopes};
use crate::auth::secret::{constant_time_eq, hash_secret, parse_hex32};
use crate::decode::header_view::{visible_ascii, HeaderView};
use crate::error::ApiError;
use axum::http::header;
use fencelog_api::ErrorCode;
use std::sync::Arc;

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
