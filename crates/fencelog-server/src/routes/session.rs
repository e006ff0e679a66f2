//! `GET /v1/streams/{stream}/session`: the pipelined append session, a
//! WebSocket of binary messages (the layouts are `fencelog_api::session`'s).
//! Many single-record appends in flight on one connection, each answered
//! in the order it was sent once the engine has made it durable — or with
//! the single-request route's refusal for that append alone.
//!
//! Each append goes to the backend's session sink
//! ([`crate::backend::SessionWrites`]) in the order the messages arrive:
//! on a single node the engine's [`fencelog_engine::Engine::write`], the
//! same checks and the same writer request as `POST .../records`, so the
//! writer plans them in that order and its group commit puts the appends
//! in flight into one `sync_data`; on a cluster node the shard's proposer,
//! on its leader. The session only orders the answers: it answers the
//! oldest unanswered append once the backend has, and never anything the
//! backend has not answered.
//!
//! Bounded: at most [`HttpLimits::session_appends_max`] appends and
//! [`HttpLimits::session_bytes_max`] bytes read but not answered; at
//! either bound the session stops reading (the client's sends back up in
//! TCP) until answers go out. Answers that cannot be written (a client
//! that stopped reading) stop the reading the same way, and the write
//! timeout ends the connection. The session's whole memory — those bytes,
//! one message over, the WebSocket buffers — is taken from the upload
//! budget when it opens.
//!
//! [`HttpLimits::session_appends_max`]: crate::state::HttpLimits::session_appends_max
//! [`HttpLimits::session_bytes_max`]: crate::state::HttpLimits::session_bytes_max

use crate::auth::Caller;
use crate::backend::{Elsewhere, Pending, Refused, SessionWrites};
use crate::decode::params::stream_name;
use crate::error::ApiError;
use crate::state::budget::{overloaded, Lease, Pool};
use crate::state::shutdown::ConnHold;
use crate::state::AppState;
use axum::extract::rejection::PathRejection;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::{HeaderValue, Uri};
use axum::response::Response;
use axum::Extension;
use bytes::{Bytes, BytesMut};
use fencelog_api::session::{self as wire, SessionAppend};
use fencelog_api::{ErrorCode, Field};
use fencelog_engine::{Ack, AppendOptions, Applied, WriteOp};
use futures_util::{FutureExt, SinkExt, StreamExt};
use std::collections::VecDeque;
use std::time::Duration;
use tokio_tungstenite::tungstenite;

/// The WebSocket read buffer of a session.
const READ_BUFFER_BYTES: usize = 64 << 10;
/// Answers are written to the socket once this many bytes wait (and at
/// every flush, which the session does whenever it has answered all it
/// can).
const WRITE_BUFFER_BYTES: usize = 64 << 10;
/// The write buffer's bound: it grows past [`WRITE_BUFFER_BYTES`] only
/// while the socket refuses bytes.
const WRITE_BUFFER_MAX_BYTES: usize = 256 << 10;
/// How long a closed session waits for the client's close reply.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// One append's answer: known, or to come from the backend.
enum Answer {
    /// Decided.
    Known(Result<Ack, Refused>),
    /// The backend's answer, when it has one.
    Waiting(Pending),
}

/// An append's ack out of what the backend answered.
fn ack_of(answer: Result<Applied, Refused>) -> Result<Ack, Refused> {
    match answer? {
        Applied::Appended(ack) => Ok(ack),
        other => unreachable!("an append answered {other:?}"),
    }
}

/// `GET /v1/streams/{stream}/session`: checks, where the backend serves
/// the stream's session, the budget, then the upgrade. Authorization
/// (scope `append` on the stream) is the route table's, as for `POST
/// .../records`.
pub async fn open(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    hold: Option<Extension<ConnHold>>,
    uri: Uri,
    path: Result<Path<String>, PathRejection>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let caller = caller.map(|Extension(c)| c).unwrap_or_default();
    let stream = stream_name(path)?;
    let sink = match state.backend.open_session(&stream) {
        Ok(sink) => sink,
        Err(Elsewhere::Redirect(r)) => {
            let path = uri.path_and_query().map_or("/", |p| p.as_str());
            return Ok(crate::routes::writes::redirect(&r, path));
        }
        Err(Elsewhere::Refused(e)) => return Err(e.on_stream(&stream)),
    };
    upgrade(state, caller, hold, stream, ws, sink).await
}

