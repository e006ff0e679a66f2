//! `fencelog_client::Client` against a real server over a socket: every typed
//! error, with its fields, and which requests are (never) retried.

use bytes::Bytes;
use fencelog_client::{Client, ClientError, ReadOptions};
use fencelog_engine::sim::HookedStorage;
use fencelog_engine::{Config, DirStorage, Engine};
use fencelog_server::server::ServerConfig;
use fencelog_testkit::http::TestServer;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A server in this process on a free port, and a client for it; the
/// server stops when the `TestServer` is dropped.
async fn server(config: Config) -> (TestServer, Client) {
    let srv = TestServer::start_with(config, |_| {}, ServerConfig::default()).await;
    let client = Client::new(srv.url().to_string()).unwrap();
    (srv, client)
}

#[tokio::test]
async fn stale_token_carries_presented_highest_and_next_seq() {
    let (_srv, c) = server(Config::default()).await;
    c.append("orders", 41, ["A1"]).await.unwrap();
    let ack = c.append("orders", 42, ["B1"]).await.unwrap();
    assert_eq!((ack.first_seq, ack.next_seq, ack.fencing_token), (1, 2, 42));

    for err in [
        c.append("orders", 41, ["late"]).await.unwrap_err(),
        c.append_raw("orders", 41, "late", None).await.unwrap_err(),
        c.fence("orders", 41).await.map(|_| ()).unwrap_err(),
    ] {
        match err {
            ClientError::StaleToken {
                presented,
                highest,
                next_seq,
                answer,
            } => {
                assert_eq!((presented, highest, next_seq), (41, 42, 2));
                assert_eq!(answer.stream(), Some("orders"));
            }
            other => panic!("expected StaleToken, got {other:?}"),
        }
    }
    let read = c.read("orders", 0, &ReadOptions::default()).await.unwrap();
    let bodies: Vec<Bytes> = read.records.into_iter().map(|r| r.body).collect();
    assert_eq!(bodies, vec![Bytes::from("A1"), Bytes::from("B1")]);
}

#[tokio::test]
async fn seq_mismatch_reports_expected_and_actual() {
    let (_srv, c) = server(Config::default()).await;
    c.append("s", 1, ["a", "b"]).await.unwrap();
    match c.append_with("s", 1, ["c"], Some(5)).await.unwrap_err() {
        ClientError::SeqMismatch {
            expected, next_seq, ..
        } => assert_eq!((expected, next_seq), (5, 2)),
        other => panic!("expected SeqMismatch, got {other:?}"),
    }
    match c.append_raw("s", 1, "c", Some(0)).await.unwrap_err() {
        ClientError::SeqMismatch {
            expected, next_seq, ..
        } => assert_eq!((expected, next_seq), (0, 2)),
        other => panic!("expected SeqMismatch, got {other:?}"),
    }
    let ack = c.append_with("s", 1, ["c"], Some(2)).await.unwrap();
    assert_eq!(ack.first_seq, 2);
}

#[tokio::test]
async fn not_found_out_of_range_too_large_and_bad_request() {
    let config = Config {
        batch_records_max: 2,
        batch_bytes_max: 16,
        ..Config::default()
    };
    let (_srv, c) = server(config).await;
    assert!(matches!(
        c.state("missing").await,
        Err(ClientError::StreamNotFound { stream, .. }) if stream == "missing"
    ));
    assert!(matches!(
        c.read("missing", 0, &ReadOptions::default()).await,
        Err(ClientError::StreamNotFound { stream, .. }) if stream == "missing"
    ));

    c.append("s", 1, ["x"]).await.unwrap();
    assert!(matches!(
        c.read("s", 5, &ReadOptions::default()).await,
        Err(ClientError::OutOfRange {
            first_seq: 0,
            next_seq: 1,
            ..
        })
    ));
    assert!(matches!(
        c.append("s", 1, ["a", "b", "c"]).await,
        Err(ClientError::TooLarge { .. })
    ));
    assert!(matches!(
        c.append("s", 1, ["seventeen bytes!!"]).await,
        Err(ClientError::TooLarge { .. })
    ));
    assert!(matches!(
        c.append("s", 0, ["zero token"]).await,
        Err(ClientError::BadRequest { .. })
    ));
    assert!(matches!(
        c.append("no/slashes", 1, ["x"]).await,
        Err(ClientError::BadRequest { .. })
    ));
    assert!(matches!(
        c.append("s", 1, Vec::<Bytes>::new()).await,
        Err(ClientError::BadRequest { .. })
    ));
    // None of the rejections wrote anything.
    assert_eq!(c.state("s").await.unwrap().next_seq, 1);
}

/// Binary bodies go out as base64 and come back byte for byte.
#[tokio::test]
async fn binary_records_round_trip() {
    let (_srv, c) = server(Config::default()).await;
    let bin = Bytes::from(vec![0xff, 0x00, 0xfe]);
    c.append("b", 1, [bin.clone(), Bytes::from("text")])
        .await
        .unwrap();
    c.append_raw("b", 1, bin.clone(), None).await.unwrap();
    let r = c.read("b", 0, &ReadOptions::default()).await.unwrap();
    let bodies: Vec<Bytes> = r.records.into_iter().map(|r| r.body).collect();
    assert_eq!(bodies, vec![bin.clone(), Bytes::from("text"), bin]);
}

/// A server whose disk breaks with `kind` after one good append.
async fn broken_server(kind: io::ErrorKind) -> (TestServer, Client) {
    let dir = tempfile::tempdir().unwrap();
    let fail = Arc::new(Mutex::new(None));
    let disk = HookedStorage::failing_when(DirStorage::new(dir.path()).unwrap(), fail.clone());
    let engine = Engine::open_storage(Arc::new(disk), Config::default()).unwrap();
    let srv = TestServer::with_engine(engine, dir).await;
    let c = Client::new(srv.url().to_string()).unwrap();
    c.append("s", 1, ["before"]).await.unwrap();
    *fail.lock().unwrap() = Some(kind);
    (srv, c)
}

