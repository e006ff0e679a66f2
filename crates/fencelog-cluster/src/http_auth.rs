//! Who may call a cluster node.
//!
//! - Client routes (`/v1/...`) are the server's own, with its scoped
//!   tokens and checks: the scopes and the 401/403 bodies are the single
//!   node's, byte for byte. A follower checks the client's token before it
//!   forwards a write; the forward itself is a peer RPC.
//! - Everything under `/_cluster/` goes through one layer ([`guard`]),
//!   whatever route it reaches, so an endpoint added there later is
//!   covered without saying so: `/_cluster/admin/...` needs a client token
//!   with the `admin` scope; every other `/_cluster/` path (the Raft RPCs,
//!   forwarded writes, read-index requests) needs the cluster's peer
//!   secret, compared in constant time. A forged forward without the
//!   secret never reaches the leader's proposer.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use fencelog_api::ErrorCode;
use fencelog_server::auth::{
    authorize, constant_time_eq, hash_secret, with_challenge, Auth, Scope,
};
use fencelog_server::ApiError;

/// The header a peer RPC carries the cluster secret in.
pub const PEER_SECRET_HEADER: &str = "fencelog-peer-secret";
/// The prefix of the cluster's own routes.
pub const CLUSTER_PREFIX: &str = "/_cluster/";
/// The prefix of the operator's cluster routes (status, membership).
pub const ADMIN_PREFIX: &str = "/_cluster/admin/";
/// The shortest peer secret a node accepts (bytes, after trimming).
pub const PEER_SECRET_BYTES_MIN: usize = 16;

/// How a node authenticates its callers.
#[derive(Clone)]
pub struct ClusterAuth {
    /// Client tokens; [`Auth::Open`] without any.
    pub auth: Auth,
    /// SHA-256 of the peer secret; `None` runs the RPCs open (only allowed
    /// while the client API is open too, see [`ClusterAuth::new`]).
    peer_sha256: Option<[u8; 32]>,
}

impl ClusterAuth {
    /// The node's auth. Refused: tokens without a peer secret (the Raft
    /// RPCs and forwarded writes would be the way around every token), or
    /// a secret shorter than [`PEER_SECRET_BYTES_MIN`].
    pub fn new(auth: Auth, peer_secret: Option<&str>) -> Result<ClusterAuth, String> {
        let secret = peer_secret.map(str::trim);
        if let Some(s) = secret {
            if s.len() < PEER_SECRET_BYTES_MIN {
                return Err(format!(
                    "the cluster secret must be at least {PEER_SECRET_BYTES_MIN} bytes, got {}",
                    s.len()
                ));
            }
        }
        if !auth.is_open() && secret.is_none() {
            return Err("access tokens are configured but no cluster secret: give every node the same --cluster-secret-file (at least 16 bytes), or the Raft RPCs would let anyone around the tokens".into());
        }
        Ok(ClusterAuth {
            auth,
            peer_sha256: secret.map(hash_secret),
        })
    }

    /// Open client API and open RPCs (tests, a loopback dev cluster).
    pub fn open() -> ClusterAuth {
        ClusterAuth {
            auth: Auth::Open,
            peer_sha256: None,
        }
    }

    fn peer_ok(&self, request: &Request) -> Result<(), ApiError> {
        let Some(want) = &self.peer_sha256 else {
            return Ok(());
        };
        let presented = request
            .headers()
            .get(PEER_SECRET_HEADER)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| peer_refused("this path is for cluster peers: no peer secret"))?;
        if constant_time_eq(want, &hash_secret(presented.trim())) {
            Ok(())
        } else {
            Err(peer_refused("wrong peer secret"))
        }
    }
}

fn peer_refused(message: &str) -> ApiError {
    ApiError::new(ErrorCode::Unauthenticated, message)
}

/// The one layer over `/_cluster/`: admin paths need an `admin` token,
/// all others the peer secret. Other paths pass untouched.
pub async fn guard(State(a): State<ClusterAuth>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    if path.starts_with(ADMIN_PREFIX) {
        let principal = match a.auth.authenticate(request.headers()) {
            Ok(p) => p,
            Err(e) => return with_challenge(e),
        };
        if let Err(e) = authorize(principal, Scope::Admin, None) {
            return e.into_response();
        }
    } else if path.starts_with(CLUSTER_PREFIX) || path == CLUSTER_PREFIX.trim_end_matches('/') {
        if let Err(e) = a.peer_ok(&request) {
            return e.into_response();
        }
    }
    next.run(request).await
}