/// The session on `stream` for an already checked caller, its appends
/// going to `sink`: the budget, then the upgrade.
async fn upgrade(
    state: AppState,
    caller: Caller,
    hold: Option<Extension<ConnHold>>,
    stream: String,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
    sink: Box<dyn SessionWrites>,
) -> Result<Response, ApiError> {
    let ws = ws.map_err(|e| {
        ApiError::bad_request(format!(
            "an append session is a WebSocket: send GET with Upgrade: websocket ({e})"
        ))
        .on_stream(&stream)
    })?;
    let limits = Limits::of(&state);
    let lease = state
        .budget
        .take(Pool::Uploads, limits.lease_bytes(), state.budget.wait)
        .await
        .ok_or_else(|| overloaded("append sessions").on_stream(&stream))?;
    let session = Session::new(state, caller, stream, limits, lease, hold, sink);
    let mut resp = ws
        .protocols([wire::SUBPROTOCOL])
        .read_buffer_size(READ_BUFFER_BYTES)
        .write_buffer_size(WRITE_BUFFER_BYTES)
        .max_write_buffer_size(WRITE_BUFFER_MAX_BYTES)
        .max_message_size(limits.message_bytes_max)
        .max_frame_size(limits.message_bytes_max)
        .on_upgrade(move |socket| session.run(socket));
    let headers = resp.headers_mut();
    headers.insert(
        wire::APPENDS_MAX_HEADER,
        HeaderValue::from(limits.appends_max),
    );
    headers.insert(wire::BYTES_MAX_HEADER, HeaderValue::from(limits.bytes_max));
    Ok(resp)
}

/// A session's bounds.
#[derive(Debug, Clone, Copy)]
struct Limits {
    appends_max: usize,
    bytes_max: usize,
    /// One append of the engine's largest batch, with its header.
    message_bytes_max: usize,
}

impl Limits {
    fn of(state: &AppState) -> Limits {
        Limits {
            appends_max: state.limits.session_appends_max.max(1),
            bytes_max: state.limits.session_bytes_max.max(1),
            message_bytes_max: wire::APPEND_HEADER_BYTES + state.backend.config().batch_bytes_max,
        }
    }

    /// Everything the session may hold: unanswered appends up to the
    /// bound plus the one message that crossed it, and both buffers.
    fn lease_bytes(&self) -> usize {
        self.bytes_max + self.message_bytes_max + READ_BUFFER_BYTES + WRITE_BUFFER_MAX_BYTES
    }
}

/// An append read and not yet answered.
struct InFlight {
    n: u64,
    bytes: usize,
    /// The stream's token before it, for the audit log's token rises.
    before: u64,
    answer: Answer,
}

impl InFlight {
    /// Whether the engine has answered, taking the answer if it just did.
    fn ready(&mut self) -> bool {
        let known = match &mut self.answer {
            Answer::Known(_) => return true,
            Answer::Waiting(p) => p.try_answer().map(ack_of),
        };
        match known {
            Some(a) => {
                self.answer = Answer::Known(a);
                true
            }
            None => false,
        }
    }
}

/// Why the session stops reading, and what its last message says.
struct End {
    /// The first append not applied.
    n: u64,
    error: ApiError,
    close_code: u16,
}

struct Session {
    state: AppState,
    caller: Caller,
    stream: String,
    limits: Limits,
    in_flight: VecDeque<InFlight>,
    bytes_in_flight: usize,
    /// Appends read so far: the next one's number.
    received: u64,
    end: Option<End>,
    /// The client closed, or the session ends: read nothing more.
    closing: bool,
    /// The connection is gone: nobody to answer.
    gone: bool,
    out: BytesMut,
    /// Where appends go: the backend's sink for this session.
    sink: Box<dyn SessionWrites>,
    _lease: Lease,
    /// The connection's slot under the server's cap and drain.
    _hold: Option<Extension<ConnHold>>,
}

impl Session {
    fn new(
        state: AppState,
        caller: Caller,
        stream: String,
        limits: Limits,
        lease: Lease,
        hold: Option<Extension<ConnHold>>,
        sink: Box<dyn SessionWrites>,
    ) -> Session {
        Session {
            state,
            caller,
            stream,
            limits,
            in_flight: VecDeque::with_capacity(limits.appends_max.min(4096)),
            bytes_in_flight: 0,
            received: 0,
            end: None,
            closing: false,
            gone: false,
            out: BytesMut::new(),
            sink,
            _lease: lease,
            _hold: hold,
        }
    }

