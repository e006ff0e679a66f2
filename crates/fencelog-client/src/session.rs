//! The pipelined append session: many single-record appends in flight on
//! one WebSocket, answered in the order they were sent, each once it is
//! durable (the wire format is `fencelog_api::session`'s).
//!
//! ```no_run
//! # async fn demo() -> Result<(), fencelog_client::ClientError> {
//! let client = fencelog_client::Client::new("http://127.0.0.1:7070")?;
//! let session = client.append_session("orders").await?;
//! let (mut tx, mut rx) = (session.sender, session.receiver);
//! let sending = async move {
//!     for i in 0..1000u32 {
//!         tx.send(7, None, format!("order #{i}").as_bytes()).await?;
//!     }
//!     tx.close().await // flushes; the server answers everything sent
//! };
//! let receiving = async move {
//!     while let Some((n, answer)) = rx.recv().await? {
//!         let ack = answer?; // a refusal is this append's alone
//!         println!("append #{n} durable at seq {}", ack.first_seq);
//!     }
//!     Ok::<_, fencelog_client::ClientError>(())
//! };
//! let (sent, received) = tokio::join!(sending, receiving);
//! sent?;
//! received?;
//! # Ok(()) }
//! ```
//!
//! The two halves must run concurrently: the sender waits for window room
//! that only answers the receiver takes make.

use crate::error::from_answer;
use crate::{Client, ClientError};
use bytes::{Bytes, BytesMut};
use fencelog_api::session::{self as wire, SessionAnswer};
use fencelog_api::ErrorBody;
use fencelog_types::Ack;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::WebSocketStream;

/// Appends a session keeps unanswered by default (the server may allow
/// fewer; the smaller bound applies).
pub const SESSION_WINDOW_DEFAULT: usize = 4096;
/// Appends are written to the socket once this many bytes wait, when the
/// window is full, and at every [`SessionSender::flush`].
const WRITE_BUFFER_BYTES: usize = 64 << 10;
/// The largest answer accepted: an error body is well under it.
const ANSWER_BYTES_MAX: usize = 1 << 20;

type Ws = WebSocketStream<crate::session_io::SessionIo>;

/// One answer of a session: the append's number and its outcome.
pub type Answered = (u64, Result<Ack, ClientError>);

/// An open append session, in its two halves.
pub struct AppendSession {
    pub sender: SessionSender,
    pub receiver: SessionReceiver,
    /// How many appends may be unanswered at once: the smaller of the
    /// window asked for and the server's bound.
    pub window: usize,
}

/// Sends appends; at most the window unanswered.
pub struct SessionSender {
    sink: SplitSink<Ws, Message>,
    window: Arc<Semaphore>,
    sent: u64,
    buf: BytesMut,
}

/// Takes the answers, in the order the appends were sent.
pub struct SessionReceiver {
    stream: SplitStream<Ws>,
    window: Arc<Semaphore>,
    /// The next answer's append number.
    next: u64,
    url: String,
    done: bool,
}

impl Client {
    /// Opens an append session on `stream` with the default window.
    pub async fn append_session(&self, stream: &str) -> Result<AppendSession, ClientError> {
        self.append_session_with(stream, SESSION_WINDOW_DEFAULT)
            .await
    }

    /// Opens an append session on `stream` keeping at most `window`
    /// appends unanswered, over `http://` or `https://` (the builder's CA
    /// certificates and the system's roots).
    pub async fn append_session_with(
        &self,
        stream: &str,
        window: usize,
    ) -> Result<AppendSession, ClientError> {
        let mut url = self.stream_url(stream, wire::SESSION_PATH);
        // A cluster follower answers the upgrade with 307 to the shard's
        // leader, where the session is served: follow it, as requests do.
        let mut redirects = 0;
        let (ws, response) = loop {
            match self.handshake(&url).await? {
                Ok(done) => break done,
                Err(to) if redirects < crate::REDIRECTS_MAX => {
                    redirects += 1;
                    url = to;
                }
                Err(to) => {
                    return Err(lost(
                        0,
                        format!(
                        "opening the session: more than {redirects} redirects (the last to {to})"
                    ),
                    ))
                }
            }
        };
        let server_max = response
            .headers()
            .get(wire::APPENDS_MAX_HEADER)
            .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
            .unwrap_or(window);
        let window = window.min(server_max).max(1);
        let permits = Arc::new(Semaphore::new(window));
        let (sink, stream) = ws.split();
        Ok(AppendSession {
            sender: SessionSender {
                sink,
                window: permits.clone(),
                sent: 0,
                buf: BytesMut::new(),
            },
            receiver: SessionReceiver {
                stream,
                window: permits,
                next: 0,
                url,
                done: false,
            },
            window,
        })
    }

