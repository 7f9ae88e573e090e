//! A plain HTTP request's way in: amber reads the body itself before jsonrpsee sees it, so
//!
//! - a body must arrive whole within `frame_timeout` of its head (else 408, closed);
//! - its bytes come out of the daemon's [`ByteBudget`] while it is read and handled
//!   (past the budget: 503 with -32003, closed);
//! - a body that breaks HTTP framing (a bad chunk size, a connection cut short) is 400
//!   with -32700 — jsonrpsee would say 500, internal error;
//! - the JSON-RPC envelope is checked ([`envelope::check`]) before jsonrpsee parses it.

use std::time::Duration;

use amber_proto::errors;
use hyper::body::{Body as _, Incoming};
use jsonrpsee::server::HttpBody;
use jsonrpsee::server::http::response;
use tokio::time::Instant;

use super::budget::{ByteBudget, Reserved};
use super::envelope::{self, Verdict};

/// What reading a body ended in, short of a whole body.
enum Refusal {
    Timeout,
    Malformed,
    TooLarge,
    Overloaded,
}

/// The limits a request body is read under (from `[server]`).
#[derive(Debug, Clone, Copy)]
pub(super) struct BodyLimits {
    pub max_bytes: u32,
    pub timeout: Duration,
}

/// The request with its body read and checked, ready for jsonrpsee, and the budget it holds
/// (to be dropped once jsonrpsee has answered); or the response that answers it already.
pub(super) async fn read(
    request: http::Request<Incoming>,
    limits: BodyLimits,
    budget: &ByteBudget,
) -> Result<(http::Request<HttpBody>, Reserved), http::Response<HttpBody>> {
    let (parts, body) = request.into_parts();
    if parts.method != http::Method::POST {
        // jsonrpsee answers 405 with the reason.
        return Ok((
            http::Request::from_parts(parts, HttpBody::new(body)),
            Reserved::default(),
        ));
    }
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let deadline = Instant::now() + limits.timeout;
    let mut body = body;
    let bytes = match collect(&mut body, declared, limits, budget, deadline).await {
        Ok(read) => read,
        Err(refusal) => {
            if matches!(refusal, Refusal::TooLarge | Refusal::Overloaded) {
                // Read the rest (keeping none of it), so the client, still sending, can
                // read the answer: a socket closed with unread data resets the peer.
                drain(&mut body, deadline).await;
            }
            return Err(refused(refusal, limits.max_bytes));
        }
    };
    let (bytes, reserved) = bytes;
    let bytes = match envelope::check(&bytes) {
        Verdict::Pass { .. } => bytes,
        Verdict::Rewrite(batch) => batch.into_bytes(),
        Verdict::Answer(answer) => return Err(response::ok_response(answer)),
    };
    Ok((
        http::Request::from_parts(parts, HttpBody::from(bytes)),
        reserved,
    ))
}

async fn collect(
    body: &mut Incoming,
    declared: Option<u64>,
    limits: BodyLimits,
    budget: &ByteBudget,
    deadline: Instant,
) -> Result<(Vec<u8>, Reserved), Refusal> {
    let max = u64::from(limits.max_bytes);
    if declared.is_some_and(|n| n > max) {
        return Err(Refusal::TooLarge);
    }
    // A declared length is taken whole up front, so a body that will not fit is refused
    // before any of it is read.
    let mut reserved = match declared {
        Some(n) => budget.try_take(n).ok_or(Refusal::Overloaded)?,
        None => Reserved::default(),
    };
    let capacity = declared.and_then(|n| usize::try_from(n).ok()).unwrap_or(0);
    let mut bytes = Vec::with_capacity(capacity);
    loop {
        let frame = match tokio::time::timeout_at(deadline, next_frame(body)).await {
            Err(_) => return Err(Refusal::Timeout),
            Ok(None) => return Ok((bytes, reserved)),
            Ok(Some(Err(_))) => return Err(Refusal::Malformed),
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        let total = (bytes.len() + data.len()) as u64;
        if total > max {
            return Err(Refusal::TooLarge);
        }
        if declared.is_none() {
            reserved.merge(
                budget
                    .try_take(data.len() as u64)
                    .ok_or(Refusal::Overloaded)?,
            );
        }
        bytes.extend_from_slice(&data);
    }
}

async fn next_frame(
    body: &mut Incoming,
) -> Option<Result<hyper::body::Frame<bytes::Bytes>, hyper::Error>> {
    std::future::poll_fn(|cx| std::pin::Pin::new(&mut *body).poll_frame(cx)).await
}

async fn drain(body: &mut Incoming, deadline: Instant) {
    let _ = tokio::time::timeout_at(deadline, async {
        while let Some(Ok(_)) = next_frame(body).await {}
    })
    .await;
}

fn refused(refusal: Refusal, max_bytes: u32) -> http::Response<HttpBody> {
    let mut response = match refusal {
        Refusal::TooLarge => response::too_large(max_bytes),
        Refusal::Malformed => response::malformed(),
        Refusal::Timeout => json_error(
            http::StatusCode::REQUEST_TIMEOUT,
            errors::INVALID_REQUEST,
            "the request body did not arrive in time",
        ),
        Refusal::Overloaded => json_error(
            http::StatusCode::SERVICE_UNAVAILABLE,
            errors::OVERLOADED,
            "too many request bytes in flight on the daemon; retry later",
        ),
    };
    // The body was not read to its end: the connection cannot carry another request.
    response.headers_mut().insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    response
}

/// A JSON-RPC error with `id: null` as an HTTP response with `status`.
pub(super) fn json_error(
    status: http::StatusCode,
    code: i32,
    message: &str,
) -> http::Response<HttpBody> {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": code, "message": message},
    })
    .to_string();
    let mut response = http::Response::new(HttpBody::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json; charset=utf-8"),
    );
    response
}
