//! Scopes, what a token may be allowed to do, and [`Access`], what a
//! route needs.

use std::fmt;

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
