//! The HTTP/1.1 front (the server's `front.rs`), over real sockets: it
//! answers plain requests itself and hands a connection to hyper at the
//! first request that is not plain, with every unanswered byte. What it
//! must never do: answer out of order, answer twice, drop or reorder a
//! pipelined request at the hand-over, wait for a head it cannot finish,
//! or keep an idle connection open through shutdown. (That its answers
//! are hyper's, byte for byte, is the comparison in the crate's
//! `server/append_route_tests.rs`.)

use fencelog_engine::Config;
use fencelog_server::server::ServerConfig;
use fencelog_testkit::http::{stale_body, TestServer};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The bound on waits that a correct server ends by itself (a close, an
/// answer): it only keeps a broken build from hanging the suite.
const HANG: Duration = Duration::from_secs(20);

/// One answer read off a keep-alive connection.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&self.body)))
    }

    fn header(&self, name: &str) -> Option<&str> {
        let mut values = self.headers.iter().filter(|(n, _)| n == name);
        let value = values.next().map(|(_, v)| v.as_str());
        assert!(
            values.next().is_none(),
            "{name} twice in {:?}",
            self.headers
        );
        value
    }
}

/// A client connection that reads answers one at a time, by their framing.
struct Client {
    tcp: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    async fn open(addr: SocketAddr) -> Client {
        let tcp = TcpStream::connect(addr).await.unwrap();
        tcp.set_nodelay(true).unwrap();
        Client {
            tcp,
            buf: Vec::new(),
        }
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.tcp.write_all(bytes).await.unwrap();
    }

