//! The CLI explains itself, against the real binary: server
//! addresses as people write them, the actual cause of a failure, "no such
//! route" told apart from a missing stream, arguments checked before
//! anything is sent, a tail that says when it lost and regained the server
//! and waits for a stream that does not exist yet, Ctrl-C during
//! `append -`, `--json` errors that are the server's answer, and where
//! `read` and `tail` start.

use crate::cli_commands::start;
use crate::support::{code, json_err, next_line, serve, stderr, stdout, Cli};
use fencelog_client::{Client, ReadOptions};
use fencelog_testkit::process::{ChildGuard, Signal};
use serde_json::{json, Value};
use std::io::{BufReader, Read, Write};
use std::process::Stdio;

/// A port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Waits, with a long-poll (the server answers when the record exists),
/// until `stream` holds a record at `seq`.
fn wait_for_record(url: &str, stream: &str, seq: u64) {
    let client = Client::new(url).unwrap();
    let opts = ReadOptions {
        wait_ms: Some(30_000),
        wait_for_stream: true,
        ..ReadOptions::default()
    };
    runtime().block_on(async {
        let mut start = 0;
        while start <= seq {
            start = client
                .read(stream, start, &opts)
                .await
                .unwrap()
                .next_start_seq;
        }
    })
}

#[test]
fn server_addresses_are_taken_as_written_or_refused_with_how_to_write_them() {
    let (_tmp, server, _) = start();
    let port = server.addr().port();
    for url in [format!("localhost:{port}"), format!("127.0.0.1:{port}")] {
        let cli = Cli { url: url.clone() };
        let o = cli.run(&["append", "s", "--token", "1", "x"]);
        assert_eq!(code(&o), 0, "{url}: {o:?}");
    }
    for (url, says) in [
        (
            "ftp://127.0.0.1:1",
            "the scheme is \"ftp\"; use http:// or https://",
        ),
        (
            "127.0.0.1:99999",
            "invalid port number; write it as http://HOST:PORT (or HOST:PORT)",
        ),
        (
            "http://127.0.0.1:1/?q=1",
            "a server URL has no query or fragment",
        ),
    ] {
        let o = Cli { url: url.into() }.run(&["status"]);
        assert_eq!(code(&o), 2, "{url}: {o:?}");
        assert!(stderr(&o).contains(says), "{url}: {}", stderr(&o));
        assert!(stderr(&o).contains("--server"), "{}", stderr(&o));
    }
}

#[test]
fn failures_print_their_actual_cause() {
    let cli = Cli {
        url: format!("127.0.0.1:{}", closed_port()),
    };
    let o = cli.run(&["status", "s"]);
    assert_eq!(code(&o), 1, "{o:?}");
    let err = stderr(&o);
    assert!(
        err.starts_with("fencelog: could not reach the server: "),
        "{err}"
    );
    assert!(err.contains("Connection refused"), "{err}");
    // `.invalid` never resolves (RFC 6761): the lookup failure is named.
    let o = Cli {
        url: "no-such-host.invalid:7070".into(),
    }
    .run(&["status", "s"]);
    assert_eq!(code(&o), 1, "{o:?}");
    let err = stderr(&o);
    assert!(
        err.starts_with("fencelog: could not reach the server: ")
            && err.contains("http://no-such-host.invalid:7070/v1/streams/s")
            && err.contains("dns error"),
        "{err}"
    );
    // A server that is not speaking plain HTTP: here a TLS alert, as a
    // TLS server answers a plain request.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Reads are retried twice on a failed connection: three attempts.
    let fake = std::thread::spawn(move || {
        for _ in 0..3 {
            let (mut conn, _) = listener.accept().unwrap();
            let mut buf = [0u8; 1024];
            let _ = std::io::Read::read(&mut conn, &mut buf);
            conn.write_all(b"\x15\x03\x03\x00\x02\x02\x46").unwrap();
        }
    });
    let o = Cli {
        url: addr.to_string(),
    }
    .run(&["status", "s"]);
    fake.join().unwrap();
    assert_eq!(code(&o), 1, "{o:?}");
    assert!(stderr(&o).contains("try https://"), "{}", stderr(&o));
}

