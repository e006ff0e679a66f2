use bytes::Bytes;
use fencelog_engine::{Config, Engine, WriteError};

fn recs(items: &[&str]) -> Vec<Bytes> {
    items.iter().map(|s| Bytes::from(s.to_string())).collect()
}

#[tokio::test]
async fn append_read_restart_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = Engine::open(dir.path()).unwrap();
        let a = e.append("s", 41, recs(&["a1"]), None).await.unwrap();
        assert_eq!((a.first_seq, a.last_seq, a.next_seq), (0, 0, 1));
        let b = e.append("s", 42, recs(&["b1", "b2"]), None).await.unwrap();
        assert_eq!((b.first_seq, b.last_seq, b.next_seq), (1, 2, 3));
        let stale = e.append("s", 41, recs(&["late"]), None).await;
        assert_eq!(
            stale,
            Err(WriteError::StaleToken {
                presented: 41,
                highest: 42,
                next_seq: 3
            })
        );
        e.fence("f", 7).await.unwrap();
        e.shutdown().await;
    }
    let e = Engine::open(dir.path()).unwrap();
    let r = e.read("s", 0, 100, 1 << 20).unwrap();
    let bodies: Vec<_> = r.records.iter().map(|r| r.body.clone()).collect();
    assert_eq!(bodies, recs(&["a1", "b1", "b2"]));
    assert_eq!(r.next_seq, 3);
    let f = e.state("f").unwrap();
    assert_eq!((f.highest_token, f.next_seq), (7, 0));
    assert!(matches!(
        e.append("f", 6, recs(&["x"]), None).await,
        Err(WriteError::StaleToken { .. })
    ));
}

#[tokio::test]
async fn rolls_across_segments_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        segment_bytes_max: 4096,
        ..Config::default()
    };
    {
        let e = Engine::open_with(dir.path(), cfg.clone()).unwrap();
        for i in 0..500u32 {
            e.append("s", 1, vec![Bytes::from(format!("record-{i:05}"))], None)
                .await
                .unwrap();
        }
        let r = e.read("s", 0, 1000, 1 << 20).unwrap();
        assert_eq!(r.records.len(), 500);
        e.shutdown().await;
    }
    let e = Engine::open_with(dir.path(), cfg).unwrap();
    assert!(e.recovery_report().segments > 5);
    let r = e.read("s", 250, 1000, 1 << 20).unwrap();
    assert_eq!(r.records.len(), 250);
    for (k, rec) in r.records.iter().enumerate() {
        assert_eq!(rec.seq, 250 + k as u64);
        assert_eq!(rec.body, Bytes::from(format!("record-{:05}", 250 + k)));
    }
}