    /// Reads until `done` finds its end in the buffer.
    async fn fill_until(&mut self, done: impl Fn(&[u8]) -> Option<usize>) -> Vec<u8> {
        loop {
            if let Some(n) = done(&self.buf) {
                return self.buf.drain(..n).collect();
            }
            let mut chunk = [0u8; 4096];
            let n = tokio::time::timeout(HANG, self.tcp.read(&mut chunk))
                .await
                .expect("the server answers")
                .unwrap();
            assert!(
                n > 0,
                "closed mid-answer; have {:?}",
                String::from_utf8_lossy(&self.buf)
            );
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// The next whole answer.
    async fn answer(&mut self) -> Answer {
        let head = self
            .fill_until(|b| find(b, b"\r\n\r\n").map(|at| at + 4))
            .await;
        let head = String::from_utf8(head).unwrap();
        let mut lines = head.trim_end().split("\r\n");
        let status = lines
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let headers: Vec<(String, String)> = lines
            .map(|l| {
                let (n, v) = l.split_once(": ").unwrap();
                (n.to_ascii_lowercase(), v.to_string())
            })
            .collect();
        let mut answer = Answer {
            status,
            headers,
            body: Vec::new(),
        };
        if let Some(n) = answer.header("content-length") {
            let n: usize = n.parse().unwrap();
            answer.body = self.fill_until(|b| (b.len() >= n).then_some(n)).await;
        } else if answer.header("transfer-encoding") == Some("chunked") {
            loop {
                let line = self.fill_until(|b| find(b, b"\r\n").map(|at| at + 2)).await;
                let size = usize::from_str_radix(std::str::from_utf8(&line).unwrap().trim(), 16);
                let size = size.unwrap();
                let chunk = self
                    .fill_until(|b| (b.len() >= size + 2).then_some(size + 2))
                    .await;
                assert_eq!(&chunk[size..], b"\r\n");
                if size == 0 {
                    break;
                }
                answer.body.extend_from_slice(&chunk[..size]);
            }
        }
        answer
    }

    /// Reads until the server closes; true when it did so with nothing
    /// more said.
    async fn closed_quietly(mut self) -> bool {
        let mut rest = Vec::new();
        tokio::time::timeout(HANG, self.tcp.read_to_end(&mut rest))
            .await
            .expect("the server closes the connection")
            .unwrap();
        self.buf.extend_from_slice(&rest);
        self.buf.is_empty()
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn assert_has(hay: &[u8], needle: &[u8]) {
    assert!(
        find(hay, needle).is_some(),
        "no {:?} in {:?}",
        String::from_utf8_lossy(needle),
        String::from_utf8_lossy(hay)
    );
}

/// A raw append of `body` to stream `s` with `token`, keep-alive.
fn append(token: u64, body: &str) -> Vec<u8> {
    format!(
        "POST /v1/streams/s/records HTTP/1.1\r\nHost: t\r\nFencing-Token: {token}\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The same append with a chunked body: hyper's to answer.
fn chunked_append(token: u64, body: &str) -> Vec<u8> {
    format!(
        "POST /v1/streams/s/records HTTP/1.1\r\nHost: t\r\nFencing-Token: {token}\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
        body.len()
    )
    .into_bytes()
}

fn get(target: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes()
}

/// The bodies and seqs of stream `s`, read back through the API.
async fn bodies(srv: &TestServer) -> Vec<(u64, String)> {
    let (status, page) = srv.api.get("/v1/streams/s/records?start_seq=0").await;
    assert_eq!(status, 200, "{page}");
    page["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["seq"].as_u64().unwrap(),
                r["body"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn pipelined_requests_in_one_write_are_answered_once_each_in_order() {
    let srv = TestServer::start().await;
    let mut c = Client::open(srv.addr).await;
    let mut burst = Vec::new();
    for req in [
        append(10, "a"),
        append(10, "b"),
        get("/v1/streams/s/records?start_seq=0"),
        append(9, "stale"),
        get("/v1/nowhere"),
        append(11, "c"),
    ] {
        burst.extend_from_slice(&req);
    }
    c.send(&burst).await;
    let answers = [
        c.answer().await,
        c.answer().await,
        c.answer().await,
        c.answer().await,
        c.answer().await,
        c.answer().await,
    ];
    let statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
    assert_eq!(statuses, [200, 200, 200, 409, 404, 200]);
    let seq = |a: &Answer| a.json()["first_seq"].clone();
    assert_eq!(
        [seq(&answers[0]), seq(&answers[1]), seq(&answers[5])],
        [json!(0), json!(1), json!(2)]
    );
    let read: Vec<Value> = answers[2].json()["records"].as_array().unwrap().clone();
    assert_eq!(
        read.iter().map(|r| r["body"].clone()).collect::<Vec<_>>(),
        [json!("a"), json!("b")]
    );
    assert_eq!(answers[3].json(), stale_body("s", 9, 10, 2));
    assert_eq!(answers[4].json()["error"], json!("not_found"));
    for a in &answers {
        assert_eq!(a.header("connection"), None, "{a:?}");
        assert!(a.header("date").is_some(), "{a:?}");
    }
    assert_eq!(
        bodies(&srv).await,
        [(0, "a".into()), (1, "b".into()), (2, "c".into())]
    );
    // Nothing more was said: one answer per request.
    c.send(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .await;
    let last = c.answer().await;
    assert_eq!(
        (last.status, last.header("connection")),
        (200, Some("close"))
    );
    assert!(c.closed_quietly().await);
}

#[tokio::test]
async fn a_request_cut_at_any_byte_is_answered_once() {
    let srv = TestServer::start().await;
    let mut c = Client::open(srv.addr).await;
    let req = append(1, "cut");
    for cut in 1..req.len() {
        c.send(&req[..cut]).await;
        c.send(&req[cut..]).await;
        let a = c.answer().await;
        assert_eq!(
            (a.status, a.json()["first_seq"].clone()),
            (200, json!(cut - 1)),
            "cut at {cut}"
        );
    }
    let (_, state) = srv.api.state("s").await;
    assert_eq!(state["next_seq"], json!(req.len() - 1));
}

#[tokio::test]
async fn hyper_takes_over_mid_connection_with_the_pipelined_rest_in_order() {
    let srv = TestServer::start().await;
    let mut c = Client::open(srv.addr).await;
    let mut burst = append(5, "front");
    // Chunked: hyper's from here on, this request and the ones after it.
    burst.extend_from_slice(&chunked_append(5, "chunked"));
    burst.extend_from_slice(&append(5, "after"));
    burst.extend_from_slice(&append(4, "stale"));
    c.send(&burst).await;
    let mut seqs = Vec::new();
    for _ in 0..3 {
        let a = c.answer().await;
        assert_eq!(a.status, 200, "{a:?}");
        seqs.push(a.json()["first_seq"].as_u64().unwrap());
    }
    let stale = c.answer().await;
    assert_eq!(
        (stale.status, stale.json()),
        (409, stale_body("s", 4, 5, 3))
    );
    assert_eq!(seqs, [0, 1, 2]);
    let want: Vec<(u64, String)> = vec![
        (0, "front".into()),
        (1, "chunked".into()),
        (2, "after".into()),
    ];
    assert_eq!(bodies(&srv).await, want);

    // A live tail after a plain request on the same connection (the
    // front's, as the request before it): it sees what was appended.
    let mut t = Client::open(srv.addr).await;
    t.send(&append(5, "tailed")).await;
    assert_eq!(t.answer().await.status, 200);
    t.send(&get("/v1/streams/s/records?start_seq=3&follow=true"))
        .await;
    let head = t
        .fill_until(|b| find(b, b"\r\n\r\n").map(|at| at + 4))
        .await;
    let head = String::from_utf8(head).unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/event-stream"),
        "{head}"
    );
    let event = t.fill_until(|b| find(b, b"tailed").map(|at| at + 6)).await;
    assert_has(&event, b"event: records");
}

#[tokio::test]
async fn a_body_that_stops_coming_is_hyper_s_to_time_out() {
    let srv = TestServer::start_with(
        Config::default(),
        |l| l.body_read_timeout = Duration::from_millis(100),
        ServerConfig::default(),
    )
    .await;
    assert_eq!(srv.api.fence("s", 1).await.0, 200);
    let mut c = Client::open(srv.addr).await;
    let req = append(1, "0123456789");
    c.send(&req[..req.len() - 4]).await;
    let a = c.answer().await;
    assert_eq!(
        (a.status, a.json()["error"].clone()),
        (408, json!("request_timeout"))
    );
    let (_, state) = srv.api.state("s").await;
    assert_eq!(state["next_seq"], json!(0));
}

#[tokio::test]
async fn a_target_hyper_would_refuse_is_refused_alike_and_closed() {
    let srv = TestServer::start().await;
    let mut c = Client::open(srv.addr).await;
    // httparse takes a `"` in the target; the `http` crate's URI does not.
    c.send(b"GET /v1/streams/s/records?x=\"1\" HTTP/1.1\r\nHost: t\r\n\r\n")
        .await;
    let a = c.answer().await;
    assert_eq!(
        (a.status, a.json(), a.header("connection")),
        (
            400,
            json!({"error": "bad_request", "message": "malformed HTTP request"}),
            Some("close")
        )
    );
    assert!(c.closed_quietly().await);
}

#[tokio::test]
async fn an_idle_connection_is_closed_by_shutdown_without_waiting_for_the_drain() {
    let srv = TestServer::start_with(
        Config::default(),
        |_| {},
        ServerConfig {
            // Were the idle connection waited for, stop would take this long.
            drain_timeout: Duration::from_secs(600),
            header_read_timeout: Duration::from_secs(600),
            ..ServerConfig::default()
        },
    )
    .await;
    let mut idle = Client::open(srv.addr).await;
    idle.send(&append(1, "x")).await;
    assert_eq!(idle.answer().await.status, 200);
    let mut half = Client::open(srv.addr).await;
    half.send(b"GET /healthz HTTP/1.1\r\nHo").await;
    let stopping = tokio::spawn(srv.stop());
    assert!(idle.closed_quietly().await);
    assert!(half.closed_quietly().await);
    tokio::time::timeout(HANG, stopping)
        .await
        .expect("the drain ends once the connections are closed")
        .unwrap()
        .unwrap();
}

/// Live tails are the front's; with pings an hour apart, only its watch
/// on the socket can notice in time that a tail's client has gone.
async fn quiet_tail_server() -> TestServer {
    TestServer::start_with(
        Config::default(),
        |l| l.ping_interval = Duration::from_secs(3600),
        ServerConfig::default(),
    )
    .await
}

async fn tails_live(srv: &TestServer) -> String {
    let text = srv.api.metrics_text().await;
    let line = text.lines().find(|l| l.starts_with("fencelog_tails_live "));
    line.expect("the gauge is served").to_string()
}

/// A quiet server, stream `s` holding one record "a", and a client whose
/// live tail of it has caught up.
async fn caught_up_tail() -> (TestServer, Client) {
    let srv = quiet_tail_server().await;
    assert_eq!(srv.api.append("s", 1, &["a"]).await.0, 200);
    let mut c = Client::open(srv.addr).await;
    c.send(&get("/v1/streams/s/records?start_seq=0&follow=true"))
        .await;
    c.fill_until(|b| find(b, b"event: caught_up").map(|at| at + 16))
        .await;
    (srv, c)
}

#[tokio::test]
async fn a_tail_whose_client_leaves_ends_with_its_connection_at_once() {
    let (srv, mut c) = caught_up_tail().await;
    assert_eq!(tails_live(&srv).await, "fencelog_tails_live 1");
    // The client is done sending (as one that closes is): the server ends
    // the tail and closes, with no ping or event to write first.
    c.tcp.shutdown().await.unwrap();
    let mut rest = Vec::new();
    tokio::time::timeout(HANG, c.tcp.read_to_end(&mut rest))
        .await
        .expect("the server closes the tail's connection")
        .unwrap();
    // The tail was dropped before the connection closed.
    assert_eq!(tails_live(&srv).await, "fencelog_tails_live 0");
}

#[tokio::test]
async fn a_tail_with_nothing_to_send_has_its_head_sent_at_once() {
    let srv = quiet_tail_server().await;
    let mut c = Client::open(srv.addr).await;
    c.send(
        b"GET /v1/streams/later/records?wait_for_stream=true HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n",
    )
    .await;
    let head = c
        .fill_until(|b| find(b, b"\r\n\r\n").map(|at| at + 4))
        .await;
    let head = String::from_utf8(head).unwrap().to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
    assert!(head.contains("content-type: text/event-stream"), "{head}");
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    // Nothing else until the stream exists; then its first record.
    assert!(c.buf.is_empty(), "{:?}", String::from_utf8_lossy(&c.buf));
    assert_eq!(srv.api.append("later", 1, &["first"]).await.0, 200);
    let event = c.fill_until(|b| find(b, b"first").map(|at| at + 5)).await;
    assert_has(&event, b"event: records");
}

#[tokio::test]
async fn a_request_sent_behind_a_tail_is_answered_once_the_tail_ends() {
    let (srv, mut c) = caught_up_tail().await;
    // Read by the tail's watch on the socket, and kept for after it.
    c.send(&get("/v1/streams/s/records?start_seq=0")).await;
    let (status, _) = srv
        .api
        .post_json("/v1/streams/s/seal", &json!({"fencing_token": 1}))
        .await;
    assert_eq!(status, 200);
    let end = c
        .fill_until(|b| find(b, b"\r\n0\r\n\r\n").map(|at| at + 7))
        .await;
    assert_has(&end, b"event: sealed");
    let read = c.answer().await;
    assert_eq!(read.status, 200, "{read:?}");
    let records = read.json()["records"].clone();
    assert_eq!(records[0]["body"], json!("a"), "{records}");
    assert_eq!(records.as_array().unwrap().len(), 1, "{records}");
}
