//! Sending a request: each hop on its transport (the pool for `http://`,
//! reqwest for `https://` or when asked for), following a cluster
//! follower's 307 (`--cluster-redirect`): the same request — method, body
//! and headers, the access token included — is sent again to the
//! `Location`, at most [`REDIRECTS_MAX`] times. reqwest's own policy is
//! off: it would drop `Authorization` on a move to another port. A
//! redirect is answered before anything is proposed, so following it never
//! writes twice.

use crate::error::{Cause, TransportError};
use crate::pool::Failure;
use crate::request::{Answer, Req};
use crate::Client;

/// Most redirects one request follows; the answer after that is returned
/// as it is (a 307, which the caller reports).
pub const REDIRECTS_MAX: usize = 3;

/// Where a 307 or 308 answer to a request for `url` points, if anywhere a
/// client can go (relative locations are resolved against `url`).
fn location(answer: &Answer) -> Option<String> {
    if !matches!(answer.status, 307 | 308) {
        return None;
    }
    let raw = answer.header("location")?;
    let url = reqwest::Url::parse(&answer.url).ok()?.join(raw).ok()?;
    matches!(url.scheme(), "http" | "https").then(|| url.to_string())
}

impl Client {
    /// Sends `req`, following 307 and 308 answers.
    pub(crate) async fn execute(&self, mut req: Req) -> Result<Answer, Failure> {
        for _ in 0..REDIRECTS_MAX {
            let answer = self.hop(&req).await?;
            let Some(next) = location(&answer) else {
                return Ok(answer);
            };
            req.url = next;
        }
        self.hop(&req).await
    }

    /// One request to one server, on the transport its URL takes.
    async fn hop(&self, req: &Req) -> Result<Answer, Failure> {
        if !self.use_reqwest && req.url.starts_with("http://") {
            return self.pool.send(req, self.timeout).await;
        }
        self.hop_reqwest(req).await
    }

    async fn hop_reqwest(&self, req: &Req) -> Result<Answer, Failure> {
        let mut builder = self
            .http
            .request(req.method.clone(), &req.url)
            .timeout(self.timeout)
            .body(req.body.clone());
        for (name, value) in &req.headers {
            builder = builder.header(name.clone(), value.clone());
        }
        let failed = |e: reqwest::Error| Failure {
            sent: !(e.is_connect() || e.is_builder()),
            error: TransportError(Cause::Reqwest(e), None),
        };
        let resp = builder.send().await.map_err(failed)?;
        let (status, url) = (resp.status().as_u16(), resp.url().to_string());
        let headers = resp.headers().clone();
        let body = resp.bytes().await.map_err(|e| Failure {
            sent: true,
            error: TransportError(Cause::Reqwest(e), None),
        })?;
        Ok(Answer {
            status,
            headers,
            body,
            pieces: Vec::new(),
            url,
        })
    }
}
