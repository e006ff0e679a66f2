//! The serving side of a peer stream ([`super::stream`]):
//! `GET /_cluster/raft/stream` with `Upgrade: fencelog-raft-v1`, behind
//! the same peer-secret guard as every other `/_cluster/` path.
//!
//! Each request frame runs as its own task through
//! [`answer`], exactly as the HTTP route runs it,
//! so RPCs of different shards never wait for each other; their answers
//! go back in the order they finish. At most [`IN_FLIGHT_MAX`] run per
//! connection: past that the connection is not read until one finishes,
//! so a peer that sends faster than this node answers costs bounded
//! memory. On shutdown the stream stops reading, the RPCs already running
//! finish and are answered, and the connection closes.

use super::answer::answer;
use super::frame::{put_answer, take_request};
use super::stream::{write_frames, FRAME_BYTES_MAX, READ_CHUNK_BYTES, UPGRADE_PROTOCOL};
use crate::node::Node;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use bytes::BytesMut;
use fencelog_server::server::{ConnHold, Shutdown};
use fencelog_server::ApiError;
use hyper_util::rt::TokioIo;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::sync::{mpsc, watch, Semaphore};

/// What the node's `/_cluster/` routes share: the node, and the server's
/// shutdown, which ends peer streams.
#[derive(Clone)]
pub(crate) struct Peers {
    pub(crate) node: Arc<Node>,
    /// Ends peer streams when the server shuts down.
    pub(crate) shutdown: Shutdown,
}

/// Most RPCs running at once per peer stream.
pub const IN_FLIGHT_MAX: usize = 1024;

/// `GET /_cluster/raft/stream`: 101 and the stream, or 400 for a request
/// that is not its upgrade.
pub(crate) async fn open(
    State(s): State<Peers>,
    hold: Option<Extension<ConnHold>>,
    mut req: Request,
) -> Response {
    let wanted = req.headers().get(header::UPGRADE).is_some_and(|v| {
        v.as_bytes()
            .eq_ignore_ascii_case(UPGRADE_PROTOCOL.as_bytes())
    });
    if !wanted {
        let m = format!("a peer stream is an upgrade: send GET with Upgrade: {UPGRADE_PROTOCOL}");
        return ApiError::bad_request(m).into_response();
    }
    let upgrade = hyper::upgrade::on(&mut req);
    let node = s.node.clone();
    let shutdown = s.shutdown.clone();
    tokio::spawn(async move {
        // Held while the stream runs, so the server's shutdown waits for it.
        let _hold = hold;
        match upgrade.await {
            Ok(io) => serve(node, TokioIo::new(io), shutdown).await,
            Err(e) => tracing::debug!(error = %e, "a peer stream's upgrade failed"),
        }
    });
    let mut resp = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let h = resp.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static(UPGRADE_PROTOCOL));
    resp
}

/// Reads request frames until the peer closes, a protocol error, or
/// shutdown; then lets the running RPCs answer and closes.
async fn serve<I>(node: Arc<Node>, io: I, mut shutdown: Shutdown)
where
    I: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut r, w) = tokio::io::split(io);
    let (tx, rx) = mpsc::channel::<Vec<u8>>(IN_FLIGHT_MAX);
    // The writer ends once every RPC task has answered (all senders gone);
    // nothing closes it early.
    let (_never, open) = watch::channel(false);
    let writer = tokio::spawn(write_frames(rx, w, open));
    let permits = Arc::new(Semaphore::new(IN_FLIGHT_MAX));
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    'read: loop {
        loop {
            let req = match take_request(&mut buf, FRAME_BYTES_MAX) {
                Ok(Some(req)) => req,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "a peer stream sent a bad frame: closed");
                    break 'read;
                }
            };
            let permit = tokio::select! {
                p = permits.clone().acquire_owned() => p.expect("never closed"),
                _ = shutdown.wait() => break 'read,
            };
            let node = node.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                let answer = answer(&node, req.shard, req.kind, &req.body).await;
                let mut frame = Vec::new();
                put_answer(
                    &mut frame,
                    req.id,
                    answer.as_deref().map_err(String::as_str),
                );
                let _ = tx.send(frame).await;
                drop(permit);
            });
        }
        if buf.capacity() - buf.len() < READ_CHUNK_BYTES / 4 {
            buf.reserve(READ_CHUNK_BYTES);
        }
        let n = tokio::select! {
            n = r.read_buf(&mut buf) => n,
            _ = shutdown.wait() => break,
        };
        match n {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(error = %e, "a peer stream ended with an error");
                break;
            }
        }
    }
    drop(tx);
    if let Ok(Err(e)) = writer.await {
        tracing::debug!(error = %e, "a peer stream's answers were not all written");
    }
}
