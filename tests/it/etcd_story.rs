//! The seeds' story end to end with real parts: an etcd lock with a lease,
//! a worker process really paused (SIGSTOP) past its lease, a second worker
//! taking over with a higher token, and fencelog rejecting the first
//! worker's late write when it resumes.
//!
//! Needs `etcd` on `PATH` (Debian package `etcd-server`; `cargo xtask test`
//! installs it). Without it the test says `SKIPPED` loudly, or, under
//! `cargo xtask test`, fails (`fencelog_testkit::deps`).

use crate::support::{next_line, serve, BIN};
use fencelog_client::etcd::Etcd;
use fencelog_client::{Client, ReadOptions};
use fencelog_testkit::deps;
use fencelog_testkit::process::ChildGuard;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const LEASE_TTL_S: u64 = 2;
/// How long the test waits for etcd to expire a lease of LEASE_TTL_S; etcd
/// checks expiry periodically, so allow generous slack on a busy machine.
const LEASE_GONE_WITHIN: Duration = Duration::from_secs(30);
const STREAM: &str = "orders";
const LOCK_KEY: &str = "fencelog/locks/orders";

struct EtcdServer {
    child: ChildGuard,
    url: String,
    log: PathBuf,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn start_etcd(bin: &Path, dir: &Path) -> EtcdServer {
    let (client_port, peer_port) = (free_port(), free_port());
    let client_url = format!("http://127.0.0.1:{client_port}");
    let peer_url = format!("http://127.0.0.1:{peer_port}");
    let log = dir.join("etcd.log");
    let child = ChildGuard::spawn(
        Command::new(bin)
            .args(["--name", "story"])
            .arg("--data-dir")
            .arg(dir.join("etcd-data"))
            .args(["--listen-client-urls", &client_url])
            .args(["--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("story={peer_url}")])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap()),
    );
    let mut etcd = EtcdServer {
        child,
        url: client_url,
        log,
    };
    // etcd has no readiness signal we can wait on besides its health
    // endpoint, so poll it, bounded.
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = etcd.child.try_wait() {
            let text = std::fs::read_to_string(&etcd.log).unwrap_or_default();
            panic!("etcd exited with {status} before becoming healthy; log:\n{text}");
        }
        if let Ok(r) = http.get(format!("{}/health", etcd.url)).send().await {
            if r.status().is_success() && r.text().await.unwrap_or_default().contains("true") {
                return etcd;
            }
        }
        assert!(
            Instant::now() < deadline,
            "etcd not healthy within 30 s; log:\n{}",
            std::fs::read_to_string(&etcd.log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A `fencelog demo-worker`; SIGKILLed when dropped, which ends a stopped
/// process too: nothing may outlive a failed run.
struct Worker {
    name: &'static str,
    child: ChildGuard,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Worker {
    fn start(name: &'static str, etcd: &str, server: &str, log_dir: &Path) -> Worker {
        let mut child = ChildGuard::spawn(
            Command::new(BIN)
                .args(["demo-worker", "--etcd", etcd, "--server", server])
                .args(["--stream", STREAM, "--lock-key", LOCK_KEY, "--name", name])
                .args(["--lease-ttl-s", &LEASE_TTL_S.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(std::fs::File::create(log_dir.join(format!("{name}.log"))).unwrap()),
        );
        Worker {
            name,
            stdin: child.child_mut().stdin.take(),
            stdout: BufReader::new(child.child_mut().stdout.take().unwrap()),
            child,
        }
    }

    fn line(&mut self) -> String {
        next_line(&mut self.stdout, self.name)
    }

    fn send(&mut self, record: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{record}").unwrap();
        stdin.flush().unwrap();
    }

    /// Waits for `acquired token=T` and returns T.
    fn acquired(&mut self) -> u64 {
        let line = self.line();
        line.strip_prefix("acquired token=")
            .unwrap_or_else(|| panic!("{}: expected acquisition, got {line:?}", self.name))
            .parse()
            .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_worker_loses_its_lease_and_its_late_write_is_rejected() {
    let Some(etcd_bin) = deps::find_program("etcd") else {
        deps::missing(
            "etcd_story",
            "etcd is not on PATH (Debian: apt-get install etcd-server)",
        );
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let etcd_server = start_etcd(&etcd_bin, tmp.path()).await;
    let store = serve().data_dir(tmp.path().join("fencelog")).start();
    let etcd = Etcd::new(etcd_server.url.clone());

    // A takes the lock and writes its first record.
    let mut a = Worker::start("A", &etcd_server.url, store.url(), tmp.path());
    let token_a = a.acquired();
    a.send("a-1");
    assert_eq!(a.line(), format!("appended seq=0 token={token_a}"));

    // A freezes (think GC pause or VM suspension) and so stops renewing.
    a.child.sigstop();
    let deadline = Instant::now() + LEASE_GONE_WITHIN;
    while etcd.exists(LOCK_KEY).await.unwrap() {
        assert!(
            Instant::now() < deadline,
            "etcd did not expire A's lease within {LEASE_GONE_WITHIN:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // B takes over with a strictly higher token, fences, and writes.
    let mut b = Worker::start("B", &etcd_server.url, store.url(), tmp.path());
    let token_b = b.acquired();
    assert!(
        token_b > token_a,
        "B's token {token_b} must be above A's {token_a}"
    );
    b.send("b-1");
    assert_eq!(b.line(), format!("appended seq=1 token={token_b}"));
    b.send("b-2");
    assert_eq!(b.line(), format!("appended seq=2 token={token_b}"));

    // A's next piece of work is already waiting in its pipe when it wakes;
    // from its own point of view nothing happened in between.
    a.send("a-late");
    a.child.sigcont();
    assert_eq!(
        a.line(),
        format!("fenced out: token={token_a} highest={token_b}")
    );
    let status = a.child.wait();
    assert_eq!(status.code(), Some(3), "A must exit with the stale code");

    // B finishes normally and releases the lock.
    drop(b.stdin.take());
    assert_eq!(b.line(), format!("finished token={token_b} appended=2"));
    assert!(b.child.wait().success());
    assert!(!etcd.exists(LOCK_KEY).await.unwrap(), "B released the lock");

    // The store holds exactly what the rightful owners wrote.
    let client = Client::new(store.url().to_string()).unwrap();
    let read = client
        .read(STREAM, 0, &ReadOptions::default())
        .await
        .unwrap();
    let got: Vec<(String, u64)> = read
        .records
        .iter()
        .map(|r| (String::from_utf8(r.body.to_vec()).unwrap(), r.fencing_token))
        .collect();
    assert_eq!(
        got,
        vec![
            ("a-1".to_string(), token_a),
            ("b-1".to_string(), token_b),
            ("b-2".to_string(), token_b),
        ]
    );
    let state = client.state(STREAM).await.unwrap();
    assert_eq!((state.next_seq, state.highest_token), (3, token_b));
}
