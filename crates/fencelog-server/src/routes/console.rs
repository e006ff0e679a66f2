//! `GET /console`: the web console, plain HTML, CSS and JavaScript modules
//! compiled into the binary (`include_bytes!` of `console/`), so it needs
//! no build step, no CDN and no network beyond this server. It uses only
//! the public API (`/v1/...`, `/metrics`, `/healthz`) from the browser.
//!
//! Every answer carries a Content-Security-Policy that allows this origin
//! alone: no inline script, no other host, no framing. `no-cache` makes a
//! browser revalidate, so an upgraded server never runs an old console.

use crate::error::ApiError;
use axum::extract::Path;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use fencelog_api::ErrorCode;

/// One embedded file, served at `/console/{name}` (and `index.html` at
/// `/console` itself).
pub struct Asset {
    pub name: &'static str,
    pub content_type: &'static str,
    pub body: &'static [u8],
}

macro_rules! assets {
    ($($name:literal => $type:expr),* $(,)?) => {
        &[$(Asset {
            name: $name,
            content_type: $type,
            body: include_bytes!(concat!("../../console/", $name)),
        }),*]
    };
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// Every file of `console/` (a test checks that none is missing).
pub const ASSETS: &[Asset] = assets![
    "index.html" => HTML,
    "console.css" => CSS,
    "app.js" => JS,
    "api.js" => JS,
    "chart.js" => JS,
    "dom.js" => JS,
    "format.js" => JS,
    "metrics.js" => JS,
    "overview.js" => JS,
    "records.js" => JS,
    "sse.js" => JS,
    "stream.js" => JS,
    "streams.js" => JS,
    "timeline.js" => JS,
    "tokens.js" => JS,
];

/// This origin only; `data:` images for the blank favicon.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self' data:; connect-src 'self'; \
    base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn serve(asset: &Asset) -> Response {
    (
        [
            (header::CONTENT_TYPE, asset.content_type),
            (header::CACHE_CONTROL, "no-cache"),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        asset.body,
    )
        .into_response()
}

/// `GET /console`: the page.
pub async fn index() -> Response {
    serve(&ASSETS[0])
}

/// `GET /console/{asset}`: a script or the stylesheet.
pub async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|a| a.name == name) {
        Some(asset) => serve(asset),
        None => ApiError::new(
            ErrorCode::NotFound,
            format!("the console has no file {name:?}"),
        )
        .into_response(),
    }
}
