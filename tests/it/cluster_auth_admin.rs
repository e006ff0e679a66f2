//! Issue 14's admin paths with issue 12's tokens on, against real
//! processes: `fencelog cluster status|transfer|add` take the operator's
//! token (`--auth-token` or `--auth-token-file`), answer the node's exact
//! 401 without one and its exact 403 with a token lacking `admin`; a node
//! started with `serve --join` reads the cluster's shard count over the
//! peer secret and joins; and with `--cluster-redirect` a follower checks
//! a write's token before it redirects, so a caller without a valid one
//! gets the follower's own 401/403, never the leader's address; and the
//! append session's refusal in cluster mode is exact, after the check.

use crate::auth_scopes::{forbidden, secret_for, send, write_config};
use crate::cluster_support::{others, ProcCluster};
use crate::support::BIN;
use fencelog_server::auth::{Access, Scope};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

const PEER_SECRET: &str = "peer-secret-of-the-admin-test-0123";

/// The 401 of a request without a token, as every node answers it.
fn no_token() -> Value {
    json!({"error": "unauthenticated", "message": "this server requires an access token: send Authorization: Bearer <secret>"})
}

fn client_with(secret: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    let value = format!("Bearer {secret}").parse().unwrap();
    headers.insert(reqwest::header::AUTHORIZATION, value);
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap()
}

/// `--config` with the auth test's tokens, `--cluster-secret-file`, and
/// `--cluster-redirect`.
fn auth_args(dir: &Path) -> Vec<String> {
    let config = write_config(dir);
    let secret = dir.join("peer.secret");
    std::fs::write(&secret, format!("{PEER_SECRET}\n")).unwrap();
    vec![
        "--config".into(),
        config.display().to_string(),
        "--cluster-secret-file".into(),
        secret.display().to_string(),
        "--cluster-redirect".into(),
    ]
}

/// `(exit code, stdout, stderr)` of `fencelog cluster ARGS --server URL`,
/// with no token from the environment.
fn cli(url: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .arg("cluster")
        .args(args)
        .args(["--server", url])
        .env_remove("FENCELOG_URL")
        .env_remove("FENCELOG_AUTH_TOKEN")
        .env_remove("FENCELOG_AUTH_TOKEN_FILE")
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
    (
        out.status.code().unwrap(),
        text(&out.stdout),
        text(&out.stderr),
    )
}

