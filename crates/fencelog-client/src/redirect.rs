//! Following a cluster follower's 307 (`--cluster-redirect`): the same
//! request — method, body and headers, the access token included — is sent
//! again to the `Location`, at most [`REDIRECTS_MAX`] times. reqwest's own
//! policy is off: it would drop `Authorization` on a move to another port.
//! A redirect is answered before anything is proposed, so following it
//! never writes twice.

use crate::Client;
use reqwest::StatusCode;

/// Most redirects one request follows; the answer after that is returned
/// as it is (a 307, which the caller reports).
pub const REDIRECTS_MAX: usize = 3;

fn location(resp: &reqwest::Response) -> Option<reqwest::Url> {
    let raw = resp
        .headers()
        .get(reqwest::header::LOCATION)?
        .to_str()
        .ok()?;
    let url = resp.url().join(raw).ok()?;
    matches!(url.scheme(), "http" | "https").then_some(url)
}

impl Client {
    /// Sends `req`, following 307 and 308 answers.
    pub(crate) async fn execute(
        &self,
        req: reqwest::RequestBuilder,
    ) -> reqwest::Result<reqwest::Response> {
        let (http, req) = req.build_split();
        let mut req = req?;
        for _ in 0..REDIRECTS_MAX {
            let again = req.try_clone();
            let resp = http.execute(req).await?;
            let moved = matches!(
                resp.status(),
                StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT
            );
            let (true, Some(mut next), Some(url)) = (moved, again, location(&resp)) else {
                return Ok(resp);
            };
            *next.url_mut() = url;
            req = next;
        }
        http.execute(req).await
    }
}
