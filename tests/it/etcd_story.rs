//! The seeds' story end to end with real parts, and the hostile tests of
//! the seeds that need the lease service next to fencelog:
//!
//! - test 1: a worker process really paused (SIGSTOP) past its lease, a
//!   second worker taking over with a higher token, and fencelog rejecting
//!   the first worker's late write when it resumes;
//! - test 3: the expired owner's late keep-alive and release reach etcd
//!   and change nothing of its successor's lock, which keeps writing;
//! - test 5: etcd restarts in the middle; tokens keep increasing and the
//!   stale owner is still refused;
//! - test 8: the owner is cut off from etcd (a TCP proxy the test cuts)
//!   but not from fencelog: it keeps writing until a successor fences,
//!   then it is refused and notices through `StaleToken`.
//!
//! Needs `etcd` on `PATH` (Debian package `etcd-server`; `cargo xtask test`
//! installs it). Without it the test says `SKIPPED` loudly, or, under
//! `cargo xtask test`, fails (`fencelog_testkit::deps`).

use crate::support::{next_line, serve, BIN};
use fencelog_client::etcd::{Etcd, Lock};
use fencelog_client::{Client, ClientError, ReadOptions};
use fencelog_testkit::deps;
use fencelog_testkit::process::{ChildGuard, ServerProcess, Signal};
use fencelog_testkit::proxy::TcpProxy;
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

/// A one-member etcd on loopback ports; [`EtcdServer::restart`] keeps its
/// data directory and ports.
struct EtcdServer {
    bin: PathBuf,
    dir: PathBuf,
    ports: (u16, u16),
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

fn spawn_etcd(
    bin: &Path,
    dir: &Path,
    (client_port, peer_port): (u16, u16),
    log: &Path,
) -> ChildGuard {
    let client_url = format!("http://127.0.0.1:{client_port}");
    let peer_url = format!("http://127.0.0.1:{peer_port}");
    // Appended to, so a restart's log follows the first run's.
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    ChildGuard::spawn(
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
            .stderr(log),
    )
}

/// Tries to bind ports that were free a moment ago; another test may have
/// taken one since (`free_port` cannot hold them), so a start that fails
/// with "address already in use" is retried on fresh ports, bounded.
async fn start_etcd(bin: &Path, dir: &Path) -> EtcdServer {
    const BIND_ATTEMPTS_MAX: usize = 5;
    let log = dir.join("etcd.log");
    for attempt in 1..=BIND_ATTEMPTS_MAX {
        let ports = (free_port(), free_port());
        let mut etcd = EtcdServer {
            bin: bin.to_path_buf(),
            dir: dir.to_path_buf(),
            ports,
            child: spawn_etcd(bin, dir, ports, &log),
            url: format!("http://127.0.0.1:{}", ports.0),
            log: log.clone(),
        };
        match etcd.try_wait_healthy().await {
            Ok(()) => return etcd,
            Err(text) if text.contains("address already in use") && attempt < BIND_ATTEMPTS_MAX => {
                eprintln!("etcd lost a port race (attempt {attempt}); retrying on fresh ports");
                let _ = std::fs::remove_file(&log);
                let _ = std::fs::remove_dir_all(dir.join("etcd-data"));
            }
            Err(text) => panic!("{text}"),
        }
    }
    unreachable!("the last attempt returns or panics")
}

impl EtcdServer {
    fn addr(&self) -> std::net::SocketAddr {
        ([127, 0, 0, 1], self.ports.0).into()
    }

    /// etcd has no readiness signal we can wait on besides its health
    /// endpoint, so poll it, bounded.
    async fn wait_healthy(&mut self) {
        if let Err(text) = self.try_wait_healthy().await {
            panic!("{text}");
        }
    }

