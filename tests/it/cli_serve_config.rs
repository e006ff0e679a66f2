//! `fencelog serve --config FILE`: the file sets defaults, environment
//! variables override it, flags override both; `--print-config` shows the
//! result; `--log-format json` logs JSON lines.

use crate::support::{Server, BIN};
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
         segment_bytes = 65536\nlog_format = \"json\"\n",
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
    assert_eq!(printed["batch_records_max"].as_integer(), Some(20), "env");
    assert_eq!(printed["segment_bytes"].as_integer(), Some(262144), "flag");
    assert_eq!(
        printed["batch_bytes_max"].as_integer(),
        Some(1 << 20),
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

#[test]
fn json_log_format_writes_json_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(
        &tmp.path().join("data"),
        "127.0.0.1:0",
        &["--log-format", "json"],
    );
    let log_path = server.log.clone();
    drop(server);
    let log = std::fs::read_to_string(log_path).unwrap();
    let first = log.lines().next().expect("the server logged at startup");
    let v: serde_json::Value = serde_json::from_str(first)
        .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {first}"));
    assert_eq!(v["level"], "INFO");
    assert!(v["fields"]["message"].is_string(), "{v}");
}
