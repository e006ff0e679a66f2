//! Misbehaving clients against the real binary: clients that do not
//! read, uploads that stall, descriptors that run out, a full writer
//! queue. Each case
//! ends with the data unchanged (everything acknowledged is there, nothing
//! else) and the server healthy.

use crate::support::serve;
use fencelog_client::Client;
use fencelog_testkit::process::ServerProcess;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// Resident memory of `pid` in bytes, from /proc/PID/status.
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status");
    kb * 1024
}

/// Waits (bounded) until `pid` used no CPU for half a second; returns the
/// peak resident memory seen meanwhile.
fn settle(pid: u32) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut peak = rss_bytes(pid);
    let mut last = cpu_ticks(pid);
    loop {
        std::thread::sleep(Duration::from_millis(500));
        peak = peak.max(rss_bytes(pid));
        let now = cpu_ticks(pid);
        if now == last {
            return peak;
        }
        assert!(Instant::now() < deadline, "the server never went idle");
        last = now;
    }
}

/// User + system CPU time of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// This test process needs more descriptors than a default soft limit.
fn raise_own_nofile() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let l = getrlimit(Resource::Nofile);
    if let Some(hard) = l.maximum {
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(hard),
                maximum: Some(hard),
            },
        );
    }
}

/// A connection that sends `request` and then never reads: its receive
/// buffer is tiny, so the server's writes back up at once.
async fn never_reading(addr: SocketAddr, request: &[u8]) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut s = socket.connect(addr).await.unwrap();
    s.write_all(request).await.unwrap();
    s
}

fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes()
}

async fn healthy(c: &Client, srv: &ServerProcess) {
    let r = reqwest::get(format!("{}/healthz", srv.url()))
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let _ = c;
}

/// Every body of `stream`, in order.
async fn bodies(c: &Client, stream: &str) -> Vec<Vec<u8>> {
    let opts = fencelog_client::ReadOptions {
        count: Some(10_000),
        bytes: Some(1 << 20),
        ..Default::default()
    };
    let next = c.state(stream).await.unwrap().next_seq;
    let mut out = Vec::new();
    while (out.len() as u64) < next {
        let page = c.read(stream, out.len() as u64, &opts).await.unwrap();
        out.extend(page.records.into_iter().map(|r| r.body.to_vec()));
    }
    out
}

