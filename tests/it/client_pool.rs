//! The client's own HTTP/1.1 connection pool against servers that behave
//! in one exact way each: its bound, its timeouts, and the resend rule —
//! an append that may have been written is never sent again, whatever the
//! connection did after.

use fencelog_client::{Client, ClientError, ReadOptions};
use fencelog_engine::Config;
use fencelog_server::server::ServerConfig;
use fencelog_testkit::http::TestServer;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore};

/// What the scripted server does with the request it just read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Then {
    /// Answers and keeps the connection for the next request.
    Answer,
    /// Answers, then closes the connection without saying so beforehand.
    AnswerAndClose,
    /// Closes the connection without answering.
    HangUp,
    /// Never answers (the test ends first).
    Stall,
    /// Answers 307 to `redirect_to`.
    Redirect,
}

/// A server that answers every request with an append ack, and counts
/// connections, requests in flight, and every request body it read.
struct Scripted {
    addr: SocketAddr,
    connections: AtomicUsize,
    in_flight: AtomicUsize,
    in_flight_max: AtomicUsize,
    bodies: Mutex<Vec<Vec<u8>>>,
    /// Every request's head, lowercased.
    heads: Mutex<Vec<String>>,
    redirect_to: Mutex<String>,
    /// Each request takes one permit before it is answered: the test
    /// decides when answers go out.
    answers: Semaphore,
    /// Signalled after every request read.
    read_one: Notify,
    script: Box<dyn Fn(usize) -> Then + Send + Sync>,
}

const ACK: &[u8] =
    br#"{"stream":"s","first_seq":0,"last_seq":0,"next_seq":1,"fencing_token":1,"timestamp_ms":1}"#;

impl Scripted {
    /// `script(n)` says what to do with the n-th request (from 0);
    /// `answers` permits are there from the start.
    async fn start(
        answers: usize,
        script: impl Fn(usize) -> Then + Send + Sync + 'static,
    ) -> Arc<Scripted> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let srv = Arc::new(Scripted {
            addr: listener.local_addr().unwrap(),
            connections: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            in_flight_max: AtomicUsize::new(0),
            bodies: Mutex::new(Vec::new()),
            heads: Mutex::new(Vec::new()),
            redirect_to: Mutex::new(String::new()),
            answers: Semaphore::new(answers),
            read_one: Notify::new(),
            script: Box::new(script),
        });
        let s = srv.clone();
        tokio::spawn(async move {
            loop {
                let (conn, _) = listener.accept().await.unwrap();
                s.connections.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(s.clone().serve(conn));
            }
        });
        srv
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn bodies(&self) -> Vec<Vec<u8>> {
        self.bodies.lock().unwrap().clone()
    }

    async fn serve(self: Arc<Self>, mut conn: TcpStream) {
        let mut seen = Vec::new();
        loop {
            let Some((head, body)) = read_request(&mut conn, &mut seen).await else {
                return;
            };
            self.heads.lock().unwrap().push(head);
            let n = {
                let mut bodies = self.bodies.lock().unwrap();
                bodies.push(body);
                bodies.len() - 1
            };
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.in_flight_max.fetch_max(now, Ordering::SeqCst);
            self.read_one.notify_one();
            let then = (self.script)(n);
            if then == Then::Stall {
                std::future::pending::<()>().await;
            }
            if then == Then::HangUp {
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
                return;
            }
            self.answers.acquire().await.unwrap().forget();
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            let mut out = if then == Then::Redirect {
                let to = self.redirect_to.lock().unwrap().clone();
                format!("HTTP/1.1 307 Temporary Redirect\r\nlocation: {to}\r\ncontent-length: 0\r\n\r\n")
                    .into_bytes()
            } else {
                let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", ACK.len());
                head.into_bytes()
            };
            if then != Then::Redirect {
                out.extend_from_slice(ACK);
            }
            if conn.write_all(&out).await.is_err() || then == Then::AnswerAndClose {
                return;
            }
        }
    }
}

