//! One accepted connection, from its first byte to its close. amber reads the first request
//! head itself (it must be whole within `frame_timeout`) to tell the two kinds apart:
//!
//! - a WebSocket upgrade makes its slot a WebSocket's (`max_connections` less
//!   `reserved_http_connections` of them; none free, none pending to evict: 503, -32003)
//!   and is served through the WebSocket guard; it carries that one request, the upgrade;
//! - anything else is plain HTTP: keep-alive requests, each body read by `http_intake`;
//!   a later request on it may not upgrade (the guard must see a WebSocket's first frame).
//!
//! hyper serves both (HTTP/1.1 only), with `frame_timeout` as its header-read timeout for
//! later requests; jsonrpsee answers the requests. amber serves the connection itself, in
//! front of jsonrpsee's tower service, because jsonrpsee 0.26 offers no header-read timeout,
//! no per-connection bound on unread replies and no RFC 6455 close codes (`ws_guard.rs`,
//! `unread.rs`); hyper was already in the tree through jsonrpsee.

use std::sync::Arc;

use amber_proto::errors;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use jsonrpsee::server::{HttpBody, ws};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tower::Service;

use super::admission::{Activity, SlotState, Slots};
use super::budget::ByteBudget;
use super::conn_io::ConnIo;
use super::gate::WsConn;
use super::http_intake::{self, BodyLimits};
use super::unread::{ConnUnread, UnreadBudget};
use super::ws_guard::{WsGuard, WsLimits};

/// A request head longer than this is refused (431).
const MAX_HEAD_BYTES: usize = 16 * 1024;

/// What every connection shares.
pub(super) struct Shared {
    pub slots: Arc<Slots>,
    /// Reply bytes not yet written, daemon-wide, and each WebSocket's own bound.
    pub unread: Arc<UnreadBudget>,
    pub unread_per_connection: u64,
    /// Calls of one WebSocket that run at once.
    pub concurrent_calls: usize,
    pub budget: ByteBudget,
    pub ws_limits: WsLimits,
    pub body_limits: BodyLimits,
}