/// One raw append of `body` (one record, as is: a JSON append of bytes
/// that JSON escapes would be over the body limit) with token 1, timed.
async fn timed_append(srv: &ServerProcess, stream: &str, body: Vec<u8>) -> Duration {
    let started = Instant::now();
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/streams/{stream}/records", srv.url()))
        .header("fencing-token", "1")
        .header("content-type", "application/octet-stream")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200, "{:?}", resp.text().await);
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_followers_and_readers_keep_memory_bounded() {
    raise_own_nofile();
    let tmp = tempfile::tempdir().unwrap();
    let srv = serve().data_dir(tmp.path().join("data")).start();
    let c = Client::new(srv.url().to_string()).unwrap();
    // 9 MiB of records that JSON escapes six times over (\u0001).
    let record = vec![1u8; 1 << 20];
    for _ in 0..9 {
        timed_append(&srv, "big", record.clone()).await;
    }
    let mut baseline = Vec::new();
    for _ in 0..5 {
        baseline.push(timed_append(&srv, "other", vec![1u8; 1 << 20]).await);
    }
    let rss_before = rss_bytes(srv.pid());
    let mut idle = Vec::new();
    for _ in 0..1000 {
        idle.push(never_reading(srv.addr(), &get("/v1/streams/big/records?follow=true")).await);
    }
    let path = "/v1/streams/big/records?start_seq=0&count=10000&bytes=8388608";
    for _ in 0..200 {
        idle.push(never_reading(srv.addr(), &get(path)).await);
    }
    // The same pages in the binary read format (64 KiB chunks): readers
    // that stop mid-body hold their share of the budget, never the page.
    let binary =
        format!("GET {path} HTTP/1.1\r\nHost: t\r\nAccept: application/vnd.fencelog.batch\r\n\r\n");
    for _ in 0..200 {
        idle.push(never_reading(srv.addr(), binary.as_bytes()).await);
    }
    // Each filled its socket and hyper's buffer (bounded) and stopped; wait
    // until the server's CPU time stops moving, then appends go on at the
    // usual pace while all of them stay connected.
    let mut peak = settle(srv.pid());
    let mut loaded = Vec::new();
    for _ in 0..5 {
        loaded.push(timed_append(&srv, "big", vec![1u8; 1 << 20]).await);
        peak = peak.max(rss_bytes(srv.pid()));
    }
    peak = peak.max(settle(srv.pid()));
    let max = |v: &[Duration]| v.iter().max().copied().unwrap();
    println!(
        "RSS {} MB before, peak {} MB with 1000 idle followers and 200 + 200 idle 8 MiB readers (JSON, binary); append max {:?} idle, {:?} loaded",
        rss_before >> 20,
        peak >> 20,
        max(&baseline),
        max(&loaded)
    );
    assert!(peak < 256 << 20, "resident {} MB", peak >> 20);
    assert!(
        max(&loaded) < max(&baseline) * 10 + Duration::from_millis(200),
        "appends slowed from {:?} to {:?}",
        max(&baseline),
        max(&loaded)
    );
    drop(idle);
    let all = bodies(&c, "big").await;
    assert_eq!(all.len(), 14);
    assert!(all.iter().all(|b| b == &record));
    healthy(&c, &srv).await;
    srv.sigterm_and_wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_uploads_are_capped_and_shutdown_does_not_wait_for_them() {
    raise_own_nofile();
    let tmp = tempfile::tempdir().unwrap();
    let srv = serve().data_dir(tmp.path().join("data")).start();
    let c = Client::new(srv.url().to_string()).unwrap();
    c.append("s", 1, ["kept"]).await.unwrap();
    let head = "POST /v1/streams/s/records HTTP/1.1\r\nHost: t\r\nFencing-Token: 1\r\nContent-Type: application/octet-stream\r\nContent-Length: 2100000\r\n\r\n";
    let chunk = vec![b'x'; 2_000_000];
    let mut stalled = Vec::new();
    for _ in 0..300 {
        let mut s = TcpStream::connect(srv.addr()).await.unwrap();
        s.write_all(head.as_bytes()).await.unwrap();
        let chunk = chunk.clone();
        // Send what the server takes within a moment, then stall.
        stalled.push(tokio::spawn(async move {
            let _ = tokio::time::timeout(Duration::from_millis(500), s.write_all(&chunk)).await;
            s
        }));
    }
    let mut held = Vec::new();
    for t in stalled {
        held.push(t.await.unwrap());
    }
    let rss = rss_bytes(srv.pid());
    println!("RSS with 300 stalled 2 MB uploads: {} MB", rss >> 20);
    assert!(rss < 256 << 20, "resident {} MB", rss >> 20);
    // Past the upload budget (64 MiB: about 31 of them hold theirs until
    // the body timeout) a new large upload is told to come back later.
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/streams/s/records", srv.url()))
        .header("fencing-token", "1")
        .body(vec![b'y'; 2_100_000])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 503);
    assert_eq!(resp.headers()["retry-after"], "1");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body,
        json!({"error": "overloaded", "message": "the server is at its memory budget for request bodies; retry shortly", "retry_after_s": 1, "stream": "s"})
    );
    // SIGTERM is not held up by the stalled bodies (30 s body timeout):
    // the drain gives up after its 5 s deadline.
    let started = Instant::now();
    let status = srv.sigterm_and_wait();
    let took = started.elapsed();
    assert_eq!(status.code(), Some(0));
    assert!(took < Duration::from_secs(15), "shutdown took {took:?}");
    drop(held);
    let srv = serve().data_dir(tmp.path().join("data")).start();
    let c = Client::new(srv.url().to_string()).unwrap();
    assert_eq!(bodies(&c, "s").await, [b"kept".to_vec()]);
    healthy(&c, &srv).await;
    srv.sigterm_and_wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_dropped_after_the_write_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    let srv = serve()
        .data_dir(tmp.path().join("data"))
        .args(["--write-timeout-ms", "1000"])
        .start();
    let c = Client::new(srv.url().to_string()).unwrap();
    for _ in 0..8 {
        timed_append(&srv, "big", vec![1u8; 1 << 20]).await;
    }
    for path in [
        "/v1/streams/big/records?start_seq=0&bytes=8388608",
        "/v1/streams/big/records?follow=true",
    ] {
        let mut s = never_reading(srv.addr(), &get(path)).await;
        // Not reading for longer than the timeout...
        tokio::time::sleep(Duration::from_millis(2500)).await;
        // ...then the connection ends after what was buffered.
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0usize;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, s.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => break,
                Ok(Ok(n)) => total += n,
                Err(_) => panic!("{path}: still open after the write timeout ({total} bytes read)"),
            }
        }
        assert!(
            total < 48 << 20,
            "{path}: the whole response came ({total} bytes)"
        );
    }
    assert_eq!(bodies(&c, "big").await.len(), 8);
    healthy(&c, &srv).await;
    srv.sigterm_and_wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_writer_queue_is_503_overloaded_and_nothing_is_half_applied() {
    let tmp = tempfile::tempdir().unwrap();
    let srv = serve()
        .data_dir(tmp.path().join("data"))
        .args(["--queue-depth-max", "1"])
        .start();
    let http = reqwest::Client::new();
    let url = format!("{}/v1/streams/q/records", srv.url());
    let mut calls = Vec::new();
    for i in 0..200 {
        let req = http
            .post(&url)
            .header("fencing-token", "1")
            .body(format!("r{i}"))
            .send();
        calls.push(tokio::spawn(req));
    }
    let (mut acked, mut overloaded) = (Vec::new(), 0);
    for (i, call) in calls.into_iter().enumerate() {
        let resp = call.await.unwrap().unwrap();
        match resp.status().as_u16() {
            200 => acked.push(format!("r{i}")),
            503 => {
                assert_eq!(resp.headers()["retry-after"], "1");
                let body: Value = resp.json().await.unwrap();
                assert_eq!(body["error"], json!("overloaded"), "{body}");
                assert_eq!(body["retry_after_s"], json!(1));
                overloaded += 1;
            }
            other => panic!("status {other}"),
        }
    }
    println!("{} acknowledged, {overloaded} overloaded", acked.len());
    assert!(
        overloaded > 0,
        "a queue of 1 never filled with 200 concurrent appends"
    );
    let metrics = http
        .get(format!("{}/metrics", srv.url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(&format!(
            "fencelog_overload_rejections_total {overloaded}\n"
        )),
        "{metrics}"
    );
    let c = Client::new(srv.url().to_string()).unwrap();
    let mut stored: Vec<String> = bodies(&c, "q")
        .await
        .into_iter()
        .map(|b| String::from_utf8(b).unwrap())
        .collect();
    stored.sort();
    acked.sort();
    assert_eq!(stored, acked, "exactly the acknowledged appends are stored");
    healthy(&c, &srv).await;
    srv.sigterm_and_wait();
}

/// `fencelog serve` under a hard descriptor limit, through `prlimit`
/// (util-linux), via a wrapper script the harness starts as the binary.
fn limited_server(dir: &std::path::Path, nofile: u32, extra: &[&str]) -> ServerProcess {
    limited_server_soft(dir, (nofile, nofile), extra)
}

/// [`limited_server`] with a soft limit below the hard one.
fn limited_server_soft(
    dir: &std::path::Path,
    (soft, hard): (u32, u32),
    extra: &[&str],
) -> ServerProcess {
    let wrapper = dir.join("fencelog-limited");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec prlimit --nofile={soft}:{hard} {} \"$@\"\n",
            crate::support::BIN
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    ServerProcess::builder(&wrapper)
        .data_dir(dir.join("data"))
        .args(["--segment-bytes", "65536"])
        .args(extra)
        .start()
}

async fn idle_connections(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(TcpStream::connect(addr).await.unwrap());
    }
    out
}

