//! Shared by the client, CLI and etcd tests: the real `fencelog serve`
//! binary on a loopback port, stopped by its own PID, and small process
//! helpers.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};

pub const BIN: &str = env!("CARGO_BIN_EXE_fencelog");

pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub url: String,
    pub log: PathBuf,
    // Held so the server never writes to a closed pipe.
    _stdout: BufReader<ChildStdout>,
}

impl Drop for Server {
    // A failed assertion must not leave a server running.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// `fencelog serve` on `data_dir`, listening on `listen` (port 0 for a
    /// free one); returns once it has announced its address.
    pub fn start(data_dir: &Path, listen: &str, extra: &[&str]) -> Server {
        let log = data_dir.with_extension(format!("log-{}", unique()));
        let mut child = Command::new(BIN)
            .arg("serve")
            .args(["--listen", listen, "--data-dir"])
            .arg(data_dir)
            .args(extra)
            .env_remove("FENCELOG_LISTEN")
            .env_remove("FENCELOG_DATA_DIR")
            .env_remove("FENCELOG_CONFIG")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let addr: SocketAddr = match line.trim().strip_prefix("listening on ") {
            Some(a) => a.parse().unwrap(),
            None => {
                let _ = child.kill();
                let status = child.wait();
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                panic!("server did not start: {line:?}, exit {status:?}, log:\n{text}")
            }
        };
        Server {
            child,
            addr,
            url: format!("http://{addr}"),
            log,
            _stdout: stdout,
        }
    }

    /// SIGKILL, as a crash would.
    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

fn unique() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Sends `signal` (e.g. "STOP", "CONT", "INT") to one process by its PID.
pub fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid} failed");
}

/// The next line a child printed, without the newline; panics at EOF.
pub fn next_line(out: &mut impl BufRead, who: &str) -> String {
    let mut line = String::new();
    let n = out.read_line(&mut line).unwrap();
    assert!(n > 0, "{who} closed its stdout");
    line.trim_end().to_string()
}
