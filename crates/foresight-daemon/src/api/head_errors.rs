//! The answers hyper gives by itself to a request head it cannot read, before any of the
//! service's code runs: 400 (a malformed request line, method, version or header), 414 (a
//! request target over 65534 bytes) and 431 (a head over [`MAX_HEAD_BYTES`], or more than
//! [`MAX_HEADERS`] headers). hyper writes them with an empty body and closes the connection;
//! [`JsonHeadErrors`] sits between hyper and the connection and writes each with the API's
//! JSON error body instead, so that every error the service answers reads the same.
//!
//! Such an answer is recognised by exactly what hyper writes: one write of a status line
//! `HTTP/1.1 400|414|431`, no header but `content-length: 0`, `date` and `connection`, and
//! the blank line, nothing before or after. The service's own answers never look so: every
//! error it answers has a JSON body ([`fill_empty_error`] sees to it). Only the bytes of a
//! job's output that a client downloads could, if a write of them began and ended exactly
//! there; that client would then read a JSON error in place of those bytes, which changes
//! nothing for anyone else.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The most headers a request may have (hyper's default, set explicitly so that the error
/// can say it).
pub const MAX_HEADERS: usize = 100;
/// The largest request head, in bytes: hyper's read buffer (its default, set explicitly).
pub const MAX_HEAD_BYTES: usize = 8192 + 4096 * 100;
/// The longest request target hyper reads (its own limit, `u16::MAX - 1`).
pub const MAX_URI_BYTES: usize = 65_534;

/// The JSON error for one of hyper's own answers, by status; None for other statuses.
fn body_for(status: u16) -> Option<foresight_api::ApiError> {
    let (code, field, message) = match status {
        400 => (
            "bad_request",
            "request",
            "the request could not be read as HTTP/1.1: a malformed request line, method, \
             version or header"
                .to_string(),
        ),
        414 => (
            "uri_too_long",
            "uri",
            format!("the request target (URI) is longer than {MAX_URI_BYTES} bytes"),
        ),
        431 => (
            "request_header_fields_too_large",
            "headers",
            format!(
                "the request's head is too large: at most {MAX_HEADERS} headers and \
                 {MAX_HEAD_BYTES} bytes in all"
            ),
        ),
        _ => return None,
    };
    Some(foresight_api::ApiError {
        code: code.into(),
        field: Some(field.into()),
        message,
    })
}