// A roll that does find no descriptor (EMFILE at segment creation) is
// refused cleanly without poisoning: the engine's fault suites fail every
// storage call of the create path (`faults_io`), and a refusal that poisons
// fails them.

/// Appends 8 KiB records until one fails or `n` succeed; returns the acked
/// bodies and the failure.
async fn append_until_refused(
    c: &Client,
    n: usize,
) -> (Vec<Vec<u8>>, Option<fencelog_client::ClientError>) {
    let mut acked = Vec::new();
    for i in 0..n {
        let body = format!("{i:08}").repeat(1024).into_bytes();
        match c.append("fd", 1, [body.clone()]).await {
            Ok(_) => acked.push(body),
            Err(e) => return (acked, Some(e)),
        }
    }
    (acked, None)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_past_the_descriptor_limit_never_break_a_roll() {
    if fencelog_testkit::deps::find_program("prlimit").is_none() {
        fencelog_testkit::deps::missing(
            "out_of_descriptors",
            "prlimit (util-linux) is not installed",
        );
        return;
    }
    raise_own_nofile();
    // With the default cap (from the limit) accepting never takes the
    // descriptors the writer needs: the same flood, and every roll works.
    let tmp = tempfile::tempdir().unwrap();
    let srv = limited_server(tmp.path(), 256, &["--header-read-timeout-ms", "2000"]);
    let c = Client::builder(srv.url())
        .pool_idle_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let (mut acked, failed) = append_until_refused(&c, 1).await;
    assert!(failed.is_none());
    let idle = idle_connections(srv.addr(), 400).await;
    let (more, failure) = append_until_refused(&c, 64).await;
    assert!(failure.is_none(), "{failure:?}");
    acked.extend(more);
    drop(idle);
    assert_eq!(bodies(&c, "fd").await, acked);
    healthy(&c, &srv).await;
    srv.sigterm_and_wait();
}

/// The soft descriptor limit is raised to the hard one at start,
/// and the default connection cap comes from the raised limit (half of it
/// after a reserve for segments), as the startup line says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_soft_descriptor_limit_is_raised_to_the_hard_one_at_start() {
    if fencelog_testkit::deps::find_program("prlimit").is_none() {
        fencelog_testkit::deps::missing("raise_nofile", "prlimit (util-linux) is not installed");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let srv = limited_server_soft(tmp.path(), (256, 4096), &[]);
    let log = srv.log_text();
    assert!(
        log.contains("nofile_was=256 nofile=4096 connections_max=2016"),
        "{log}"
    );
    let c = Client::new(srv.url().to_string()).unwrap();
    let (acked, failure) = append_until_refused(&c, 2).await;
    assert!(failure.is_none() && acked.len() == 2, "{failure:?}");
    healthy(&c, &srv).await;
    srv.sigterm_and_wait();
}
