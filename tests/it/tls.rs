//! TLS against the real binary: HTTPS with a certificate rcgen
//! makes, the Rust client and the CLI with `--ca-cert`, a plaintext request
//! on the TLS port answered with a JSON 400, and a SIGHUP that swaps the
//! certificate without dropping a live tail.

use crate::support::{serve, BIN};
use fencelog_client::{Client, ClientError};
use futures_util::StreamExt;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A CA and a server certificate it signed for `localhost` and
/// 127.0.0.1, written as PEM files; returns (ca, cert, key) paths.
pub fn certificates(dir: &Path, tag: &str) -> (PathBuf, PathBuf, PathBuf) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("fencelog test CA {tag}"));
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let params =
        rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap();
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    let paths = (
        dir.join(format!("ca-{tag}.pem")),
        dir.join(format!("cert-{tag}.pem")),
        dir.join(format!("key-{tag}.pem")),
    );
    std::fs::write(&paths.0, ca.pem()).unwrap();
    std::fs::write(&paths.1, cert.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}

fn client(url: &str, ca: &Path) -> Client {
    Client::builder(url)
        .ca_cert_file(ca)
        .unwrap()
        .build()
        .unwrap()
}

/// The server on `dir/data` with this certificate and key, and its URL.
fn serve_tls(
    dir: &Path,
    cert: &Path,
    key: &Path,
) -> (fencelog_testkit::process::ServerProcess, String) {
    let srv = serve()
        .data_dir(dir.join("data"))
        .arg("--tls-cert")
        .arg(cert)
        .arg("--tls-key")
        .arg(key)
        .start();
    let url = format!("https://localhost:{}", srv.addr().port());
    (srv, url)
}

/// Waits for `needle` in the server's log; the reload has no other signal
/// a test can see.
fn wait_for_log(srv: &fencelog_testkit::process::ServerProcess, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !srv.log_text().contains(needle) {
        assert!(
            Instant::now() < deadline,
            "no {needle:?} in the log:\n{}",
            srv.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_a_private_ca_and_a_reload_that_drops_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (ca1, cert1, key1) = certificates(tmp.path(), "1");
    let (ca2, cert2, key2) = certificates(tmp.path(), "2");
    let cert = tmp.path().join("server.pem");
    let key = tmp.path().join("server.key");
    std::fs::copy(&cert1, &cert).unwrap();
    std::fs::copy(&key1, &key).unwrap();
    let (srv, url) = serve_tls(tmp.path(), &cert, &key);
    let c1 = client(&url, &ca1);
    let ack = c1.append("tls", 1, ["over https"]).await.unwrap();
    assert_eq!(ack.first_seq, 0);

    // Plain HTTP on the TLS port: a JSON 400 saying why, then a close.
    let mut plain = std::net::TcpStream::connect(srv.addr()).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    plain
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    plain.read_to_string(&mut answer).unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
        "{answer}"
    );
    assert!(
        answer.ends_with(r#"{"error":"bad_request","message":"this port serves HTTPS only: use an https:// URL"}"#),
        "{answer}"
    );
    // A client that does not trust the CA cannot connect.
    let stranger = Client::new(url.clone()).unwrap();
    assert!(matches!(
        stranger.state("tls").await,
        Err(ClientError::Transport { .. })
    ));

    // A live tail over TLS survives the reload.
    let mut tail = Box::pin(c1.tail("tls", 0));
    assert!(matches!(tail.next().await, Some(Ok(_))));
    std::fs::copy(&cert2, &cert).unwrap();
    std::fs::copy(&key2, &key).unwrap();
    srv.sighup();
    wait_for_log(&srv, "TLS certificate reloaded");
    // New connections get the new certificate: CA 2 is trusted now, CA 1
    // no longer (a fresh client, so no pooled connection is reused).
    let c2 = client(&url, &ca2);
    c2.append("tls", 1, ["after the reload"]).await.unwrap();
    assert!(matches!(
        client(&url, &ca1).state("tls").await,
        Err(ClientError::Transport { .. })
    ));
    // ...and the tail, on its old connection, sees the record.
    loop {
        match tokio::time::timeout(Duration::from_secs(30), tail.next()).await {
            Ok(Some(Ok(r))) if r.body == "after the reload" => break,
            Ok(Some(Ok(_))) => continue,
            other => panic!("the tail ended across the reload: {other:?}"),
        }
    }
    // The CLI speaks https with --ca-cert.
    let out = Command::new(BIN)
        .args(["read", "tls", "--from", "0", "--server", &url, "--ca-cert"])
        .arg(&ca2)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text.contains("over https") && text.contains("after the reload"),
        "{text}"
    );
    // A broken file on reload keeps the certificate in use.
    std::fs::write(&cert, "not a certificate").unwrap();
    srv.sighup();
    wait_for_log(&srv, "TLS reload failed; keeping the previous certificate");
    assert_eq!(client(&url, &ca2).state("tls").await.unwrap().next_seq, 2);
    drop(tail);
    srv.sigterm_and_wait();
}

/// The append session over https:// (`wss://`, the client's own rustls
/// with the builder's CA): every append answered in order and durable; a
/// client that does not trust the CA is refused at the handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_append_session_runs_over_https() {
    const APPENDS: u64 = 200;
    let tmp = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificates(tmp.path(), "s");
    let (_srv, url) = serve_tls(tmp.path(), &cert, &key);
    let c = client(&url, &ca);
    let session = c.append_session_with("wss", 32).await.unwrap();
    let (mut tx, mut rx) = (session.sender, session.receiver);
    let sending = async move {
        for i in 0..APPENDS {
            tx.send(3, None, format!("over wss {i}").as_bytes()).await?;
        }
        tx.close().await
    };
    let receiving = async move {
        let mut answered = Vec::new();
        while let Some((n, answer)) = rx.recv().await? {
            answered.push((n, answer?.first_seq));
        }
        Ok::<_, ClientError>(answered)
    };
    let (sent, answered) = tokio::join!(sending, receiving);
    sent.unwrap();
    let want: Vec<(u64, u64)> = (0..APPENDS).map(|i| (i, i)).collect();
    assert_eq!(answered.unwrap(), want);
    let options = fencelog_client::ReadOptions {
        count: Some(APPENDS),
        ..Default::default()
    };
    let page = c.read("wss", 0, &options).await.unwrap();
    let bodies: Vec<bytes::Bytes> = page.records.iter().map(|r| r.body.clone()).collect();
    let want: Vec<bytes::Bytes> = (0..APPENDS)
        .map(|i| format!("over wss {i}").into())
        .collect();
    assert_eq!(bodies, want);

    let stranger = Client::new(url.clone()).unwrap();
    match stranger.append_session("wss").await {
        Err(ClientError::SessionEnded { message, .. }) => {
            assert!(message.starts_with("TLS handshake with "), "{message}")
        }
        Err(other) => panic!("expected a refused handshake, got {other:?}"),
        Ok(_) => panic!("a client without the CA opened a session"),
    }
}

