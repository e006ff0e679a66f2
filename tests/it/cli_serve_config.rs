//! `fencelog serve --config FILE`: the file sets defaults, environment
//! variables override it, flags override both; `--print-config` shows the
//! result; `--log-format json` logs JSON lines; the startup lines are in the
//! log by the time the server prints `listening on`, and the shutdown lines
//! by the time it exits; every setting is checked, under its own name,
//! before anything touches the disk; `--help` states every cap;
//! `--log-level` picks the lines.

use crate::support::{serve, BIN};
use fencelog_engine::config::{
    BATCH_BYTES_LIMIT, BATCH_RECORDS_LIMIT, SEGMENT_BYTES_LIMIT, WRITER_SPIN_US_DEFAULT,
    WRITER_SPIN_US_LIMIT,
};
use std::process::Command;

fn serve_cmd() -> Command {
    let mut c = Command::new(BIN);
    c.arg("serve");
    for var in [
        "FENCELOG_CONFIG",
        "FENCELOG_LISTEN",
        "FENCELOG_DATA_DIR",
        "FENCELOG_LOG_FORMAT",
        "FENCELOG_SEGMENT_BYTES",
        "FENCELOG_BATCH_RECORDS_MAX",
        "FENCELOG_BATCH_BYTES_MAX",
        "FENCELOG_BODY_BYTES_MAX",
        "FENCELOG_HEADER_READ_TIMEOUT_MS",
        "FENCELOG_BODY_READ_TIMEOUT_MS",
        "FENCELOG_WRITER_SPIN_US",
        "FENCELOG_LOG_LEVEL",
        "RUST_LOG",
    ] {
        c.env_remove(var);
    }
    c
}

#[test]
fn file_then_environment_then_flags() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("fencelog.toml");
    std::fs::write(
        &file,
        "listen = \"127.0.0.1:9001\"\ndata_dir = \"/srv/log\"\nbatch_records_max = 10\n\
         segment_bytes = 65536\nlog_format = \"json\"\nwriter_spin_us = 0\n",
    )
    .unwrap();
    let o = serve_cmd()
        .arg("--config")
        .arg(&file)
        .env("FENCELOG_BATCH_RECORDS_MAX", "20")
        .env("FENCELOG_SEGMENT_BYTES", "131072")
        .args(["--segment-bytes", "262144", "--print-config"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let printed: toml::Table = toml::from_str(&String::from_utf8(o.stdout).unwrap()).unwrap();
    assert_eq!(printed["listen"].as_str(), Some("127.0.0.1:9001"), "file");
    assert_eq!(printed["data_dir"].as_str(), Some("/srv/log"), "file");
    assert_eq!(printed["log_format"].as_str(), Some("json"), "file");
    assert_eq!(printed["writer_spin_us"].as_integer(), Some(0), "file");
    assert_eq!(printed["batch_records_max"].as_integer(), Some(20), "env");
    assert_eq!(printed["segment_bytes"].as_integer(), Some(262144), "flag");
    assert_eq!(
        printed["batch_bytes_max"].as_integer(),
        Some(1 << 20),
        "default"
    );
    let o = serve_cmd().arg("--print-config").output().unwrap();
    let printed: toml::Table = toml::from_str(&String::from_utf8(o.stdout).unwrap()).unwrap();
    assert_eq!(
        printed["writer_spin_us"].as_integer(),
        Some(WRITER_SPIN_US_DEFAULT as i64),
        "default"
    );
    // The derived default follows the batch limit in effect.
    assert_eq!(
        printed["body_bytes_max"].as_integer(),
        Some(2 * (1 << 20) + (64 << 10))
    );
}

#[test]
fn unknown_keys_and_missing_files_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("typo.toml");
    std::fs::write(&file, "lisen = \"127.0.0.1:1\"\n").unwrap();
    let o = serve_cmd()
        .arg("--config")
        .arg(&file)
        .arg("--print-config")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("lisen"),
        "{o:?}"
    );
    let o = serve_cmd()
        .args(["--config", "/nonexistent/fencelog.toml", "--print-config"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// Every log line of a JSON-format server, parsed.
fn json_lines(log: &str) -> Vec<serde_json::Value> {
    log.lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"))
        })
        .collect()
}

