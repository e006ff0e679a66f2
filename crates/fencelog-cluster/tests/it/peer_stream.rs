//! The peer stream's calling side against scripted peers on loopback:
//! answers matched by id over one connection, a peer's refusal, a slow
//! RPC timing out alone, a peer that closes or stalls with calls waiting
//! (`Lost`, then a new connection), nothing listening (`Unreachable`), and the HTTP posts
//! for snapshots, for `PeerRpc::Http` and for a peer without the route.

use bytes::BytesMut;
use fencelog_cluster::peer::{
    put_answer, take_request, HttpTransport, PeerRpc, Request, STALL, STREAM_PATH, UPGRADE_PROTOCOL,
};
use fencelog_cluster::rpc::{RpcKind, Transport, TransportError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

const MAX: usize = 1 << 20;
const LONG: Duration = Duration::from_secs(10);

/// A connection to the scripted peer, after its request head.
struct Accepted {
    tcp: TcpStream,
    /// The request line.
    line: String,
    /// Bytes read past the head.
    rest: BytesMut,
}

impl Accepted {
    async fn switch(&mut self) {
        let head = format!(
            "HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: {UPGRADE_PROTOCOL}\r\n\r\n"
        );
        self.tcp.write_all(head.as_bytes()).await.unwrap();
    }

    /// The next request frame; `None` when the caller closed.
    async fn request(&mut self) -> Option<Request> {
        loop {
            if let Some(r) = take_request(&mut self.rest, MAX).unwrap() {
                return Some(r);
            }
            if self.tcp.read_buf(&mut self.rest).await.unwrap() == 0 {
                return None;
            }
        }
    }

    async fn answer(&mut self, id: u64, outcome: Result<&[u8], &str>) {
        let mut f = Vec::new();
        put_answer(&mut f, id, outcome);
        self.tcp.write_all(&f).await.unwrap();
    }

    async fn plain(&mut self, status: &str, body: &[u8]) {
        let head = format!(
            "HTTP/1.1 {status}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        self.tcp.write_all(head.as_bytes()).await.unwrap();
        self.tcp.write_all(body).await.unwrap();
    }
}

/// A listener whose connections arrive, heads read, on the channel.
async fn peer() -> (String, mpsc::Receiver<Accepted>, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let (tx, rx) = mpsc::channel(16);
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = l.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let tx = tx.clone();
            tokio::spawn(async move {
                let a = read_head(tcp).await;
                let _ = tx.send(a).await;
            });
        }
    });
    (addr, rx, accepted)
}

async fn read_head(mut tcp: TcpStream) -> Accepted {
    let mut buf = BytesMut::new();
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8(buf[..end].to_vec()).unwrap();
            let rest = buf.split_off(end + 4);
            let line = head.lines().next().unwrap().to_string();
            let lower = head.to_ascii_lowercase();
            let length = lower
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .map(|n| n.trim().parse::<usize>().unwrap());
            let mut a = Accepted { tcp, line, rest };
            if let Some(n) = length {
                while a.rest.len() < n {
                    a.tcp.read_buf(&mut a.rest).await.unwrap();
                }
            }
            return a;
        }
        assert!(
            tcp.read_buf(&mut buf).await.unwrap() > 0,
            "closed in the head"
        );
    }
}

fn call(
    t: &Arc<HttpTransport>,
    addr: &str,
    shard: u32,
    kind: RpcKind,
    body: &[u8],
    timeout: Duration,
) -> tokio::task::JoinHandle<Result<Vec<u8>, TransportError>> {
    let f = t.call(2, addr, shard, kind, body.to_vec(), timeout);
    tokio::spawn(f)
}

