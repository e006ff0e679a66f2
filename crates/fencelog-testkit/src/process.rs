//! Child processes for end-to-end tests: the real `fencelog serve` binary
//! ([`ServerProcess`]) and any other program a test starts ([`ChildGuard`]).
//!
//! Every child is stopped by its own PID — SIGKILL when its guard is
//! dropped, so a failed assertion never leaves a process behind — and never
//! by name. Readiness is the server's own `listening on ADDR` line on
//! stdout, never a sleep; every wait is bounded and, past its bound, kills
//! the child and fails with its log.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::net::SocketAddr;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a server may take to print `listening on` (recovery of a test's
/// data directory takes milliseconds; the slack is for a loaded machine).
pub const STARTUP_LIMIT_DEFAULT: Duration = Duration::from_secs(60);
/// How long a server may take to exit after SIGTERM (the drain of a test's
/// few connections takes milliseconds).
pub const EXIT_LIMIT_DEFAULT: Duration = Duration::from_secs(60);
/// The line `fencelog serve` prints on stdout once it accepts connections.
pub const READY_PREFIX: &str = "listening on ";

/// The signals tests send, by their `kill -<NAME>` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Term,
    Hup,
    Int,
    Stop,
    Cont,
    Kill,
}

impl Signal {
    fn name(self) -> &'static str {
        match self {
            Signal::Term => "TERM",
            Signal::Hup => "HUP",
            Signal::Int => "INT",
            Signal::Stop => "STOP",
            Signal::Cont => "CONT",
            Signal::Kill => "KILL",
        }
    }
}

/// A child process that is SIGKILLed by its own PID and reaped when
/// dropped. Signals go to that PID only, and only while the child is not yet
/// reaped, so a PID the kernel has handed to someone else is never hit.
pub struct ChildGuard {
    child: Child,
    reaped: bool,
}

