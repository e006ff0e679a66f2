//! What survives a clean restart: records, next_seq, highest_token, fences
//! that carried no data, timestamps; and the directory lock.

use crate::support::gate::{bodies, recs};
use bytes::Bytes;
use fencelog_engine::{Engine, OpenError, ReadError, StreamState, WriteError};

fn state(e: &Engine, s: &str) -> (u64, u64) {
    let st = e.state(s).unwrap();
    (st.highest_token, st.next_seq)
}

#[tokio::test]
async fn restart_keeps_records_tokens_and_dataless_fences() {
    let dir = tempfile::tempdir().unwrap();
    let ts_before;
    {
        let e = Engine::open(dir.path()).unwrap();
        e.append("orders", 3, recs(&["o0", "o1"]), None)
            .await
            .unwrap();
        e.append("orders", 3, recs(&["o2"]), None).await.unwrap();
        // Raising the token of a stream with data, without writing data.
        let st = e.fence("orders", 9).await.unwrap();
        assert_eq!(
            st,
            StreamState {
                stream: "orders".into(),
                first_seq: 0,
                next_seq: 3,
                highest_token: 9,
                last_timestamp_ms: st.last_timestamp_ms,
                sealed: false,
                deleted: false,
                retention_age_s: None,
                retention_bytes: None,
                retention_respect_cursors: false,
                bytes: st.bytes,
            }
        );
        // A fence that creates a stream with no records at all.
        let f = e.fence("lock:a", 41).await.unwrap();
        assert_eq!(
            (f.highest_token, f.next_seq, f.last_timestamp_ms),
            (41, 0, 0)
        );
        // Re-fencing with the same token and with a higher one.
        e.fence("lock:a", 41).await.unwrap();
        e.fence("lock:b", 5).await.unwrap();
        e.fence("lock:b", 6).await.unwrap();
        e.append("other", 1, recs(&["x"]), None).await.unwrap();
        ts_before = e.state("orders").unwrap().last_timestamp_ms;
        assert!(ts_before > 0);
        e.shutdown().await;
    }
    for round in 0..2 {
        // Twice: a recovery that found nothing to do changes nothing.
        let e = Engine::open(dir.path()).unwrap();
        let rep = e.recovery_report();
        assert_eq!(rep.truncated, None, "round {round}");
        assert_eq!((rep.streams, rep.records), (4, 4));
        assert_eq!(state(&e, "orders"), (9, 3));
        assert_eq!(e.state("orders").unwrap().last_timestamp_ms, ts_before);
        assert_eq!(state(&e, "lock:a"), (41, 0));
        assert_eq!(e.state("lock:a").unwrap().last_timestamp_ms, 0);
        assert_eq!(state(&e, "lock:b"), (6, 0));
        assert_eq!(state(&e, "other"), (1, 1));
        let r = e.read("orders", 0, 100, 1 << 20).unwrap();
        assert_eq!(bodies(&r), recs(&["o0", "o1", "o2"]));
        assert_eq!(
            r.records
                .iter()
                .map(|r| (r.seq, r.fencing_token))
                .collect::<Vec<_>>(),
            vec![(0, 3), (1, 3), (2, 3)]
        );
        assert_eq!(
            e.read("lock:a", 0, 100, 1 << 20).unwrap().records,
            Vec::new()
        );
        // The data-less fence still locks the old owner out after restart.
        assert_eq!(
            e.append("orders", 8, recs(&["late"]), None).await,
            Err(WriteError::StaleToken {
                presented: 8,
                highest: 9,
                next_seq: 3
            })
        );
        assert_eq!(
            e.append("lock:a", 40, recs(&["late"]), None).await,
            Err(WriteError::StaleToken {
                presented: 40,
                highest: 41,
                next_seq: 0
            })
        );
        e.shutdown().await;
    }
    let e = Engine::open(dir.path()).unwrap();
    let ack = e.append("orders", 9, recs(&["o3"]), None).await.unwrap();
    assert_eq!((ack.first_seq, ack.next_seq, ack.fencing_token), (3, 4, 9));
    assert!(ack.timestamp_ms >= ts_before);
    let ack = e
        .append("lock:a", 41, recs(&["a0"]), Some(0))
        .await
        .unwrap();
    assert_eq!(ack.first_seq, 0);
    e.shutdown().await;
}

#[tokio::test]
async fn timestamps_never_decrease_within_a_stream() {
    let dir = tempfile::tempdir().unwrap();
    let mut acked = Vec::new();
    {
        let e = Engine::open(dir.path()).unwrap();
        for i in 0..200u32 {
            let ack = e
                .append("t", 1, vec![Bytes::from(i.to_string())], None)
                .await
                .unwrap();
            acked.push(ack.timestamp_ms);
        }
        assert!(acked.windows(2).all(|w| w[0] <= w[1]), "{acked:?}");
        assert_eq!(
            e.state("t").unwrap().last_timestamp_ms,
            *acked.last().unwrap()
        );
        e.shutdown().await;
    }
    let e = Engine::open(dir.path()).unwrap();
    let r = e.read("t", 0, 1000, 1 << 20).unwrap();
    let read: Vec<u64> = r.records.iter().map(|r| r.timestamp_ms).collect();
    // The log carries exactly the timestamps the acks promised.
    assert_eq!(read, acked);
    let next = e.append("t", 1, recs(&["after"]), None).await.unwrap();
    assert!(next.timestamp_ms >= *acked.last().unwrap());
    e.shutdown().await;
}

#[tokio::test]
async fn a_second_open_of_an_open_directory_fails() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..20 {
        let e = Engine::open(dir.path()).unwrap();
        match Engine::open(dir.path()) {
            Err(OpenError::Io { source, .. }) => {
                assert_eq!(
                    source.kind(),
                    std::io::ErrorKind::WouldBlock,
                    "round {round}"
                )
            }
            Err(other) => panic!("round {round}: wrong error {other}"),
            Ok(_) => panic!("round {round}: two engines opened one directory"),
        }
        e.append("s", 1, vec![Bytes::from(format!("{round}"))], None)
            .await
            .unwrap();
        // The refused open touched nothing the first engine depends on.
        assert_eq!(e.state("s").unwrap().next_seq, round + 1);
        // After a shutdown the lock is free again, right away.
        e.shutdown().await;
        drop(e);
    }
    let e = Engine::open(dir.path()).unwrap();
    assert_eq!(e.read("s", 0, 100, 1 << 20).unwrap().records.len(), 20);
    assert!(matches!(e.read("nope", 0, 1, 1), Err(ReadError::NotFound)));
    e.shutdown().await;
}
