//! One accepted connection: TLS when configured (a plain-HTTP request on
//! the TLS port is answered in plain text), then the HTTP/1.1 front
//! ([`crate::server::front`]) while requests are its own, then hyper with
//! whatever the front read and did not answer.

use crate::routes::append_route::AppendRoute;
use crate::server::config::ServerConfig;
use crate::server::conn_io::ConnIo;
use crate::server::front::{Front, Left, KEEP_ALIVE};
use crate::server::rewind::Rewind;
use crate::server::tls::Tls;
use crate::state::shutdown::{ConnHold, Shutdown};
use axum::Router;
use bytes::Bytes;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tower::ServiceExt;

/// What a connection answers with: the router, and optionally the append
/// route's fast path in front of it ([`crate::routes::append_route`]). A
/// bare router converts into one without the fast path (which the tests
/// hold to the same answers as the router's).
#[derive(Clone)]
pub(crate) struct Routes {
    pub router: Router,
    pub append: Option<Arc<AppendRoute>>,
}

impl From<Router> for Routes {
    fn from(router: Router) -> Self {
        Routes {
            router,
            append: None,
        }
    }
}

/// One accepted connection and what it holds while it lives.
pub(super) struct Conn {
    pub(super) routes: Routes,
    pub(super) config: ServerConfig,
    pub(super) shutdown: Shutdown,
    pub(super) peer: SocketAddr,
    pub(super) hold: ConnHold,
}

/// Which way a request is answered: the append route's fast path, or the
/// router's service call.
#[allow(
    clippy::large_enum_variant,
    reason = "made and consumed once per request inside its future; a box would be an allocation per request, which is what the fast path exists to save"
)]
enum Answer<F> {
    Append(Arc<AppendRoute>, axum::extract::Request),
    Router(F),
}

/// The first byte of every TLS handshake record.
const TLS_HANDSHAKE: u8 = 0x16;

impl Conn {
    pub(super) async fn run(self, tcp: TcpStream) {
        let _ = tcp.set_nodelay(true);
        let _ = socket2::SockRef::from(&tcp).set_send_buffer_size(self.config.send_buffer_bytes);
        let Some(tls) = self.config.tls.clone() else {
            return self.http(tcp).await;
        };
        // Boxed: a TLS session (rustls' state, inline in the handshake and
        // connection futures) would otherwise size every connection's
        // task, plaintext ones too — and an idle SSE tail's task is a
        // large part of what the tail costs (BENCHMARKS.md, memory per idle
        // live tail).
        Box::pin(self.tls(tcp, tls)).await
    }

    async fn tls(self, tcp: TcpStream, tls: Arc<Tls>) {
        let mut first = [0u8; 1];
        let limit = self.config.header_read_timeout;
        match tokio::time::timeout(limit, tcp.peek(&mut first)).await {
            Ok(Ok(1)) if first[0] == TLS_HANDSHAKE => {}
            Ok(Ok(1)) => return plaintext_on_tls(tcp).await,
            _ => return,
        }
        match tokio::time::timeout(limit, tls.acceptor().accept(tcp)).await {
            Ok(Ok(stream)) => self.http(stream).await,
            Ok(Err(e)) => tracing::debug!(peer = %self.peer, error = %e, "TLS handshake failed"),
            Err(_) => tracing::debug!(peer = %self.peer, "TLS handshake timed out"),
        }
    }

    async fn http<I>(self, io: I)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let io = ConnIo::new(io, self.config.write_timeout);
        // Appends are answered by the front until a request is anything
        // else; hyper then has the connection, unanswered bytes first.
        let (io, unanswered) = match self.routes.append.clone() {
            Some(route) => {
                let front = Front {
                    route,
                    router: self.routes.router.clone(),
                    head_timeout: self.config.header_read_timeout,
                    cap_bytes: self.read_buffer_bytes(),
                    keep_alive: self.config.keep_alive_header(),
                };
                // Small: the front boxes its answering state, made only
                // once a request is its own (`Front::serve`).
                match front.serve(io, &self.shutdown).await {
                    Left::ToHyper(io, unanswered) => (io, unanswered),
                    Left::Closed => return,
                }
            }
            None => (io, Bytes::new()),
        };
        self.hyper(Rewind::new(unanswered, io)).await
    }

    /// hyper's read buffer limit, which bounds the front's too.
    fn read_buffer_bytes(&self) -> usize {
        self.config.header_bytes_max.max(8192)
    }

    async fn hyper<I>(self, io: I)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let keep_alive = self.config.keep_alive_header();
        let Routes { router, append } = self.routes.clone();
        let hold = self.hold.clone();
        let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            // Only upgrades: an extension costs every other request an
            // allocation.
            let upgrade = req.headers().contains_key(hyper::header::UPGRADE);
            if upgrade {
                req.extensions_mut().insert(hold.clone());
            }
            let keep_alive = keep_alive.clone();
            let fast = append
                .as_ref()
                .filter(|_| !upgrade && AppendRoute::matches(&req).is_some())
                .cloned();
            let answer = match fast {
                Some(route) => Answer::Append(route, req.map(axum::body::Body::new)),
                None => Answer::Router(router.clone().oneshot(req)),
            };
            async move {
                let mut resp = match answer {
                    Answer::Append(route, req) => route.serve(req).await,
                    Answer::Router(answer) => answer.await?,
                };
                resp.headers_mut().insert(KEEP_ALIVE.clone(), keep_alive);
                Ok::<_, std::convert::Infallible>(resp)
            }
        });
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(self.config.header_read_timeout)
            .max_buf_size(self.read_buffer_bytes());
        // With upgrades: the append session is a WebSocket.
        let conn = builder
            .serve_connection(TokioIo::new(io), service)
            .with_upgrades();
        tokio::pin!(conn);
        let mut shutdown = self.shutdown.clone();
        let result = tokio::select! {
            r = conn.as_mut() => r,
            _ = shutdown.wait() => {
                conn.as_mut().graceful_shutdown();
                conn.await
            }
        };
        if let Err(e) = result {
            tracing::debug!(peer = %self.peer, error = %e, "connection ended with an error");
        }
    }
}

/// A plain-HTTP request on the TLS port: a JSON 400 in plain text, so the
/// client learns why instead of seeing a reset, then the connection closes.
async fn plaintext_on_tls(mut tcp: TcpStream) {
    let body = serde_json::to_vec(&fencelog_api::ErrorBody::new(
        fencelog_api::ErrorCode::BadRequest,
        "this port serves HTTPS only: use an https:// URL",
    ))
    .expect("error bodies serialize");
    let head = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = tcp.write_all(head.as_bytes()).await;
    let _ = tcp.write_all(&body).await;
    let _ = tcp.shutdown().await;
}
