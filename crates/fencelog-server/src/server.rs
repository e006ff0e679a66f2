//! Running the router on a socket: HTTP/1.1 (over TLS when configured)
//! with a cap on connections, a header read timeout (which also bounds how
//! long an idle keep-alive connection may sit, advertised as
//! `Keep-Alive: timeout=N`), a write timeout ([`crate::conn_io`]), and
//! graceful shutdown: stop accepting, end live tails and long-polls, let
//! in-flight requests finish for at most the drain timeout, then shut the
//! engine down so everything queued is committed and synced.

use crate::append_route::AppendRoute;
use crate::conn_io::ConnIo;
use crate::front::{Front, Left, KEEP_ALIVE};
use crate::rewind::Rewind;
use crate::router::app;
pub use crate::shutdown::{ConnHold, Shutdown};
use crate::state::AppState;
use crate::tls::Tls;
use axum::http::HeaderValue;
use axum::Router;
use bytes::Bytes;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tower::ServiceExt;

/// Connections served at once by default; the CLI derives its default
/// from the file-descriptor limit instead.
pub const CONNECTIONS_MAX_DEFAULT: usize = 10_000;
/// The most bytes hyper buffers per connection, in either direction; also
/// the largest request head (431 past it).
pub const HEADER_BYTES_MAX_DEFAULT: usize = 64 << 10;
/// The kernel send buffer of each connection (Linux doubles it for its
/// own bookkeeping). Fixed instead of autotuned: autotuning grows it to
/// megabytes for a client that does not read, and the server would encode
/// that much for every such client (1,000 idle tails: gigabytes of kernel
/// memory and the CPU to fill it). 128 KiB (256 KiB in the kernel) keeps a
/// 1 ms path at well over 200 MB/s.
pub const SEND_BUFFER_BYTES_DEFAULT: usize = 128 << 10;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// A client must send a request's complete headers within this time of
    /// the connection becoming ready for one, which includes idle time
    /// between keep-alive requests.
    pub header_read_timeout: Duration,
    /// Longest the server waits for in-flight requests after a shutdown
    /// signal; unfinished ones are then dropped (never acknowledged).
    pub drain_timeout: Duration,
    /// A connection whose socket takes no bytes for this long is closed:
    /// a client that stopped reading a response, or a live tail whose
    /// socket stays full.
    pub write_timeout: Duration,
    /// Connections served at once; more wait in the kernel's backlog, so
    /// accepting never competes with the writer for file descriptors.
    pub connections_max: usize,
    /// Request head limit and hyper's buffer per connection (at least 8192).
    pub header_bytes_max: usize,
    /// Serve HTTPS only (plain HTTP requests get a JSON 400 and a close).
    pub tls: Option<Arc<Tls>>,
    /// `SO_SNDBUF` of each connection.
    pub send_buffer_bytes: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            header_read_timeout: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(30),
            connections_max: CONNECTIONS_MAX_DEFAULT,
            header_bytes_max: HEADER_BYTES_MAX_DEFAULT,
            tls: None,
            send_buffer_bytes: SEND_BUFFER_BYTES_DEFAULT,
        }
    }
}

impl ServerConfig {
    /// What `Keep-Alive: timeout=N` advertises: a second under the real
    /// idle limit, so a client that honours it closes first and never sends
    /// a request into a connection the server is closing.
    fn keep_alive_header(&self) -> HeaderValue {
        let secs = self.header_read_timeout.as_secs().saturating_sub(1).max(1);
        HeaderValue::from_str(&format!("timeout={secs}")).expect("ASCII")
    }
}

/// Serves `state` on `listener` until `signal` resolves, then drains and
/// shuts the backend down. Returns once everything acknowledged is durable.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    config: ServerConfig,
    signal: impl Future<Output = ()>,
) -> io::Result<()> {
    serve_with(listener, state, |_| Router::new(), config, signal).await
}

