//! Per-connection state and the middleware in front of every method: the `initialize`
//! gate (PROTOCOL.md "Handshake") and the mapping of jsonrpsee's own answers onto the
//! protocol's.
//!
//! - A WebSocket connection carries a `WsConn` in its request extensions; until its client
//!   sends `initialize`, every other method — unknown ones included, as PROTOCOL.md says
//!   "every other method" — gets -32002. Plain HTTP POSTs carry none: they are stateless
//!   and need no handshake.
//! - The subscriptions (`session/subscribe`, `session/watch`) and their unsubscribe
//!   methods over HTTP get -32600 saying a WebSocket is needed (jsonrpsee would answer
//!   -32603).
//! - `session/unsubscribe {"subscription": id}` (and `session/unwatch`'s) is rewritten to
//!   jsonrpsee's positional `[id]`, which is all its unsubscribe handler parses; a `false`
//!   is retried for up to 50 ms, since jsonrpsee answers a subscribe before it registers
//!   the subscription.
//! - The per-connection subscription cap (jsonrpsee: -32006, which PROTOCOL.md reserves for
//!   MCP server errors) is answered -32003, overloaded.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use amber_proto::{errors, methods};
use jsonrpsee::core::middleware::{Batch, BatchEntry, BatchEntryErr, Notification, RpcServiceT};
use jsonrpsee::server::MethodResponse;
use jsonrpsee::types::error::TOO_MANY_SUBSCRIPTIONS_CODE;
use jsonrpsee::types::{ErrorObject, Request};
use serde_json::value::RawValue;

use super::admission::{Activity, SlotState};
use super::unread::{ConnUnread, Full};

/// State of one WebSocket connection. It lives as long as the connection (jsonrpsee keeps
/// the upgrade request's extensions), so it also carries the connection's lease.
pub(crate) struct WsConn {
    initialized: AtomicBool,
    approver: AtomicBool,
    upgrade_claimed: AtomicBool,
    slot: Option<Arc<SlotState>>,
    /// Reply and notification bytes queued for this connection, not yet written.
    pub unread: ConnUnread,
    /// Calls of this connection running now (`max_concurrent_calls_per_connection`).
    running: tokio::sync::Semaphore,
    /// The size of each method's last reply here: what its next one is expected to cost.
    reply_sizes: std::sync::Mutex<std::collections::HashMap<String, u64>>,
    _lease: Option<Arc<dyn Send + Sync>>,
}

impl WsConn {
    /// `lease` is held until the WebSocket closes (connection slot, connection count);
    /// `slot` learns when the connection is initialized (no longer evictable).
    pub(crate) fn new(
        lease: Arc<dyn Send + Sync>,
        slot: Arc<SlotState>,
        unread: ConnUnread,
        concurrent_calls: usize,
    ) -> Self {
        Self {
            initialized: AtomicBool::new(false),
            approver: AtomicBool::new(false),
            upgrade_claimed: AtomicBool::new(false),
            slot: Some(slot),
            unread,
            running: tokio::sync::Semaphore::new(concurrent_calls.max(1)),
            reply_sizes: std::sync::Mutex::default(),
            _lease: Some(lease),
        }
    }

    /// A connection with no slot and its own budget (unit tests).
    #[cfg(test)]
    pub(crate) fn detached() -> Self {
        Self {
            initialized: AtomicBool::new(false),
            approver: AtomicBool::new(false),
            upgrade_claimed: AtomicBool::new(false),
            slot: None,
            unread: ConnUnread::new(super::unread::UnreadBudget::new(u64::MAX), u64::MAX),
            running: tokio::sync::Semaphore::new(16),
            reply_sizes: std::sync::Mutex::default(),
            _lease: None,
        }
    }

    /// What `method`'s next reply is expected to cost: its last one's size here.
    fn expected_reply(&self, method: &str) -> u64 {
        self.reply_sizes
            .lock()
            .ok()
            .and_then(|sizes| sizes.get(method).copied())
            .unwrap_or(0)
    }

    fn reply_was(&self, method: &str, len: u64) {
        if let Ok(mut sizes) = self.reply_sizes.lock() {
            // Bounded by the methods that exist: an unknown one is not remembered.
            if sizes.len() < 256 || sizes.contains_key(method) {
                sizes.insert(method.to_owned(), len);
            }
        }
    }

