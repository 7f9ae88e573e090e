//! Per-connection state and the `initialize` gate (PROTOCOL.md "Handshake").
//!
//! A WebSocket connection carries a `WsConn` in its request extensions; until its client
//! sends `initialize`, every other known method gets -32002. Plain HTTP POSTs carry none:
//! they are stateless and need no handshake. Unknown methods fall through to jsonrpsee's
//! own -32601 so the two errors never mask each other.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use amber_proto::{errors, methods};
use jsonrpsee::core::middleware::{Batch, BatchEntry, BatchEntryErr, Notification, RpcServiceT};
use jsonrpsee::server::MethodResponse;
use jsonrpsee::types::{ErrorObject, Request};

/// State of one WebSocket connection. It lives as long as the connection (jsonrpsee keeps
/// the upgrade request's extensions), so it also carries the connection's lease.
#[derive(Default)]
pub struct WsConn {
    initialized: AtomicBool,
    approver: AtomicBool,
    _lease: Option<Arc<dyn Send + Sync>>,
}

impl WsConn {
    /// `lease` is held until the WebSocket closes (connection slot, connection count).
    pub fn new(lease: Arc<dyn Send + Sync>) -> Self {
        Self {
            _lease: Some(lease),
            ..Self::default()
        }
    }

    pub fn mark_initialized(&self, approver: bool) {
        self.approver.store(approver, Ordering::SeqCst);
        self.initialized.store(true, Ordering::SeqCst);
    }

    pub fn is_initialized(&self) -> bool {
        self.initialized.load(Ordering::SeqCst)
    }

    /// Declared `capabilities.approvals: true` in `initialize`.
    pub fn is_approver(&self) -> bool {
        self.approver.load(Ordering::SeqCst)
    }
}

/// RPC middleware enforcing the handshake on WebSocket connections.
#[derive(Clone)]
pub struct InitGate<S> {
    inner: S,
}

impl<S> InitGate<S> {
    pub fn new(inner: S) -> Self {
        Self { inner }
    }
}

fn must_wait(extensions: &http::Extensions, method: &str) -> bool {
    method != methods::INITIALIZE
        && (methods::ALL.contains(&method) || methods::EXTENSIONS.contains(&method))
        && extensions
            .get::<Arc<WsConn>>()
            .is_some_and(|conn| !conn.is_initialized())
}

fn not_initialized(method: &str) -> ErrorObject<'static> {
    ErrorObject::owned(
        errors::NOT_INITIALIZED,
        format!("not initialized: send `initialize` before `{method}` on this connection"),
        None::<()>,
    )
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
        request: Request<'a>,
    ) -> impl Future<Output = Self::MethodResponse> + Send + 'a {
        let inner = self.inner.clone();
        async move {
            if must_wait(request.extensions(), request.method_name()) {
                let err = not_initialized(request.method_name());
                return MethodResponse::error(request.id, err);
            }
            inner.call(request).await
        }
    }

    fn batch<'a>(
        &self,
        mut batch: Batch<'a>,
    ) -> impl Future<Output = Self::BatchResponse> + Send + 'a {
        for entry in batch.iter_mut() {
            let gated = match entry {
                Ok(BatchEntry::Call(req)) if must_wait(req.extensions(), req.method_name()) => {
                    Some((req.id.clone(), not_initialized(req.method_name())))
                }
                _ => None,
            };
            if let Some((id, err)) = gated {
                *entry = Err(BatchEntryErr::new(id, err));
            }
        }
        self.inner.batch(batch)
    }

    fn notification<'a>(
        &self,
        n: Notification<'a>,
    ) -> impl Future<Output = Self::NotificationResponse> + Send + 'a {
        self.inner.notification(n)
    }
}
