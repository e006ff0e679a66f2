//! Scoped tokens against the real binary: every route of the route table ×
//! every scope × a stream inside and outside the token's prefix, with the
//! exact 401 and 403 bodies; listing filtered to the prefix; `/metrics` open
//! on `--metrics-listen`; `fencelog token create` output pasted into the
//! config works; and nothing the refused requests sent changed anything.

use crate::support::{serve, BIN};
use fencelog_server::auth::{hash_secret, to_hex, Access, Scope};
use fencelog_server::routes::ROUTES;
use fencelog_testkit::process::ServerProcess;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

/// The prefix every per-scope token is confined to.
const PREFIX: &str = "in-";

pub(crate) fn secret_for(scope: Scope) -> String {
    format!("secret-{scope}")
}

/// A config with one token per scope (prefix `in-`) and a `setup` token
/// that can write anywhere.
pub(crate) fn write_config(dir: &Path) -> std::path::PathBuf {
    let mut text = String::new();
    for scope in Scope::ALL {
        text.push_str(&format!(
            "[[auth.tokens]]\nname = \"only-{scope}\"\nsha256 = \"{}\"\nscopes = [\"{scope}\"]\nstream_prefix = \"{PREFIX}\"\n\n",
            to_hex(&hash_secret(&secret_for(scope)))
        ));
    }
    text.push_str(&format!(
        "[[auth.tokens]]\nname = \"setup\"\nsha256 = \"{}\"\nscopes = [\"append\", \"fence\", \"read\"]\n",
        to_hex(&hash_secret("setup-secret"))
    ));
    let path = dir.join("fencelog.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn start(dir: &Path, extra: &[&str]) -> ServerProcess {
    let config = write_config(dir);
    serve()
        .data_dir(dir.join("data"))
        .arg("--config")
        .arg(&config)
        .args(extra)
        .start()
}

pub(crate) async fn send(
    http: &reqwest::Client,
    method: &str,
    url: &str,
    secret: Option<&str>,
) -> (u16, Value, Option<String>) {
    send_with(http, method, url, secret.as_slice()).await
}

/// [`send`] with one `Authorization: Bearer` header per secret.
async fn send_with(
    http: &reqwest::Client,
    method: &str,
    url: &str,
    secrets: &[&str],
) -> (u16, Value, Option<String>) {
    let mut req = match method {
        "get" => http.get(url),
        "post" => http
            .post(url)
            .header("content-type", "application/json")
            .body("{}"),
        "put" => http
            .put(url)
            .header("content-type", "application/json")
            .body("{}"),
        "delete" => http
            .delete(url)
            .header("content-type", "application/json")
            .body("{}"),
        other => panic!("a route with method {other}: teach this test its request"),
    };
    for s in secrets {
        // `header` appends: two secrets make two headers.
        req = req.header("authorization", format!("Bearer {s}"));
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let challenge = resp
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string());
    let bytes = resp.bytes().await.unwrap();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, body, challenge)
}

/// The 403 the server owes `scope`'s token for a route needing `needed`.
pub(crate) fn forbidden(token_scope: Scope, needed: Scope, stream: Option<&str>) -> Value {
    let name = format!("only-{token_scope}");
    let message = match stream {
        Some(s) if token_scope == needed => {
            format!("token {name:?} covers only streams starting with {PREFIX:?}, not {s:?}")
        }
        Some(s) => format!("token {name:?} lacks scope {needed} for stream {s:?}"),
        None => format!("token {name:?} lacks scope {needed}"),
    };
    let mut body = json!({
        "error": "forbidden",
        "message": message,
        "principal": name,
        "scope": needed.as_str(),
    });
    if let Some(s) = stream {
        body["stream"] = json!(s);
    }
    body
}

async fn states(http: &reqwest::Client, base: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for s in ["in-s", "out-s"] {
        let url = format!("{base}/v1/streams/{s}/records?start_seq=0");
        // A cluster node may answer a read 503 `unavailable` while it
        // finds no quorum for the read index: nothing was read, so again.
        let read = || http.get(&url).bearer_auth("setup-secret");
        out.push(crate::cluster_support::settled(read).await.1);
    }
    out
}