    /// The connection's slot was given to another client.
    pub(crate) fn evicted(&self) -> Option<&tokio_util::sync::CancellationToken> {
        self.slot.as_deref().map(SlotState::evicted)
    }

    /// True for the first caller only: a WebSocket connection carries one upgrade.
    pub(crate) fn claim_upgrade(&self) -> bool {
        !self.upgrade_claimed.swap(true, Ordering::SeqCst)
    }

    pub(crate) fn mark_initialized(&self, approver: bool) {
        self.approver.store(approver, Ordering::SeqCst);
        self.initialized.store(true, Ordering::SeqCst);
        if let Some(slot) = &self.slot {
            slot.set(Activity::Established);
        }
    }

    pub(crate) fn is_initialized(&self) -> bool {
        self.initialized.load(Ordering::SeqCst)
    }

    /// Declared `capabilities.approvals: true` in `initialize`.
    pub(crate) fn is_approver(&self) -> bool {
        self.approver.load(Ordering::SeqCst)
    }
}

/// RPC middleware enforcing the handshake on WebSocket connections.
#[derive(Clone)]
pub(crate) struct InitGate<S> {
    inner: S,
}

impl<S> InitGate<S> {
    pub(crate) fn new(inner: S) -> Self {
        Self { inner }
    }
}

/// Methods that open a subscription.
fn is_subscribe(method: &str) -> bool {
    method == methods::SESSION_SUBSCRIBE || method == methods::SESSION_WATCH
}

/// Methods that end one.
fn is_unsubscribe(method: &str) -> bool {
    method == methods::SESSION_UNSUBSCRIBE || method == methods::SESSION_UNWATCH
}

/// The error a request gets before it reaches its method, if any.
fn refusal(extensions: &http::Extensions, method: &str) -> Option<ErrorObject<'static>> {
    match extensions.get::<Arc<WsConn>>() {
        Some(conn) if method != methods::INITIALIZE && !conn.is_initialized() => {
            Some(not_initialized(method))
        }
        Some(_) => None,
        None if is_subscribe(method) || is_unsubscribe(method) => Some(needs_websocket(method)),
        None => None,
    }
}

fn not_initialized(method: &str) -> ErrorObject<'static> {
    ErrorObject::owned(
        errors::NOT_INITIALIZED,
        format!("not initialized: send `initialize` before `{method}` on this connection"),
        None::<()>,
    )
}

fn needs_websocket(method: &str) -> ErrorObject<'static> {
    ErrorObject::owned(
        errors::INVALID_REQUEST,
        format!(
            "`{method}` needs a WebSocket connection (subscriptions stream notifications, \
             which a plain HTTP POST cannot carry)"
        ),
        None::<()>,
    )
}

fn too_many_subscriptions() -> ErrorObject<'static> {
    ErrorObject::owned(
        errors::OVERLOADED,
        "too many subscriptions on this connection; unsubscribe one or open another \
         connection, then retry",
        None::<()>,
    )
}

/// `response` as it goes out on `conn`: counted among the connection's unread bytes, or,
/// when it does not fit, replaced by -32003 (the large result is dropped here, not queued).
fn queued(
    conn: &WsConn,
    id: jsonrpsee::types::Id<'static>,
    response: MethodResponse,
) -> MethodResponse {
    let len = response.as_json().get().len() as u64;
    match conn.unread.try_take(len) {
        Ok(()) => response,
        Err(full) => {
            let extensions = response.extensions().clone();
            drop(response);
            counted(
                Some(conn),
                MethodResponse::error(id, unread_overloaded(full, len, conn.unread.queued()))
                    .with_extensions(extensions),
            )
        }
    }
}

/// A short reply that goes out whatever the bounds say, counted so the books stay even.
fn counted(conn: Option<&WsConn>, response: MethodResponse) -> MethodResponse {
    if let Some(conn) = conn {
        conn.unread.add(response.as_json().get().len() as u64);
    }
    response
}

/// What became of the call: not run (`len` 0), or its reply dropped.
fn dropped(len: u64) -> String {
    match len {
        0 => "the call was not run".to_owned(),
        len => format!("the {len}-byte reply was dropped"),
    }
}