fn messages(lines: &[serde_json::Value]) -> Vec<&str> {
    lines
        .iter()
        .map(|v| {
            v["fields"]["message"]
                .as_str()
                .unwrap_or_else(|| panic!("{v}"))
        })
        .collect()
}

#[test]
fn json_log_format_writes_json_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let server = serve()
        .data_dir(tmp.path().join("data"))
        .args(["--log-format", "json"])
        .start();
    // Read the moment the server is ready: the startup lines are written
    // before it says so, not at some later flush.
    let startup = json_lines(&server.log_text());
    assert_eq!(
        messages(&startup),
        ["limits in force", "recovered", "serving"]
    );
    assert!(startup.iter().all(|v| v["level"] == "INFO"), "{startup:?}");
    assert_eq!(
        startup[2]["fields"]["addr"].as_str(),
        Some(server.addr().to_string().as_str())
    );

    let log = server.log_path().to_path_buf();
    let exit = server.sigterm_and_wait();
    assert_eq!(exit.code(), Some(0), "{exit:?}");
    let all = json_lines(&std::fs::read_to_string(log).unwrap());
    let all = messages(&all);
    // Between these the HTTP layer says how it drains, in its own words.
    assert_eq!(
        all[..4],
        [
            "limits in force",
            "recovered",
            "serving",
            "received SIGTERM"
        ]
    );
    assert_eq!(all.last(), Some(&"stopped"), "{all:?}");
}

/// The startup lines are written before `listening on` is: with the log
/// in the same pipe as stdout, they arrive first. (The log writer is a
/// queue and a thread; the server waits for it before announcing itself,
/// so a SIGKILL the moment it is ready still finds them in the log.)
#[test]
fn startup_lines_are_logged_before_listening_is_printed() {
    let tmp = tempfile::tempdir().unwrap();
    let server = serve()
        .data_dir(tmp.path().join("data"))
        .log_to_stdout()
        .start();
    let before = server.output_before_ready();
    let serving = format!(" serving addr={} ", server.addr());
    assert!(
        before.iter().any(|l| l.contains(" recovered "))
            && before.iter().any(|l| l.contains(&serving)),
        "the startup lines did not precede `listening on`: {before:#?}"
    );
    let status = server.kill9();
    assert_eq!(status.code(), None, "killed, not exited: {status:?}");
}

/// After SIGTERM the shutdown lines are in the log when the process has
/// exited: the signal is noted and the last line says it stopped.
#[test]
fn shutdown_lines_are_logged_before_exit() {
    let tmp = tempfile::tempdir().unwrap();
    let server = serve().data_dir(tmp.path().join("data")).start();
    let log = server.log_path().to_path_buf();
    let exit = server.sigterm_and_wait();
    assert_eq!(exit.code(), Some(0), "{exit:?}");
    let text = std::fs::read_to_string(log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines.iter().any(|l| l.ends_with(" received SIGTERM"))
            && lines.last().is_some_and(|l| l.ends_with(" stopped")),
        "the log lacks the shutdown lines:\n{text}"
    );
}

