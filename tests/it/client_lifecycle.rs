//! The Rust client's lifecycle calls against a real server: trim, seal,
//! delete, config, each error typed (`StreamSealed` its own variant), reads
//! below the trim point and `clamp`, and a tail that ends at a seal.

use fencelog_client::{Client, ClientError, ReadOptions, Retention, StreamConfig, TailEvent};
use fencelog_engine::Config;
use fencelog_server::server::ServerConfig;
use fencelog_testkit::http::TestServer;
use futures_util::StreamExt;

async fn server() -> (TestServer, Client) {
    let srv = TestServer::start_with(Config::default(), |_| {}, ServerConfig::default()).await;
    let client = Client::new(format!("http://{}", srv.addr)).unwrap();
    (srv, client)
}

#[tokio::test]
async fn trim_and_reads_below_the_trim_point() {
    let (_srv, c) = server().await;
    c.append("t", 2, ["a", "b", "c"]).await.unwrap();
    let s = c.trim("t", 2, 2).await.unwrap();
    assert_eq!((s.first_seq, s.next_seq, s.highest_token), (2, 3, 2));
    match c.read("t", 0, &ReadOptions::default()).await.unwrap_err() {
        ClientError::OutOfRange {
            first_seq,
            next_seq,
            ..
        } => assert_eq!((first_seq, next_seq), (2, 3)),
        other => panic!("expected OutOfRange, got {other:?}"),
    }
    let opts = ReadOptions {
        clamp: true,
        ..ReadOptions::default()
    };
    let r = c.read("t", 0, &opts).await.unwrap();
    assert_eq!(r.records.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![2]);
    match c.trim("t", 1, 3).await.unwrap_err() {
        ClientError::StaleToken {
            presented,
            highest,
            next_seq,
            ..
        } => assert_eq!((presented, highest, next_seq), (1, 2, 3)),
        other => panic!("expected StaleToken, got {other:?}"),
    }
    assert!(matches!(
        c.trim("none", 1, 0).await,
        Err(ClientError::StreamNotFound { stream, .. }) if stream == "none"
    ));
}

#[tokio::test]
async fn a_sealed_stream_is_its_own_error_and_ends_a_tail() {
    let (_srv, c) = server().await;
    c.append("s", 4, ["x"]).await.unwrap();
    let mut tail = Box::pin(c.tail_events("s", 0));
    assert!(matches!(tail.next().await, Some(Ok(TailEvent::Record(_)))));
    assert!(matches!(
        tail.next().await,
        Some(Ok(TailEvent::CaughtUp { next_seq: 1 }))
    ));
    assert!(c.seal("s", 4).await.unwrap().sealed);
    assert_eq!(
        tail.next().await.unwrap().unwrap(),
        TailEvent::Sealed { next_seq: 1 }
    );
    assert!(tail.next().await.is_none(), "the tail ends at the seal");
    for err in [
        c.append("s", 9, ["no"]).await.map(drop).unwrap_err(),
        c.fence("s", 9).await.map(drop).unwrap_err(),
        c.trim("s", 9, 1).await.map(drop).unwrap_err(),
    ] {
        match err {
            ClientError::StreamSealed {
                first_seq,
                next_seq,
                highest_token,
                ..
            } => {
                assert_eq!((first_seq, next_seq, highest_token), (0, 1, 4))
            }
            other => panic!("expected StreamSealed, got {other:?}"),
        }
    }
    let r = c.read("s", 0, &ReadOptions::default()).await.unwrap();
    assert!(r.sealed && r.records.len() == 1);
}

#[tokio::test]
async fn delete_and_config() {
    let (_srv, c) = server().await;
    c.append("d", 5, ["a"]).await.unwrap();
    let t = c.delete("d", 5).await.unwrap();
    assert!(t.deleted && t.next_seq == 1);
    assert!(
        matches!(c.state("d").await, Err(ClientError::StreamNotFound { stream, .. }) if stream == "d")
    );
    assert!(matches!(
        c.append("d", 5, ["zombie"]).await,
        Err(ClientError::StaleToken { highest: 5, .. })
    ));
    assert_eq!(c.append("d", 6, ["new"]).await.unwrap().first_seq, 1);

    let config = StreamConfig {
        retention_age_s: Retention::Limit(3600),
        retention_bytes: Retention::Unlimited,
        respect_cursors: false,
    };
    let s = c.set_config("d", Some(6), config).await.unwrap();
    assert_eq!((s.retention_age_s, s.retention_bytes), (Some(3600), None));
    assert!(matches!(
        c.set_config("d", Some(5), config).await,
        Err(ClientError::StaleToken { .. })
    ));
    let s = c
        .set_config("d", None, StreamConfig::default())
        .await
        .unwrap();
    assert_eq!((s.retention_age_s, s.highest_token), (None, 6));
}