#[tokio::test]
async fn answers_out_of_order_reach_their_own_calls_over_one_connection() {
    let (addr, mut conns, accepted) = peer().await;
    let t = Arc::new(HttpTransport::new());
    let first = call(&t, &addr, 1, RpcKind::Append, b"one", LONG);
    let mut c = conns.recv().await.unwrap();
    assert_eq!(c.line, format!("GET {STREAM_PATH} HTTP/1.1"));
    c.switch().await;
    let a = c.request().await.unwrap();
    assert_eq!(
        (a.shard, a.kind, &a.body[..]),
        (1, RpcKind::Append, &b"one"[..])
    );
    let second = call(&t, &addr, 7, RpcKind::Vote, b"two", LONG);
    let b = c.request().await.unwrap();
    assert_eq!(
        (b.shard, b.kind, &b.body[..]),
        (7, RpcKind::Vote, &b"two"[..])
    );
    c.answer(b.id, Ok(b"answer two")).await;
    c.answer(a.id, Ok(b"answer one")).await;
    assert_eq!(second.await.unwrap(), Ok(b"answer two".to_vec()));
    assert_eq!(first.await.unwrap(), Ok(b"answer one".to_vec()));
    let third = call(&t, &addr, 3, RpcKind::ReadIndex, b"three", LONG);
    let r = c.request().await.unwrap();
    c.answer(r.id, Err("shard 3 out of range")).await;
    assert_eq!(
        third.await.unwrap(),
        Err(TransportError::Lost(
            "node 2 answered: shard 3 out of range".into()
        ))
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "one connection for all");
}

#[tokio::test]
async fn a_peer_that_closes_loses_the_waiting_calls_and_the_next_call_reconnects() {
    let (addr, mut conns, accepted) = peer().await;
    let t = Arc::new(HttpTransport::new());
    let waiting = call(&t, &addr, 0, RpcKind::Forward, b"op", LONG);
    let mut c = conns.recv().await.unwrap();
    c.switch().await;
    c.request().await.unwrap();
    drop(c);
    let got = waiting.await.unwrap();
    assert!(
        matches!(&got, Err(TransportError::Lost(m)) if m.contains("closed the stream")),
        "{got:?}"
    );
    let next = call(&t, &addr, 0, RpcKind::Forward, b"again", LONG);
    let mut c = conns.recv().await.unwrap();
    c.switch().await;
    let r = c.request().await.unwrap();
    assert_eq!(&r.body[..], b"again");
    c.answer(r.id, Ok(b"done")).await;
    assert_eq!(next.await.unwrap(), Ok(b"done".to_vec()));
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_stalled_stream_is_closed_after_the_stall_time_and_replaced() {
    let (addr, mut conns, accepted) = peer().await;
    let t = Arc::new(HttpTransport::new());
    let short = Duration::from_millis(300);
    let stalled = call(&t, &addr, 4, RpcKind::Append, b"entries", short);
    let mut c = conns.recv().await.unwrap();
    c.switch().await;
    c.request().await.unwrap();
    // The connection stays open and silent, as behind a partition.
    let got = stalled.await.unwrap();
    assert!(
        matches!(&got, Err(TransportError::Lost(m)) if m.contains("no answer within")),
        "{got:?}"
    );
    // A timeout alone keeps the connection; nothing read for the stall
    // time with the call out closes it.
    let waited = std::time::Instant::now();
    assert_eq!(
        c.request().await,
        None,
        "the caller closed the stalled stream"
    );
    assert!(
        waited.elapsed() + short >= STALL,
        "closed before the stall time"
    );
    let next = call(&t, &addr, 4, RpcKind::Append, b"entries", LONG);
    let mut d = conns.recv().await.unwrap();
    d.switch().await;
    let r = d.request().await.unwrap();
    d.answer(r.id, Ok(b"ok")).await;
    assert_eq!(next.await.unwrap(), Ok(b"ok".to_vec()));
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_slow_rpc_times_out_alone_and_its_late_answer_is_dropped() {
    let (addr, mut conns, accepted) = peer().await;
    let t = Arc::new(HttpTransport::new());
    let slow = call(
        &t,
        &addr,
        1,
        RpcKind::ReadIndex,
        b"slow",
        Duration::from_millis(200),
    );
    let mut c = conns.recv().await.unwrap();
    c.switch().await;
    let a = c.request().await.unwrap();
    let quick = call(&t, &addr, 2, RpcKind::Vote, b"quick", LONG);
    let b = c.request().await.unwrap();
    c.answer(b.id, Ok(b"granted")).await;
    assert_eq!(quick.await.unwrap(), Ok(b"granted".to_vec()));
    let got = slow.await.unwrap();
    assert!(
        matches!(&got, Err(TransportError::Lost(m)) if m.contains("no answer within")),
        "{got:?}"
    );
    // The late answer finds nobody; the connection serves the next call.
    c.answer(a.id, Ok(b"late")).await;
    let next = call(&t, &addr, 1, RpcKind::ReadIndex, b"again", LONG);
    let r = c.request().await.unwrap();
    assert_eq!(&r.body[..], b"again");
    c.answer(r.id, Ok(b"index")).await;
    assert_eq!(next.await.unwrap(), Ok(b"index".to_vec()));
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "one connection throughout"
    );
}

#[tokio::test]
async fn nothing_listening_is_unreachable() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    drop(l);
    let t = Arc::new(HttpTransport::new());
    let got = call(&t, &addr, 0, RpcKind::Vote, b"v", LONG).await.unwrap();
    assert!(
        matches!(got, Err(TransportError::Unreachable(_))),
        "{got:?}"
    );
}

