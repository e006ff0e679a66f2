//! One raw HTTP/1.1 connection: no pool, no redirects, no retries, so the
//! client adds as little as possible to what is measured.

use super::BenchError;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE, HOST};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// Where a fencelog server listens. Only loopback addresses are accepted:
/// a load generator must never be pointed at someone else's machine.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub addr: SocketAddr,
    host: HeaderValue,
    /// The `host:port` it was parsed from.
    pub authority: String,
}

impl Endpoint {
    pub async fn parse(url: &str) -> Result<Endpoint, BenchError> {
        let uri: Uri = url
            .parse()
            .map_err(|e| BenchError::args(format!("--server {url:?}: {e}")))?;
        if uri.scheme_str().is_some_and(|s| s != "http") {
            return Err(BenchError::args("--server must be an http:// URL"));
        }
        let authority = uri
            .authority()
            .ok_or_else(|| BenchError::args(format!("--server {url:?} has no host")))?;
        let port = authority.port_u16().unwrap_or(80);
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let addr = tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| BenchError::target(format!("resolving {host}: {e}")))?
            .find(|a| a.ip().is_loopback())
            .ok_or_else(|| {
                BenchError::args(format!(
                    "--server {url:?} does not resolve to a loopback address; load is only sent to this machine"
                ))
            })?;
        let host = HeaderValue::from_str(authority.as_str())
            .map_err(|e| BenchError::args(format!("--server host: {e}")))?;
        let authority = authority.as_str().to_string();
        Ok(Endpoint {
            addr,
            host,
            authority,
        })
    }
}

pub struct Conn {
    sender: SendRequest<Full<Bytes>>,
    host: HeaderValue,
    driver: JoinHandle<()>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl Conn {
    pub async fn connect(endpoint: &Endpoint) -> Result<Conn, BenchError> {
        let tcp = TcpStream::connect(endpoint.addr)
            .await
            .map_err(|e| BenchError::target(format!("connecting to {}: {e}", endpoint.addr)))?;
        // Requests are small and each waits for its answer: Nagle would add
        // a delayed-ACK round to every one of them.
        tcp.set_nodelay(true)
            .map_err(|e| BenchError::target(format!("TCP_NODELAY: {e}")))?;
        let (sender, connection) = http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| BenchError::target(format!("HTTP handshake: {e}")))?;
        let driver = tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Conn {
            sender,
            host: endpoint.host.clone(),
            driver,
        })
    }

    fn build(
        &self,
        method: Method,
        path: &str,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<Request<Full<Bytes>>, BenchError> {
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, self.host.clone());
        for (k, v) in headers {
            req = req.header(k, v);
        }
        req.body(Full::new(body))
            .map_err(|e| BenchError::target(format!("building request {path}: {e}")))
    }

    async fn send(
        &mut self,
        req: Request<Full<Bytes>>,
    ) -> Result<hyper::Response<Incoming>, BenchError> {
        self.sender
            .ready()
            .await
            .map_err(|e| BenchError::target(format!("connection closed: {e}")))?;
        self.sender
            .send_request(req)
            .await
            .map_err(|e| BenchError::target(format!("request failed: {e}")))
    }

    /// Sends one request and reads the whole answer.
    pub async fn call(
        &mut self,
        method: Method,
        path: &str,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<(StatusCode, Bytes), BenchError> {
        let (status, _, bytes) = self.call_hinted(method, path, headers, body).await?;
        Ok((status, bytes))
    }

    /// [`Conn::call`], also handing back the answer's leader hint
    /// (`fencelog-leader: id=host:port`, cluster mode only).
    pub async fn call_hinted(
        &mut self,
        method: Method,
        path: &str,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<(StatusCode, Option<String>, Bytes), BenchError> {
        let req = self.build(method, path, headers, body)?;
        let resp = self.send(req).await?;
        let status = resp.status();
        let hint = resp
            .headers()
            .get(fencelog_api::header::LEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once('='))
            .map(|(_, addr)| addr.to_string());
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| BenchError::target(format!("reading the answer to {path}: {e}")))?
            .to_bytes();
        Ok((status, hint, bytes))
    }

    /// Sends a GET and hands back the body unread, for live tails.
    pub async fn stream(
        &mut self,
        path: &str,
        headers: &[(HeaderName, HeaderValue)],
    ) -> Result<(StatusCode, Incoming), BenchError> {
        let req = self.build(Method::GET, path, headers, Bytes::new())?;
        let resp = self.send(req).await?;
        Ok((resp.status(), resp.into_body()))
    }
}

pub fn json_header() -> (HeaderName, HeaderValue) {
    (
        CONTENT_TYPE,
        HeaderValue::from_static(fencelog_api::header::JSON),
    )
}