    async fn run(mut self, mut socket: WebSocket) {
        let mut shutdown = self.state.shutdown.clone();
        loop {
            if self.answer_ready(&mut socket).await.is_err() || self.gone {
                return;
            }
            if self.closing && self.in_flight.is_empty() {
                break;
            }
            let reading = !self.closing
                && self.in_flight.len() < self.limits.appends_max
                && self.bytes_in_flight < self.limits.bytes_max;
            tokio::select! {
                biased;
                () = wait_front(&mut self.in_flight) => {}
                msg = socket.next(), if reading => {
                    self.received(msg);
                    self.read_buffered(&mut socket);
                }
                () = shutdown.wait(), if !self.closing => self.stop(
                    ApiError::new(ErrorCode::Unavailable, "the server is shutting down"),
                    1001,
                ),
            }
        }
        self.finish(socket).await;
    }

    /// Stops reading; `error` is the session's last message once every
    /// append read so far is answered.
    fn stop(&mut self, error: ApiError, close_code: u16) {
        let error = error.on_stream(&self.stream);
        self.end = Some(End {
            n: self.received,
            error,
            close_code,
        });
        self.closing = true;
    }

    /// Every message already buffered, up to the bounds, without waiting:
    /// one pass of the loop per burst rather than per append.
    fn read_buffered(&mut self, socket: &mut WebSocket) {
        while !self.closing
            && self.in_flight.len() < self.limits.appends_max
            && self.bytes_in_flight < self.limits.bytes_max
        {
            match socket.next().now_or_never() {
                Some(msg) => self.received(msg),
                None => return,
            }
        }
    }

    fn received(&mut self, msg: Option<Result<Message, axum::Error>>) {
        match msg {
            Some(Ok(Message::Binary(bytes))) => self.append(bytes),
            Some(Ok(Message::Text(_))) => self.stop(
                ApiError::bad_request(
                    "a text message: every append is a binary message (fencelog_api::session)",
                ),
                1003,
            ),
            // A WebSocket close ends both directions at once (no answer
            // may follow it): the connection is as good as gone. A client
            // that is done sends the session's own end message instead.
            Some(Ok(Message::Close(_))) => {
                self.closing = true;
                self.gone = true;
            }
            // tungstenite answers pings itself.
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            Some(Err(e)) => self.read_failed(e),
            None => {
                self.closing = true;
                self.gone = true;
            }
        }
    }

    /// A message the WebSocket layer refused (too large, malformed
    /// framing) ends the session with the reason; anything else is a
    /// connection that is gone.
    fn read_failed(&mut self, e: axum::Error) {
        let inner = e.into_inner();
        match inner.downcast_ref::<tungstenite::Error>() {
            Some(tungstenite::Error::Capacity(c)) => {
                let limit = self.limits.message_bytes_max as u64;
                let error = ApiError::too_large(format!(
                    "an append message is at most {limit} bytes (the batch limit plus the {}-byte header): {c}",
                    wire::APPEND_HEADER_BYTES
                ))
                .with(Field::Limit, limit);
                self.stop(error, 1009);
            }
            Some(tungstenite::Error::Protocol(p)) => {
                self.stop(
                    ApiError::bad_request(format!("WebSocket protocol: {p}")),
                    1002,
                );
            }
            _ => {
                self.closing = true;
                self.gone = true;
            }
        }
    }

    fn append(&mut self, message: Bytes) {
        if wire::is_end(&message) {
            // The client is done: answer what it sent, then close.
            self.closing = true;
            return;
        }
        let append = match wire::decode_append(&message) {
            Ok(a) => a,
            Err(e) => {
                let error = ApiError::bad_request(format!("append message {}: {e}", self.received));
                return self.stop(error, 1008);
            }
        };
        let n = self.received;
        self.received += 1;
        let before = self.state.token_before(&self.stream);
        let answer = self.queue(append);
        self.bytes_in_flight += message.len();
        self.in_flight.push_back(InFlight {
            n,
            bytes: message.len(),
            before,
            answer,
        });
    }

