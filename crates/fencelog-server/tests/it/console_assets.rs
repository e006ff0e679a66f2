//! `GET /console`: the embedded files are exactly `console/`, each served
//! with its type and a policy that allows this origin alone, every file
//! the page or a module loads is one of them, and nothing refers to
//! another host. What the console shows is tested in a real browser
//! (`tests/browser/`).

use fencelog_server::routes::{Asset, ASSETS, CONTENT_SECURITY_POLICY};
use fencelog_testkit::http::TestServer;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

fn dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/console"))
}

fn text(a: &Asset) -> &'static str {
    std::str::from_utf8(a.body).unwrap()
}

#[test]
fn every_file_of_the_console_directory_is_embedded_as_it_is() {
    let on_disk: BTreeSet<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let embedded: BTreeSet<String> = ASSETS.iter().map(|a| a.name.to_string()).collect();
    assert_eq!(embedded, on_disk);
    assert_eq!(
        ASSETS[0].name, "index.html",
        "GET /console serves the first"
    );
    for a in ASSETS {
        assert_eq!(
            a.body,
            std::fs::read(dir().join(a.name)).unwrap(),
            "{}",
            a.name
        );
    }
}

/// What a file loads: `src="…"` / `href="…"` of the page, `from "./…"`
/// of a module, as asset names.
fn references(a: &Asset) -> Vec<String> {
    let t = text(a);
    let mut out = Vec::new();
    for marker in ["src=\"console/", "href=\"console/", "from \"./"] {
        for piece in t.split(marker).skip(1) {
            out.push(piece.split('"').next().unwrap().to_string());
        }
    }
    out
}

#[test]
fn everything_the_console_loads_is_embedded_and_nothing_is_remote() {
    let mut loaded = BTreeSet::new();
    for a in ASSETS {
        for name in references(a) {
            assert!(
                ASSETS.iter().any(|b| b.name == name),
                "{} loads {name}, which is not embedded",
                a.name
            );
            loaded.insert(name);
        }
        // The SVG namespace is a name, not an address anything fetches.
        let t = text(a).replace("http://www.w3.org/2000/svg", "");
        assert!(
            !t.contains("http://") && !t.contains("https://") && !t.contains("//cdn"),
            "{} refers to another host",
            a.name
        );
    }
    // Every embedded file but the page is loaded by something.
    for a in &ASSETS[1..] {
        assert!(
            loaded.contains(a.name),
            "{} is embedded but never loaded",
            a.name
        );
    }
}

#[tokio::test]
async fn the_page_and_its_files_are_served_with_their_types_and_policy() {
    let srv = TestServer::start().await;
    let http = reqwest::Client::new();
    let get = |path: String| http.get(format!("{}{path}", srv.url())).send();
    let page = get("/console".into()).await.unwrap();
    assert_eq!(page.status(), 200);
    let h = page.headers().clone();
    assert_eq!(h["content-type"], "text/html; charset=utf-8");
    assert_eq!(h["content-security-policy"], CONTENT_SECURITY_POLICY);
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["cache-control"], "no-cache");
    assert_eq!(page.bytes().await.unwrap(), ASSETS[0].body);
    for a in ASSETS {
        let r = get(format!("/console/{}", a.name)).await.unwrap();
        assert_eq!(r.status(), 200, "{}", a.name);
        assert_eq!(r.headers()["content-type"], a.content_type, "{}", a.name);
        assert_eq!(
            r.headers()["content-security-policy"],
            CONTENT_SECURITY_POLICY
        );
        assert_eq!(r.bytes().await.unwrap(), a.body, "{}", a.name);
    }
    let missing = get("/console/nope.js".into()).await.unwrap();
    assert_eq!(missing.status(), 404);
    let body: Value = missing.json().await.unwrap();
    assert_eq!(body["error"], "not_found");
    assert_eq!(body["message"], "the console has no file \"nope.js\"");
}