/// The mapping from operation to scope, spelled out here so the
/// route table (which the test below walks) cannot drift from it: trim,
/// seal, delete and stream config each have their own scope.
const MAPPING: &[(&str, Access)] = &[
    ("append", Access::Scope(Scope::Append)),
    // The pipelined append session appends.
    ("appendSession", Access::Scope(Scope::Append)),
    ("read", Access::Scope(Scope::Read)),
    ("fence", Access::Scope(Scope::Fence)),
    ("trim", Access::Scope(Scope::Trim)),
    ("seal", Access::Scope(Scope::Seal)),
    ("delete", Access::Scope(Scope::Delete)),
    ("config", Access::Scope(Scope::Config)),
    ("state", Access::Scope(Scope::Read)),
    ("list", Access::Scope(Scope::Read)),
    // Producers, fence history, cursors and batches: lookups read; a
    // cursor commit and a batch append (each batch op is authorized
    // again with its own scope on its stream).
    ("producer", Access::Scope(Scope::Read)),
    ("fences", Access::Scope(Scope::Read)),
    ("put_cursor", Access::Scope(Scope::Append)),
    ("get_cursor", Access::Scope(Scope::Read)),
    ("list_cursors", Access::Scope(Scope::Read)),
    ("batch", Access::Scope(Scope::Append)),
    ("healthz", Access::Open),
    ("metrics", Access::Scope(Scope::Admin)),
    ("console", Access::Open),
    ("console_asset", Access::Open),
    ("openapi", Access::Open),
];