    /// Like `wait_healthy`, but an early exit is returned (with the log)
    /// rather than a panic, so a lost port race can be retried.
    async fn try_wait_healthy(&mut self) -> Result<(), String> {
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait() {
                let text = std::fs::read_to_string(&self.log).unwrap_or_default();
                return Err(format!(
                    "etcd exited with {status} before becoming healthy; log:\n{text}"
                ));
            }
            if let Ok(r) = http.get(format!("{}/health", self.url)).send().await {
                if r.status().is_success() && r.text().await.unwrap_or_default().contains("true") {
                    return Ok(());
                }
            }
            assert!(
                Instant::now() < deadline,
                "etcd not healthy within 30 s; log:\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops etcd gracefully (SIGTERM to its PID, waits for the exit) and
    /// starts it again on the same data directory and ports.
    async fn restart(&mut self) {
        self.child.signal(Signal::Term);
        let status = self.child.wait();
        assert!(
            status.success() || status.code().is_none(),
            "etcd stopped with {status}"
        );
        self.child = spawn_etcd(&self.bin, &self.dir, self.ports, &self.log);
        self.wait_healthy().await;
    }
}

/// Waits, bounded, until `key` is gone (its lease expired or was revoked).
async fn wait_gone(etcd: &Etcd, key: &str, whose: &str) {
    let deadline = Instant::now() + LEASE_GONE_WITHIN;
    while etcd.exists(key).await.unwrap() {
        assert!(
            Instant::now() < deadline,
            "etcd did not expire {whose}'s lease within {LEASE_GONE_WITHIN:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// etcd and fencelog for one test, or `None` (after saying so) without etcd.
async fn services(test: &str) -> Option<(tempfile::TempDir, EtcdServer, ServerProcess)> {
    let Some(etcd_bin) = deps::find_program("etcd") else {
        deps::missing(
            test,
            "etcd is not on PATH (Debian: apt-get install etcd-server)",
        );
        return None;
    };
    let tmp = tempfile::tempdir().unwrap();
    let etcd_server = start_etcd(&etcd_bin, tmp.path()).await;
    let store = serve().data_dir(tmp.path().join("fencelog")).start();
    Some((tmp, etcd_server, store))
}

/// The stream's records as `(body, token)`, in seq order.
async fn contents(client: &Client) -> Vec<(String, u64)> {
    let read = client
        .read(STREAM, 0, &ReadOptions::default())
        .await
        .unwrap();
    read.records
        .iter()
        .map(|r| (String::from_utf8(r.body.to_vec()).unwrap(), r.fencing_token))
        .collect()
}

fn owned(bodies: &[&str], token: u64) -> Vec<(String, u64)> {
    bodies.iter().map(|b| (b.to_string(), token)).collect()
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
        Worker::start_with(name, etcd, server, log_dir, &[])
    }

    /// [`Worker::start`] with more `demo-worker` arguments.
    fn start_with(
        name: &'static str,
        etcd: &str,
        server: &str,
        log_dir: &Path,
        extra: &[&str],
    ) -> Worker {
        let mut child = ChildGuard::spawn(
            Command::new(BIN)
                .args(["demo-worker", "--etcd", etcd, "--server", server])
                .args(["--stream", STREAM, "--lock-key", LOCK_KEY, "--name", name])
                .args(["--lease-ttl-s", &LEASE_TTL_S.to_string()])
                .args(extra)
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
    let Some((tmp, etcd_server, store)) = services("etcd_story").await else {
        return;
    };
    let etcd = Etcd::new(etcd_server.url.clone());

    // A takes the lock and writes its first record.
    let mut a = Worker::start("A", &etcd_server.url, store.url(), tmp.path());
    let token_a = a.acquired();
    a.send("a-1");
    assert_eq!(a.line(), format!("appended seq=0 token={token_a}"));

    // A freezes (think GC pause or VM suspension) and so stops renewing.
    a.child.sigstop();
    wait_gone(&etcd, LOCK_KEY, "A").await;

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
    // "Did my write land?": the producer lookup names A's a-1, nothing later.
    assert_eq!(
        a.line(),
        format!("last landed: producer_seq=0 seq=0..=0 token={token_a}")
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
    let want = [owned(&["a-1"], token_a), owned(&["b-1", "b-2"], token_b)].concat();
    assert_eq!(contents(&client).await, want);
    let state = client.state(STREAM).await.unwrap();
    assert_eq!((state.next_seq, state.highest_token), (3, token_b));
}

/// A's write with its old token: refused, and by how much.
async fn assert_refused(client: &Client, token: u64, highest: u64) {
    match client.append(STREAM, token, ["a-late"]).await {
        Err(ClientError::StaleToken {
            presented,
            highest: h,
            ..
        }) => assert_eq!((presented, h), (token, highest)),
        other => panic!("a write with stale token {token} got {other:?}"),
    }
}

/// Seeds' test 3: once A's lease expired and B took the lock, what A sends
/// late — a keep-alive, then its release — changes nothing of B's lock
/// (key, value, token, lease) and B keeps writing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_keep_alive_and_release_of_the_old_owner_leave_the_new_owner_alone() {
    let Some((_tmp, etcd_server, store)) = services("etcd_story test 3").await else {
        return;
    };
    let etcd = Etcd::new(etcd_server.url.clone());
    let client = Client::new(store.url().to_string()).unwrap();

    let a: Lock = etcd.lock(LOCK_KEY, "A", LEASE_TTL_S).await.unwrap();
    client.fence(STREAM, a.token).await.unwrap();
    client.append(STREAM, a.token, ["a-1"]).await.unwrap();
    // A stops renewing (paused); its lease runs out.
    wait_gone(&etcd, LOCK_KEY, "A").await;

    // B's lease outlives the test's steps, so only A's can expire here.
    let b = etcd.lock(LOCK_KEY, "B", 60).await.unwrap();
    assert!(
        b.token > a.token,
        "B's token {} must be above A's {}",
        b.token,
        a.token
    );
    client.fence(STREAM, b.token).await.unwrap();
    let held = etcd.get(LOCK_KEY).await.unwrap().expect("B holds the lock");
    assert_eq!(
        (held.value.as_str(), held.create_revision, held.lease_id),
        ("B", b.token, b.lease_id)
    );

    // A wakes up: its next keep-alive, then its release, reach etcd.
    assert!(
        !etcd.keep_alive(a.lease_id).await.unwrap(),
        "an expired lease must not be renewed"
    );
    assert!(
        !etcd.release(a).await.unwrap(),
        "A's lease was already gone"
    );
    assert_eq!(
        etcd.get(LOCK_KEY).await.unwrap(),
        Some(held),
        "B's lock changed"
    );

    // B still owns the lease and the stream; A's write is refused.
    assert!(etcd.keep_alive(b.lease_id).await.unwrap());
    let ack = client.append(STREAM, b.token, ["b-1"]).await.unwrap();
    assert_eq!(ack.first_seq, 1);
    assert_refused(&client, a.token, b.token).await;
    let want = [owned(&["a-1"], a.token), owned(&["b-1"], b.token)].concat();
    assert_eq!(contents(&client).await, want);

    assert!(etcd.release(b).await.unwrap());
    assert!(
        !etcd.exists(LOCK_KEY).await.unwrap(),
        "B's release freed the lock"
    );
}

/// Seeds' test 5: etcd restarts in the middle of the story. Its revision
/// counter is durable, so an acquisition after the restart gets a token
/// above every token handed out before it, and the owner from before the
/// restart is still refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_keep_increasing_across_an_etcd_restart() {
    let Some((_tmp, mut etcd_server, store)) = services("etcd_story test 5").await else {
        return;
    };
    let etcd = Etcd::new(etcd_server.url.clone());
    let client = Client::new(store.url().to_string()).unwrap();

    let a = etcd.lock(LOCK_KEY, "A", LEASE_TTL_S).await.unwrap();
    client.fence(STREAM, a.token).await.unwrap();
    client.append(STREAM, a.token, ["a-1"]).await.unwrap();
    // Another stream's owner comes and goes, so tokens were handed out
    // above A's before the restart.
    let other = etcd.lock("fencelog/locks/other", "C", 60).await.unwrap();
    assert!(etcd.release(other).await.unwrap());
    let before = [a.token, other.token];

    // A pauses (no keep-alive) while etcd goes down and comes back.
    etcd_server.restart().await;
    wait_gone(&etcd, LOCK_KEY, "A").await;

    let b = etcd.lock(LOCK_KEY, "B", 60).await.unwrap();
    let highest_before = before.iter().max().unwrap();
    assert!(
        b.token > *highest_before,
        "B's token {} after the restart must be above every earlier token {before:?}",
        b.token
    );
    client.fence(STREAM, b.token).await.unwrap();
    client.append(STREAM, b.token, ["b-1"]).await.unwrap();
    assert_refused(&client, a.token, b.token).await;
    let want = [owned(&["a-1"], a.token), owned(&["b-1"], b.token)].concat();
    assert_eq!(contents(&client).await, want);
    assert_eq!(client.state(STREAM).await.unwrap().highest_token, b.token);
}

/// Seeds' test 8: A reaches etcd only through a proxy the test cuts, while
/// it still reaches fencelog. A keeps running and writing — nothing stops
/// it locally — until B takes the lock and fences; from then on fencelog
/// refuses A, and A notices through `StaleToken` (the worker's "fenced
/// out" line and exit code 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_cut_off_from_etcd_writes_until_fenced_then_is_refused() {
    let Some((tmp, etcd_server, store)) = services("etcd_story test 8").await else {
        return;
    };
    let etcd = Etcd::new(etcd_server.url.clone());
    let proxy = TcpProxy::start(etcd_server.addr()).await;

    let mut a = Worker::start("A", &proxy.url(), store.url(), tmp.path());
    let token_a = a.acquired();
    a.send("a-1");
    assert_eq!(a.line(), format!("appended seq=0 token={token_a}"));

    // The partition: A's keep-alives no longer arrive; fencelog is fine.
    proxy.cut();
    a.send("a-2");
    assert_eq!(a.line(), format!("appended seq=1 token={token_a}"));
    wait_gone(&etcd, LOCK_KEY, "A").await;
    // A's lease is gone but nobody has taken over: its writes still land.
    a.send("a-3");
    assert_eq!(a.line(), format!("appended seq=2 token={token_a}"));

    // B, which reaches etcd, takes the lock and fences the stream.
    let mut b = Worker::start("B", &etcd_server.url, store.url(), tmp.path());
    let token_b = b.acquired();
    assert!(
        token_b > token_a,
        "B's token {token_b} must be above A's {token_a}"
    );
    a.send("a-4");
    assert_eq!(
        a.line(),
        format!("fenced out: token={token_a} highest={token_b}")
    );
    assert_eq!(
        a.line(),
        format!("last landed: producer_seq=2 seq=2..=2 token={token_a}")
    );
    assert_eq!(
        a.child.wait().code(),
        Some(3),
        "A must exit with the stale code"
    );
    b.send("b-1");
    assert_eq!(b.line(), format!("appended seq=3 token={token_b}"));
    drop(b.stdin.take());
    assert_eq!(b.line(), format!("finished token={token_b} appended=1"));
    assert!(b.child.wait().success());

    // Durable: A's three writes before B's fence, B's after; a-4 nowhere.
    let client = Client::new(store.url().to_string()).unwrap();
    let want = [
        owned(&["a-1", "a-2", "a-3"], token_a),
        owned(&["b-1"], token_b),
    ]
    .concat();
    assert_eq!(contents(&client).await, want);
    assert_eq!(client.state(STREAM).await.unwrap().highest_token, token_b);
    // A saw the partition itself: its keep-alive failed, and so did its
    // release on the way out.
    let log = std::fs::read_to_string(tmp.path().join("A.log")).unwrap();
    assert!(
        log.contains("lease lost") && log.contains("release failed"),
        "A's log:\n{log}"
    );
}

/// Deadlines in the story: A appends with `not_after_ms` = its
/// lease's expiry minus a margin. Cut off from etcd, its lease runs out
/// while nobody has taken over yet — and fencelog already refuses its next
/// write (`deadline_exceeded`: the writer's time is past A's lease), so the
/// window before a successor's first fenced write is closed; A stops with
/// the stale code. The durable contents show nothing of A after a-1, and
/// the successor continues from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_past_its_lease_is_refused_by_its_deadline_before_any_successor() {
    let Some((tmp, etcd_server, store)) = services("etcd_story deadlines").await else {
        return;
    };
    let etcd = Etcd::new(etcd_server.url.clone());
    let proxy = TcpProxy::start(etcd_server.addr()).await;
    let margin = ["--deadline-margin-ms", "100"];
    let mut a = Worker::start_with("A", &proxy.url(), store.url(), tmp.path(), &margin);
    let token_a = a.acquired();
    a.send("a-1");
    assert_eq!(a.line(), format!("appended seq=0 token={token_a}"));
    proxy.cut();
    wait_gone(&etcd, LOCK_KEY, "A").await;
    a.send("a-2");
    let line = a.line();
    assert!(
        line.starts_with(&format!("lease expired: token={token_a} writer_ms=")),
        "{line}"
    );
    assert_eq!(
        a.child.wait().code(),
        Some(3),
        "A stops with the stale code"
    );
    let client = Client::new(store.url().to_string()).unwrap();
    assert_eq!(contents(&client).await, owned(&["a-1"], token_a));
    let mut b = Worker::start_with("B", &etcd_server.url, store.url(), tmp.path(), &margin);
    let token_b = b.acquired();
    b.send("b-1");
    assert_eq!(b.line(), format!("appended seq=1 token={token_b}"));
    drop(b.stdin.take());
    assert_eq!(b.line(), format!("finished token={token_b} appended=1"));
    assert!(b.child.wait().success());
    let want = [owned(&["a-1"], token_a), owned(&["b-1"], token_b)].concat();
    assert_eq!(contents(&client).await, want);
}

/// A worker that waits for the lock longer than its lease's TTL minus its
/// margin still starts with a live deadline: the lease it waited with was
/// renewed while it waited, and its deadline counts from the last renewal,
/// not from when it began to wait (else its first append would be refused
/// as past its lease although it holds the lock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_that_waited_for_the_lock_starts_with_a_live_deadline() {
    let Some((tmp, etcd_server, store)) = services("etcd_story waited deadline").await else {
        return;
    };
    // The deadline is 1 s after each renewal (TTL 2 s minus 1 s).
    let margin = ["--deadline-margin-ms", "1000"];
    let mut a = Worker::start("A", &etcd_server.url, store.url(), tmp.path());
    let token_a = a.acquired();
    let mut b = Worker::start_with("B", &etcd_server.url, store.url(), tmp.path(), &margin);
    // Time passing is what this test is about, not a stand-in for a
    // signal: B waits past TTL minus margin counted from its lease's grant.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    a.send("a-1");
    assert_eq!(a.line(), format!("appended seq=0 token={token_a}"));
    drop(a.stdin.take());
    assert_eq!(a.line(), format!("finished token={token_a} appended=1"));
    assert!(a.child.wait().success());
    let token_b = b.acquired();
    b.send("b-1");
    assert_eq!(b.line(), format!("appended seq=1 token={token_b}"));
    drop(b.stdin.take());
    assert_eq!(b.line(), format!("finished token={token_b} appended=1"));
    assert!(b.child.wait().success());
    let client = Client::new(store.url().to_string()).unwrap();
    let want = [owned(&["a-1"], token_a), owned(&["b-1"], token_b)].concat();
    assert_eq!(contents(&client).await, want);
}