#[tokio::test]
async fn a_refused_upgrade_is_unreachable() {
    let (addr, mut conns, _) = peer().await;
    let t = Arc::new(HttpTransport::new());
    let got = call(&t, &addr, 0, RpcKind::Vote, b"v", LONG);
    let mut c = conns.recv().await.unwrap();
    c.plain("401 Unauthorized", b"wrong peer secret").await;
    let got = got.await.unwrap();
    assert!(
        matches!(&got, Err(TransportError::Unreachable(m)) if m.contains("401") && m.contains("wrong peer secret")),
        "{got:?}"
    );
}

#[tokio::test]
async fn a_peer_without_the_route_snapshots_and_http_mode_get_posts() {
    let (addr, mut conns, accepted) = peer().await;
    let t = Arc::new(HttpTransport::new());
    // An older node: 404 to the upgrade, then the RPC as a POST.
    let got = call(&t, &addr, 3, RpcKind::Vote, b"v", LONG);
    let mut c = conns.recv().await.unwrap();
    c.plain("404 Not Found", b"").await;
    let mut p = conns.recv().await.unwrap();
    assert_eq!(p.line, "POST /_cluster/raft/3/vote HTTP/1.1");
    assert_eq!(&p.rest[..], b"v");
    p.plain("200 OK", b"granted").await;
    assert_eq!(got.await.unwrap(), Ok(b"granted".to_vec()));
    // Within the fallback's time, no new upgrade is tried.
    let got = call(&t, &addr, 3, RpcKind::Append, b"e", LONG);
    let mut p = conns.recv().await.unwrap();
    assert_eq!(p.line, "POST /_cluster/raft/3/append HTTP/1.1");
    p.plain("200 OK", b"appended").await;
    assert_eq!(got.await.unwrap(), Ok(b"appended".to_vec()));
    // Snapshots are posts even where a stream would be open.
    let (addr, mut conns, _) = peer().await;
    let got = call(&t, &addr, 1, RpcKind::Snapshot, b"s", LONG);
    let mut p = conns.recv().await.unwrap();
    assert_eq!(p.line, "POST /_cluster/raft/1/snapshot HTTP/1.1");
    p.plain("200 OK", b"installed").await;
    assert_eq!(got.await.unwrap(), Ok(b"installed".to_vec()));
    // And every RPC is a post with PeerRpc::Http.
    let http = Arc::new(HttpTransport::new().peer_rpc(PeerRpc::Http));
    let got = call(&http, &addr, 5, RpcKind::Forward, b"f", LONG);
    let mut p = conns.recv().await.unwrap();
    assert_eq!(p.line, "POST /_cluster/raft/5/forward HTTP/1.1");
    p.plain("200 OK", b"forwarded").await;
    assert_eq!(got.await.unwrap(), Ok(b"forwarded".to_vec()));
    assert!(accepted.load(Ordering::SeqCst) >= 3);
}
