//! Fenced consumer cursors at the engine — their own highest
//! token, never backwards but with a strictly higher token, never past the
//! tail, durable across restarts and reclamation.

use crate::support::gate::recs;
use fencelog_engine::{Config, CursorEntry, Engine, WriteError};

fn pos(c: &CursorEntry) -> (u64, u64) {
    (c.token, c.seq)
}

#[tokio::test]
async fn cursors_follow_the_cursor_rule_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = Engine::open(dir.path()).unwrap();
        e.append("s", 9, recs(&["a", "b", "c", "d"]), None)
            .await
            .unwrap();
        let c = e.commit_cursor("s", "reader", 2, 3).await.unwrap();
        assert_eq!(pos(&c), (2, 3));
        assert!(c.timestamp_ms > 0);
        // Lower token: stale, naming the cursor's token and seq.
        assert_eq!(
            e.commit_cursor("s", "reader", 1, 4).await,
            Err(WriteError::StaleToken {
                presented: 1,
                highest: 2,
                next_seq: 3
            })
        );
        // Backwards with the same token: stale; forwards: fine.
        assert!(matches!(
            e.commit_cursor("s", "reader", 2, 2).await,
            Err(WriteError::StaleToken { .. })
        ));
        e.commit_cursor("s", "reader", 2, 4).await.unwrap();
        // A new owner may rewind.
        e.commit_cursor("s", "reader", 3, 1).await.unwrap();
        // Never past the tail.
        assert_eq!(
            e.commit_cursor("s", "reader", 3, 5).await,
            Err(WriteError::CursorOutOfRange {
                seq: 5,
                next_seq: 4
            })
        );
        e.commit_cursor("s", "audit", 1, 0).await.unwrap();
        // The stream's own token is untouched by cursor tokens.
        assert_eq!(e.state("s").unwrap().highest_token, 9);
        assert_eq!(
            e.commit_cursor("none", "reader", 1, 0).await,
            Err(WriteError::NotFound)
        );
        assert!(matches!(
            e.commit_cursor("s", "bad name", 1, 0).await,
            Err(WriteError::BadInput(_))
        ));
        assert_eq!(
            e.commit_cursor("s", "r", 0, 0).await,
            Err(WriteError::ZeroToken)
        );
        e.shutdown().await;
    }
    let e = Engine::open(dir.path()).unwrap();
    let all: Vec<(String, u64, u64)> = e
        .cursors("s")
        .unwrap()
        .into_iter()
        .map(|c| (c.name, c.token, c.seq))
        .collect();
    assert_eq!(all, vec![("audit".into(), 1, 0), ("reader".into(), 3, 1)]);
    assert_eq!(e.cursor("s", "nope").unwrap(), None);
    assert!(matches!(
        e.commit_cursor("s", "reader", 2, 4).await,
        Err(WriteError::StaleToken { .. })
    ));
}

#[tokio::test]
async fn cursors_survive_checkpoint_and_segment_deletion() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        segment_bytes_max: 4096,
        reclaim_interval_ms: 0,
        ..Config::default()
    };
    {
        let e = Engine::open_with(dir.path(), cfg.clone()).unwrap();
        e.append("s", 1, recs(&["x"]), None).await.unwrap();
        e.commit_cursor("s", "c", 4, 1).await.unwrap();
        let filler = "f".repeat(1000);
        for _ in 0..12 {
            e.append("s", 1, recs(&[&filler]), None).await.unwrap();
        }
        let next = e.state("s").unwrap().next_seq;
        e.trim("s", 1, next).await.unwrap();
        let r = e.reclaim().await.unwrap();
        assert!(!r.deleted.is_empty(), "{r:?}");
        e.shutdown().await;
    }
    let e = Engine::open_with(dir.path(), cfg).unwrap();
    let c = e.cursor("s", "c").unwrap().unwrap();
    assert_eq!(pos(&c), (4, 1));
    assert!(matches!(
        e.commit_cursor("s", "c", 3, 13).await,
        Err(WriteError::StaleToken { .. })
    ));
    e.shutdown().await;
}
