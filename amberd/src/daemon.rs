//! The daemon's root state shared by every connection and method handler.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::session::SessionManager;
use crate::session::deps::Deps;

/// Name reported in `initialize` and `daemon/status`.
pub const NAME: &str = "amberd";
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Root of everything the daemon owns.
pub struct Daemon {
    pub sessions: SessionManager,
    pub started: Instant,
    connections: AtomicU64,
    subscriptions: Arc<AtomicU64>,
    /// Cancelled by `daemon/shutdown` or a signal.
    pub shutdown: CancellationToken,
}

impl Daemon {
    pub fn new(deps: Deps) -> Arc<Daemon> {
        Arc::new(Daemon {
            sessions: SessionManager::new(Arc::new(deps)),
            started: Instant::now(),
            connections: AtomicU64::new(0),
            subscriptions: Arc::new(AtomicU64::new(0)),
            shutdown: CancellationToken::new(),
        })
    }

    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    /// Counts a connection for as long as the guard lives.
    pub fn connection_guard(self: &Arc<Self>) -> ConnectionCount {
        self.connections.fetch_add(1, Ordering::Relaxed);
        ConnectionCount(self.clone())
    }
}

impl Daemon {
    /// Subscriptions whose forwarder is still running.
    pub fn subscriptions(&self) -> u64 {
        self.subscriptions.load(Ordering::SeqCst)
    }

    /// Counts a running subscription forwarder for as long as the guard lives.
    pub fn subscription_guard(&self) -> SubscriptionCount {
        self.subscriptions.fetch_add(1, Ordering::SeqCst);
        SubscriptionCount(self.subscriptions.clone())
    }
}

/// Decrements the subscription count on drop.
pub struct SubscriptionCount(Arc<AtomicU64>);

impl Drop for SubscriptionCount {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Decrements the connection count on drop.
pub struct ConnectionCount(Arc<Daemon>);

impl Drop for ConnectionCount {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}