    /// One upgrade attempt at `url`: the WebSocket, or where a 307/308
    /// answer points.
    async fn handshake(
        &self,
        url: &str,
    ) -> Result<Result<(Ws, tungstenite::handshake::client::Response), String>, ClientError> {
        let target = crate::session_io::target(url)?;
        let io = crate::session_io::connect(&target, url, &self.ca_certs)
            .await
            .map_err(|e| lost(0, e))?;
        let request = self.session_request(&target.ws_url)?;
        let config = WebSocketConfig::default()
            .write_buffer_size(WRITE_BUFFER_BYTES)
            .max_message_size(Some(ANSWER_BYTES_MAX))
            .max_frame_size(Some(ANSWER_BYTES_MAX));
        match tokio_tungstenite::client_async_with_config(request, io, Some(config)).await {
            Ok(done) => Ok(Ok(done)),
            Err(tungstenite::Error::Http(resp)) if matches!(resp.status().as_u16(), 307 | 308) => {
                let next = resp
                    .headers()
                    .get("location")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|l| reqwest::Url::parse(url).ok()?.join(l).ok())
                    .filter(|u| matches!(u.scheme(), "http" | "https"));
                match next {
                    Some(u) => Ok(Err(u.to_string())),
                    None => Err(handshake_error(tungstenite::Error::Http(resp), url)),
                }
            }
            Err(e) => Err(handshake_error(e, url)),
        }
    }

    fn session_request(
        &self,
        ws_url: &str,
    ) -> Result<tungstenite::handshake::client::Request, ClientError> {
        let invalid = |reason: String| ClientError::InvalidUrl {
            url: ws_url.to_string(),
            reason,
        };
        let mut request = ws_url
            .into_client_request()
            .map_err(|e| invalid(e.to_string()))?;
        let headers = request.headers_mut();
        headers.insert(
            "sec-websocket-protocol",
            wire::SUBPROTOCOL.parse().expect("ASCII"),
        );
        if let Some(secret) = &self.token {
            let value =
                format!("Bearer {}", secret.0)
                    .parse()
                    .map_err(|_| ClientError::BadRequest {
                        message: "the access token is not a valid header value".into(),
                        answer: None,
                    })?;
            headers.insert("authorization", value);
        }
        Ok(request)
    }
}

/// The server refused the upgrade with an answer (401, 403, 400, 503): the
/// error that answer is, as for any request; anything else lost the
/// connection before the session began.
fn handshake_error(e: tungstenite::Error, url: &str) -> ClientError {
    match e {
        tungstenite::Error::Http(resp) => {
            let status = resp.status().as_u16();
            let body = resp.body().as_deref().unwrap_or(&[]);
            from_answer(status, body, url)
        }
        other => lost(0, format!("opening the session: {other}")),
    }
}

fn lost(first_unanswered: u64, message: String) -> ClientError {
    ClientError::SessionEnded {
        first_unanswered,
        message,
        answer: None,
    }
}