/// A cluster whose nodes serve TLS (`--tls-cert`, `--cluster-ca-cert`):
/// Raft RPCs, forwarded writes and read indexes go node to node over
/// https, so writes through every node commit in order and every replica
/// serves them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_over_tls_replicates_and_forwards_over_https() {
    let tmp = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificates(tmp.path(), "c");
    let ca_pem = std::fs::read(&ca).unwrap();
    let http = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca_pem).unwrap())
        .build()
        .unwrap();
    let path = |p: &Path| p.to_str().unwrap().to_string();
    let (ca, cert, key) = (path(&ca), path(&cert), path(&key));
    let args = [
        "--tls-cert",
        cert.as_str(),
        "--tls-key",
        key.as_str(),
        "--cluster-ca-cert",
        ca.as_str(),
    ];
    let c = crate::cluster_support::ProcCluster::start_with(3, 1, &args, http);
    let ids = [1, 2, 3];
    let leader = c.leader(0, &ids).await;
    for id in ids {
        let (s, v) = c
            .append(id, "tls.c", 1, &format!("through node {id}"))
            .await;
        assert_eq!(
            (s, v["first_seq"].as_u64()),
            (200, Some(id as u64 - 1)),
            "node {id}: {v}"
        );
    }
    c.converged(0, &ids).await;
    for id in ids {
        let got = c.records(id, "tls.c").await;
        let want: Vec<(u64, u64, String)> = (1..=3)
            .map(|i| (i - 1, 1, format!("through node {i}")))
            .collect();
        assert_eq!(got, want, "node {id} (leader {leader})");
    }
}

/// `--cluster-ca-cert` is for nodes that serve TLS, and must hold a PEM
/// certificate: either mistake stops the node before it starts (exit 2).
#[test]
fn a_cluster_ca_without_tls_or_without_a_certificate_refuses_to_start() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, cert, key) = certificates(tmp.path(), "r");
    let junk = tmp.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate").unwrap();
    let port = crate::cluster_support::free_ports(1)[0];
    let cluster = format!("1=127.0.0.1:{port}");
    let tls = [
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ];
    let cases: [(&[&str], &str); 2] = [
        (
            &[],
            "cluster_ca_cert needs tls_cert: the nodes serve plain HTTP",
        ),
        (&tls, "cluster_ca_cert: no PEM certificate in it"),
    ];
    for (extra, says) in cases {
        let err = crate::cluster_support::serve_refused(|cmd| {
            cmd.args(["--node-id", "1", "--cluster", &cluster, "--listen"])
                .arg(format!("127.0.0.1:{port}"))
                .arg("--cluster-ca-cert")
                .arg(&junk)
                .arg("--data-dir")
                .arg(tmp.path().join("data"))
                .args(extra);
        });
        assert!(err.contains(says), "{extra:?}: {err}");
    }
}