/// If `bytes` is one of hyper's own answers to an unreadable head, the same answer with the
/// JSON error body (hyper's `date` kept).
pub fn rewrite(bytes: &[u8]) -> Option<Vec<u8>> {
    const MAX: usize = 256;
    if bytes.len() > MAX || !bytes.starts_with(b"HTTP/1.1 ") || !bytes.ends_with(b"\r\n\r\n") {
        return None;
    }
    let text = std::str::from_utf8(bytes).ok()?;
    let mut lines = text[..text.len() - 4].split("\r\n");
    let status_line = lines.next()?;
    let status: u16 = status_line.get(9..12)?.parse().ok()?;
    let body = body_for(status)?;
    let mut date = None;
    let mut length_zero = false;
    for line in lines {
        let (name, value) = line.split_once(':')?;
        match name.to_ascii_lowercase().as_str() {
            "content-length" if value.trim() == "0" => length_zero = true,
            "date" => date = Some(value.trim()),
            "connection" => {}
            _ => return None,
        }
    }
    if !length_zero {
        return None;
    }
    let json = serde_json::to_vec(&body).ok()?;
    let mut out = format!(
        "{status_line}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n",
        json.len()
    );
    if let Some(d) = date {
        out.push_str(&format!("date: {d}\r\n"));
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(&json);
    Some(out)
}

/// A connection as hyper sees it, whose own answers to unreadable heads get the JSON body
/// ([`rewrite`]). A rewritten answer is reported to hyper as written at once and sent
/// before anything else: by the next write, flush or shutdown.
pub struct JsonHeadErrors<I> {
    inner: I,
    /// The rewritten answer and how much of it is sent.
    pending: Option<(Vec<u8>, usize)>,
}

impl<I> JsonHeadErrors<I> {
    /// Wraps the connection hyper is given.
    pub fn new(inner: I) -> JsonHeadErrors<I> {
        JsonHeadErrors {
            inner,
            pending: None,
        }
    }
}

impl<I: AsyncWrite + Unpin> JsonHeadErrors<I> {
    /// Sends what is left of a rewritten answer; Ready once nothing is left.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, sent)) = &mut self.pending {
            if *sent >= bytes.len() {
                self.pending = None;
                break;
            }
            match Pin::new(&mut self.inner).poll_write(cx, &bytes[*sent..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => *sent += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Takes `data` as a rewritten answer when it is one of hyper's own; its length then.
    fn take_answer(
        &mut self,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Option<Poll<io::Result<usize>>> {
        let answer = rewrite(data)?;
        self.pending = Some((answer, 0));
        Some(match self.poll_pending(cx) {
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            _ => Poll::Ready(Ok(data.len())),
        })
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for JsonHeadErrors<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for JsonHeadErrors<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        std::task::ready!(this.poll_pending(cx))?;
        if let Some(r) = this.take_answer(cx, data) {
            return r;
        }
        Pin::new(&mut this.inner).poll_write(cx, data)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        std::task::ready!(this.poll_pending(cx))?;
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if total <= 256 && bufs.first().is_some_and(|b| b.starts_with(b"HTTP/1.1 4")) {
            let joined: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            if let Some(r) = this.take_answer(cx, &joined) {
                return r;
            }
        }
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match this.poll_pending(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_flush(cx),
            other => other,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match this.poll_pending(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_shutdown(cx),
            other => other,
        }
    }
}

/// An error the router answered with an empty body (one of axum's own, or a handler's
/// bare status) gets the API's JSON error body, naming the status.
pub async fn fill_empty_error(resp: Response) -> Response {
    use axum::body::HttpBody as _;
    let status = resp.status();
    let empty = resp.body().size_hint().exact() == Some(0);
    if !(status.is_client_error() || status.is_server_error())
        || !empty
        || resp.headers().contains_key(header::CONTENT_TYPE)
    {
        return resp;
    }
    let code = match status {
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large".to_string(),
        StatusCode::REQUEST_TIMEOUT => "request_timeout".to_string(),
        s if s.is_server_error() => "internal".to_string(),
        s => s
            .canonical_reason()
            .unwrap_or("error")
            .to_ascii_lowercase()
            .replace([' ', '-'], "_"),
    };
    let body = foresight_api::ApiError {
        code,
        field: None,
        message: format!(
            "{} {}",
            status.as_u16(),
            status.canonical_reason().unwrap_or("error")
        ),
    };
    let (mut parts, _) = resp.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    let mut out = (status, axum::Json(body)).into_response();
    for (name, value) in parts.headers.iter() {
        if name != header::CONTENT_TYPE {
            out.headers_mut().insert(name, value.clone());
        }
    }
    out.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hypers_own_answers_get_the_json_body_and_nothing_else_does() {
        let date = "date: Thu, 01 Jan 2026 00:00:00 GMT\r\n";
        for (status, code) in [
            ("400 Bad Request", "bad_request"),
            ("414 URI Too Long", "uri_too_long"),
            (
                "431 Request Header Fields Too Large",
                "request_header_fields_too_large",
            ),
        ] {
            let raw = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n{date}\r\n");
            let out = String::from_utf8(rewrite(raw.as_bytes()).unwrap()).unwrap();
            let (head, body) = out.split_once("\r\n\r\n").unwrap();
            assert!(
                head.starts_with(&format!("HTTP/1.1 {status}\r\n")),
                "{head}"
            );
            assert!(head.contains("content-type: application/json"), "{head}");
            assert!(head.contains(date.trim_end()), "{head}");
            assert!(
                head.contains(&format!("content-length: {}", body.len())),
                "{head}"
            );
            let e: foresight_api::ApiError = serde_json::from_str(body).unwrap();
            assert_eq!(e.code, code);
        }
        for other in [
            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_string(),
            format!("HTTP/1.1 400 Bad Request\r\ncontent-length: 5\r\n{date}\r\n"),
            format!("HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nx-a: b\r\n{date}\r\n"),
            format!("HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n{date}\r\n{{}}"),
            format!("HTTP/1.1 400 Bad Request\r\n{date}\r\n"),
            "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".to_string(),
        ] {
            assert_eq!(rewrite(other.as_bytes()), None, "{other:?}");
        }
    }
}
