//! A client tail survives the server being killed with SIGKILL and
//! restarted on the same directory and port: it reconnects by itself and
//! delivers every record exactly once, in order.

use crate::support::serve;
use fencelog_client::{Client, ClientError, TailEvent};
use futures_util::StreamExt;
use std::time::Duration;

/// Only keeps a broken build from hanging the suite; every wait below ends
/// on an event, not on this.
const BOUND: Duration = Duration::from_secs(60);

async fn next(
    tail: &mut (impl futures_util::Stream<Item = Result<TailEvent, ClientError>> + Unpin),
) -> TailEvent {
    tokio::time::timeout(BOUND, tail.next())
        .await
        .expect("tail stalled")
        .expect("tail ended")
        .expect("tail failed")
}

#[tokio::test]
async fn tail_resumes_across_a_sigkill_restart_without_gaps_or_repeats() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = serve().data_dir(&data).start();
    let addr = server.addr();
    let client = Client::new(server.url().to_string()).unwrap();
    client.append("t", 7, ["r0", "r1", "r2"]).await.unwrap();

    let mut tail = Box::pin(client.tail_events("t", 1));
    let mut seen = Vec::new();
    loop {
        match next(&mut tail).await {
            TailEvent::Record(r) => seen.push(r),
            TailEvent::CaughtUp { next_seq } => {
                assert_eq!(next_seq, 3);
                break;
            }
            other => panic!("before the restart: {other:?}"),
        }
    }
    server.kill9();

    // Same directory, same port: the tail's reconnect finds it there.
    let server = serve().data_dir(&data).listen(addr.to_string()).start();
    client.append("t", 7, ["r3", "r4"]).await.unwrap();
    client.append("t", 8, ["r5"]).await.unwrap();
    while seen.len() < 5 {
        if let TailEvent::Record(r) = next(&mut tail).await {
            seen.push(r);
        }
    }
    let got: Vec<(u64, u64, String)> = seen
        .iter()
        .map(|r| {
            (
                r.seq,
                r.fencing_token,
                String::from_utf8(r.body.to_vec()).unwrap(),
            )
        })
        .collect();
    let want: Vec<(u64, u64, String)> = (1..=5)
        .map(|s| (s, if s == 5 { 8 } else { 7 }, format!("r{s}")))
        .collect();
    assert_eq!(got, want);
    // A marker written now must be the very next record: nothing between
    // r5 and it was repeated. (caught_up comes whenever the tail reaches
    // the end again, so it may come between.)
    client.append("t", 8, ["marker"]).await.unwrap();
    loop {
        match next(&mut tail).await {
            TailEvent::CaughtUp { next_seq } => assert!(next_seq >= 6),
            TailEvent::Record(r) => {
                assert_eq!((r.seq, &r.body[..]), (6, &b"marker"[..]), "repeat or gap");
                break;
            }
            other => panic!("after the restart: {other:?}"),
        }
    }
    drop(server);
}