/// [`serve`] with the routes `extra` makes (given the shutdown signal)
/// beside the API's: a cluster node's peer and admin routes, which carry
/// their own checks.
pub async fn serve_with(
    listener: TcpListener,
    state: AppState,
    extra: impl FnOnce(Shutdown) -> Router,
    config: ServerConfig,
    signal: impl Future<Output = ()>,
) -> io::Result<()> {
    let audit = state.audit.clone();
    let flusher = tokio::spawn(async move {
        let mut tick = tokio::time::interval(crate::audit::STALE_WINDOW);
        loop {
            tick.tick().await;
            audit.flush();
        }
    });
    let for_router = state.clone();
    let build = move |shutdown: Shutdown| {
        let mut state = for_router;
        state.shutdown = shutdown.clone();
        Routes {
            router: app(state.clone()).merge(extra(shutdown)),
            append: Some(Arc::new(AppendRoute::new(state))),
        }
    };
    serve_router(listener, build, config, signal).await?;
    state.backend.shutdown().await;
    flusher.abort();
    state.audit.flush();
    tracing::info!("backend shut down; everything acknowledged is durable");
    Ok(())
}

/// What a connection answers with: the router, and optionally the append
/// route's fast path in front of it ([`crate::append_route`]). A bare
/// router (a cluster node's) converts into one without the fast path.
#[derive(Clone)]
pub struct Routes {
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

/// Serves the routes `build` makes (given the shutdown signal its long
/// polls and tails end on) with the same connection-level protections,
/// until `signal` resolves; then drains. What is behind the router is the
/// caller's to shut down (a cluster node's groups and engines, issue 14).
pub async fn serve_router<R: Into<Routes>>(
    listener: TcpListener,
    build: impl FnOnce(Shutdown) -> R,
    config: ServerConfig,
    signal: impl Future<Output = ()>,
) -> io::Result<()> {
    let (trigger, shutdown) = Shutdown::new();
    let routes: Routes = build(shutdown.clone()).into();
    let conns = Arc::new(Semaphore::new(config.connections_max.max(1)));
    // Each connection task holds a sender; when all are gone, recv() ends.
    let (conn_alive, mut conns_done) = mpsc::channel::<()>(1);
    tokio::pin!(signal);
    loop {
        let permit = tokio::select! {
            p = conns.clone().acquire_owned() => p.expect("never closed"),
            _ = &mut signal => break,
        };
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Usually out of file descriptors; back off instead of
                    // spinning, the condition clears as connections close.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut signal => break,
        };
        let conn = Conn {
            routes: routes.clone(),
            config: config.clone(),
            shutdown: shutdown.clone(),
            peer,
            hold: ConnHold::new(permit, conn_alive.clone()),
        };
        tokio::spawn(conn.run(tcp));
    }
    drop(listener);
    tracing::info!("shutting down: no longer accepting connections, draining requests");
    let _ = trigger.send(true);
    drop(conn_alive);
    if tokio::time::timeout(config.drain_timeout, conns_done.recv())
        .await
        .is_err()
    {
        tracing::warn!(
            drain_timeout_ms = config.drain_timeout.as_millis() as u64,
            "requests still unfinished after the drain timeout; dropping them (none was acknowledged)"
        );
    }
    Ok(())
}

/// `GET /metrics` (and `/healthz`) without a token, for a separate
/// `--metrics-listen` address an operator keeps private; plain HTTP.
pub async fn serve_metrics(listener: TcpListener, state: AppState) -> io::Result<()> {
    use axum::routing::get;
    let router = Router::new()
        .route("/metrics", get(crate::ops::metrics))
        .route("/healthz", get(crate::ops::healthz))
        .fallback(crate::ops::not_found)
        .with_state(state);
    axum::serve(listener, router).await
}

/// One accepted connection and what it holds while it lives.
struct Conn {
    routes: Routes,
    config: ServerConfig,
    shutdown: Shutdown,
    peer: SocketAddr,
    hold: ConnHold,
}

/// Which way a request is answered: the append route's fast path, or the
/// router's service call.
// Made and consumed once per request inside its future; a box would be
// an allocation per request, which is what the fast path exists to save.
#[allow(clippy::large_enum_variant)]
enum Answer<F> {
    Append(Arc<AppendRoute>, axum::extract::Request),
    Router(F),
}

/// The first byte of every TLS handshake record.
const TLS_HANDSHAKE: u8 = 0x16;

impl Conn {
    async fn run(self, tcp: TcpStream) {
        let _ = tcp.set_nodelay(true);
        let _ = socket2::SockRef::from(&tcp).set_send_buffer_size(self.config.send_buffer_bytes);
        let Some(tls) = self.config.tls.clone() else {
            return self.http(tcp).await;
        };
        // Boxed: a TLS session (rustls' state, inline in the handshake and
        // connection futures) would otherwise size every connection's
        // task, plaintext ones too — and an idle SSE tail's task is a
        // large part of what the tail costs (issue 13).
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
