//! How the single writer orders requests: inside one group, against pending
//! state, answering only once the group is durable; the caller-side fast path
//! for stale tokens; `match_seq_num`; and many concurrent appenders.

use crate::support::gate::{bodies, open_controlled, poll_once, recs, until_held};
use bytes::Bytes;
use fencelog_engine::{Config, Engine, WriteError};
use std::collections::HashSet;

#[tokio::test]
async fn lower_token_after_higher_in_one_group_is_rejected_after_the_sync() {
    let dir = tempfile::tempdir().unwrap();
    let (e, ctl) = open_controlled(dir.path(), Config::default());

    // Group 1 (just "a") is held in its fdatasync, so "b" and "c" queue
    // behind it and the writer takes them together as group 2.
    ctl.hold_next_sync();
    let mut a = Box::pin(e.append("s", 1, recs(&["a"]), None));
    assert!(poll_once(&mut a).is_none());
    until_held(&ctl).await;
    let mut b = Box::pin(e.append("s", 10, recs(&["b"]), None));
    assert!(poll_once(&mut b).is_none());
    // Token 5 passes the fast path: the durable highest token is still 0.
    let mut c = Box::pin(e.append("s", 5, recs(&["c"]), None));
    assert!(poll_once(&mut c).is_none());
    assert_eq!(e.queue_depth(), 2);

    ctl.hold_next_sync();
    ctl.release();
    let ack_a = a.await.unwrap();
    assert_eq!((ack_a.first_seq, ack_a.last_seq, ack_a.next_seq), (0, 0, 1));
    assert_eq!(ack_a.fencing_token, 1);

    // Group 2 is now inside its fdatasync. Neither its acceptance nor its
    // rejection may have been answered, and nothing of it is visible.
    until_held(&ctl).await;
    assert!(poll_once(&mut b).is_none());
    assert!(poll_once(&mut c).is_none());
    let st = e.state("s").unwrap();
    assert_eq!((st.highest_token, st.next_seq), (1, 1));
    assert_eq!(bodies(&e.read("s", 0, 10, 1 << 20).unwrap()), recs(&["a"]));

    ctl.release();
    let ack_b = b.await.unwrap();
    assert_eq!((ack_b.first_seq, ack_b.last_seq, ack_b.next_seq), (1, 1, 2));
    assert_eq!(ack_b.fencing_token, 10);
    assert_eq!(
        c.await,
        Err(WriteError::StaleToken {
            presented: 5,
            highest: 10,
            next_seq: 2
        })
    );
    let st = e.state("s").unwrap();
    assert_eq!((st.highest_token, st.next_seq), (10, 2));
    let r = e.read("s", 0, 10, 1 << 20).unwrap();
    assert_eq!(bodies(&r), recs(&["a", "b"]));
    assert_eq!(
        r.records
            .iter()
            .map(|r| r.fencing_token)
            .collect::<Vec<_>>(),
        vec![1, 10]
    );
    e.shutdown().await;
}

#[tokio::test]
async fn lower_then_higher_token_in_one_group_are_both_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let (e, ctl) = open_controlled(dir.path(), Config::default());
    ctl.hold_next_sync();
    let mut x = Box::pin(e.fence("x", 1));
    assert!(poll_once(&mut x).is_none());
    until_held(&ctl).await;
    let mut lo = Box::pin(e.append("s", 3, recs(&["lo"]), None));
    let mut hi = Box::pin(e.append("s", 4, recs(&["hi"]), None));
    let mut eq = Box::pin(e.append("s", 4, recs(&["eq"]), None));
    assert!(poll_once(&mut lo).is_none());
    assert!(poll_once(&mut hi).is_none());
    assert!(poll_once(&mut eq).is_none());
    ctl.release();
    x.await.unwrap();
    assert_eq!(lo.await.unwrap().first_seq, 0);
    assert_eq!(hi.await.unwrap().first_seq, 1);
    assert_eq!(eq.await.unwrap().first_seq, 2);
    let st = e.state("s").unwrap();
    assert_eq!((st.highest_token, st.next_seq), (4, 3));
    assert_eq!(
        bodies(&e.read("s", 0, 10, 1 << 20).unwrap()),
        recs(&["lo", "hi", "eq"])
    );
    e.shutdown().await;
}