#[tokio::test]
async fn failed_storage_is_unavailable_and_says_when_the_outcome_is_unknown() {
    let (_srv, c) = broken_server(io::ErrorKind::Other).await;
    match c.append("s", 1, ["during"]).await.unwrap_err() {
        ClientError::Unavailable {
            outcome_unknown, ..
        } => assert!(outcome_unknown, "the failing write itself may be on disk"),
        other => panic!("expected Unavailable, got {other:?}"),
    }
    match c.append("s", 1, ["after"]).await.unwrap_err() {
        ClientError::Unavailable {
            outcome_unknown, ..
        } => assert!(!outcome_unknown, "later writes were never attempted"),
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert!(matches!(
        c.fence("s", 2).await,
        Err(ClientError::Unavailable { .. })
    ));
    // What was durable is still served.
    let r = c.read("s", 0, &ReadOptions::default()).await.unwrap();
    assert_eq!(r.records[0].body, Bytes::from("before"));
}

#[tokio::test]
async fn full_disk_is_insufficient_storage() {
    let (_srv, c) = broken_server(io::ErrorKind::StorageFull).await;
    match c.append("s", 1, ["during"]).await.unwrap_err() {
        ClientError::InsufficientStorage {
            outcome_unknown, ..
        } => assert!(outcome_unknown),
        other => panic!("expected InsufficientStorage, got {other:?}"),
    }
    match c.append_raw("s", 1, "after", None).await.unwrap_err() {
        ClientError::InsufficientStorage {
            outcome_unknown, ..
        } => assert!(!outcome_unknown),
        other => panic!("expected InsufficientStorage, got {other:?}"),
    }
}

#[tokio::test]
async fn closed_port_is_a_transport_error_for_every_call() {
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let c = Client::new(format!("http://{addr}")).unwrap();
    assert!(matches!(
        c.append("s", 1, ["x"]).await,
        Err(ClientError::Transport { .. })
    ));
    assert!(matches!(
        c.fence("s", 1).await,
        Err(ClientError::Transport { .. })
    ));
    assert!(matches!(
        c.read("s", 0, &ReadOptions::default()).await,
        Err(ClientError::Transport { .. })
    ));
    assert!(matches!(
        c.state("s").await,
        Err(ClientError::Transport { .. })
    ));
}

/// A server that reads each request completely and then hangs up without
/// answering: the request may have taken effect, nobody can tell.
async fn hang_up_server() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        loop {
            let (mut conn, _) = listener.accept().await.unwrap();
            count.fetch_add(1, Ordering::SeqCst);
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            // Read the head and the whole body so the client has finished
            // sending before the connection drops.
            loop {
                let n = conn.read(&mut buf).await.unwrap_or(0);
                if n == 0 {
                    break;
                }
                seen.extend_from_slice(&buf[..n]);
                if request_complete(&seen) {
                    break;
                }
            }
            drop(conn);
        }
    });
    (addr, accepted)
}

fn request_complete(raw: &[u8]) -> bool {
    let text = String::from_utf8_lossy(raw);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    let len = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    body.len() >= len
}

#[tokio::test]
async fn lost_answer_to_a_write_is_outcome_unknown_and_never_retried() {
    let (addr, accepted) = hang_up_server().await;
    let c = Client::new(format!("http://{addr}")).unwrap();

    assert!(matches!(
        c.append("s", 1, ["x"]).await,
        Err(ClientError::OutcomeUnknown { .. })
    ));
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "append was retried");
    assert!(matches!(
        c.append_raw("s", 1, "x", None).await,
        Err(ClientError::OutcomeUnknown { .. })
    ));
    assert_eq!(accepted.load(Ordering::SeqCst), 2, "raw append was retried");
    assert!(matches!(
        c.fence("s", 1).await,
        Err(ClientError::OutcomeUnknown { .. })
    ));
    assert_eq!(accepted.load(Ordering::SeqCst), 3, "fence was retried");

    // Reads are idempotent: they are retried, and then give up.
    let before = accepted.load(Ordering::SeqCst);
    assert!(c.read("s", 0, &ReadOptions::default()).await.is_err());
    assert_eq!(accepted.load(Ordering::SeqCst) - before, 3);
}

#[tokio::test]
async fn an_answer_that_is_not_the_api_is_a_protocol_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            let mut seen = Vec::new();
            while !request_complete(&seen) {
                let n = conn.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                seen.extend_from_slice(&buf[..n]);
            }
            let _ = conn
                .write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
                )
                .await;
        }
    });
    let c = Client::new(format!("http://{addr}")).unwrap();
    assert!(matches!(
        c.state("s").await,
        Err(ClientError::Protocol { status: 200, .. })
    ));
}

/// An append far over the server's body limit (its bytes more than the
/// sockets buffer, so the server answers before it has read them) is
/// the server's 413, not a lost answer.
#[tokio::test]
async fn an_append_far_over_the_body_limit_is_too_large_not_unknown() {
    let srv = TestServer::start().await;
    let c = Client::new(format!("http://{}", srv.addr)).unwrap();
    let huge = vec![b'x'; 64 << 20];
    match c.append_raw("s", 1, Bytes::from(huge), None).await {
        Err(ClientError::TooLarge { .. }) => {}
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert!(
        c.read("s", 0, &ReadOptions::default()).await.is_err(),
        "nothing appended"
    );
}