#[test]
fn no_such_route_is_not_a_missing_stream() {
    let (_tmp, server, cli) = start();
    let wrong = Cli {
        url: format!("{}/wrong/prefix", server.url()),
    };
    let o = wrong.run(&["status", "s"]);
    assert_eq!(code(&o), 4, "{o:?}");
    assert!(
        stderr(&o).starts_with("fencelog: no such route: "),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("not found"), "{}", stderr(&o));
    let o = wrong.run(&["read", "s", "--json"]);
    let e = json_err(&o);
    assert_eq!(
        (&e["error"], &e["status"]),
        (&json!("no_such_route"), &json!(404))
    );
    let o = cli.run(&["status", "s"]);
    assert_eq!(code(&o), 4);
    assert_eq!(stderr(&o), "fencelog: stream \"s\" does not exist\n");
}

#[test]
fn arguments_are_checked_before_anything_is_sent() {
    // Nothing listens: had anything been sent, this would be exit 1.
    let cli = Cli {
        url: format!("127.0.0.1:{}", closed_port()),
    };
    for (args, says) in [
        (
            &["append", "team/orders", "--token", "1", "x"][..],
            "'/' is not allowed in a stream name",
        ),
        (&["read", "a b"], "' ' is not allowed in a stream name"),
        (
            &["append", "s", "--token", "0", "x"],
            "0 is never a fencing token",
        ),
        (
            &["fence", "s", "--token=-3"],
            "a fencing token is an integer in 1..=18446744073709551615",
        ),
        (
            &["append", "s", "--token", "1", "--header", "novalue", "x"],
            "is not a header: write NAME=VALUE",
        ),
        (
            &["append", "s", "--token", "1", "--header", "=v", "x"],
            "header 0 has an empty name",
        ),
        (&["read", "s", "--since", "10 minutes"], "is not a duration"),
        (&["tail", "s", "--from", "start"], "--from takes a seq"),
        (
            &["read", "s", "--from", "3", "--last", "2"],
            "cannot be used with",
        ),
    ] {
        let o = cli.run(args);
        assert_eq!(code(&o), 2, "{args:?}: {o:?}");
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn every_positional_argument_is_described_in_help() {
    let cli = Cli {
        url: "127.0.0.1:1".into(),
    };
    for cmd in ["append", "read", "tail", "fence", "status"] {
        let help = stdout(&cli.run(&[cmd, "--help"]));
        let args = help
            .split("Arguments:")
            .nth(1)
            .unwrap_or_else(|| panic!("{cmd} has no Arguments section:\n{help}"));
        for line in args.lines().skip(1).take_while(|l| !l.trim().is_empty()) {
            // "  <STREAM>  Stream to ...": a name, then words.
            let words: Vec<&str> = line.split_whitespace().collect();
            assert!(words.len() >= 3, "{cmd}: undescribed argument {line:?}");
        }
    }
}

#[test]
fn json_errors_are_the_servers_answer_and_records_keep_the_api_order() {
    let (_tmp, server, cli) = start();
    cli.run(&["fence", "s", "--token", "5"]);
    let o = cli.run(&["append", "s", "--token", "4", "--json", "late"]);
    assert_eq!(code(&o), 3);
    let http: Value = runtime().block_on(async {
        reqwest::Client::new()
            .post(format!("{}/v1/streams/s/records", server.url()))
            .json(&json!({"fencing_token": 4, "records": [{"body": "late"}]}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    });
    assert_eq!(json_err(&o), http);
    assert_eq!(http["stream"], json!("s"));
    let o = cli.run(&["read", "s", "--from", "9", "--json"]);
    assert_eq!(
        json_err(&o),
        json!({"error": "out_of_range", "message": "start_seq 9 is past the stream's next_seq 0",
               "stream": "s", "start_seq": 9, "first_seq": 0, "next_seq": 0})
    );
    cli.run(&["append", "s", "--token", "5", "x"]);
    let o = cli.run(&["read", "s", "--json"]);
    let line = stdout(&o);
    assert!(
        line.starts_with(r#"{"seq":0,"fencing_token":5,"timestamp_ms":"#)
            && line.ends_with(",\"body\":\"x\"}\n"),
        "{line}"
    );
}

#[test]
fn read_and_tail_start_from_the_end_the_last_n_or_a_time_ago() {
    let (_tmp, _server, cli) = start();
    let input: String = (0..10).map(|i| format!("r{i}\n")).collect();
    assert_eq!(
        code(&cli.run_stdin(&["append", "s", "--token", "1", "-"], input.as_bytes())),
        0
    );
    let bodies = |o: &std::process::Output| -> Vec<String> {
        stdout(o)
            .lines()
            .map(|l| l.split('\t').nth(2).unwrap().to_string())
            .collect()
    };
    assert_eq!(
        bodies(&cli.run(&["read", "s", "--last", "3"])),
        ["r7", "r8", "r9"]
    );
    assert_eq!(bodies(&cli.run(&["read", "s", "--since", "1h"])).len(), 10);
    assert_eq!(
        bodies(&cli.run(&["read", "s", "--from", "8"])),
        ["r8", "r9"]
    );
    // Everything was written well under a day ago, nothing in the future.
    let o = cli.run(&["read", "s", "--since", "0ms"]);
    assert_eq!((code(&o), stdout(&o)), (0, String::new()));

    for (args, first) in [
        (&["tail", "s", "--last", "2"][..], "r8"),
        (&["tail", "s", "--since", "1d"], "r0"),
        (&["tail", "s", "--from", "end"], "live"),
    ] {
        let mut child =
            ChildGuard::spawn(cli.cmd(args).stdout(Stdio::piped()).stderr(Stdio::null()));
        let mut out = BufReader::new(child.child_mut().stdout.take().unwrap());
        if first == "live" {
            // Nothing is printed until a record lands. `--from end` starts
            // where the tail is when the tail connects, so the record is
            // appended once the server counts the tail as open.
            wait_for_live_tails(&cli.url, 1);
            assert_eq!(code(&cli.run(&["append", "s", "--token", "1", "live"])), 0);
        }
        let line = next_line(&mut out, "tail");
        assert_eq!(line.split('\t').nth(2), Some(first), "{args:?}: {line}");
        child.signal(Signal::Int);
        assert_eq!(child.wait().code(), Some(0));
    }
}

/// Waits until the server at `url` reports `n` live tails open
/// (`fencelog_tails_live`): the signal that a tail has connected. A
/// deadline for a failure, not a wait for success.
fn wait_for_live_tails(url: &str, n: u64) {
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let want = format!("fencelog_tails_live {n}");
    loop {
        let mut conn = std::net::TcpStream::connect(addr).unwrap();
        write!(
            conn,
            "GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        conn.read_to_string(&mut text).unwrap();
        if text.lines().any(|l| l.trim() == want) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the tail never connected: no {want:?} in /metrics"
        );
        // Connecting takes a process start and a request; poll gently.
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_tail_waits_for_its_stream_and_says_so() {
    let (_tmp, _server, cli) = start();
    let mut child = ChildGuard::spawn(
        cli.cmd(&["tail", "later"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let mut err = BufReader::new(child.child_mut().stderr.take().unwrap());
    assert_eq!(
        next_line(&mut err, "tail"),
        "fencelog: stream \"later\" does not exist yet; waiting for it to be created (Ctrl-C to stop)"
    );
    let mut out = BufReader::new(child.child_mut().stdout.take().unwrap());
    assert_eq!(
        code(&cli.run(&["append", "later", "--token", "1", "hello"])),
        0
    );
    assert_eq!(next_line(&mut out, "tail"), "0\t1\thello");
    child.signal(Signal::Int);
    assert_eq!(
        next_line(&mut err, "tail"),
        "fencelog: stopped following later before seq 1"
    );
    assert_eq!(child.wait().code(), Some(0));
    let o = cli.run(&["tail", "nothing", "--no-wait"]);
    assert_eq!(code(&o), 4);
    assert!(
        stderr(&o).contains("stream \"nothing\" does not exist"),
        "{o:?}"
    );
}

#[test]
fn a_tail_says_when_it_loses_and_regains_the_server() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = serve().data_dir(&data).start();
    let addr = server.addr();
    let cli = Cli {
        url: server.url().to_string(),
    };
    cli.run(&["append", "t", "--token", "1", "before"]);
    let mut child = ChildGuard::spawn(
        cli.cmd(&["tail", "t"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let mut out = BufReader::new(child.child_mut().stdout.take().unwrap());
    let mut err = BufReader::new(child.child_mut().stderr.take().unwrap());
    assert_eq!(next_line(&mut out, "tail"), "0\t1\tbefore");
    server.kill9();
    let line = next_line(&mut err, "tail");
    assert!(line.starts_with("fencelog: disconnected ("), "{line}");
    assert!(line.ends_with("); retrying…"), "{line}");
    let server = serve().data_dir(&data).listen(addr.to_string()).start();
    assert_eq!(next_line(&mut err, "tail"), "fencelog: resumed at seq 1");
    cli.run(&["append", "t", "--token", "1", "after"]);
    assert_eq!(next_line(&mut out, "tail"), "1\t1\tafter");
    child.signal(Signal::Term);
    assert_eq!(
        next_line(&mut err, "tail"),
        "fencelog: stopped following t before seq 2"
    );
    assert_eq!(child.wait().code(), Some(0));
    drop(server);
}

#[test]
fn ctrl_c_during_append_from_stdin_prints_what_was_acknowledged() {
    let (_tmp, server, cli) = start();
    let mut child = ChildGuard::spawn(
        cli.cmd(&["append", "s", "--token", "1", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let mut stdin = child.child_mut().stdin.take().unwrap();
    stdin.write_all(b"one\ntwo\nthree\n").unwrap();
    stdin.flush().unwrap();
    // Acknowledged once the server holds seq 2; stdin stays open.
    wait_for_record(server.url(), "s", 2);
    child.signal(Signal::Int);
    // The server holding seq 2 does not mean its answer has reached the
    // CLI yet: the signal may land while that batch is still in flight, and
    // then the CLI says it waits for the answer first. Either way the
    // summary is the same, exact one.
    let mut out = String::new();
    child
        .child_mut()
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    child
        .child_mut()
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(out, "appended 3 records to s at seq 0..=2 with token 1\n");
    let done = "fencelog: interrupted; nothing more was sent\n";
    let waited = "fencelog: interrupted; waiting for the batch in flight (again to abandon it)\n";
    assert!(err == done || err == format!("{waited}{done}"), "{err}");
    assert_eq!(child.wait().code(), Some(130));
    drop(stdin);
}

/// `--header` (repeated, in order) is stored with every record the append
/// sends; `read` and `tail` show the headers as a fourth column and in
/// `--json` as the API's `headers`; a header over the limits is a usage
/// error, nothing sent.
#[test]
fn headers_are_stored_and_shown_by_read_and_tail() {
    let (_tmp, _server, cli) = start();
    let o = cli.run(&[
        "append",
        "s",
        "--token",
        "1",
        "--header",
        "trace-id=abc",
        "--header",
        "trace-id=",
        "x",
    ]);
    assert_eq!(code(&o), 0, "{o:?}");
    assert_eq!(code(&cli.run(&["append", "s", "--token", "1", "y"])), 0);
    let o = cli.run(&["read", "s"]);
    assert_eq!(stdout(&o), "0\t1\tx\ttrace-id=abc, trace-id=\n1\t1\ty\n");
    let o = cli.run(&["read", "s", "--count", "1", "--json"]);
    let line: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(
        line["headers"],
        json!([["trace-id", "abc"], ["trace-id", ""]])
    );
    let mut child = ChildGuard::spawn(
        cli.cmd(&["tail", "s", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    );
    let mut out = BufReader::new(child.child_mut().stdout.take().unwrap());
    let first: Value = serde_json::from_str(&next_line(&mut out, "tail")).unwrap();
    assert_eq!(first, line);
    let second: Value = serde_json::from_str(&next_line(&mut out, "tail")).unwrap();
    assert!(second.get("headers").is_none(), "{second}");
    child.signal(Signal::Int);
    assert_eq!(child.wait().code(), Some(0));
    let long = format!("{}=v", "n".repeat(256));
    let o = cli.run(&["append", "s", "--token", "1", "--header", &long, "z"]);
    assert_eq!(code(&o), 2, "{o:?}");
    assert!(
        stderr(&o).contains("header 0 has a 256-byte name, the limit is 255"),
        "{}",
        stderr(&o)
    );
    assert_eq!(stdout(&cli.run(&["read", "s", "--from", "2"])), "");
}