/// Serves `stream` until it closes, `stopped` fires or its slot is evicted; `lease` lives
/// as long as the connection (for a WebSocket: until the upgraded connection closes), and
/// `slot` follows what it does.
pub(super) async fn serve<S>(
    mut stream: UnixStream,
    lease: Arc<dyn Send + Sync>,
    slot: Arc<SlotState>,
    shared: Arc<Shared>,
    rpc: S,
    stopped: impl std::future::Future<Output = ()>,
) where
    S: Service<http::Request<HttpBody>, Response = http::Response<HttpBody>>
        + Clone
        + Send
        + 'static,
    S::Error: std::fmt::Display,
    S::Future: Send,
{
    let timeout = shared.body_limits.timeout;
    let first = tokio::select! {
        first = tokio::time::timeout(timeout, read_head(&mut stream)) => first,
        () = slot.evicted().cancelled() => return,
    };
    let (read, head_len) = match first {
        Ok(Ok(Some(head))) => head,
        Ok(Ok(None)) | Ok(Err(_)) => return,
        Err(_) => {
            tracing::debug!("no request head in time; closing");
            return;
        }
    };
    let ws_conn = if is_websocket_upgrade(&read[..head_len]) {
        if !shared.slots.upgrade(&slot) {
            let message = "too many WebSocket connections; plain HTTP requests still answer";
            let refusal =
                super::socket::refusal("503 Service Unavailable", errors::OVERLOADED, message);
            super::refuse(stream, refusal).await;
            return;
        }
        let unread = ConnUnread::new(shared.unread.clone(), shared.unread_per_connection);
        Some(Arc::new(WsConn::new(
            lease.clone(),
            slot.clone(),
            unread,
            shared.concurrent_calls,
        )))
    } else {
        slot.set(Activity::Busy);
        None
    };
    let upgrading = ws_conn.is_some();
    let io = match &ws_conn {
        Some(conn) => {
            let mut head = read;
            let leftover = head.split_off(head_len);
            let guard = WsGuard::new(
                shared.ws_limits,
                conn.clone(),
                shared.budget.clone(),
                leftover,
            );
            ConnIo::websocket(stream, head, guard)
        }
        None => ConnIo::http(stream, read),
    };
    let http_slot = ws_conn.is_none().then(|| slot.clone());
    let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
        let rpc = rpc.clone();
        let shared = shared.clone();
        let ws_conn = ws_conn.clone();
        let http_slot = http_slot.clone();
        async move {
            // Plain HTTP is busy while it answers, idle (evictable) between requests.
            if let Some(slot) = &http_slot {
                slot.set(Activity::Busy);
            }
            let response = answer(request, rpc, &shared, ws_conn).await;
            if let Some(slot) = &http_slot {
                slot.set(Activity::Idle);
            }
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(timeout);
    let connection = builder
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    tokio::pin!(connection, stopped);
    let _lease = lease;
    let result = tokio::select! {
        result = &mut connection => result,
        () = &mut stopped => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
        // Evicted while idle between requests (a WebSocket's guard sees its own eviction).
        () = slot.evicted().cancelled(), if !upgrading => Ok(()),
    };
    if let Err(err) = result {
        tracing::debug!(%err, "connection ended with an error");
    }
}

async fn answer<S>(
    mut request: http::Request<Incoming>,
    mut rpc: S,
    shared: &Shared,
    ws_conn: Option<Arc<WsConn>>,
) -> http::Response<HttpBody>
where
    S: Service<http::Request<HttpBody>, Response = http::Response<HttpBody>>,
    S::Error: std::fmt::Display,
{
    let upgrade = ws::is_upgrade_request(&request);
    let (request, reserved) = match (ws_conn, upgrade) {
        (Some(conn), true) if conn.claim_upgrade() => {
            request.extensions_mut().insert(conn);
            (request.map(HttpBody::new), Default::default())
        }
        (Some(_), _) => {
            return closing(bad_request(
                "a connection opened as a WebSocket upgrade carries only that request",
            ));
        }
        (None, true) => {
            return closing(bad_request(
                "a WebSocket upgrade must be the first request on its connection",
            ));
        }
        (None, false) => {
            super::assume_json_body(&mut request);
            match http_intake::read(request, shared.body_limits, &shared.budget).await {
                Ok(read) => read,
                Err(response) => return response,
            }
        }
    };
    let response = match rpc.call(request).await {
        Ok(response) => response,
        Err(err) => {
            tracing::warn!(%err, "the RPC service failed");
            http_intake::json_error(
                http::StatusCode::INTERNAL_SERVER_ERROR,
                errors::INTERNAL_ERROR,
                "internal error",
            )
        }
    };
    drop(reserved);
    if upgrade && response.status() != http::StatusCode::SWITCHING_PROTOCOLS {
        return closing(response);
    }
    if upgrade {
        return response;
    }
    held_while_written(response, &shared.unread)
}

/// A plain HTTP reply's body counts among the daemon's unread bytes until it is written;
/// one that does not fit is replaced by 503/-32003 (dropped here, not held).
fn held_while_written(
    response: http::Response<HttpBody>,
    unread: &Arc<UnreadBudget>,
) -> http::Response<HttpBody> {
    use hyper::body::Body as _;
    // jsonrpsee's bodies are whole: their size is exact.
    let hint = response.body().size_hint();
    let len = hint.upper().unwrap_or(hint.lower());
    let Some(reservation) = unread.reserve_body(len) else {
        drop(response);
        return http_intake::json_error(
            http::StatusCode::SERVICE_UNAVAILABLE,
            errors::OVERLOADED,
            "overloaded: clients have not read the daemon's replies (`[server] \
             max_unread_bytes`); the reply was dropped — retry later",
        );
    };
    response.map(|body| {
        HttpBody::new(Reserved {
            body,
            _reservation: reservation,
        })
    })
}

/// A body that holds its bytes' reservation until it is dropped.
struct Reserved {
    body: HttpBody,
    _reservation: super::unread::BodyReservation,
}

impl hyper::body::Body for Reserved {
    type Data = <HttpBody as hyper::body::Body>::Data;
    type Error = <HttpBody as hyper::body::Body>::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

fn bad_request(message: &str) -> http::Response<HttpBody> {
    http_intake::json_error(
        http::StatusCode::BAD_REQUEST,
        errors::INVALID_REQUEST,
        message,
    )
}

fn closing(mut response: http::Response<HttpBody>) -> http::Response<HttpBody> {
    response.headers_mut().insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    response
}

/// Reads until the first request head is whole: the bytes read and the head's length.
/// `None` when the peer closed first; an error (answered 431) for a head past the limit.
async fn read_head(stream: &mut UnixStream) -> std::io::Result<Option<(Vec<u8>, usize)>> {
    let mut read = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        let searched_from = read.len().saturating_sub(3);
        read.extend_from_slice(&chunk[..n]);
        if let Some(at) = memchr::memmem::find(&read[searched_from..], b"\r\n\r\n") {
            return Ok(Some((read, searched_from + at + 4)));
        }
        if read.len() > MAX_HEAD_BYTES {
            let refusal = super::socket::refusal(
                "431 Request Header Fields Too Large",
                errors::INVALID_REQUEST,
                "the request head is too large",
            );
            let _ = stream.write_all(&refusal).await;
            return Err(std::io::ErrorKind::InvalidData.into());
        }
    }
}

/// `GET` with `Upgrade: websocket` and `Connection: upgrade` (RFC 6455 §4.2.1), read the
/// way soketto reads them.
fn is_websocket_upgrade(head: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(head) else {
        return false;
    };
    let mut lines = text.split("\r\n");
    if !lines.next().is_some_and(|line| line.starts_with("GET ")) {
        return false;
    }
    let (mut upgrade, mut connection) = (false, false);
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let name = name.trim();
        if name.eq_ignore_ascii_case("upgrade") {
            upgrade |= value
                .split(',')
                .any(|token| token.trim().eq_ignore_ascii_case("websocket"));
        } else if name.eq_ignore_ascii_case("connection") {
            connection |= value
                .split(',')
                .any(|token| token.trim().eq_ignore_ascii_case("upgrade"));
        }
    }
    upgrade && connection
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upgrade_heads_are_told_from_plain_requests() {
        for (head, expected) in [
            (
                "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
                true,
            ),
            (
                "GET / HTTP/1.1\r\nupgrade: WebSocket\r\nconnection: keep-alive, upgrade\r\n\r\n",
                true,
            ),
            ("GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n", false),
            (
                "POST / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
                false,
            ),
            ("POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\n", false),
        ] {
            assert_eq!(is_websocket_upgrade(head.as_bytes()), expected, "{head}");
        }
    }
}