    /// The append to the backend's sink, through the normal append path.
    fn queue(&self, append: SessionAppend) -> Answer {
        let token = append.fencing_token;
        let op = WriteOp::Append {
            stream: self.stream.clone(),
            token,
            records: vec![append.body],
            headers: Vec::new(),
            options: AppendOptions {
                match_seq_num: append.match_seq_num,
                ..Default::default()
            },
        };
        match self.sink.append(op) {
            pending if mutated!(self.state.mutation, SessionAckBeforeDurable) => {
                drop(pending);
                Answer::Known(Ok(self.guessed_ack(token)))
            }
            pending => Answer::Waiting(pending),
        }
    }

    /// Only under the `SessionAckBeforeDurable` mutation: the ack the
    /// append would get if it were durable now.
    fn guessed_ack(&self, token: u64) -> Ack {
        let engine = self.state.backend.read(&self.stream).now_or_never();
        let published = engine
            .and_then(Result::ok)
            .and_then(|e| e.state(&self.stream).ok())
            .map_or(0, |s| s.next_seq);
        let seq = published + self.in_flight.len() as u64;
        Ack {
            first_seq: seq,
            last_seq: seq,
            next_seq: seq + 1,
            fencing_token: token,
            timestamp_ms: 0,
            duplicate: false,
        }
    }

    /// Sends the answer of every append at the front whose answer is
    /// known, in order, then flushes them in one write.
    async fn answer_ready(&mut self, socket: &mut WebSocket) -> Result<(), axum::Error> {
        let unordered = mutated!(self.state.mutation, SessionAckUnordered);
        let mut wrote = false;
        let mut i = 0;
        while i < self.in_flight.len() {
            if !self.in_flight[i].ready() {
                if !unordered {
                    break;
                }
                i += 1;
                continue;
            }
            let done = self.in_flight.remove(i).expect("in range");
            self.bytes_in_flight -= done.bytes;
            let message = self.encode(done);
            socket.feed(Message::Binary(message)).await?;
            wrote = true;
        }
        if wrote {
            socket.flush().await?;
        }
        Ok(())
    }

    /// The answer message, with what the single-request route logs.
    fn encode(&mut self, done: InFlight) -> Bytes {
        let Answer::Known(answer) = done.answer else {
            unreachable!("only answered appends are encoded");
        };
        match answer {
            Ok(ack) => {
                self.state.written(
                    &self.caller,
                    &self.stream,
                    "append",
                    done.before,
                    ack.fencing_token,
                );
                self.out.extend_from_slice(&wire::encode_ack(done.n, &ack));
            }
            Err(e) => {
                let (status, body) = match e {
                    Refused::Write(e) => {
                        self.state.write_refused_body(&self.caller, &self.stream, e)
                    }
                    Refused::Api(e) => {
                        let e = e.on_stream(&self.stream);
                        (e.code().status(), e.to_json())
                    }
                };
                let mut m = Vec::with_capacity(wire::ERROR_HEADER_BYTES + body.len());
                wire::encode_error(&mut m, false, done.n, status, &body);
                self.out.extend_from_slice(&m);
            }
        }
        self.out.split().freeze()
    }

    /// The session's last message (when it ended on an error), the close,
    /// and the client's close reply (what it sent meanwhile is not read
    /// as appends).
    async fn finish(mut self, mut socket: WebSocket) {
        let (code, reason) = match self.end.take() {
            Some(end) => {
                let mut m = Vec::new();
                let status = end.error.code().status();
                wire::encode_error(&mut m, true, end.n, status, &end.error.to_json());
                if socket.send(Message::Binary(m.into())).await.is_err() {
                    return;
                }
                (end.close_code, end.error.code().as_str())
            }
            None => (1000, ""),
        };
        let close = CloseFrame {
            code,
            reason: reason.into(),
        };
        if socket.send(Message::Close(Some(close))).await.is_err() {
            return;
        }
        let drain = async { while let Some(Ok(_)) = socket.next().await {} };
        let _ = tokio::time::timeout(CLOSE_WAIT, drain).await;
    }
}

/// Resolves once the oldest unanswered append has its answer (never, with
/// none in flight).
async fn wait_front(in_flight: &mut VecDeque<InFlight>) {
    let Some(front) = in_flight.front_mut() else {
        return std::future::pending().await;
    };
    let answer = match &mut front.answer {
        Answer::Known(_) => return,
        Answer::Waiting(p) => ack_of(p.await),
    };
    front.answer = Answer::Known(answer);
}