#[tokio::test]
async fn stale_token_against_durable_state_is_answered_without_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let (e, ctl) = open_controlled(dir.path(), Config::default());
    e.append("s", 10, recs(&["a", "b"]), None).await.unwrap();
    let groups_before = e.metrics().groups_committed.get();

    // With the writer stuck in a sync, only an answer decided on the
    // caller's side can arrive.
    ctl.hold_next_sync();
    let mut busy = Box::pin(e.append("other", 1, recs(&["o"]), None));
    assert!(poll_once(&mut busy).is_none());
    until_held(&ctl).await;

    let mut stale = Box::pin(e.append("s", 9, recs(&["late"]), None));
    assert_eq!(
        poll_once(&mut stale),
        Some(Err(WriteError::StaleToken {
            presented: 9,
            highest: 10,
            next_seq: 2
        }))
    );
    let mut stale_fence = Box::pin(e.fence("s", 1));
    assert_eq!(
        poll_once(&mut stale_fence),
        Some(Err(WriteError::StaleToken {
            presented: 1,
            highest: 10,
            next_seq: 2
        }))
    );
    assert_eq!(e.queue_depth(), 0);
    // A current token does go to the writer and waits for it.
    let mut current = Box::pin(e.append("s", 10, recs(&["c"]), None));
    assert!(poll_once(&mut current).is_none());
    assert_eq!(e.queue_depth(), 1);

    ctl.release();
    busy.await.unwrap();
    assert_eq!(current.await.unwrap().first_seq, 2);
    assert_eq!(e.metrics().stale_rejections.get(), 2);
    assert_eq!(e.metrics().groups_committed.get(), groups_before + 2);
    assert_eq!(
        bodies(&e.read("s", 0, 10, 1 << 20).unwrap()),
        recs(&["a", "b", "c"])
    );
    e.shutdown().await;
}

