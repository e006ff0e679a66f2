//! Running the router on a socket: HTTP/1.1 connections with a header read
//! timeout (which also bounds how long an idle keep-alive connection may
//! sit), and graceful shutdown: stop accepting, end live tails and
//! long-polls, let in-flight requests finish, then shut the engine down so
//! everything queued is committed and synced.

use crate::app;
use crate::state::{AppState, Shutdown};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::io;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tower::ServiceExt;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// A client must send a request's complete headers within this time of
    /// the connection becoming ready for one, which includes idle time
    /// between keep-alive requests.
    pub header_read_timeout: Duration,
    /// Longest the server waits for in-flight requests after a shutdown
    /// signal before closing their connections anyway.
    pub drain_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            header_read_timeout: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(30),
        }
    }
}

/// Serves `state` on `listener` until `signal` resolves, then drains and
/// shuts the engine down. Returns once everything acknowledged is durable.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    config: ServerConfig,
    signal: impl Future<Output = ()>,
) -> io::Result<()> {
    let engine = state.engine.clone();
    let build = move |shutdown: Shutdown| {
        let mut state = state;
        state.shutdown = shutdown;
        app(state)
    };
    serve_router(listener, build, config, signal).await?;
    engine.shutdown().await;
    tracing::info!("engine shut down; everything acknowledged is durable");
    Ok(())
}

/// Serves the router `build` makes (given the shutdown signal its long
/// polls and tails end on) with the same connection-level protections,
/// until `signal` resolves; then drains. What is behind the router is the
/// caller's to shut down (a cluster node's groups and engines, issue 14).
pub async fn serve_router(
    listener: TcpListener,
    build: impl FnOnce(Shutdown) -> axum::Router,
    config: ServerConfig,
    signal: impl Future<Output = ()>,
) -> io::Result<()> {
    let (trigger, shutdown) = Shutdown::new();
    let router = build(shutdown.clone());
    // Each connection task holds a sender; when all are gone, recv() ends.
    let (conn_alive, mut conns_done) = mpsc::channel::<()>(1);
    tokio::pin!(signal);
    loop {
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
        let _ = tcp.set_nodelay(true);
        let router = router.clone();
        let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            router.clone().oneshot(req)
        });
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(config.header_read_timeout);
        let mut shutdown = shutdown.clone();
        let alive = conn_alive.clone();
        tokio::spawn(async move {
            let conn = builder.serve_connection(TokioIo::new(tcp), service);
            tokio::pin!(conn);
            let result = tokio::select! {
                r = conn.as_mut() => r,
                _ = shutdown.wait() => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
            drop(alive);
        });
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
            "connections still open after the drain timeout; closing anyway"
        );
    }
    Ok(())
}
