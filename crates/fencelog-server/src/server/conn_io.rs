//! The socket as hyper sees it, with two things hyper does not do:
//!
//! - A write deadline: a socket that takes no bytes for `write_timeout`
//!   (a client that stopped reading a response, or a live tail whose
//!   socket stays full) fails the connection, which frees everything the
//!   response held. A tail's client resumes with `Last-Event-ID`.
//! - JSON bodies on hyper's own answers: for a request it cannot parse
//!   (400), headers over the limit (431) or a request line too long (414,
//!   sent as 431) hyper writes an empty-bodied response itself. Those are
//!   recognised by their status line and the missing `content-type` — every
//!   response of ours has one — and replaced by the same status with the
//!   JSON error body, then the connection closes as hyper intended.

use fencelog_api::{ErrorBody, ErrorCode};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

pub struct ConnIo<I> {
    inner: I,
    write_timeout: Duration,
    /// Armed while a write is pending.
    stall: Option<Pin<Box<Sleep>>>,
    /// A replacement response still to be written, and how much of it is.
    replacement: Option<(Vec<u8>, usize)>,
}

impl<I> ConnIo<I> {
    pub fn new(inner: I, write_timeout: Duration) -> Self {
        ConnIo {
            inner,
            write_timeout,
            stall: None,
            replacement: None,
        }
    }
}

/// The 400 hyper writes, JSON-bodied, for a request it cannot parse; the
/// connection closes after it.
pub fn malformed_request() -> Vec<u8> {
    replacement_for(b"HTTP/1.1 400 Bad Request\r\n\r\n").expect("a 400 is replaced")
}

/// The JSON answer for one of hyper's automatic responses, if `buf` starts
/// one.
fn replacement_for(buf: &[u8]) -> Option<Vec<u8>> {
    const AUTOMATIC: [(&[u8], ErrorCode, &str); 3] = [
        (
            b"HTTP/1.1 400 Bad Request\r\n",
            ErrorCode::BadRequest,
            "malformed HTTP request",
        ),
        (
            b"HTTP/1.1 431 Request Header Fields Too Large\r\n",
            ErrorCode::HeadersTooLarge,
            "the request headers are over the server's limit",
        ),
        (
            b"HTTP/1.1 414 URI Too Long\r\n",
            ErrorCode::HeadersTooLarge,
            "the request line is over the server's limit",
        ),
    ];
    let (_, code, message) = AUTOMATIC.iter().find(|(line, ..)| buf.starts_with(line))?;
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    if head.contains("\r\ncontent-type:") {
        return None;
    }
    let body =
        serde_json::to_vec(&ErrorBody::new(*code, *message)).expect("error bodies serialize");
    let reason = match code.status() {
        400 => "Bad Request",
        _ => "Request Header Fields Too Large",
    };
    let mut out = format!(
        "HTTP/1.1 {} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        code.status(),
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    Some(out)
}

impl<I: AsyncWrite + Unpin> ConnIo<I> {
    /// Turns a pending write into an error once it has been pending for
    /// the write timeout; any progress disarms the timer.
    fn watch<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match r {
            Poll::Ready(r) => {
                self.stall = None;
                Poll::Ready(r)
            }
            Poll::Pending => {
                let timeout = self.write_timeout;
                let stall = self
                    .stall
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                if stall.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("the client took no bytes for {} ms", timeout.as_millis()),
                    )));
                }
                Poll::Pending
            }
        }
    }

    /// Writes what is left of a replacement response.
    fn poll_replacement(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, done)) = self.replacement.take() {
            if done == bytes.len() {
                break;
            }
            let r = Pin::new(&mut self.inner).poll_write(cx, &bytes[done..]);
            match self.watch(cx, r) {
                Poll::Pending => {
                    self.replacement = Some((bytes, done));
                    return Poll::Pending;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => self.replacement = Some((bytes, done + n)),
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for ConnIo<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for ConnIo<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_replacement(cx))?;
        if let Some(out) = replacement_for(buf) {
            self.replacement = Some((out, 0));
            return Poll::Ready(Ok(buf.len()));
        }
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_replacement(cx))?;
        if let Some(first) = bufs.iter().find(|b| !b.is_empty()) {
            if let Some(out) = replacement_for(first) {
                self.replacement = Some((out, 0));
                return Poll::Ready(Ok(first.len()));
            }
        }
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_replacement(cx))?;
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_replacement(cx))?;
        let r = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.watch(cx, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hyper_automatic_answers_are_replaced() {
        let hyper_400 = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let out = String::from_utf8(replacement_for(hyper_400).unwrap()).unwrap();
        assert!(out.starts_with("HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"));
        assert!(out.ends_with(r#"{"error":"bad_request","message":"malformed HTTP request"}"#));
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(replacement_for(ours), None);
        let big = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\r\n";
        let out = String::from_utf8(replacement_for(big).unwrap()).unwrap();
        assert!(out.contains(r#""error":"headers_too_large""#), "{out}");
        assert_eq!(replacement_for(b"HTTP/1.1 200 OK\r\n\r\n"), None);
        let malformed = String::from_utf8(malformed_request()).unwrap();
        assert!(
            malformed.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{malformed}"
        );
        assert!(
            malformed.contains("\r\nconnection: close\r\n"),
            "{malformed}"
        );
    }
}
