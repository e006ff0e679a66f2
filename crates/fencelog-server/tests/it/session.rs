//! The pipelined append session (`GET /v1/streams/{stream}/session`)
//! against a real server: answers in exactly the order sent, each
//! append refused or accepted as the single-request route would (the same
//! bodies), durable after a restart, bounded when the client stops
//! reading, bad messages ending the session with an exact body and
//! nothing of them applied, the route's auth, and the deliberate bugs that
//! answer early or out of order caught.

use bytes::Bytes;
use fencelog_api::session as wire;
use fencelog_client::{Ack, Client, ClientError};
use fencelog_engine::sim::HookedStorage;
use fencelog_engine::{Config, DirStorage, Engine};
use fencelog_server::auth::{hash_secret, to_hex, Auth, AuthSettings, TokenSettings};
use fencelog_server::server::ServerConfig;
use fencelog_server::state::AppState;
use fencelog_server::state::{set_mutation, Mutation};
use fencelog_testkit::http::TestServer;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpSocket;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

/// Every answer of a session of `appends` (token, match_seq_num, body),
/// sent in one burst and then closed; answers checked to come numbered
/// in order.
async fn pipeline(
    client: &Client,
    stream: &str,
    appends: &[(u64, Option<u64>, String)],
) -> Result<Vec<Result<Ack, ClientError>>, ClientError> {
    let session = client.append_session(stream).await?;
    let (mut tx, mut rx) = (session.sender, session.receiver);
    let owned = appends.to_vec();
    let sending = tokio::spawn(async move {
        for (token, m, body) in owned {
            tx.send(token, m, body.as_bytes()).await?;
        }
        tx.close().await
    });
    let mut out = Vec::new();
    while let Some((n, answer)) = rx.recv().await? {
        assert_eq!(n, out.len() as u64, "answers numbered in order");
        out.push(answer);
    }
    sending.await.unwrap()?;
    assert_eq!(out.len(), appends.len(), "every append answered");
    Ok(out)
}

fn plain(token: u64, body: &str) -> (u64, Option<u64>, String) {
    (token, None, body.to_string())
}

fn seq_of(answer: &Result<Ack, ClientError>) -> u64 {
    match answer {
        Ok(ack) => {
            assert_eq!(
                (ack.first_seq, ack.next_seq),
                (ack.last_seq, ack.last_seq + 1)
            );
            ack.first_seq
        }
        Err(e) => panic!("refused: {e}"),
    }
}