impl SessionSender {
    /// Queues one append of one record and returns its number in the
    /// session (0 for the first). Waits while the window is full, after
    /// writing out what is buffered (else the answers it waits for could
    /// never come). Buffered appends go out at 64 KiB, at a full window,
    /// and at [`SessionSender::flush`].
    pub async fn send(
        &mut self,
        fencing_token: u64,
        match_seq_num: Option<u64>,
        body: &[u8],
    ) -> Result<u64, ClientError> {
        // The receiver gives the permit back when the answer arrives.
        let window = self.window.clone();
        match window.try_acquire() {
            Ok(p) => p.forget(),
            Err(_) => {
                self.flush().await?;
                let ended = || lost(self.sent, "the session ended".into());
                window.acquire().await.map_err(|_| ended())?.forget();
            }
        }
        let mut m = Vec::new();
        wire::encode_append(&mut m, fencing_token, match_seq_num, body);
        self.buf.extend_from_slice(&m);
        let message = Message::Binary(self.buf.split().freeze());
        self.sink
            .feed(message)
            .await
            .map_err(|e| lost(self.sent, format!("sending: {e}")))?;
        self.sent += 1;
        Ok(self.sent - 1)
    }

    /// Writes out every buffered append.
    pub async fn flush(&mut self) -> Result<(), ClientError> {
        self.sink
            .flush()
            .await
            .map_err(|e| lost(self.sent, format!("sending: {e}")))
    }

    /// Appends sent so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Ends the session: tells the server there is nothing more (the
    /// session's end message, not a WebSocket close, which would end the
    /// answers too) and flushes. The server answers every append sent,
    /// then closes, and the receiver ends with `Ok(None)`.
    pub async fn close(mut self) -> Result<(), ClientError> {
        let end = Message::Binary(Bytes::from_static(&wire::END));
        self.sink
            .send(end)
            .await
            .map_err(|e| lost(self.sent, format!("closing: {e}")))
    }

    /// Sends raw bytes as one message (tests of the server's refusals).
    #[doc(hidden)]
    pub async fn send_raw(&mut self, message: Bytes) -> Result<(), ClientError> {
        self.sink
            .send(Message::Binary(message))
            .await
            .map_err(|e| lost(self.sent, format!("sending: {e}")))
    }
}

impl SessionReceiver {
    /// The answer to the oldest unanswered append: its number and its
    /// outcome (an accepted ack, or the refusal a single append would
    /// have got — for that append alone). `Ok(None)` once the session
    /// closed with every append answered; `Err(SessionEnded)` when it
    /// ended first.
    pub async fn recv(&mut self) -> Result<Option<Answered>, ClientError> {
        if self.done {
            return Ok(None);
        }
        loop {
            let message = match self.stream.next().await {
                Some(Ok(Message::Binary(b))) => b,
                Some(Ok(Message::Close(_))) | None => return self.closed(),
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(self.end(lost(self.next, e.to_string()))),
            };
            return self.answer(message).map(Some);
        }
    }

    fn answer(&mut self, message: Bytes) -> Result<Answered, ClientError> {
        let protocol = |what: &str| ClientError::Protocol {
            status: 101,
            body: format!("append session: {what}"),
        };
        let answer = wire::decode_answer(&message).ok_or_else(|| protocol("unknown answer"))?;
        if answer.n() != self.next {
            return Err(self.end(protocol(&format!(
                "answer for append #{} where #{} was next",
                answer.n(),
                self.next
            ))));
        }
        let result = match answer {
            SessionAnswer::Accepted { ack, .. } => Ok(ack),
            SessionAnswer::Refused { status, body, .. } => {
                Err(from_answer(status, &body, &self.url))
            }
            SessionAnswer::Ended { n, body, .. } => {
                let answer = ErrorBody::decode(&body).map(Box::new);
                let message = answer.as_ref().map_or_else(
                    || String::from_utf8_lossy(&body).into_owned(),
                    |a| a.message.clone(),
                );
                return Err(self.end(ClientError::SessionEnded {
                    first_unanswered: n,
                    message,
                    answer,
                }));
            }
        };
        self.next += 1;
        self.window.add_permits(1);
        Ok((self.next - 1, result))
    }

    /// The server closed: fine once everything sent was answered, which
    /// the receiver cannot know — the sender's count can; an early close
    /// shows as fewer answers than appends sent.
    fn closed(&mut self) -> Result<Option<Answered>, ClientError> {
        self.done = true;
        self.window.close();
        Ok(None)
    }

    fn end(&mut self, e: ClientError) -> ClientError {
        self.done = true;
        self.window.close();
        e
    }

    /// Answers taken so far.
    pub fn answered(&self) -> u64 {
        self.next
    }
}
