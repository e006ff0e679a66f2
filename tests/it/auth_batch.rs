//! `POST /v1/batch` names its streams in the body, not the path, so the
//! route check cannot see them: each op is authorized on its own stream
//! with its own scope (append or fence) inside the handler, and a batch
//! with one op the token may not do is refused whole, changing nothing.

use crate::support::serve;
use fencelog_server::auth::{hash_secret, to_hex};
use serde_json::{json, Value};

fn token(name: &str, secret: &str, scopes: &str, prefix: &str) -> String {
    format!(
        "[[auth.tokens]]\nname = \"{name}\"\nsha256 = \"{}\"\nscopes = [{scopes}]\nstream_prefix = \"{prefix}\"\n\n",
        to_hex(&hash_secret(secret))
    )
}

#[test]
fn every_batch_op_is_authorized_on_its_own_stream_and_scope() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("fencelog.toml");
    let text = token("in-writer", "w", "\"append\", \"fence\", \"read\"", "in-")
        + &token("in-appender", "a", "\"append\", \"read\"", "in-");
    std::fs::write(&config, text).unwrap();
    let server = serve()
        .data_dir(tmp.path().join("data"))
        .arg("--config")
        .arg(&config)
        .start();
    let url = format!("{}/v1/batch", server.url());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let http = reqwest::Client::new();
    let send = |secret: &'static str, body: Value| {
        let req = http.post(&url).bearer_auth(secret).json(&body);
        async move {
            let r = req.send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    rt.block_on(async {
        let outside = json!({"ops": [
            {"stream": "in-a", "fencing_token": 1, "records": [{"body": "x"}]},
            {"stream": "out-b", "fencing_token": 1, "fence": true},
        ]});
        let (status, body) = send("w", outside).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (403, Some("forbidden")),
            "{body}"
        );
        assert_eq!(body["stream"], "out-b");
        let fence = json!({"ops": [{"stream": "in-a", "fencing_token": 1, "fence": true}]});
        let (status, body) = send("a", fence).await;
        assert_eq!(
            (status, body["scope"].as_str()),
            (403, Some("fence")),
            "{body}"
        );
        // Nothing of the refused batches happened; an allowed one does.
        let inside = json!({"ops": [
            {"stream": "in-a", "fencing_token": 1, "records": [{"body": "x"}]},
            {"stream": "in-b", "fencing_token": 1, "fence": true},
        ]});
        let (status, body) = send("w", inside).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["ops"][0]["first_seq"], 0);
    });
}