fn refusal(answer: &Result<Ack, ClientError>) -> Value {
    match answer {
        Err(e) => e.answer().expect("a server answer").to_value(),
        Ok(ack) => panic!("accepted: {ack:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_come_in_order_and_acked_appends_survive_a_restart() {
    let mut srv = TestServer::start().await;
    let client = Client::new(srv.url()).unwrap();
    let appends: Vec<_> = (0..3000).map(|i| plain(1, &format!("r{i}"))).collect();
    let answers = pipeline(&client, "s", &appends).await.unwrap();
    for (i, a) in answers.iter().enumerate() {
        assert_eq!(seq_of(a), i as u64, "append #{i}");
    }
    let dir = std::mem::replace(&mut srv.dir, tempfile::tempdir().unwrap());
    srv.stop().await.unwrap();
    let engine = Engine::open_with(dir.path(), Config::default()).unwrap();
    let page = engine.read("s", 0, 10_000, 1 << 30).unwrap();
    let bodies: Vec<_> = page.records.iter().map(|r| r.body.clone()).collect();
    let expected: Vec<_> = (0..3000).map(|i| Bytes::from(format!("r{i}"))).collect();
    assert_eq!(bodies, expected);
    engine.shutdown().await;
}

/// The same refusal from the single-request route, on another stream in
/// the same state, renamed: what the session's body must be exactly.
async fn single_route_refusal(srv: &TestServer, headers: &[(&str, &str)]) -> Value {
    let (status, mut body) = srv.api.append_raw("twin", headers, "x").await;
    assert!(status >= 400, "{body}");
    body["stream"] = json!("s");
    body
}

async fn append_twin(srv: &TestServer, token: &str, body: &'static str) {
    let (status, _) = srv
        .api
        .append_raw("twin", &[("fencing-token", token)], body)
        .await;
    assert_eq!(status, 200);
}

/// A stale append in the middle of a pipeline is refused alone, with the
/// single route's exact body; the appends after it are answered each by
/// its own token and `match_seq_num`.
async fn stale_and_match_seq_num_mid_pipeline() {
    let srv = TestServer::start().await;
    let client = Client::new(srv.url()).unwrap();
    for s in ["s", "twin"] {
        assert_eq!(srv.api.fence(s, 5).await.0, 200);
    }
    let appends = vec![
        plain(5, "a"),
        // Stale against durable state at once: overtakes nothing.
        plain(3, "stale-at-once"),
        plain(7, "b"),
        // Stale against b, whether b is durable yet or not.
        plain(6, "stale-after-b"),
        (7, Some(2), "c".to_string()),
        (7, Some(2), "mismatch".to_string()),
        plain(8, "d"),
    ];
    let answers = pipeline(&client, "s", &appends).await.unwrap();
    assert_eq!(seq_of(&answers[0]), 0);
    assert_eq!(seq_of(&answers[2]), 1);
    assert_eq!(seq_of(&answers[4]), 2);
    assert_eq!(seq_of(&answers[6]), 3);
    // The twin in each refusal's state: durable highest 5, next_seq 0 or 1...
    let stale = refusal(&answers[1]);
    assert_eq!(
        (
            stale["presented_token"].clone(),
            stale["highest_token"].clone()
        ),
        (json!(3), json!(5))
    );
    let next = stale["next_seq"].as_u64().unwrap();
    assert!(next <= 1, "{stale}");
    let twin = srv.engine.state("twin").unwrap();
    assert_eq!((twin.next_seq, twin.highest_token), (0, 5));
    // The refusal may have been decided after a was written (next_seq 1):
    // the twin takes a first then, so that its state (and the message,
    // which names next_seq) is the one the session's refusal saw.
    let twin_appends: &[(&str, &'static str)] = if next == 1 {
        append_twin(&srv, "5", "a").await;
        &[("7", "b")]
    } else {
        &[("5", "a"), ("7", "b")]
    };
    let expected = single_route_refusal(&srv, &[("fencing-token", "3")]).await;
    assert_eq!(stale, expected);
    // ... then a and b applied: highest 7, next_seq 2.
    for &(token, body) in twin_appends {
        append_twin(&srv, token, body).await;
    }
    assert_eq!(
        refusal(&answers[3]),
        single_route_refusal(&srv, &[("fencing-token", "6")]).await
    );
    let (status, _) = srv
        .api
        .append_raw(
            "twin",
            &[("fencing-token", "7"), ("match-seq-num", "2")],
            "c",
        )
        .await;
    assert_eq!(status, 200);
    let mismatch =
        single_route_refusal(&srv, &[("fencing-token", "7"), ("match-seq-num", "2")]).await;
    assert_eq!(mismatch["error"], json!("seq_mismatch"));
    assert_eq!(refusal(&answers[5]), mismatch);
    let bodies = srv.api.bodies("s").await;
    assert_eq!(bodies, ["a", "b", "c", "d"]);
    assert_eq!(srv.engine.state("s").unwrap().highest_token, 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_append_mid_pipeline_is_refused_alone_and_match_seq_num_holds() {
    stale_and_match_seq_num_mid_pipeline().await;
}

/// Answering as each outcome is known, not in order: the refusal decided
/// at once overtakes append #0, still waiting for its sync (the client
/// sees an answer numbered 1 where 0 was next) — caught, whatever the
/// timing, because #0 waits for a sync held until #1 was refused.
#[test]
fn answering_out_of_order_is_caught() {
    let r = std::thread::spawn(|| {
        set_mutation(Mutation::SessionAckUnordered);
        runtime().block_on(async {
            let (srv, gate) = gated_server().await;
            let client = Client::new(srv.url()).unwrap();
            srv.api.fence("s", 5).await;
            gate.close();
            let session = client.append_session("s").await.unwrap();
            let (mut tx, mut rx) = (session.sender, session.receiver);
            tx.send(5, None, b"waits").await.unwrap();
            tx.send(3, None, b"stale").await.unwrap();
            tx.flush().await.unwrap();
            // The first answer comes before the sync is let go.
            let first = rx.recv().await;
            gate.open();
            let _ = first.unwrap().unwrap();
        });
    })
    .join();
    assert!(r.is_err(), "SessionAckUnordered was not caught");
}

/// A sync that fails: the append's answer is the single route's 503 with
/// `outcome_unknown`, never an ack.
async fn failed_sync_is_not_acked() {
    let dir = tempfile::tempdir().unwrap();
    let fail = Arc::new(Mutex::new(None));
    let disk = HookedStorage::failing_when(DirStorage::new(dir.path()).unwrap(), fail.clone());
    let engine = Engine::open_storage(Arc::new(disk), Config::default()).unwrap();
    let srv = TestServer::with_engine(engine, dir).await;
    let client = Client::new(srv.url()).unwrap();
    let ok = pipeline(&client, "s", &[plain(1, "before")]).await.unwrap();
    assert_eq!(seq_of(&ok[0]), 0);
    *fail.lock().unwrap() = Some(io::ErrorKind::Other);
    let answers = pipeline(&client, "s", &[plain(1, "during")]).await.unwrap();
    let body = refusal(&answers[0]);
    assert_eq!(
        (&body["error"], &body["outcome_unknown"], &body["stream"]),
        (&json!("unavailable"), &json!(true), &json!("s")),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_sync_is_answered_503_not_acked() {
    failed_sync_is_not_acked().await;
}

#[test]
fn acking_before_the_engine_answers_is_caught() {
    let r = std::thread::spawn(|| {
        set_mutation(Mutation::SessionAckBeforeDurable);
        runtime().block_on(failed_sync_is_not_acked());
    })
    .join();
    assert!(r.is_err(), "SessionAckBeforeDurable was not caught");
}

#[test]
fn the_mutation_tests_pass_without_a_mutation() {
    std::thread::spawn(|| {
        set_mutation(Mutation::None);
        runtime().block_on(stale_and_match_seq_num_mid_pipeline());
    })
    .join()
    .unwrap();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Holds every `sync_data` while closed.
#[derive(Clone, Default)]
struct Gate(Arc<(Mutex<bool>, std::sync::Condvar)>);

impl Gate {
    fn close(&self) {
        *self.0 .0.lock().unwrap() = true;
    }
    fn open(&self) {
        *self.0 .0.lock().unwrap() = false;
        self.0 .1.notify_all();
    }
    fn pass(&self) {
        let mut closed = self.0 .0.lock().unwrap();
        while *closed {
            closed = self.0 .1.wait(closed).unwrap();
        }
    }
}

async fn gated_server() -> (TestServer, Gate) {
    let dir = tempfile::tempdir().unwrap();
    let gate = Gate::default();
    let g = gate.clone();
    let disk = HookedStorage::new(DirStorage::new(dir.path()).unwrap(), move |call| {
        if call == fencelog_engine::sim::HookedCall::SyncData {
            g.pass();
        }
        Ok(())
    });
    let engine = Engine::open_storage(Arc::new(disk), Config::default()).unwrap();
    (TestServer::with_engine(engine, dir).await, gate)
}

/// A raw WebSocket to the session, for what the client never sends;
/// `recv_buffer_bytes` sets the socket's receive buffer (a client that
/// reads slowly).
async fn raw_session(
    srv: &TestServer,
    stream: &str,
    recv_buffer_bytes: Option<u32>,
) -> tokio_tungstenite::WebSocketStream<tokio::net::TcpStream> {
    let socket = TcpSocket::new_v4().unwrap();
    if let Some(b) = recv_buffer_bytes {
        socket.set_recv_buffer_size(b).unwrap();
    }
    let tcp = socket.connect(srv.addr).await.unwrap();
    let url = format!("ws://{}/v1/streams/{stream}/session", srv.addr);
    let request = url.into_client_request().unwrap();
    let (ws, resp) = tokio_tungstenite::client_async(request, tcp).await.unwrap();
    assert_eq!(resp.status().as_u16(), 101);
    ws
}

fn append_message(token: u64, body: &[u8]) -> Message {
    let mut m = Vec::new();
    wire::encode_append(&mut m, token, None, body);
    Message::Binary(m.into())
}

/// The next answer, decoded.
async fn next_answer(
    ws: &mut tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
) -> wire::SessionAnswer {
    loop {
        match ws.next().await.expect("an answer").unwrap() {
            Message::Binary(b) => return wire::decode_answer(&b).expect("a known answer"),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("expected an answer, got {other:?}"),
        }
    }
}

/// The session error and the close after it.
async fn session_end(
    ws: &mut tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
) -> (u64, u16, Value, u16) {
    let wire::SessionAnswer::Ended { n, status, body } = next_answer(ws).await else {
        panic!("expected the session error");
    };
    let close = loop {
        match ws.next().await.expect("a close").unwrap() {
            Message::Close(Some(c)) => break u16::from(c.code),
            Message::Close(None) => panic!("a close without a code"),
            _ => continue,
        }
    };
    (n, status, serde_json::from_slice(&body).unwrap(), close)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_messages_end_the_session_with_an_exact_body_and_apply_nothing_after() {
    let srv = TestServer::start().await;
    let mut short = append_message(1, b"");
    if let Message::Binary(b) = &mut short {
        *b = b.slice(..17);
    }
    let mut flags = Vec::new();
    wire::encode_append(&mut flags, 1, None, b"x");
    flags[1] = 0x80;
    let limit = wire::APPEND_HEADER_BYTES + Config::default().batch_bytes_max;
    let cases: Vec<(Message, u16, u16, Value)> = vec![
        (
            Message::Binary(Bytes::from_static(&[9; 20])),
            400,
            1008,
            json!({"error": "bad_request", "message": "append message 1: unknown message kind 9 (1 is an append, 2 the end)", "stream": "s"}),
        ),
        (
            short,
            400,
            1008,
            json!({"error": "bad_request", "message": "append message 1: an append message is at least 18 bytes, got 17", "stream": "s"}),
        ),
        (
            Message::Binary(flags.into()),
            400,
            1008,
            json!({"error": "bad_request", "message": "append message 1: unknown flags 0x80 (only bit 0, match_seq_num, is defined)", "stream": "s"}),
        ),
        (
            Message::Text("{\"fencing_token\": 1}".into()),
            400,
            1003,
            json!({"error": "bad_request", "message": "a text message: every append is a binary message (fencelog_api::session)", "stream": "s"}),
        ),
        (
            append_message(1, &vec![b'x'; limit]),
            413,
            1009,
            json!({"error": "too_large", "limit": limit, "stream": "s"}),
        ),
    ];
    for (i, (bad, status, close, body)) in cases.into_iter().enumerate() {
        let mut ws = raw_session(&srv, "s", None).await;
        ws.send(append_message(1, format!("good{i}").as_bytes()))
            .await
            .unwrap();
        let sent_bad = ws.send(bad).await;
        // Never read as an append.
        let sent_after = ws.send(append_message(1, b"after")).await;
        if status == 413 {
            // The server refuses an oversized message at its frame header
            // and stops reading, so closing its socket with the rest of that
            // message unread resets the connection, possibly while this
            // client is still writing. The answers it sent before the reset
            // are queued here all the same and are read below.
            if let Err(e) = sent_bad.and(sent_after) {
                eprintln!("case {i}: writing after the oversized message: {e}");
            }
        } else {
            sent_bad.unwrap();
            sent_after.unwrap();
        }
        let wire::SessionAnswer::Accepted { n: 0, ack } = next_answer(&mut ws).await else {
            panic!("case {i}: the good append first");
        };
        assert_eq!(ack.first_seq, i as u64);
        let (n, got_status, mut got, got_close) = session_end(&mut ws).await;
        if status == 413 {
            // The WebSocket layer's own words follow ours.
            let message = got["message"].as_str().unwrap().to_string();
            assert!(
                message.starts_with(&format!("an append message is at most {limit} bytes")),
                "{message}"
            );
            got.as_object_mut().unwrap().remove("message");
        }
        assert_eq!(
            (n, got_status, got, got_close),
            (1, status, body, close),
            "case {i}"
        );
    }
    let bodies = srv.api.bodies("s").await;
    assert_eq!(bodies, ["good0", "good1", "good2", "good3", "good4"]);
    srv.api.assert_healthy().await;
}

/// A client that sends and never reads: the server reads only while the
/// answers it owes fit its bound and the socket, so it applies a bounded
/// number of appends and buffers nothing else; once the client reads,
/// every append is answered, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_costs_bounded_memory() {
    let srv = TestServer::start_with(
        Config::default(),
        |l| l.session_appends_max = 16,
        ServerConfig {
            send_buffer_bytes: 4096,
            ..ServerConfig::default()
        },
    )
    .await;
    // 40 MiB: more than the kernel's buffers between the two can hold.
    const APPENDS: u64 = 10_000;
    const BODY_BYTES: usize = 4096;
    let ws = raw_session(&srv, "s", Some(4096)).await;
    let (mut sink, mut answers) = ws.split();
    let sending = tokio::spawn(async move {
        for i in 0..APPENDS {
            let mut body = vec![0u8; BODY_BYTES];
            body[..8].copy_from_slice(&i.to_le_bytes());
            sink.feed(append_message(1, &body)).await.unwrap();
        }
        sink.flush().await.unwrap();
        sink
    });
    // No signal says "the server stopped reading": watch the applied count
    // until it holds still.
    let mut last = u64::MAX;
    let mut still = 0;
    while still < 10 {
        tokio::time::sleep(Duration::from_millis(30)).await;
        let now = srv.engine.state("s").map_or(0, |s| s.next_seq);
        still = if now == last { still + 1 } else { 0 };
        last = now;
    }
    // Answers the WebSocket's 64 KiB write buffer and the two 8 KiB
    // socket buffers hold, plus the 16 in flight (about 1,700), doubled:
    // far below what was sent.
    let bound = 2 * (((64 + 16) << 10) / wire::ACK_BYTES as u64 + 16);
    assert!(
        last > 0 && last < bound,
        "applied {last} while not read (bound {bound})"
    );
    assert!(!sending.is_finished(), "the client could send everything");
    for i in 0..APPENDS {
        match next_answer_split(&mut answers).await {
            wire::SessionAnswer::Accepted { n, ack } => assert_eq!((n, ack.first_seq), (i, i)),
            other => panic!("append {i}: {other:?}"),
        }
    }
    let _sink = sending.await.unwrap();
    assert_eq!(srv.engine.state("s").unwrap().next_seq, APPENDS);
}

async fn next_answer_split(
    answers: &mut futures_util::stream::SplitStream<
        tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
    >,
) -> wire::SessionAnswer {
    match answers.next().await.expect("an answer").unwrap() {
        Message::Binary(b) => wire::decode_answer(&b).expect("a known answer"),
        other => panic!("expected an answer, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_is_authorized_like_the_append_route() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open_with(dir.path(), Config::default()).unwrap();
    let token = |name: &str, scopes: &[&str], prefix: &str| TokenSettings {
        name: name.into(),
        sha256: to_hex(&hash_secret(&format!("{name}-secret"))),
        scopes: scopes.iter().map(|s| s.to_string()).collect(),
        stream_prefix: prefix.into(),
    };
    let auth = Auth::from_settings(&AuthSettings {
        tokens: vec![
            token("writer", &["append"], "in-"),
            token("reader", &["read"], ""),
        ],
    })
    .unwrap();
    let state = AppState::new(engine).with_auth(auth);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(fencelog_server::server::serve(
        listener,
        state,
        ServerConfig::default(),
        std::future::pending(),
    ));
    let open = |secret: Option<&str>, stream: &str| {
        let mut b = Client::builder(url.clone());
        if let Some(s) = secret {
            b = b.token(s);
        }
        let client = b.build().unwrap();
        let stream = stream.to_string();
        async move { client.append_session(&stream).await.map(|_| ()) }
    };
    let refused = |r: Result<(), ClientError>| r.unwrap_err().answer().unwrap().to_value();
    assert_eq!(
        refused(open(None, "in-s").await),
        json!({"error": "unauthenticated", "message": "this server requires an access token: send Authorization: Bearer <secret>"})
    );
    assert_eq!(
        refused(open(Some("reader-secret"), "in-s").await),
        json!({"error": "forbidden", "message": "token \"reader\" lacks scope append for stream \"in-s\"", "principal": "reader", "scope": "append", "stream": "in-s"})
    );
    assert_eq!(
        refused(open(Some("writer-secret"), "out-s").await),
        json!({"error": "forbidden", "message": "token \"writer\" covers only streams starting with \"in-\", not \"out-s\"", "principal": "writer", "scope": "append", "stream": "out-s"})
    );
    let client = Client::builder(url.clone())
        .token("writer-secret")
        .build()
        .unwrap();
    let answers = pipeline(&client, "in-s", &[plain(1, "x")]).await.unwrap();
    assert_eq!(seq_of(&answers[0]), 0);
}

/// A server shutting down stops reading, answers every append it read, and
/// ends the session with the reason and the first append not applied; the
/// drain waits for that, so everything answered is durable after restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_answers_what_was_read_then_ends_the_session() {
    let mut srv = TestServer::start().await;
    let mut ws = raw_session(&srv, "s", None).await;
    for i in 0..100u64 {
        ws.send(append_message(1, &i.to_le_bytes())).await.unwrap();
    }
    for i in 0..100u64 {
        let wire::SessionAnswer::Accepted { n, ack } = next_answer(&mut ws).await else {
            panic!("append {i} refused");
        };
        assert_eq!((n, ack.first_seq), (i, i));
    }
    let dir = std::mem::replace(&mut srv.dir, tempfile::tempdir().unwrap());
    let stopping = tokio::spawn(srv.stop());
    let (n, status, body, close) = session_end(&mut ws).await;
    assert_eq!(
        (n, status, body, close),
        (
            100,
            503,
            json!({"error": "unavailable", "message": "the server is shutting down", "stream": "s"}),
            1001
        )
    );
    drop(ws);
    stopping.await.unwrap().unwrap();
    let engine = Engine::open_with(dir.path(), Config::default()).unwrap();
    assert_eq!(engine.state("s").unwrap().next_seq, 100);
    engine.shutdown().await;
}