fn unread_overloaded(full: Full, len: u64, queued: u64) -> ErrorObject<'static> {
    let message = match full {
        Full::Connection => format!(
            "overloaded: this connection has {queued} bytes of replies its client has not read \
             (`[server] max_unread_bytes_per_connection`); {} — read the replies, then retry",
            dropped(len)
        ),
        Full::Daemon => format!(
            "overloaded: clients have not read the daemon's replies (`[server] \
             max_unread_bytes`); {} — retry later",
            dropped(len)
        ),
    };
    ErrorObject::owned(errors::OVERLOADED, message, None::<()>)
}

/// jsonrpsee sends a subscribe response a moment before it registers the subscription, so
/// an unsubscribe sent the instant the response arrives can find nothing (`false`) and the
/// subscription would live on. A `false` is therefore retried a few times, briefly.
async fn unsubscribe<S>(inner: &S, request: Request<'_>) -> MethodResponse
where
    S: RpcServiceT<MethodResponse = MethodResponse> + Send + Sync,
{
    const RETRIES: u32 = 5;
    for _ in 0..RETRIES {
        let response = inner.call(request.clone()).await;
        if !answered_false(&response) {
            return response;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    inner.call(request).await
}

fn answered_false(response: &MethodResponse) -> bool {
    #[derive(serde::Deserialize)]
    struct Reply {
        result: Option<bool>,
    }
    serde_json::from_str::<Reply>(response.as_json().get())
        .is_ok_and(|reply| reply.result == Some(false))
}

/// `session/unsubscribe {"subscription": id}` → `[id]` (and `session/unwatch`'s):
/// jsonrpsee's unsubscribe handler reads only the positional form (and answers `false` to
/// anything else).
fn positional_unsubscribe(request: &mut Request<'_>) {
    #[derive(serde::Deserialize)]
    struct Named<'a> {
        #[serde(borrow)]
        subscription: &'a RawValue,
    }
    if !is_unsubscribe(request.method_name()) {
        return;
    }
    let Some(params) = request.params.as_deref() else {
        return;
    };
    let Ok(named) = serde_json::from_str::<Named<'_>>(params.get()) else {
        return;
    };
    let positional = RawValue::from_string(format!("[{}]", named.subscription.get()));
    if let Ok(positional) = positional {
        request.params = Some(std::borrow::Cow::Owned(positional));
    }
}

impl<S> RpcServiceT for InitGate<S>
where
    S: RpcServiceT<
            MethodResponse = MethodResponse,
            BatchResponse = MethodResponse,
            NotificationResponse = MethodResponse,
        > + Send
        + Sync
        + Clone
        + 'static,
{
    type MethodResponse = MethodResponse;
    type NotificationResponse = MethodResponse;
    type BatchResponse = MethodResponse;

    fn call<'a>(
        &self,
        mut request: Request<'a>,
    ) -> impl Future<Output = Self::MethodResponse> + Send + 'a {
        let inner = self.inner.clone();
        async move {
            if let Some(err) = refusal(request.extensions(), request.method_name()) {
                return MethodResponse::error(request.id, err);
            }
            positional_unsubscribe(&mut request);
            let subscribe = is_subscribe(request.method_name());
            let id = request.id.clone().into_owned();
            if is_unsubscribe(request.method_name()) {
                return unsubscribe(&inner, request).await;
            }
            let conn = request.extensions().get::<Arc<WsConn>>().cloned();
            // A WebSocket's calls run a few at a time, and not at all while its client
            // leaves a full queue of replies unread: a burst of large results is built
            // only as fast as it is read.
            let _running = match &conn {
                Some(conn) => conn.running.acquire().await.ok(),
                None => None,
            };
            let method = request.method_name().to_owned();
            if let Some(conn) = &conn
                && let Err(full) = conn.unread.has_room(conn.expected_reply(&method))
            {
                return counted(
                    Some(conn),
                    MethodResponse::error(id, unread_overloaded(full, 0, conn.unread.queued())),
                );
            }
            let response = inner.call(request).await;
            if subscribe && response.as_error_code() == Some(TOO_MANY_SUBSCRIPTIONS_CODE) {
                let extensions = response.extensions().clone();
                return counted(
                    conn.as_deref(),
                    MethodResponse::error(id, too_many_subscriptions()).with_extensions(extensions),
                );
            }
            match &conn {
                Some(conn) => {
                    conn.reply_was(&method, response.as_json().get().len() as u64);
                    queued(conn, id, response)
                }
                None => response,
            }
        }
    }

    fn batch<'a>(
        &self,
        mut batch: Batch<'a>,
    ) -> impl Future<Output = Self::BatchResponse> + Send + 'a {
        for entry in batch.iter_mut() {
            let refused = match entry {
                Ok(BatchEntry::Call(req)) => {
                    positional_unsubscribe(req);
                    refusal(req.extensions(), req.method_name()).map(|err| (req.id.clone(), err))
                }
                _ => None,
            };
            if let Some((id, err)) = refused {
                *entry = Err(BatchEntryErr::new(id, err));
            }
        }
        let conn = batch.iter().find_map(|entry| match entry {
            Ok(BatchEntry::Call(req)) => req.extensions().get::<Arc<WsConn>>().cloned(),
            Ok(BatchEntry::Notification(n)) => n.extensions().get::<Arc<WsConn>>().cloned(),
            Err(_) => None,
        });
        let inner = self.inner.clone();
        async move {
            let response = inner.batch(batch).await;
            match conn {
                Some(conn) => queued(&conn, jsonrpsee::types::Id::Null, response),
                None => response,
            }
        }
    }

    fn notification<'a>(
        &self,
        n: Notification<'a>,
    ) -> impl Future<Output = Self::NotificationResponse> + Send + 'a {
        self.inner.notification(n)
    }
}