impl ChildGuard {
    pub fn spawn(cmd: &mut Command) -> ChildGuard {
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {:?}: {e}", cmd.get_program()));
        ChildGuard {
            child,
            reaped: false,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The standard streams the command was given `Stdio::piped()` for.
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Sends `signal` to this child's PID (`kill -<NAME> <pid>`).
    pub fn signal(&self, signal: Signal) {
        assert!(!self.reaped, "signal {signal:?} to a reaped child");
        let status = Command::new("kill")
            .arg(format!("-{}", signal.name()))
            .arg(self.pid().to_string())
            .status()
            .unwrap_or_else(|e| panic!("cannot run kill: {e}"));
        assert!(
            status.success(),
            "kill -{} {} failed",
            signal.name(),
            self.pid()
        );
    }

    pub fn sigstop(&self) {
        self.signal(Signal::Stop);
    }

    pub fn sigcont(&self) {
        self.signal(Signal::Cont);
    }

    /// SIGKILL, as a crash would, and reap.
    pub fn kill9(&mut self) -> ExitStatus {
        if !self.reaped {
            // Fails only if the child was already reaped, which `reaped` rules out.
            self.child.kill().expect("SIGKILL to an unreaped child");
        }
        self.wait()
    }

    /// Waits for the child to exit (unbounded: use it once the exit is
    /// known to be under way, e.g. after its stdout closed).
    pub fn wait(&mut self) -> ExitStatus {
        let status = self.child.wait().expect("waiting for an owned child");
        self.reaped = true;
        status
    }

    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        let status = self.child.try_wait().expect("polling an owned child");
        self.reaped |= status.is_some();
        status
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The child's stdout, read to its end by a thread so the child never
/// blocks on a full pipe; lines arrive on a channel that disconnects at
/// EOF, which is how an exit is noticed without polling.
struct StdoutLines {
    lines: Receiver<String>,
    reader: Option<JoinHandle<()>>,
}

impl StdoutLines {
    fn new(stdout: impl Read + Send + 'static) -> StdoutLines {
        let (send, lines) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        StdoutLines {
            lines,
            reader: Some(reader),
        }
    }

    /// The next line, `Err(Timeout)` past `deadline`, `Err(Disconnected)`
    /// at EOF.
    fn next_before(&self, deadline: Instant) -> Result<String, RecvTimeoutError> {
        let left = deadline.saturating_duration_since(Instant::now());
        self.lines.recv_timeout(left)
    }

    /// Every line until EOF; only after the child has exited.
    fn rest(&mut self) -> Vec<String> {
        let rest: Vec<String> = self.lines.iter().collect();
        if let Some(reader) = self.reader.take() {
            reader.join().expect("stdout reader panicked");
        }
        rest
    }
}

/// How to start `fencelog serve`; see [`ServerProcess::builder`].
pub struct ServerBuilder {
    bin: PathBuf,
    data_dir: Option<PathBuf>,
    listen: String,
    settings_in_env: bool,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    log: Option<PathBuf>,
    log_to_stdout: bool,
    startup_limit: Duration,
}

impl ServerBuilder {
    /// The data directory (required).
    pub fn data_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.data_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// The listen address; defaults to `127.0.0.1:0` (a free port).
    pub fn listen(mut self, addr: impl Into<String>) -> Self {
        self.listen = addr.into();
        self
    }

    /// Passes the data directory and listen address through
    /// `FENCELOG_DATA_DIR` and `FENCELOG_LISTEN` instead of flags.
    pub fn settings_in_env(mut self) -> Self {
        self.settings_in_env = true;
        self
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_os_string());
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, args: I) -> Self {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    /// An environment variable for the server. The server inherits none of
    /// the test's `FENCELOG_*` variables, nor `RUST_LOG`.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env
            .push((key.as_ref().to_os_string(), value.as_ref().to_os_string()));
        self
    }

    /// Where the server's stderr (its log) goes, appended to; defaults to
    /// `<data_dir>.log`, so restarts on one directory share one log.
    pub fn log_file(mut self, path: impl AsRef<Path>) -> Self {
        self.log = Some(path.as_ref().to_path_buf());
        self
    }

    /// Sends the log into the stdout pipe instead of a file, so the order
    /// of log lines and `listening on` is the order the server wrote them;
    /// see [`ServerProcess::output_before_ready`].
    pub fn log_to_stdout(mut self) -> Self {
        self.log_to_stdout = true;
        self
    }

    pub fn startup_limit(mut self, limit: Duration) -> Self {
        self.startup_limit = limit;
        self
    }

    /// Starts the server and returns once it printed `listening on`.
    pub fn start(self) -> ServerProcess {
        self.spawn().wait_ready()
    }

    /// Starts the server without waiting for it (to kill it mid-startup).
    pub fn spawn(self) -> StartingServer {
        let data_dir = self.data_dir.expect("ServerBuilder::data_dir is required");
        let mut cmd = Command::new(&self.bin);
        cmd.arg("serve");
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("FENCELOG_") || key == "RUST_LOG" {
                cmd.env_remove(key);
            }
        }
        if self.settings_in_env {
            cmd.env("FENCELOG_LISTEN", &self.listen)
                .env("FENCELOG_DATA_DIR", &data_dir);
        } else {
            cmd.args(["--listen", &self.listen, "--data-dir"])
                .arg(&data_dir);
        }
        cmd.args(&self.args).envs(self.env).stdin(Stdio::null());
        let (log, stdout) = if self.log_to_stdout {
            let (read, write) = std::io::pipe().expect("a pipe");
            cmd.stdout(write.try_clone().expect("a pipe")).stderr(write);
            (None, read)
        } else {
            let path = self.log.unwrap_or_else(|| {
                let mut name = data_dir.clone().into_os_string();
                name.push(".log");
                PathBuf::from(name)
            });
            let (log, file) = Log::open(path);
            let (read, write) = std::io::pipe().expect("a pipe");
            cmd.stdout(write).stderr(file);
            (Some(log), read)
        };
        let child = ChildGuard::spawn(&mut cmd);
        // `cmd` holds the pipe's write ends; without dropping it the
        // reader would never see the child's exit as EOF.
        drop(cmd);
        StartingServer {
            child,
            stdout: StdoutLines::new(stdout),
            log,
            startup_limit: self.startup_limit,
        }
    }
}

/// This process's part of a log file that restarts append to.
#[derive(Debug, Clone)]
struct Log {
    path: PathBuf,
    start: u64,
}

impl Log {
    /// Opens `path` for appending; this process's part starts at its end.
    fn open(path: PathBuf) -> (Log, std::fs::File) {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("cannot open the server log {}: {e}", path.display()));
        let start = file.metadata().expect("log metadata").len();
        (Log { path, start }, file)
    }

    fn text(&self) -> String {
        let mut file = std::fs::File::open(&self.path)
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", self.path.display()));
        file.seek(SeekFrom::Start(self.start))
            .expect("seek in the log");
        let mut raw = Vec::new();
        file.read_to_end(&mut raw).expect("read the log");
        String::from_utf8_lossy(&raw).into_owned()
    }
}

/// A server that was started and may not have announced itself yet.
pub struct StartingServer {
    child: ChildGuard,
    stdout: StdoutLines,
    /// None with `log_to_stdout`.
    log: Option<Log>,
    startup_limit: Duration,
}

