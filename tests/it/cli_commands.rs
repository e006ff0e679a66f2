//! The client subcommands of the `fencelog` binary against a real server:
//! the exit code of every outcome (0 ok, 1 failure, 3 stale, 4 rejected)
//! and what they print, human and `--json`.

use crate::support::{code, json_err, json_out, next_line, serve, stderr, stdout, Cli};
use fencelog_testkit::process::{ChildGuard, ServerProcess, Signal};
use serde_json::{json, Value};
use std::io::BufReader;
use std::process::Stdio;

pub fn start() -> (tempfile::TempDir, ServerProcess, Cli) {
    let tmp = tempfile::tempdir().unwrap();
    let server = serve().data_dir(tmp.path().join("data")).start();
    let cli = Cli {
        url: server.url().to_string(),
    };
    (tmp, server, cli)
}

#[test]
fn append_read_fence_status_success_paths() {
    let (_tmp, _server, cli) = start();

    let o = cli.run(&["append", "orders", "--token", "41", "first"]);
    assert_eq!(code(&o), 0, "{o:?}");
    assert_eq!(
        stdout(&o),
        "appended 1 record to orders at seq 0..=0 with token 41\n"
    );

    let o = cli.run_stdin(
        &["append", "orders", "--token", "41", "--json", "-"],
        b"two\nthree\r\n\xff\xfe\n",
    );
    assert_eq!(code(&o), 0, "{o:?}");
    let ack = json_out(&o);
    assert_eq!(
        (
            &ack["first_seq"],
            &ack["last_seq"],
            &ack["next_seq"],
            &ack["records"]
        ),
        (&json!(1), &json!(3), &json!(4), &json!(3))
    );

    let o = cli.run(&["read", "orders"]);
    assert_eq!(code(&o), 0, "{o:?}");
    assert_eq!(
        stdout(&o),
        "0\t41\tfirst\n1\t41\ttwo\n2\t41\tthree\n3\t41\tbase64://4=\n"
    );

    let o = cli.run(&["read", "orders", "--from", "1", "--count", "2", "--json"]);
    assert_eq!(code(&o), 0, "{o:?}");
    let lines: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        (
            &lines[0]["seq"],
            &lines[0]["body"],
            &lines[0]["fencing_token"]
        ),
        (&json!(1), &json!("two"), &json!(41))
    );
    assert_eq!(lines[1]["body"], json!("three"));

    let o = cli.run(&["fence", "orders", "--token", "50"]);
    assert_eq!(code(&o), 0, "{o:?}");
    assert_eq!(stdout(&o), "fenced orders at token 50 (next_seq 4)\n");

    let o = cli.run(&["status", "orders", "--json"]);
    assert_eq!(code(&o), 0, "{o:?}");
    let st = json_out(&o);
    assert_eq!(
        (&st["next_seq"], &st["highest_token"]),
        (&json!(4), &json!(50))
    );

    cli.run(&["append", "other", "--token", "1", "x"]);
    let o = cli.run(&["status"]);
    assert_eq!(code(&o), 0, "{o:?}");
    let text = stdout(&o);
    let names: Vec<&str> = text
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert_eq!(names, vec!["orders", "other"]);
    let o = cli.run(&["status", "--json"]);
    let list = json_out(&o);
    assert_eq!(list["streams"].as_array().unwrap().len(), 2);
}

#[test]
fn stale_token_exits_3_with_the_tokens() {
    let (_tmp, _server, cli) = start();
    assert_eq!(code(&cli.run(&["append", "s", "--token", "42", "b"])), 0);

    let o = cli.run(&["append", "s", "--token", "41", "late"]);
    assert_eq!(code(&o), 3, "{o:?}");
    assert_eq!(stdout(&o), "");
    assert!(
        stderr(&o).starts_with("fencelog: fenced out: stale fencing token 41"),
        "{o:?}"
    );

    let o = cli.run(&["append", "s", "--token", "41", "--json", "late"]);
    assert_eq!(code(&o), 3);
    let e = json_err(&o);
    assert_eq!(
        (
            &e["error"],
            &e["presented_token"],
            &e["highest_token"],
            &e["next_seq"]
        ),
        (
            &json!("stale_fencing_token"),
            &json!(41),
            &json!(42),
            &json!(1)
        )
    );

    let o = cli.run(&["fence", "s", "--token", "7"]);
    assert_eq!(code(&o), 3, "{o:?}");

    let o = cli.run(&["read", "s", "--json"]);
    assert_eq!(stdout(&o).lines().count(), 1, "late writes are absent");
}