#[cfg(test)]
mod tests {

    use jsonrpsee::types::Id;

    use super::*;

    fn request(method: &str, params: &str) -> Request<'static> {
        Request::owned(
            method.to_owned(),
            Some(RawValue::from_string(params.to_owned()).unwrap()),
            Id::Number(1),
        )
    }

    #[test]
    fn named_unsubscribe_params_become_positional() {
        for (params, expected) in [
            (r#"{"subscription": "sub_1"}"#, r#"["sub_1"]"#),
            (r#"{"subscription": 42}"#, "[42]"),
            (r#"["sub_1"]"#, r#"["sub_1"]"#),
            (r#"{"other": 1}"#, r#"{"other": 1}"#),
        ] {
            let mut req = request(methods::SESSION_UNSUBSCRIBE, params);
            positional_unsubscribe(&mut req);
            assert_eq!(req.params.as_deref().unwrap().get(), expected, "{params}");
        }
        let mut req = request(methods::SESSION_UNWATCH, r#"{"subscription": 3}"#);
        positional_unsubscribe(&mut req);
        assert_eq!(req.params.as_deref().unwrap().get(), "[3]");
        // Only the unsubscribe methods are touched.
        let mut req = request(methods::SESSION_GET, r#"{"subscription": "x"}"#);
        positional_unsubscribe(&mut req);
        assert_eq!(
            req.params.as_deref().unwrap().get(),
            r#"{"subscription": "x"}"#
        );
    }

    #[test]
    fn before_initialize_every_method_is_refused_and_http_cannot_subscribe() {
        let mut ws = http::Extensions::new();
        ws.insert(Arc::new(WsConn::detached()));
        for method in [methods::DAEMON_STATUS, "no/such/method"] {
            let err = refusal(&ws, method).unwrap();
            assert_eq!(err.code(), errors::NOT_INITIALIZED, "{method}");
        }
        assert!(refusal(&ws, methods::INITIALIZE).is_none());
        if let Some(conn) = ws.get::<Arc<WsConn>>() {
            conn.mark_initialized(false);
        }
        assert!(refusal(&ws, "no/such/method").is_none());
        assert!(refusal(&ws, methods::SESSION_SUBSCRIBE).is_none());

        let http = http::Extensions::new();
        assert!(refusal(&http, methods::DAEMON_STATUS).is_none());
        for method in [
            methods::SESSION_SUBSCRIBE,
            methods::SESSION_UNSUBSCRIBE,
            methods::SESSION_WATCH,
            methods::SESSION_UNWATCH,
        ] {
            let err = refusal(&http, method).unwrap();
            assert_eq!(err.code(), errors::INVALID_REQUEST);
            assert!(err.message().contains("WebSocket"), "{}", err.message());
        }
    }
}