/// One request's head (lowercased) and body (`seen` keeps bytes of the
/// next).
async fn read_request(conn: &mut TcpStream, seen: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&seen[..end]).to_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse::<usize>().unwrap());
            if seen.len() >= end + 4 + len {
                let body = seen[end + 4..end + 4 + len].to_vec();
                seen.drain(..end + 4 + len);
                return Some((head, body));
            }
        }
        let n = conn.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        seen.extend_from_slice(&buf[..n]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_never_opens_more_connections_than_its_bound() {
    let srv = Scripted::start(0, |_| Then::Answer).await;
    let c = Client::builder(srv.url())
        .pool_max_connections(2)
        .build()
        .unwrap();
    let appends: Vec<_> = (0..16)
        .map(|i| {
            let c = c.clone();
            tokio::spawn(async move { c.append_raw("s", 1, format!("r{i}"), None).await })
        })
        .collect();
    // Two requests arrive and wait for their answers; no third connection
    // opens while they do.
    while srv.bodies().len() < 2 {
        srv.read_one.notified().await;
    }
    assert_eq!(srv.connections.load(Ordering::SeqCst), 2);
    srv.answers.add_permits(16);
    for a in appends {
        a.await.unwrap().unwrap();
    }
    assert_eq!(
        srv.connections.load(Ordering::SeqCst),
        2,
        "kept alive, reused"
    );
    assert_eq!(srv.in_flight_max.load(Ordering::SeqCst), 2);
    let mut bodies = srv.bodies();
    bodies.sort();
    let mut want: Vec<Vec<u8>> = (0..16).map(|i| format!("r{i}").into_bytes()).collect();
    want.sort();
    assert_eq!(bodies, want, "each append sent exactly once");
}

#[tokio::test]
async fn an_unanswered_append_times_out_unknown_and_reads_retry() {
    let srv = Scripted::start(0, |_| Then::Stall).await;
    let c = Client::builder(srv.url())
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    match c.append("s", 1, ["x"]).await {
        Err(ClientError::OutcomeUnknown { source }) => assert!(source.is_timeout(), "{source}"),
        other => panic!("expected OutcomeUnknown, got {other:?}"),
    }
    assert_eq!(srv.bodies().len(), 1, "the append was sent once");
    assert!(matches!(
        c.read("s", 0, &ReadOptions::default()).await,
        Err(ClientError::Transport { .. })
    ));
    assert_eq!(srv.bodies().len(), 4, "a read is tried three times");
}

/// The server answers the first request on a connection, then reads the
/// second completely and closes without answering: that append was
/// written, so it is an unknown outcome, never sent again.
#[tokio::test]
async fn a_keep_alive_connection_closed_after_the_append_was_written_is_unknown_never_resent() {
    let srv = Scripted::start(usize::MAX >> 4, |n| match n {
        0 => Then::Answer,
        _ => Then::HangUp,
    })
    .await;
    let c = Client::new(srv.url()).unwrap();
    c.append_raw("s", 1, "one", None).await.unwrap();
    assert!(matches!(
        c.append_raw("s", 1, "two", None).await,
        Err(ClientError::OutcomeUnknown { .. })
    ));
    assert_eq!(srv.bodies(), vec![b"one".to_vec(), b"two".to_vec()]);
    assert_eq!(
        srv.connections.load(Ordering::SeqCst),
        1,
        "the second went out on the kept-alive connection, and only there"
    );
}

/// A server that closes every connection right after its answer, without
/// `Connection: close`. A pooled connection found closed before the
/// request is written is skipped (the request goes out on a new one); one
/// whose close is only noticed after writing makes the append unknown.
/// Either way no append reaches the server twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_closing_idle_connections_never_gets_an_append_twice() {
    let srv = Scripted::start(usize::MAX >> 4, |_| Then::AnswerAndClose).await;
    let c = Client::new(srv.url()).unwrap();
    let mut acked = 0;
    for i in 0..30 {
        match c.append_raw("s", 1, format!("r{i}"), None).await {
            Ok(_) => acked += 1,
            Err(ClientError::OutcomeUnknown { .. }) => {}
            Err(e) => panic!("append {i}: {e:?}"),
        }
    }
    let bodies = srv.bodies();
    let mut distinct = bodies.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), bodies.len(), "an append was resent");
    assert!(
        acked >= 1 && bodies.len() <= 30,
        "{acked} acked, {bodies:?}"
    );
}

/// The real server, through the pool: an access token on every request,
/// and the exact error bodies.
#[tokio::test]
async fn the_pool_sends_the_token_and_keeps_the_servers_answers_exact() {
    let srv = TestServer::start_with(Config::default(), |_| {}, ServerConfig::default()).await;
    let c = Client::builder(srv.url().to_string())
        .token("not-checked-here")
        .build()
        .unwrap();
    c.append("s", 5, ["a"]).await.unwrap();
    match c.append_raw("s", 4, "late", None).await.unwrap_err() {
        ClientError::StaleToken {
            presented,
            highest,
            next_seq,
            answer,
        } => {
            assert_eq!((presented, highest, next_seq), (4, 5, 1));
            let general = fencelog_api::ErrorBody::decode(&serde_json::to_vec(&*answer).unwrap());
            assert_eq!(general.as_ref(), Some(&*answer));
            assert_eq!(answer.stream(), Some("s"));
        }
        other => panic!("expected StaleToken, got {other:?}"),
    }
}

/// A 307 is followed with the same method, body and headers, the token
/// included, to the other server; the append reaches only that one.
#[tokio::test]
async fn a_redirect_is_followed_with_the_same_request_and_token() {
    let leader = Scripted::start(usize::MAX >> 4, |_| Then::Answer).await;
    let follower = Scripted::start(usize::MAX >> 4, |_| Then::Redirect).await;
    *follower.redirect_to.lock().unwrap() = format!("{}/v1/streams/s/records", leader.url());
    let c = Client::builder(follower.url())
        .token("sekrit")
        .build()
        .unwrap();
    let ack = c.append_raw("s", 7, "moved", None).await.unwrap();
    assert_eq!(ack.first_seq, 0);
    assert_eq!(leader.bodies(), vec![b"moved".to_vec()]);
    for srv in [&leader, &follower] {
        let heads = srv.heads.lock().unwrap().clone();
        assert_eq!(heads.len(), 1);
        assert!(
            heads[0].starts_with("post /v1/streams/s/records http/1.1"),
            "{heads:?}"
        );
        assert!(
            heads[0].contains("\r\nauthorization: bearer sekrit"),
            "{heads:?}"
        );
        assert!(heads[0].contains("\r\nfencing-token: 7"), "{heads:?}");
    }
    // Past REDIRECTS_MAX hops the 307 itself is the answer.
    *follower.redirect_to.lock().unwrap() = format!("{}/v1/streams/s/records", follower.url());
    let e = c.append_raw("s", 7, "loop", None).await.unwrap_err();
    assert!(
        matches!(e, ClientError::Protocol { status: 307, .. }),
        "{e:?}"
    );
    let hops = fencelog_client::REDIRECTS_MAX + 1;
    assert_eq!(follower.bodies().len(), 1 + hops);
}
