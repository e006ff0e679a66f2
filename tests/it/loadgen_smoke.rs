//! The load generator against an in-process server: a short run of each
//! write mode must verify, and its counts must add up. No timing asserts:
//! the machine is shared.

use fencelog_bench::{run, BenchArgs, Workload};

fn short(workload: Workload) -> BenchArgs {
    BenchArgs {
        clients: 4,
        streams: Some(3),
        duration: 1.0,
        ..BenchArgs::new(workload)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_run_verifies_every_acknowledged_record() {
    let report = run(short(Workload::Append)).await.unwrap();
    assert!(report.verification.passed, "{}", report.to_text());
    assert!(report.appends > 0);
    assert_eq!(report.errors, 0);
    assert_eq!(report.rejections, 0);
    assert_eq!(report.requests, report.appends);
    assert_eq!(report.records, report.appends * report.batch as u64);
    assert_eq!(report.verification.streams_checked, 3);
    assert_eq!(report.verification.records_checked, report.records);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_json_appends_verify() {
    let args = BenchArgs {
        batch: 16,
        record_bytes: 64,
        ..short(Workload::Append)
    };
    let report = run(args).await.unwrap();
    assert!(report.verification.passed, "{}", report.to_text());
    assert_eq!(report.records, report.appends * 16);
    assert_eq!(report.verification.records_checked, report.records);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reject_run_accepts_nothing() {
    let report = run(short(Workload::Reject)).await.unwrap();
    assert!(report.verification.passed, "{}", report.to_text());
    assert!(report.rejections > 0);
    assert_eq!(report.appends, 0);
    assert_eq!(report.records, 0);
    assert_eq!(report.requests, report.rejections);
    assert_eq!(report.verification.records_checked, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_run_rejects_the_stale_half_and_keeps_the_rest() {
    let report = run(short(Workload::Mixed)).await.unwrap();
    assert!(report.verification.passed, "{}", report.to_text());
    assert!(report.appends > 0 && report.rejections > 0);
    assert_eq!(report.requests, report.appends + report.rejections);
    assert_eq!(report.verification.records_checked, report.records);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_and_tail_runs_verify() {
    let read = run(BenchArgs {
        fill_records: 50,
        batch: 10,
        ..short(Workload::Read)
    })
    .await
    .unwrap();
    assert!(read.verification.passed, "{}", read.to_text());
    assert!(read.records > 0);

    let tail = run(BenchArgs {
        clients: 1,
        streams: Some(1),
        ..short(Workload::Tail)
    })
    .await
    .unwrap();
    assert!(tail.verification.passed, "{}", tail.to_text());
    let visibility = tail.visibility.expect("tail reports visibility");
    assert_eq!(visibility.count, tail.records);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fan_out_tail_run_counts_each_record_once_at_its_last_tail() {
    let tail = run(BenchArgs {
        clients: 2,
        streams: Some(2),
        tails_per_stream: 25,
        rate: Some(100.0),
        ..short(Workload::Tail)
    })
    .await
    .unwrap();
    assert!(tail.verification.passed, "{}", tail.to_text());
    assert!(tail.records > 0);
    // One delay per acknowledged record (the last of its 25 tails), not
    // one per delivery.
    let visibility = tail.visibility.expect("tail reports visibility");
    assert_eq!(visibility.count, tail.records);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tails_per_stream_is_bounded() {
    let err = run(BenchArgs {
        tails_per_stream: 0,
        ..short(Workload::Tail)
    })
    .await
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid arguments: --tails-per-stream must be in 1..=10000"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_rate_is_bounded_by_schedule() {
    let report = run(BenchArgs {
        rate: Some(200.0),
        ..short(Workload::Append)
    })
    .await
    .unwrap();
    assert!(report.verification.passed, "{}", report.to_text());
    // A fixed schedule sends at most rate * duration requests (+1 per client
    // for the request at time zero).
    assert!(report.requests <= 200 + 4, "{}", report.requests);
}

/// The pipelined append session through the client crate's
/// `AppendSession`: one connection, every acknowledged record read back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_run_verifies_every_acknowledged_record() {
    let args = BenchArgs {
        window: 256,
        ..short(Workload::Session)
    };
    let report = run(args).await.unwrap();
    assert!(report.verification.passed, "{}", report.to_text());
    assert!(report.appends > 0);
    assert_eq!((report.clients, report.streams), (1, 1));
    assert_eq!(report.verification.records_checked, report.appends);
}

/// `--body client`: the client crate's own pool (and its reqwest fallback)
/// carries the appends, single records and batches; everything verifies,
/// and the generator reports its own CPU per request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_through_the_client_crate_verify_and_report_client_cpu() {
    use fencelog_bench::Encoding;
    for (encoding, workload, batch) in [
        (Encoding::Client, Workload::Mixed, 1),
        (Encoding::Client, Workload::Append, 8),
        (Encoding::ClientReqwest, Workload::Mixed, 1),
    ] {
        let args = BenchArgs {
            encoding,
            batch,
            ..short(workload)
        };
        let report = run(args).await.unwrap();
        assert!(report.verification.passed, "{}", report.to_text());
        assert!(report.appends > 0, "{}", report.to_text());
        assert_eq!(report.errors, 0, "{}", report.to_text());
        assert_eq!(report.verification.records_checked, report.records);
        assert!(report.client_cpu_us_per_request.is_some());
    }
}
