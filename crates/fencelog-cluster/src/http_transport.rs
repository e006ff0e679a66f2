//! The Raft transport over HTTP: `POST http://{addr}/_cluster/raft/{shard}/{kind}`
//! on the peer's client port, the body the bytes of [`crate::network`].
//! One pooled client (keep-alive) serves every shard. A connection that
//! could not be made is `Unreachable` (nothing was sent); anything after
//! that is `Lost` (the peer may have acted on it).

use crate::network::{RpcFuture, RpcKind, Transport, TransportError};
use crate::types::{NodeId, ShardId};
use std::time::Duration;

/// The content type of Raft RPC bodies.
pub const RAFT_CONTENT_TYPE: &str = "application/vnd.fencelog.raft";

/// The HTTP transport of one node.
pub struct HttpTransport {
    client: reqwest::Client,
    /// Sent with every RPC ([`crate::http_auth::PEER_SECRET_HEADER`]).
    peer_secret: Option<String>,
}

impl HttpTransport {
    /// A transport whose RPCs carry the cluster's peer secret.
    pub fn with_secret(peer_secret: Option<String>) -> HttpTransport {
        HttpTransport {
            peer_secret: peer_secret.map(|s| s.trim().to_string()),
            ..HttpTransport::new()
        }
    }

    /// A transport with its own connection pool.
    pub fn new() -> HttpTransport {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(8)
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(1))
            .build()
            .expect("an HTTP client without TLS always builds");
        HttpTransport {
            client,
            peer_secret: None,
        }
    }
}

impl Default for HttpTransport {
    fn default() -> Self {
        Self::new()
    }
}

impl Transport for HttpTransport {
    fn call(
        &self,
        target: NodeId,
        addr: &str,
        shard: ShardId,
        kind: RpcKind,
        body: Vec<u8>,
        timeout: Duration,
    ) -> RpcFuture {
        let url = format!("http://{addr}/_cluster/raft/{shard}/{}", kind.name());
        let mut request = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, RAFT_CONTENT_TYPE)
            .timeout(timeout)
            .body(body);
        if let Some(secret) = &self.peer_secret {
            request = request.header(crate::http_auth::PEER_SECRET_HEADER, secret);
        }
        Box::pin(async move {
            let resp = request.send().await.map_err(|e| classify(target, e))?;
            let status = resp.status();
            let bytes = resp.bytes().await.map_err(|e| classify(target, e))?;
            if !status.is_success() {
                let text = String::from_utf8_lossy(&bytes);
                return Err(TransportError::Lost(format!(
                    "node {target} answered {status}: {text}"
                )));
            }
            Ok(bytes.to_vec())
        })
    }
}

fn classify(target: NodeId, e: reqwest::Error) -> TransportError {
    if e.is_connect() {
        TransportError::Unreachable(format!("node {target}: {e}"))
    } else {
        TransportError::Lost(format!("node {target}: {e}"))
    }
}