#[test]
fn the_route_table_declares_the_scope_of_every_route() {
    let table: Vec<(&str, Access)> = ROUTES.iter().map(|r| (r.operation_id, r.access)).collect();
    assert_eq!(table, MAPPING);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_every_scope_inside_and_outside_the_prefix() {
    let tmp = tempfile::tempdir().unwrap();
    let srv = start(tmp.path(), &[]);
    let http = reqwest::Client::new();
    every_route_every_scope(&http, srv.url()).await;
    srv.sigterm_and_wait();
}

/// The walk of the test above against the server at `base`, whose config
/// is [`write_config`]'s (also a cluster node's).
pub(crate) async fn every_route_every_scope(http: &reqwest::Client, base: &str) {
    let http = http.clone();
    let base = base.to_string();
    for s in ["in-s", "out-s"] {
        let url = format!("{base}/v1/streams/{s}/records");
        let body = json!({"fencing_token": 5, "records": [{"body": "kept"}]});
        // Setup, not the subject: a cluster that has just started may
        // answer 503 `unavailable` until its shards have leaders, and a
        // client repeats that; one whose outcome is unknown too, since
        // the states compared below are read after this.
        let (status, v) = crate::cluster_support::settled_even_if_unknown(|| {
            http.post(&url).bearer_auth("setup-secret").json(&body)
        })
        .await;
        assert_eq!(status, 200, "{v}");
    }
    let before = states(&http, &base).await;
    let mut checked = 0;
    for route in ROUTES {
        let streams: &[Option<&str>] = if route.path.contains("{stream}") {
            &[Some("in-s"), Some("out-s")]
        } else {
            &[None]
        };
        for stream in streams {
            let url = format!(
                "{base}{}",
                route.path.replace("{stream}", stream.unwrap_or(""))
            );
            let what = format!("{} {url}", route.method);
            let Access::Scope(needed) = route.access else {
                let (status, body, _) = send(&http, route.method, &url, None).await;
                assert!(
                    !matches!(status, 401 | 403),
                    "{what} is open: {status} {body}"
                );
                continue;
            };
            let (status, body, challenge) = send(&http, route.method, &url, None).await;
            assert_eq!(
                (status, body, challenge.as_deref()),
                (
                    401,
                    json!({"error": "unauthenticated", "message": "this server requires an access token: send Authorization: Bearer <secret>"}),
                    Some("Bearer")
                ),
                "{what} without a token"
            );
            let (status, body, _) = send(&http, route.method, &url, Some("guess")).await;
            assert_eq!(
                (status, body),
                (
                    401,
                    json!({"error": "unauthenticated", "message": "unknown access token"})
                ),
                "{what} with an unknown token"
            );
            // Two headers, even both right, are two readings of who asks.
            let right = secret_for(needed);
            let twice = [right.as_str(), right.as_str()];
            let (status, body, _) = send_with(&http, route.method, &url, &twice).await;
            assert_eq!(
                (status, body),
                (
                    401,
                    json!({"error": "unauthenticated", "message": "the Authorization header appears more than once: send one, Bearer <secret>"})
                ),
                "{what} with two Authorization headers"
            );
            for scope in Scope::ALL {
                let (status, body, _) =
                    send(&http, route.method, &url, Some(&secret_for(scope))).await;
                let inside = stream.is_none_or(|s| s.starts_with(PREFIX));
                if scope == needed && inside {
                    assert!(
                        !matches!(status, 401 | 403),
                        "{what} with scope {scope}: {status} {body}"
                    );
                } else {
                    assert_eq!(
                        (status, body),
                        (403, forbidden(scope, needed, *stream)),
                        "{what} with scope {scope}"
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= ROUTES.len() * Scope::ALL.len(), "{checked}");
    assert_eq!(
        states(&http, &base).await,
        before,
        "a refused request changed something"
    );
    let (status, _, _) = send(&http, "get", &format!("{base}/healthz"), None).await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_shows_only_the_prefix_and_metrics_are_open_on_their_own_address() {
    let tmp = tempfile::tempdir().unwrap();
    let srv = start(tmp.path(), &["--metrics-listen", "127.0.0.1:0"]);
    let http = reqwest::Client::new();
    let base = srv.url().to_string();
    for s in ["in-a", "in-b", "other"] {
        let url = format!("{base}/v1/streams/{s}/fence");
        let (status, _, _) = send(&http, "post", &url, Some("setup-secret")).await;
        assert_eq!(status, 400, "an empty fence body is refused");
        let resp = http
            .post(&url)
            .bearer_auth("setup-secret")
            .json(&json!({"fencing_token": 1}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
    }
    let read = secret_for(Scope::Read);
    let names = |body: Value| -> Vec<String> {
        body["streams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["stream"].as_str().unwrap().to_string())
            .collect()
    };
    for (query, want) in [
        ("", vec!["in-a", "in-b"]),
        ("?prefix=in-b", vec!["in-b"]),
        ("?prefix=i", vec!["in-a", "in-b"]),
        ("?prefix=oth", vec![]),
    ] {
        let (status, body, _) = send(
            &http,
            "get",
            &format!("{base}/v1/streams{query}"),
            Some(&read),
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(names(body), want, "list{query}");
    }
    let (_, body, _) = send(
        &http,
        "get",
        &format!("{base}/v1/streams"),
        Some("setup-secret"),
    )
    .await;
    assert_eq!(names(body), ["in-a", "in-b", "other"]);
    // /metrics needs admin here, and nothing on the metrics address.
    let (status, _, _) = send(&http, "get", &format!("{base}/metrics"), Some(&read)).await;
    assert_eq!(status, 403);
    let metrics_addr = srv
        .output_before_ready()
        .iter()
        .find_map(|l| l.strip_prefix("metrics on "))
        .expect("the metrics address is announced")
        .to_string();
    let resp = http
        .get(format!("http://{metrics_addr}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert!(resp
        .text()
        .await
        .unwrap()
        .contains("fencelog_appends_accepted"));
    srv.sigterm_and_wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_token_works_once_pasted_and_the_cli_sends_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args([
            "token",
            "create",
            "--name",
            "orders-writer",
            "--scopes",
            "append,read",
            "--stream-prefix",
            "orders-",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let secret = text
        .lines()
        .filter_map(|l| l.strip_prefix("# "))
        .find(|l| l.starts_with("fl_"))
        .expect("the secret is printed")
        .to_string();
    assert!(secret.len() >= 3 + 32, "at least 128 bits: {secret}");
    assert!(
        !text
            .lines()
            .any(|l| !l.starts_with('#') && l.contains(&secret)),
        "the stanza holds the hash only"
    );
    let config = tmp.path().join("fencelog.toml");
    std::fs::write(&config, &text).unwrap();
    let srv = serve()
        .data_dir(tmp.path().join("data"))
        .arg("--config")
        .arg(&config)
        .start();
    let cli = |args: &[&str], token: Option<&str>| {
        let mut c = Command::new(BIN);
        c.args(args)
            .args(["--server", srv.url()])
            .env_remove("FENCELOG_AUTH_TOKEN");
        if let Some(t) = token {
            c.env("FENCELOG_AUTH_TOKEN", t);
        }
        c.output().unwrap()
    };
    let ok = cli(
        &["append", "orders-1", "--token", "3", "hello"],
        Some(&secret),
    );
    assert!(ok.status.success(), "{ok:?}");
    let denied = cli(
        &["append", "billing", "--token", "3", "hello"],
        Some(&secret),
    );
    assert_eq!(denied.status.code(), Some(4), "{denied:?}");
    let nobody = cli(&["read", "orders-1", "--from", "0"], None);
    assert_eq!(nobody.status.code(), Some(4), "{nobody:?}");
    assert!(
        String::from_utf8_lossy(&nobody.stderr).contains("unauthenticated"),
        "{nobody:?}"
    );
    let read = cli(&["read", "orders-1", "--from", "0"], Some(&secret));
    assert!(
        String::from_utf8_lossy(&read.stdout).contains("hello"),
        "{read:?}"
    );
    srv.sigterm_and_wait();
}

#[test]
fn without_tokens_only_loopback_unless_insecure_no_auth() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["serve", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(tmp.path().join("data"))
        .env_remove("FENCELOG_CONFIG")
        .env_remove("FENCELOG_INSECURE_NO_AUTH")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refusing to listen on 0.0.0.0:0 without access tokens"),
        "{err}"
    );
    assert!(
        err.contains("fencelog token create") && err.contains("--insecure-no-auth"),
        "{err}"
    );
    assert!(
        !tmp.path().join("data").exists(),
        "refused before opening the log"
    );
    let srv = serve()
        .data_dir(tmp.path().join("data"))
        .listen("0.0.0.0:0")
        .arg("--insecure-no-auth")
        .start();
    let log = srv.log_text();
    assert!(log.contains("serving WITHOUT access tokens"), "{log}");
    srv.sigterm_and_wait();
}