/// `args` without a token and with a `read` token: the exact 401 and 403
/// bodies (`--json`), exit 4, nothing on stdout.
fn refused_without_admin(url: &str, args: &[&str]) {
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let (code, out, err) = cli(url, &json_args);
    let body: Value = serde_json::from_str(&err).unwrap_or(Value::Null);
    assert_eq!((code, out.as_str(), body), (4, "", no_token()), "{args:?}");
    let read = secret_for(Scope::Read);
    json_args.extend(["--auth-token", &read]);
    let (code, out, err) = cli(url, &json_args);
    let body: Value = serde_json::from_str(&err).unwrap_or(Value::Null);
    let want = forbidden(Scope::Read, Scope::Admin, None);
    assert_eq!((code, out.as_str(), body), (4, "", want), "{args:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_commands_take_the_operators_token_and_a_join_uses_the_peer_secret() {
    let tmp = tempfile::tempdir().unwrap();
    let args = auth_args(tmp.path());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let admin = secret_for(Scope::Admin);
    let mut c = ProcCluster::start_with(3, 2, &args, client_with(&admin));
    let ids = [1, 2, 3];
    let leader = c.leader(0, &ids).await;
    c.leader(1, &ids).await;
    let url = c.url(others(&ids, leader)[0]);
    // status: the token by flag and by file; none; a read token.
    let (code, out, err) = cli(&url, &["status", "--auth-token", &admin]);
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    assert!(out.starts_with("node "), "{out}");
    let file = tmp.path().join("admin.token");
    std::fs::write(&file, format!("  {admin}\n")).unwrap();
    let file_arg = file.display().to_string();
    let (code, out, _) = cli(&url, &["status", "--json", "--auth-token-file", &file_arg]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!((code, v["shards"].as_array().map(Vec::len)), (0, Some(2)));
    refused_without_admin(&url, &["status"]);
    // A token file that cannot be used is refused before anything is
    // sent; a token by flag and by file is a usage error.
    let empty = tmp.path().join("empty.token");
    std::fs::write(&empty, "\n").unwrap();
    let missing = tmp.path().join("missing.token");
    for (path, why) in [
        (&empty, "the file is empty".to_string()),
        (
            &missing,
            "No such file or directory (os error 2)".to_string(),
        ),
    ] {
        let p = path.display().to_string();
        let (code, out, err) = cli(&url, &["status", "--auth-token-file", &p]);
        let want = format!("fencelog: bad request: cannot read --auth-token-file {p}: {why}\n");
        assert_eq!((code, out.as_str(), err), (4, "", want));
    }
    let both = [
        "status",
        "--auth-token",
        &admin,
        "--auth-token-file",
        &file_arg,
    ];
    assert_eq!(cli(&url, &both).0, 2);
    // transfer: refused without admin, done with it.
    let to = others(&ids, leader)[1];
    let to_arg = to.to_string();
    refused_without_admin(&url, &["transfer", "0", &to_arg]);
    let (code, out, err) = cli(&url, &["transfer", "0", &to_arg, "--auth-token", &admin]);
    let want = format!("shard 0 is led by node {to}\n");
    assert_eq!((code, out.as_str(), err.as_str()), (0, want.as_str(), ""));
    // A node joining with --join reads the shard count with the peer
    // secret (the admin status route would refuse it), then is added.
    let new = c.join(1, &args);
    let addr = c.addrs[new - 1].clone();
    let new_arg = new.to_string();
    refused_without_admin(&url, &["add", &new_arg, &addr]);
    let (code, out, err) = cli(&url, &["add", &new_arg, &addr, "--auth-token", &admin]);
    let want = format!("node {new} ({addr}) is a voter of shards 0,1\n");
    assert_eq!((code, out.as_str(), err.as_str()), (0, want.as_str(), ""));
    let all = [1, 2, 3, new];
    for k in 0..2 {
        c.converged(k, &all).await;
        let s = c.status(new).await.unwrap();
        assert_eq!(s["shards"][k as usize]["voters"], json!([1, 2, 3, new]));
    }
}

/// A redirect's `Location` and `fencelog-leader` hint, if there.
fn location_and_hint(resp: &reqwest::Response) -> (Option<String>, Option<String>) {
    let header = |h: &str| {
        resp.headers()
            .get(h)
            .map(|v| v.to_str().unwrap().to_string())
    };
    (header("location"), header("fencelog-leader"))
}

/// The route table's scope for `method` on a stream write `path`.
fn needed(method: &str, path: &str) -> Scope {
    let route = fencelog_server::routes::ROUTES
        .iter()
        .find(|r| r.method == method && r.path == path);
    match route.map(|r| r.access) {
        Some(Access::Scope(s)) => s,
        other => panic!("{method} {path} is {other:?}"),
    }
}

/// Every write a redirecting follower answers 307, as (method, route
/// pattern).
const WRITES: [(&str, &str); 5] = [
    ("post", "/v1/streams/{stream}/records"),
    ("post", "/v1/streams/{stream}/fence"),
    ("post", "/v1/streams/{stream}/trim"),
    ("post", "/v1/streams/{stream}/seal"),
    ("delete", "/v1/streams/{stream}"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirecting_follower_checks_the_token_before_it_names_the_leader() {
    let tmp = tempfile::tempdir().unwrap();
    let args = auth_args(tmp.path());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let c = ProcCluster::start_with(3, 2, &args, client_with(&secret_for(Scope::Admin)));
    let ids = [1, 2, 3];
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for stream in ["in-s", "out-s"] {
        let k = fencelog_cluster::shard::shard_of(stream, 2);
        let leader = c.leader(k, &ids).await;
        let follower = others(&ids, leader)[0];
        for (method, route) in WRITES {
            let path = route.replace("{stream}", stream);
            let url = format!("{}{path}", c.url(follower));
            let what = format!("{method} {url}");
            let (s, body, challenge) = send(&no_redirects, method, &url, None).await;
            assert_eq!(
                (s, body, challenge.as_deref()),
                (401, no_token(), Some("Bearer")),
                "{what}"
            );
            let (s, body, _) = send(&no_redirects, method, &url, Some("guess")).await;
            let unknown = json!({"error": "unauthenticated", "message": "unknown access token"});
            assert_eq!((s, body), (401, unknown), "{what}");
            let scope = needed(method, route);
            let other = if scope == Scope::Read {
                Scope::Admin
            } else {
                Scope::Read
            };
            let (s, body, _) = send(&no_redirects, method, &url, Some(&secret_for(other))).await;
            assert_eq!(
                (s, body),
                (403, forbidden(other, scope, Some(stream))),
                "{what}"
            );
            let own = secret_for(scope);
            let resp = no_redirects
                .request(method.to_uppercase().parse().unwrap(), &url)
                .bearer_auth(&own)
                .header("content-type", "application/json")
                .body("{}")
                .send()
                .await
                .unwrap();
            let (location, hint) = location_and_hint(&resp);
            if stream == "in-s" {
                let addr = &c.addrs[leader - 1];
                assert_eq!(
                    (resp.status().as_u16(), location, hint),
                    (
                        307,
                        Some(format!("http://{addr}{path}")),
                        Some(format!("{leader}={addr}"))
                    ),
                    "{what}"
                );
            } else {
                // Outside the token's prefix: refused here, no address.
                let (s, body) = (resp.status().as_u16(), resp.json::<Value>().await.unwrap());
                assert_eq!(
                    (s, body, location),
                    (403, forbidden(scope, scope, Some(stream)), None),
                    "{what}"
                );
            }
        }
    }
    // The append session: after the check, the leader of the stream's
    // shard serves it (a GET without the upgrade is its exact 400), and a
    // follower answers 307 to the leader, with the hint.
    let k = fencelog_cluster::shard::shard_of("in-s", 2);
    let leader = c.leader(k, &ids).await;
    let path = "/v1/streams/in-s/session";
    for id in ids {
        let url = format!("{}{path}", c.url(id));
        let (s, body, _) = send(&no_redirects, "get", &url, None).await;
        assert_eq!((s, body), (401, no_token()), "node {id}");
        let read = secret_for(Scope::Read);
        let (s, body, _) = send(&no_redirects, "get", &url, Some(&read)).await;
        let want = forbidden(Scope::Read, Scope::Append, Some("in-s"));
        assert_eq!((s, body), (403, want), "node {id}");
        let resp = no_redirects
            .get(&url)
            .bearer_auth(secret_for(Scope::Append))
            .send()
            .await
            .unwrap();
        let (location, hint) = location_and_hint(&resp);
        let status = resp.status().as_u16();
        if id == leader {
            let body = resp.json::<Value>().await.unwrap();
            let message = body["message"].as_str().unwrap_or_default();
            assert_eq!(
                (status, &body["error"], &body["stream"]),
                (400, &json!("bad_request"), &json!("in-s")),
                "{body}"
            );
            assert!(
                message.starts_with(
                    "an append session is a WebSocket: send GET with Upgrade: websocket"
                ),
                "{body}"
            );
        } else {
            let addr = &c.addrs[leader - 1];
            assert_eq!(
                (status, location, hint),
                (
                    307,
                    Some(format!("http://{addr}{path}")),
                    Some(format!("{leader}={addr}"))
                ),
                "node {id}"
            );
        }
    }
    // Nothing was proposed: neither stream exists on any node.
    let setup = client_with("setup-secret");
    for id in ids {
        for stream in ["in-s", "out-s"] {
            let url = format!("{}/v1/streams/{stream}", c.url(id));
            let s = setup.get(url).send().await.unwrap().status().as_u16();
            assert_eq!(s, 404, "node {id} {stream}");
        }
    }
}