/// A bad setting is exit 2 with the setting's own name and flag, before
/// the data directory is created; so is a listen address that is not one.
/// A port in use is found before recovery: exit 1, still no directory.
#[test]
fn settings_are_checked_before_the_disk_is_touched() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("never");
    let file = tmp.path().join("fencelog.toml");
    std::fs::write(&file, "segment_bytes = 100\n").unwrap();
    let cases: [(&[&str], String); 8] = [
        (
            &["--segment-bytes", "100"],
            format!("fencelog serve: segment_bytes (--segment-bytes) must be in 4096..={SEGMENT_BYTES_LIMIT}, got 100\n"),
        ),
        (
            &["--config", file.to_str().unwrap()],
            format!("fencelog serve: segment_bytes (--segment-bytes) must be in 4096..={SEGMENT_BYTES_LIMIT}, got 100\n"),
        ),
        (
            &["--batch-records-max", "0"],
            format!("fencelog serve: batch_records_max (--batch-records-max) must be in 1..={BATCH_RECORDS_LIMIT}, got 0\n"),
        ),
        (
            &["--writer-spin-us", "10001"],
            format!("fencelog serve: writer_spin_us (--writer-spin-us) must be at most {WRITER_SPIN_US_LIMIT}, got 10001\n"),
        ),
        (
            &["--body-bytes-max", "0"],
            "fencelog serve: body_bytes_max (--body-bytes-max) must be in 1..=134217728, got 0\n".into(),
        ),
        (
            &["--header-read-timeout-ms", "0"],
            "fencelog serve: header_read_timeout_ms (--header-read-timeout-ms) must be in 1..=3600000, got 0\n".into(),
        ),
        (
            &["--listen", "7070"],
            "fencelog serve: listen (--listen) \"7070\" is not an address (invalid socket address); write it as HOST:PORT, e.g. 127.0.0.1:7070\n".into(),
        ),
        (
            &["--log-level", "loud"],
            "fencelog serve: log_level (--log-level) \"loud\" is not a level or filter (\"loud\" is not a level)".into(),
        ),
    ];
    // Every case listens on a port in use (through the environment, which
    // a flag overrides): a setting let through by mistake ends in exit 1
    // at the bind, not in a server that runs on.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().map(|a| (taken, a.to_string())).unwrap();
    for (args, says) in cases {
        let o = serve_cmd()
            .arg("--data-dir")
            .arg(&data)
            .env("FENCELOG_LISTEN", &taken.1)
            .args(args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        let err = String::from_utf8(o.stderr).unwrap();
        assert!(err.starts_with(&says), "{args:?}: {err}");
        assert!(!data.exists(), "{args:?} created the data directory");
    }
    let o = serve_cmd()
        .arg("--data-dir")
        .arg(&data)
        .args(["--listen", &taken.1])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.contains("cannot listen"), "{err}");
    assert!(!err.contains("recovered"), "{err}");
    assert!(
        !data.exists(),
        "a port in use still created the data directory"
    );
}

#[test]
fn help_states_every_cap() {
    let o = serve_cmd().arg("--help").output().unwrap();
    let help = String::from_utf8(o.stdout).unwrap();
    for cap in [
        format!("4096..={SEGMENT_BYTES_LIMIT}"),
        format!("1..={BATCH_RECORDS_LIMIT}"),
        format!("1..={BATCH_BYTES_LIMIT}"),
        "1..=134217728".to_string(),
        "1..=3600000".to_string(),
        format!("at most {WRITER_SPIN_US_LIMIT}"),
        "--log-level".to_string(),
    ] {
        assert!(help.contains(&cap), "--help lacks {cap}:\n{help}");
    }
}

#[test]
fn log_level_picks_the_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let server = serve()
        .data_dir(tmp.path().join("data"))
        .args(["--log-level", "warn"])
        .start();
    let log = server.log_path().to_path_buf();
    assert_eq!(server.sigterm_and_wait().code(), Some(0));
    // Only warnings and errors: none happened, so the log is empty.
    assert_eq!(std::fs::read_to_string(log).unwrap(), "");
    let o = serve_cmd()
        .args(["--log-level", "debug", "--print-config"])
        .output()
        .unwrap();
    let printed: toml::Table = toml::from_str(&String::from_utf8(o.stdout).unwrap()).unwrap();
    assert_eq!(printed["log_level"].as_str(), Some("debug"));
}