impl StartingServer {
    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// Waits for `listening on ADDR`; a server that exits or stays silent
    /// past the startup limit is killed and the test fails with its log.
    pub fn wait_ready(mut self) -> ServerProcess {
        let deadline = Instant::now() + self.startup_limit;
        let mut before = Vec::new();
        let addr: Option<SocketAddr> = loop {
            match self.stdout.next_before(deadline) {
                Ok(line) => match line.strip_prefix(READY_PREFIX) {
                    Some(addr) => break addr.parse().ok(),
                    None => before.push(line),
                },
                Err(_) => break None,
            }
        };
        let Some(addr) = addr else {
            let status = self.child.kill9();
            panic!(
                "the server did not announce itself within {:?} (exit {}); stdout before:\n{}\nlog:\n{}",
                self.startup_limit,
                describe(status),
                before.join("\n"),
                self.log.as_ref().map(Log::text).unwrap_or_default()
            )
        };
        ServerProcess {
            child: self.child,
            stdout: self.stdout,
            addr,
            url: format!("http://{addr}"),
            log: self.log,
            before_ready: before,
        }
    }

    /// SIGKILL, wherever startup is; says whether the server had already
    /// printed `listening on`.
    pub fn kill9(mut self) -> (ExitStatus, bool) {
        let status = self.child.kill9();
        let announced = self
            .stdout
            .rest()
            .iter()
            .any(|l| l.starts_with(READY_PREFIX));
        (status, announced)
    }
}

/// A running `fencelog serve`, SIGKILLed by its PID when dropped.
pub struct ServerProcess {
    child: ChildGuard,
    stdout: StdoutLines,
    addr: SocketAddr,
    url: String,
    log: Option<Log>,
    before_ready: Vec<String>,
}

impl ServerProcess {
    /// `bin` is the `fencelog` executable; root integration tests pass
    /// `env!("CARGO_BIN_EXE_fencelog")`.
    pub fn builder(bin: impl AsRef<Path>) -> ServerBuilder {
        ServerBuilder {
            bin: bin.as_ref().to_path_buf(),
            data_dir: None,
            listen: "127.0.0.1:0".to_string(),
            settings_in_env: false,
            args: Vec::new(),
            env: Vec::new(),
            log: None,
            log_to_stdout: false,
            startup_limit: STARTUP_LIMIT_DEFAULT,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    fn log(&self) -> &Log {
        self.log
            .as_ref()
            .expect("the log went to stdout (log_to_stdout), not to a file")
    }

    /// The log file (not with `log_to_stdout`).
    pub fn log_path(&self) -> &Path {
        &self.log().path
    }

    /// What this process wrote to its log so far, not earlier runs' (not
    /// with `log_to_stdout`).
    pub fn log_text(&self) -> String {
        self.log().text()
    }

    /// The lines the server wrote to stdout before `listening on`: none,
    /// or with `log_to_stdout` its startup log lines.
    pub fn output_before_ready(&self) -> &[String] {
        &self.before_ready
    }

    /// SIGKILL, as a crash would; returns the exit status.
    pub fn kill9(mut self) -> ExitStatus {
        self.child.kill9()
    }

    pub fn sigterm(&self) {
        self.child.signal(Signal::Term);
    }

    pub fn sigstop(&self) {
        self.child.sigstop();
    }

    /// SIGHUP: the server reloads its TLS certificate.
    pub fn sighup(&self) {
        self.child.signal(Signal::Hup);
    }

    pub fn sigcont(&self) {
        self.child.sigcont();
    }

    /// Waits, bounded by [`EXIT_LIMIT_DEFAULT`], for the server to exit by
    /// itself (after [`ServerProcess::sigterm`]); past the bound it is
    /// killed and the test fails with its log.
    pub fn wait(mut self) -> ExitStatus {
        let deadline = Instant::now() + EXIT_LIMIT_DEFAULT;
        // Its stdout closes when it exits; lines printed meanwhile are fine.
        loop {
            match self.stdout.next_before(deadline) {
                Ok(_) => continue,
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    let status = self.child.kill9();
                    panic!(
                        "the server did not exit within {EXIT_LIMIT_DEFAULT:?} ({}); log:\n{}",
                        describe(status),
                        self.log.as_ref().map(Log::text).unwrap_or_default()
                    );
                }
            }
        }
        self.stdout.rest();
        self.child.wait()
    }

    /// SIGTERM, then [`ServerProcess::wait`].
    pub fn sigterm_and_wait(self) -> ExitStatus {
        self.sigterm();
        self.wait()
    }
}

/// "code 0" or "signal 9", for failure messages.
fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("code {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        (None, None) => format!("{status}"),
    }
}
