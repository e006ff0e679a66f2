//! `GET /v1/openapi.json` cannot drift from the router: every documented
//! path and method is served (with a documented status), every other method
//! on those paths is the router's 405 fallback, and the document covers the
//! whole route table the router is built from.

use fencelog_server::auth::Access;
use fencelog_server::routes;
use fencelog_testkit::http::TestServer;
use serde_json::{json, Value};

/// The router's own "no such route" and "method not allowed" answers, as
/// opposed to a handler's 404 for a missing stream.
async fn is_fallback(resp: reqwest::Response) -> (u16, bool) {
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    let fallback = matches!(
        body["error"].as_str(),
        Some("not_found") | Some("method_not_allowed")
    );
    (status, fallback)
}

#[tokio::test]
async fn document_matches_the_router() {
    let srv = TestServer::start().await;
    let base = srv.url();
    let http = reqwest::Client::new();
    let doc: Value = http
        .get(format!("{base}/v1/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(doc["openapi"], json!("3.0.3"));
    assert_eq!(doc, routes::openapi_document());

    // A stream to address, so every documented call can succeed.
    let r = http
        .post(format!("{base}/v1/streams/s/records"))
        .json(&json!({ "fencing_token": 1, "records": [{ "body": "x" }] }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    let paths = doc["paths"].as_object().unwrap();
    let mut documented = 0;
    for (path, item) in paths {
        let url = format!(
            "{base}{}",
            path.replace("{stream}", "s").replace("{asset}", "app.js")
        );
        let methods = item.as_object().unwrap();
        for (method, op) in methods {
            documented += 1;
            let req = match method.as_str() {
                "get" => http.get(&url),
                "post" | "put" | "delete" => {
                    let m = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
                    http.request(m, &url)
                        .json(&json!({ "fencing_token": 2, "records": [{ "body": "y" }] }))
                }
                other => panic!("unexpected method {other} in the document"),
            };
            let (status, fallback) = is_fallback(req.send().await.unwrap()).await;
            assert!(!fallback, "{method} {path} is documented but not routed");
            assert!(
                op["responses"].get(status.to_string()).is_some(),
                "{method} {path} answered {status}, which the document does not list"
            );
            assert!(op["operationId"].is_string() && op["summary"].is_string());
        }
        for other in ["get", "post", "put", "delete", "patch"] {
            if methods.contains_key(other) {
                continue;
            }
            let m = reqwest::Method::from_bytes(other.to_uppercase().as_bytes()).unwrap();
            let (status, fallback) = is_fallback(http.request(m, &url).send().await.unwrap()).await;
            assert_eq!(
                (status, fallback),
                (405, true),
                "{other} {path} is routed but not documented"
            );
        }
    }
    // The router is built from the same table, entry for entry.
    assert_eq!(documented, routes::ROUTES.len());
    for route in routes::ROUTES {
        let op = &doc["paths"][route.path][route.method];
        assert!(
            op.is_object(),
            "{} {} missing from the document",
            route.method,
            route.path
        );
        // Each operation declares the scope its route checks, and the
        // answers a token that lacks it gets.
        match route.access {
            Access::Open => {
                assert_eq!(op["security"], json!([]));
                assert!(op.get("x-fencelog-scope").is_none());
            }
            Access::Scope(scope) => {
                assert_eq!(op["security"], json!([{ "bearer": [] }]));
                assert_eq!(op["x-fencelog-scope"], json!(scope.as_str()));
                assert!(op["responses"]["401"].is_object());
                assert!(op["responses"]["403"].is_object());
            }
        }
    }
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        json!("bearer")
    );
    let (status, fallback) = is_fallback(
        http.get(format!("{base}/v1/undocumented"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, fallback), (404, true));

    // Every schema a response refers to exists.
    let text = doc.to_string();
    for name in text
        .split("#/components/schemas/")
        .skip(1)
        .map(|s| s.split('"').next().unwrap())
    {
        assert!(
            doc["components"]["schemas"][name].is_object(),
            "dangling schema reference {name}"
        );
    }
}
