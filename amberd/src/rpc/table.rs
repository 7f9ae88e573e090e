//! Registration of the method table. Every method is registered by its `amber_proto` type
//! ([`Method`], [`Subscription`]): the name it is served under, the params its handler gets
//! and the result the handler returns are the ones proto declares and clients call with,
//! so the three cannot drift. Params are parsed before the handler runs, by
//! [`params::parse_for`](super::params::parse_for) (absent or `null` params count as `{}`;
//! errors are -32602 naming the field; a `sessionId` may be a session's name or a unique
//! prefix of its id).

use std::future::Future;
use std::sync::Arc;

use amber_proto::methods::{Method, Notification, Subscription};
use jsonrpsee::core::{RegisterMethodError, SubscriptionError};
use jsonrpsee::types::ErrorObjectOwned;
use jsonrpsee::{Extensions, PendingSubscriptionSink, RpcModule};

use super::params::parse_for;
use crate::daemon::Daemon;

pub(crate) type RpcResult<T> = Result<T, ErrorObjectOwned>;

/// The module served on every connection, filled one typed method at a time.
pub(crate) struct MethodTable {
    module: RpcModule<Arc<Daemon>>,
}

impl MethodTable {
    pub(crate) fn new(daemon: Arc<Daemon>) -> Self {
        Self {
            module: RpcModule::new(daemon),
        }
    }

    /// Serves `M` with a handler that answers without awaiting anything.
    pub(crate) fn method<M>(
        &mut self,
        handler: impl Fn(M::Params, &Arc<Daemon>, &Extensions) -> RpcResult<M::Result>
        + Send
        + Sync
        + 'static,
    ) -> Result<(), RegisterMethodError>
    where
        M: Method,
        M::Result: Clone + 'static,
    {
        self.module
            .register_method(M::NAME, move |params, daemon, extensions| {
                handler(parse_for(&params, daemon)?, daemon, extensions)
            })?;
        Ok(())
    }

    /// Serves `M` with a handler that awaits (a session's queue, a plugin, an MCP server).
    pub(crate) fn async_method<M, F, Fut>(&mut self, handler: F) -> Result<(), RegisterMethodError>
    where
        M: Method,
        M::Result: Clone + 'static,
        F: Fn(M::Params, Arc<Daemon>, Extensions) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = RpcResult<M::Result>> + Send,
    {
        self.module
            .register_async_method(M::NAME, move |params, daemon, extensions| {
                let call = parse_for(&params, &daemon)
                    .map(|p| handler(p, Arc::clone(&daemon), extensions));
                async move { call?.await }
            })?;
        Ok(())
    }

    /// Serves the subscription `S` (and its unsubscribe method). Params that do not parse
    /// reject the subscription with their -32602.
    pub(crate) fn subscription<S, F, Fut>(&mut self, handler: F) -> Result<(), RegisterMethodError>
    where
        S: Subscription,
        S::Params: Send,
        F: Fn(S::Params, PendingSubscriptionSink, Arc<Daemon>, Extensions) -> Fut
            + Clone
            + Send
            + Sync
            + 'static,
        Fut: Future<Output = Result<(), SubscriptionError>> + Send + 'static,
    {
        self.module.register_subscription(
            S::NAME,
            <S::Notification as Notification>::NAME,
            <S::Unsubscribe as Method>::NAME,
            move |params, pending, daemon, extensions| {
                let handler = handler.clone();
                async move {
                    match parse_for(&params, &daemon) {
                        Ok(p) => handler(p, pending, Arc::clone(&daemon), extensions).await,
                        Err(err) => {
                            pending.reject(err).await;
                            Ok(())
                        }
                    }
                }
            },
        )?;
        Ok(())
    }

    pub(crate) fn into_module(self) -> RpcModule<Arc<Daemon>> {
        self.module
    }
}
