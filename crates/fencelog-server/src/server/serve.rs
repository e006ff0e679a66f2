//! Running the router on a socket: HTTP/1.1 (over TLS when configured)
//! with a cap on connections, a header read timeout (which also bounds how
//! long an idle keep-alive connection may sit, advertised as
//! `Keep-Alive: timeout=N`), a write timeout ([`crate::server::conn_io`]), and
//! graceful shutdown: stop accepting, end live tails and long-polls, let
//! in-flight requests finish for at most the drain timeout, then shut the
//! engine down so everything queued is committed and synced. Each
//! accepted connection is served by [`crate::server::conn`].

use crate::routes::append_route::AppendRoute;
use crate::routes::{ops, router};
use crate::server::config::ServerConfig;
use crate::server::conn::{Conn, Routes};
use crate::state::shutdown::{ConnHold, Shutdown};
use crate::state::AppState;
use axum::Router;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Semaphore};

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
        let mut tick = tokio::time::interval(crate::state::audit::STALE_WINDOW);
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
            router: router::app(state.clone()).merge(extra(shutdown)),
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

/// Serves the routes `build` makes (given the shutdown signal its long
/// polls and tails end on) with the same connection-level protections,
/// until `signal` resolves; then drains. What is behind the router is the
/// caller's to shut down ([`serve_with`] shuts the backend down).
pub(crate) async fn serve_router<R: Into<Routes>>(
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
            drain_timeout_ms = u64::try_from(config.drain_timeout.as_millis()).unwrap_or(u64::MAX),
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
        .route("/metrics", get(ops::metrics))
        .route("/healthz", get(ops::healthz))
        .fallback(ops::not_found)
        .with_state(state);
    axum::serve(listener, router).await
}