#[tokio::test]
async fn match_seq_num_in_one_group_admits_exactly_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let (e, ctl) = open_controlled(dir.path(), Config::default());
    e.append("s", 1, recs(&["0", "1", "2"]), Some(0))
        .await
        .unwrap();

    ctl.hold_next_sync();
    let mut busy = Box::pin(e.fence("other", 1));
    assert!(poll_once(&mut busy).is_none());
    until_held(&ctl).await;
    let mut contenders: Vec<_> = (0..5)
        .map(|i| Box::pin(e.append("s", 1, vec![Bytes::from(format!("w{i}"))], Some(3))))
        .collect();
    for c in &mut contenders {
        assert!(poll_once(c).is_none());
    }
    ctl.release();
    busy.await.unwrap();
    let mut results = Vec::new();
    for c in contenders {
        results.push(c.await);
    }
    let ack = results[0].as_ref().unwrap();
    assert_eq!((ack.first_seq, ack.next_seq), (3, 4));
    for r in &results[1..] {
        assert_eq!(
            r,
            &Err(WriteError::SeqMismatch {
                expected: 3,
                next_seq: 4
            })
        );
    }
    assert_eq!(
        bodies(&e.read("s", 0, 10, 1 << 20).unwrap()),
        recs(&["0", "1", "2", "w0"])
    );
    // The token is judged before the seq: a stale writer learns it lost
    // ownership even when its seq would also be wrong.
    e.fence("s", 2).await.unwrap();
    assert_eq!(
        e.append("s", 1, recs(&["x"]), Some(0)).await,
        Err(WriteError::StaleToken {
            presented: 1,
            highest: 2,
            next_seq: 4
        })
    );
    assert_eq!(
        e.append("s", 2, recs(&["x"]), Some(9)).await,
        Err(WriteError::SeqMismatch {
            expected: 9,
            next_seq: 4
        })
    );
    assert_eq!(
        e.append("s", 2, recs(&["y"]), Some(4))
            .await
            .unwrap()
            .first_seq,
        4
    );
    // A stream that does not exist yet has next_seq 0.
    assert_eq!(
        e.append("fresh", 1, recs(&["z"]), Some(1)).await,
        Err(WriteError::SeqMismatch {
            expected: 1,
            next_seq: 0
        })
    );
    assert_eq!(
        e.append("fresh", 1, recs(&["z"]), Some(0))
            .await
            .unwrap()
            .first_seq,
        0
    );
    e.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_with_the_same_expected_seq_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    e.append("s", 1, recs(&["seed"]), None).await.unwrap();
    for round in 0..20u64 {
        let expected = 1 + round;
        let tasks: Vec<_> = (0..8)
            .map(|w| {
                let e = e.clone();
                tokio::spawn(async move {
                    e.append(
                        "s",
                        1,
                        vec![Bytes::from(format!("r{round}w{w}"))],
                        Some(expected),
                    )
                    .await
                })
            })
            .collect();
        let mut winners = 0;
        for t in tasks {
            match t.await.unwrap() {
                Ok(ack) => {
                    winners += 1;
                    assert_eq!((ack.first_seq, ack.next_seq), (expected, expected + 1));
                }
                Err(err) => assert_eq!(
                    err,
                    WriteError::SeqMismatch {
                        expected,
                        next_seq: expected + 1
                    }
                ),
            }
        }
        assert_eq!(winners, 1, "round {round}");
    }
    assert_eq!(e.state("s").unwrap().next_seq, 21);
    e.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_concurrent_appenders_get_contiguous_seqs() {
    const WRITERS: usize = 16;
    const APPENDS: usize = 300;
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::open(dir.path()).unwrap();
    let tasks: Vec<_> = (0..WRITERS)
        .map(|w| {
            let e = e.clone();
            tokio::spawn(async move {
                let mut seqs = Vec::with_capacity(APPENDS);
                for i in 0..APPENDS {
                    let ack = e
                        .append("c", 7, vec![Bytes::from(format!("{w}/{i}"))], None)
                        .await
                        .unwrap();
                    assert_eq!(ack.first_seq, ack.last_seq);
                    seqs.push(ack.first_seq);
                }
                seqs
            })
        })
        .collect();
    let mut acked = Vec::new();
    for t in tasks {
        let seqs = t.await.unwrap();
        assert!(seqs.windows(2).all(|p| p[0] < p[1]), "{seqs:?}");
        acked.extend(seqs);
    }
    let total = (WRITERS * APPENDS) as u64;
    acked.sort_unstable();
    assert_eq!(acked, (0..total).collect::<Vec<_>>());

    let check = |e: &Engine| {
        let r = e.read("c", 0, usize::MAX, usize::MAX).unwrap();
        assert_eq!(r.next_seq, total);
        assert_eq!(r.records.len() as u64, total);
        let mut seen = HashSet::new();
        let mut last_i = vec![None::<usize>; WRITERS];
        for (k, rec) in r.records.iter().enumerate() {
            assert_eq!(rec.seq, k as u64);
            let s = std::str::from_utf8(&rec.body).unwrap();
            assert!(seen.insert(s.to_string()), "{s} twice");
            let (w, i) = s.split_once('/').unwrap();
            let (w, i): (usize, usize) = (w.parse().unwrap(), i.parse().unwrap());
            // Each appender awaited its previous ack, so its records are in
            // its own order.
            assert_eq!(last_i[w].map_or(0, |l| l + 1), i, "writer {w}");
            last_i[w] = Some(i);
        }
        assert!(last_i.iter().all(|l| *l == Some(APPENDS - 1)));
    };
    check(&e);
    e.shutdown().await;
    drop(e);
    let e = Engine::open(dir.path()).unwrap();
    check(&e);
    e.shutdown().await;
}
