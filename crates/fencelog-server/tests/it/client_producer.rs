//! The Rust client's idempotent producer against a real server: it numbers
//! its appends, and when the answer to one is lost (the connection dies
//! after the server answered) it retries with the same producer_seq and
//! gets the original ack back as a duplicate — one copy on the stream, no
//! "outcome unknown" for the caller. Plus the client's lookup, fences,
//! cursors and batches.

use fencelog_client::{BatchOp, Client, ClientError, ErrorCode, Producer};
use fencelog_testkit::http::TestServer;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A proxy to `upstream` that, on its first connection only, forwards the
/// request but drops the connection as soon as the server's answer starts
/// arriving (so the server did answer: the write was decided), without
/// passing the answer on. Later connections are passed through.
async fn answer_dropping_proxy(upstream: SocketAddr) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut first = true;
        loop {
            let (mut client, _) = listener.accept().await.unwrap();
            let mut server = TcpStream::connect(upstream).await.unwrap();
            if first {
                first = false;
                tokio::spawn(async move {
                    let (mut cr, _cw) = client.split();
                    let (mut sr, mut sw) = server.split();
                    let mut buf = vec![0u8; 1 << 16];
                    let mut answer = [0u8; 1];
                    loop {
                        tokio::select! {
                            n = cr.read(&mut buf) => {
                                let n = n.unwrap_or(0);
                                if n == 0 { return; }
                                sw.write_all(&buf[..n]).await.unwrap();
                            }
                            _ = sr.read(&mut answer) => return, // dropped unread
                        }
                    }
                });
            } else {
                tokio::spawn(async move {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                });
            }
        }
    });
    addr
}

#[tokio::test]
async fn a_lost_answer_is_retried_with_the_same_seq_and_answered_as_a_duplicate() {
    let srv = TestServer::start().await;
    let proxy = answer_dropping_proxy(srv.addr).await;
    let direct = Client::new(srv.url()).unwrap();
    direct.fence("orders", 41).await.unwrap();
    let via_proxy = Client::new(format!("http://{proxy}")).unwrap();
    // Its first append is the proxy's first connection: the answer is lost.
    let mut p = Producer::new(via_proxy, "orders", "worker-a", 41, 0);
    let ack = p.append(["A: order 1"]).await.unwrap();
    assert!(
        ack.duplicate,
        "the retry found the first attempt applied: {ack:?}"
    );
    assert_eq!((ack.first_seq, ack.last_seq, ack.fencing_token), (0, 0, 41));
    assert_eq!(p.next_producer_seq(), 1);
    let next = p.append(["A: order 2"]).await.unwrap();
    assert_eq!((next.first_seq, next.duplicate), (1, false));
    assert_eq!(srv.api.bodies("orders").await, ["A: order 1", "A: order 2"]);
    let info = direct
        .producer("orders", "worker-a")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((info.producer_seq, info.first_seq), (1, 1));
    assert_eq!(direct.producer("orders", "nobody").await.unwrap(), None);
    // A producer restarted later continues after its last applied seq.
    let q = Producer::start(direct.clone(), "orders", "worker-a", 41)
        .await
        .unwrap();
    assert_eq!(q.next_producer_seq(), 2);
    // Fenced out: the error is the typed stale token, never retried.
    direct.fence("orders", 42).await.unwrap();
    let mut q = q;
    assert!(matches!(
        q.append(["late"]).await,
        Err(ClientError::StaleToken { highest: 42, .. })
    ));
    // A deadline already past.
    let mut d = Producer::start(direct.clone(), "d", "w", 1).await.unwrap();
    d.set_deadline(Some(1));
    assert!(
        matches!(d.append(["x"]).await, Err(ClientError::DeadlineExceeded { writer_ms, .. }) if writer_ms > 1)
    );
}

#[tokio::test]
async fn the_client_reads_fences_commits_cursors_and_sends_batches() {
    let srv = TestServer::start().await;
    let c = Client::new(srv.url()).unwrap();
    c.append("s", 1, ["a", "b"]).await.unwrap();
    c.fence("s", 3).await.unwrap();
    let h = c.fences("s", None).await.unwrap();
    let tokens: Vec<u64> = h.fences.iter().map(|f| f.fencing_token).collect();
    assert_eq!(tokens, vec![3, 1]);
    let cur = c.commit_cursor("s", "r", 5, 1).await.unwrap();
    assert_eq!((cur.fencing_token, cur.seq), (5, 1));
    assert!(matches!(
        c.commit_cursor("s", "r", 4, 2).await,
        Err(ClientError::StaleToken { .. })
    ));
    assert_eq!(c.cursor("s", "r").await.unwrap().seq, 1);
    assert_eq!(c.cursors("s").await.unwrap().cursors.len(), 1);
    assert!(matches!(
        c.cursor("s", "none").await,
        Err(ClientError::Rejected { answer }) if answer.code == ErrorCode::CursorNotFound
            && answer.stream() == Some("s")
    ));
    let ops = [
        BatchOp::Fence {
            stream: "x".into(),
            fencing_token: 7,
        },
        BatchOp::Append {
            stream: "y".into(),
            fencing_token: 7,
            records: vec!["y0".into()],
            match_seq_num: None,
        },
    ];
    let acks = c.batch(&ops, None).await.unwrap();
    assert_eq!(acks.len(), 2);
    assert_eq!(acks[1]["first_seq"], 0);
    let stale = [
        BatchOp::Append {
            stream: "y".into(),
            fencing_token: 7,
            records: vec!["y1".into()],
            match_seq_num: None,
        },
        BatchOp::Fence {
            stream: "x".into(),
            fencing_token: 6,
        },
    ];
    match c.batch(&stale, None).await {
        Err(ClientError::BatchRefused { first, ops }) => {
            assert!(
                matches!(*first, ClientError::StaleToken { highest: 7, .. }),
                "{first:?}"
            );
            assert_eq!(ops.len(), 2);
            assert_eq!(ops[1]["error"], "stale_fencing_token");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(srv.api.bodies("y").await, ["y0"]);
}
