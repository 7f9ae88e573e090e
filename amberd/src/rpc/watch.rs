//! `session/watch` (amber extension): every session's changes as `session/changed`
//! notifications, until `session/unwatch`, the connection's end or the daemon's.
//!
//! The watch only sends changes. A client watches first, then calls `session/list`, then
//! applies every item in arrival order over the list: changes made before the list was read
//! only repeat what a later item (or the list) supersedes, and none made after the watch
//! was accepted is missed, since the watcher's receiver exists before the answer is sent.
//!
//! `approvals: true` on an approver connection makes the connection an approver of every
//! session while the watch lasts (`Watchers::approver`, counted by every session's
//! `Approvals`); elsewhere the flag counts for nothing. A watcher that falls
//! `[server] subscriber_buffer` items behind is closed `lagged` (`lastSeq` 0: a watch has
//! no seq to resume from; the client watches and lists again).

use std::sync::Arc;

use amber_proto::{CloseCode, SessionWatchParams, SubscriptionClosed, methods};
use jsonrpsee::PendingSubscriptionSink;
use jsonrpsee::core::SubscriptionError;

use super::gate::WsConn;
use super::subscribe::Outlet;
use super::table::MethodTable;
use crate::daemon::Daemon;
use crate::session::watch::{WatchEnd, WatchReceiver};

pub(super) fn register(m: &mut MethodTable) -> Result<(), jsonrpsee::core::RegisterMethodError> {
    m.subscription::<methods::SessionWatch, _, _>(|p, pending, daemon, ext| async move {
        // Only a WebSocket connection carries a `WsConn`; an HTTP POST never approves.
        let conn = ext.get::<Arc<WsConn>>().cloned();
        watch(p, pending, daemon, conn).await
    })
}

async fn watch(
    p: SessionWatchParams,
    pending: PendingSubscriptionSink,
    daemon: Arc<Daemon>,
    conn: Option<Arc<WsConn>>,
) -> Result<(), SubscriptionError> {
    let approver = conn.as_ref().is_some_and(|c| c.is_approver());
    let watchers = daemon.sessions.services().watchers.clone();
    // Shutdown waits for this guard, so the sessions' last changes reach the client
    // before the connection is stopped.
    let _running = daemon.subscription_guard();
    // Counted before the answer: a request made once the client has its watch waits.
    let _approver = (p.approvals && approver).then(|| watchers.approver());
    // Before the answer too: every change after it reaches this watcher.
    let changes = watchers.subscribe();
    let Ok(sink) = pending.accept().await else {
        return Ok(());
    };
    let out = Outlet {
        sink: &sink,
        conn: conn.as_deref(),
    };
    forward(out, changes).await
}

async fn forward(out: Outlet<'_>, mut changes: WatchReceiver) -> Result<(), SubscriptionError> {
    let sink = out.sink;
    loop {
        let received = tokio::select! {
            received = changes.recv() => received,
            () = sink.closed() => return Ok(()),
        };
        match received {
            Ok(change) => {
                if out.send(change.as_ref().to_owned()).await.is_err() {
                    return Ok(());
                }
            }
            Err(WatchEnd::Lagged) => {
                tracing::warn!("dropping a session watcher that cannot keep up");
                return Err(close(
                    CloseCode::Lagged,
                    "watcher fell too far behind and was dropped; call session/watch again, \
                     then session/list",
                ));
            }
            Err(WatchEnd::Closed) => {
                return Err(close(CloseCode::SessionClosed, "the daemon is stopping"));
            }
        }
    }
}

/// The error object sent as the watch's last notification.
fn close(code: CloseCode, message: &str) -> SubscriptionError {
    let reason = SubscriptionClosed {
        code,
        // A watch spans sessions: there is no seq to resume after.
        last_seq: 0,
        message: message.to_owned(),
    };
    match serde_json::value::to_raw_value(&reason) {
        Ok(raw) => SubscriptionError::from_json(raw),
        Err(_) => SubscriptionError::from(reason.message),
    }
}
