//! The Raft transport over HTTP. Every RPC but a snapshot goes over the
//! peer's stream ([`super::stream`]: one upgraded connection per
//! peer carrying every shard's RPCs); a snapshot, and every RPC to a peer
//! without the stream route or with [`PeerRpc::Http`], is its own
//! `POST http(s)://{addr}/_cluster/raft/{shard}/{kind}` on the peer's
//! client port, the body the bytes of [`crate::rpc`].
//! Nodes that serve TLS (`--tls-cert`) are reached over https, trusting
//! the system's roots and the cluster's CA ([`PeerTls`]).
//! One pooled client (keep-alive) serves every shard. A connection that
//! could not be made is `Unreachable` (nothing was sent); anything after
//! that is `Lost` (the peer may have acted on it).

use super::stream::PeerStreams;
use crate::ids::{NodeId, ShardId};
use crate::rpc::{RpcFuture, RpcKind, Transport, TransportError};
use std::sync::Arc;
use std::time::Duration;

/// The content type of Raft RPC bodies.
pub const RAFT_CONTENT_TYPE: &str = "application/vnd.fencelog.raft";

/// How a node sends its Raft RPCs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PeerRpc {
    /// One stream per peer for every shard (snapshots over HTTP).
    #[default]
    Stream,
    /// One HTTP request per RPC.
    Http,
}

impl std::str::FromStr for PeerRpc {
    type Err = String;

    fn from_str(s: &str) -> Result<PeerRpc, String> {
        match s {
            "stream" => Ok(PeerRpc::Stream),
            "http" => Ok(PeerRpc::Http),
            other => Err(format!("peer_rpc: {other:?} is not stream or http")),
        }
    }
}

/// The HTTP transport of one node.
pub struct HttpTransport {
    posts: Arc<Posts>,
    /// `None` with [`PeerRpc::Http`].
    streams: Option<Arc<PeerStreams>>,
}

/// One HTTP request per RPC.
struct Posts {
    client: reqwest::Client,
    /// Sent with every RPC ([`crate::http_auth::PEER_SECRET_HEADER`]).
    peer_secret: Option<String>,
    /// `http`, or `https` when the nodes serve TLS.
    scheme: &'static str,
}

/// The nodes serve TLS: reach them over https, trusting the system's
/// roots and `ca_pem` (the CA that signed the nodes' certificates).
#[derive(Debug, Clone, Default)]
pub struct PeerTls {
    /// PEM certificates, one or more.
    pub ca_pem: Option<Vec<u8>>,
}

impl HttpTransport {
    /// A transport whose RPCs carry the cluster's peer secret.
    pub fn with_secret(peer_secret: Option<String>) -> HttpTransport {
        HttpTransport::configured(peer_secret, None).expect("an HTTP client without TLS builds")
    }

    /// A transport with its own connection pool, the peer secret, and
    /// https when the nodes serve TLS. Fails on a CA that is not PEM.
    pub fn configured(
        peer_secret: Option<String>,
        tls: Option<&PeerTls>,
    ) -> Result<HttpTransport, String> {
        let mut builder = reqwest::Client::builder()
            .pool_max_idle_per_host(8)
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(1));
        if let Some(t) = tls {
            builder = builder.use_rustls_tls();
            if let Some(pem) = &t.ca_pem {
                let certs = reqwest::Certificate::from_pem_bundle(pem)
                    .map_err(|e| format!("the cluster's CA certificate: {e}"))?;
                if certs.is_empty() {
                    return Err("no PEM certificate in it".into());
                }
                for cert in certs {
                    builder = builder.add_root_certificate(cert);
                }
            }
        }
        let client = builder.build().map_err(|e| e.to_string())?;
        let peer_secret = peer_secret.map(|s| s.trim().to_string());
        let scheme = if tls.is_some() { "https" } else { "http" };
        let streams = PeerStreams::new(client.clone(), peer_secret.clone(), scheme);
        Ok(HttpTransport {
            posts: Arc::new(Posts {
                client,
                peer_secret,
                scheme,
            }),
            streams: Some(Arc::new(streams)),
        })
    }

    /// The same transport sending its RPCs as `how` says.
    pub fn peer_rpc(mut self, how: PeerRpc) -> HttpTransport {
        if how == PeerRpc::Http {
            self.streams = None;
        }
        self
    }

    /// A transport with its own connection pool (plain HTTP, no secret).
    pub fn new() -> HttpTransport {
        HttpTransport::with_secret(None)
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
        let streams = match &self.streams {
            Some(s) if !kind.is_snapshot() => s.clone(),
            _ => return self.posts.call(target, addr, shard, kind, body, timeout),
        };
        let posts = self.posts.clone();
        let addr = addr.to_string();
        Box::pin(async move {
            match streams
                .call(target, &addr, shard, kind, &body, timeout)
                .await
            {
                Some(answer) => answer,
                None => posts.call(target, &addr, shard, kind, body, timeout).await,
            }
        })
    }

    fn scheme(&self) -> &'static str {
        self.posts.scheme
    }
}

impl Transport for Posts {
    fn call(
        &self,
        target: NodeId,
        addr: &str,
        shard: ShardId,
        kind: RpcKind,
        body: Vec<u8>,
        timeout: Duration,
    ) -> RpcFuture {
        let scheme = self.scheme;
        let url = format!("{scheme}://{addr}/_cluster/raft/{shard}/{}", kind.name());
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

    fn scheme(&self) -> &'static str {
        self.scheme
    }
}

fn classify(target: NodeId, e: reqwest::Error) -> TransportError {
    if e.is_connect() {
        TransportError::Unreachable(format!("node {target}: {e}"))
    } else {
        TransportError::Lost(format!("node {target}: {e}"))
    }
}