#[test]
fn other_rejections_exit_4() {
    let (_tmp, _server, cli) = start();
    cli.run(&["append", "s", "--token", "1", "a"]);

    let o = cli.run(&["append", "s", "--token", "1", "--match-seq", "0", "b"]);
    assert_eq!(code(&o), 4, "{o:?}");
    assert_eq!(stderr(&o), "fencelog: match_seq_num 0 but next_seq is 1\n");
    let o = cli.run(&["append", "s", "--token", "1", "--match-seq", "1", "b"]);
    assert_eq!(code(&o), 0, "{o:?}");

    let o = cli.run(&["status", "missing", "--json"]);
    assert_eq!(code(&o), 4);
    assert_eq!(json_err(&o)["error"], json!("stream_not_found"));
    assert_eq!(code(&cli.run(&["read", "missing"])), 4);
    assert_eq!(code(&cli.run(&["tail", "missing", "--no-wait"])), 4);

    let o = cli.run(&["read", "s", "--from", "9", "--json"]);
    assert_eq!(code(&o), 4);
    assert_eq!(
        (&json_err(&o)["error"], &json_err(&o)["next_seq"]),
        (&json!("out_of_range"), &json!(2))
    );

    // Checked before sending: usage errors.
    assert_eq!(code(&cli.run(&["append", "s", "--token", "0", "x"])), 2);
    assert_eq!(
        code(&cli.run(&["append", "bad/name", "--token", "1", "x"])),
        2
    );
    // Past the server's 1 MiB batch limit (too long for an argv entry).
    let big = "x".repeat(3 << 19) + "\n";
    let o = cli.run_stdin(&["append", "s", "--token", "1"], big.as_bytes());
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(stderr(&o).contains("too large"), "{}", stderr(&o));
}

#[test]
fn unreachable_server_exits_1_and_usage_errors_exit_2() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cli = Cli {
        url: format!("http://127.0.0.1:{port}"),
    };
    for args in [
        &["append", "s", "--token", "1", "x"][..],
        &["read", "s"],
        &["fence", "s", "--token", "1"],
        &["status"],
    ] {
        let o = cli.run(args);
        assert_eq!(code(&o), 1, "{args:?}: {o:?}");
        assert!(stderr(&o).contains("could not reach the server"), "{o:?}");
    }
    // --server wins over FENCELOG_URL.
    let (_tmp, server, _) = start();
    let o = cli.run(&["--help"]);
    assert!(stdout(&o).contains("3    stale fencing token"));
    let o = cli.run(&["status", "--server", server.url()]);
    assert_eq!(code(&o), 0, "{o:?}");
    assert_eq!(code(&cli.run(&["append", "s"])), 2, "missing --token");
}

#[test]
fn stdin_is_batched_within_the_limits_and_match_seq_chains_batches() {
    let (_tmp, _server, cli) = start();
    let input: String = (0..25).map(|i| format!("line {i}\n")).collect();
    let o = cli.run_stdin(
        &[
            "append",
            "s",
            "--token",
            "3",
            "--match-seq",
            "0",
            "--batch-records",
            "10",
            "--json",
        ],
        input.as_bytes(),
    );
    assert_eq!(code(&o), 0, "{o:?}");
    let ack = json_out(&o);
    assert_eq!(ack["records"], json!(25));
    assert!(ack["batches"].as_u64().unwrap() >= 3, "{ack}");
    assert_eq!(ack["next_seq"], json!(25));
    let o = cli.run(&["read", "s", "--json"]);
    let bodies: Vec<String> = stdout(&o)
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["body"].as_str().unwrap().to_string()
        })
        .collect();
    let want: Vec<String> = (0..25).map(|i| format!("line {i}")).collect();
    assert_eq!(bodies, want);
}

#[test]
fn tail_prints_new_records_as_they_land_and_stops_on_ctrl_c() {
    let (_tmp, _server, cli) = start();
    cli.run(&["append", "t", "--token", "1", "old"]);
    let mut child = ChildGuard::spawn(
        cli.cmd(&["tail", "t", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let mut out = BufReader::new(child.child_mut().stdout.take().unwrap());
    let first: Value = serde_json::from_str(&next_line(&mut out, "tail")).unwrap();
    assert_eq!((&first["seq"], &first["body"]), (&json!(0), &json!("old")));
    // The tail is connected (it printed), so this lands live.
    cli.run(&["append", "t", "--token", "2", "new"]);
    let second: Value = serde_json::from_str(&next_line(&mut out, "tail")).unwrap();
    assert_eq!(
        (&second["seq"], &second["body"], &second["fencing_token"]),
        (&json!(1), &json!("new"), &json!(2))
    );
    child.signal(Signal::Int);
    let status = child.wait();
    assert_eq!(status.code(), Some(0), "Ctrl-C is a normal end of a tail");
}
