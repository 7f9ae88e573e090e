//! `session/subscribe`: replay after `afterSeq`, then `synced`, then live events.
//!
//! One forwarding task per subscription reads the session's broadcast. A subscriber that
//! falls a whole buffer behind is ended with a close reason naming the last seq it got,
//! so it can resubscribe with `afterSeq` and lose nothing durable.

use std::sync::Arc;

use amber_proto::{CloseCode, EventKind, SessionSubscribeParams, SubscriptionClosed, methods};
use jsonrpsee::core::SubscriptionError;
use jsonrpsee::{PendingSubscriptionSink, SubscriptionMessage, SubscriptionSink};

use super::gate::WsConn;
use super::table::MethodTable;
use crate::clock::now_rfc3339;
use crate::daemon::Daemon;
use crate::session::SessionShared;
use crate::session::hub::{End, Subscription, WireEvent};

pub(super) fn register(m: &mut MethodTable) -> Result<(), jsonrpsee::core::RegisterMethodError> {
    m.subscription::<methods::SessionSubscribe, _, _>(|p, pending, daemon, ext| async move {
        let conn = ext.get::<Arc<WsConn>>().cloned();
        subscribe(p, pending, daemon, conn).await
    })
}

async fn subscribe(
    p: SessionSubscribeParams,
    pending: PendingSubscriptionSink,
    daemon: Arc<Daemon>,
    conn: Option<Arc<WsConn>>,
) -> Result<(), SubscriptionError> {
    let approver = conn.as_ref().is_some_and(|c| c.is_approver());
    let shared = match daemon.sessions.get(&p.session_id) {
        Ok(handle) => handle.shared.clone(),
        Err(err) => {
            pending.reject(err).await;
            return Ok(());
        }
    };
    // Shutdown waits for this guard, so the session's last events reach the client
    // before the connection is stopped.
    let _running = daemon.subscription_guard();
    // An approver watching the session can answer its approval requests.
    let _approver = approver.then(|| shared.approvals.approver());
    shared.touch();
    let subscription = shared.hub.subscribe(p.after_seq);
    let Ok(sink) = pending.accept().await else {
        return Ok(());
    };
    let out = Outlet {
        sink: &sink,
        conn: conn.as_deref(),
    };
    forward(out, &shared, subscription).await
}

/// Where a subscription's notifications go: the sink, counted among the connection's
/// unread bytes (a notification waits until it fits; see `unread.rs`).
#[derive(Clone, Copy)]
pub(super) struct Outlet<'a> {
    pub sink: &'a SubscriptionSink,
    pub conn: Option<&'a WsConn>,
}

/// What jsonrpsee wraps around a notification's result (`{"jsonrpc":"2.0","method":…,
/// "params":{"subscription":…,"result":…}}`), at most.
const NOTIFICATION_ENVELOPE: u64 = 192;

impl Outlet<'_> {
    /// Sends `raw`, once it fits; `Err` when the subscription is gone.
    pub(super) async fn send(self, raw: Box<serde_json::value::RawValue>) -> Result<(), ()> {
        if let Some(conn) = self.conn {
            let len = raw.get().len() as u64 + NOTIFICATION_ENVELOPE;
            tokio::select! {
                () = conn.unread.take(len) => {}
                () = self.sink.closed() => return Err(()),
            }
        }
        self.sink
            .send(SubscriptionMessage::from(raw))
            .await
            .map_err(|_| ())
    }
}

async fn forward(
    out: Outlet<'_>,
    shared: &SessionShared,
    sub: Subscription,
) -> Result<(), SubscriptionError> {
    let sink = out.sink;
    let Subscription {
        replay,
        last_seq,
        in_progress,
        mut live,
    } = sub;
    let mut delivered = last_seq;
    for event in replay {
        if send(out, &event).await.is_err() {
            return Ok(());
        }
    }
    if send(out, &synced_event(shared, last_seq, in_progress))
        .await
        .is_err()
    {
        return Ok(());
    }
    loop {
        let received = tokio::select! {
            received = live.recv() => received,
            () = sink.closed() => return Ok(()),
        };
        match received {
            Ok(event) => {
                if send(out, &event).await.is_err() {
                    return Ok(());
                }
                if let Some(seq) = event.seq {
                    delivered = seq;
                }
            }
            Err(End::Lagged) => {
                tracing::warn!(session = %shared.id, "dropping a subscriber that cannot keep up");
                let message = format!(
                    "subscriber fell too far behind and was dropped; resubscribe with afterSeq={delivered}"
                );
                return Err(close(CloseCode::Lagged, message, delivered));
            }
            Err(End::Closed) => {
                let message = "the session was deleted or the daemon is stopping";
                return Err(close(
                    CloseCode::SessionClosed,
                    message.to_owned(),
                    delivered,
                ));
            }
        }
    }
}

async fn send(out: Outlet<'_>, event: &WireEvent) -> Result<(), ()> {
    out.send(event.json.as_ref().to_owned()).await
}

fn synced_event(
    shared: &SessionShared,
    last_seq: u64,
    in_progress: Vec<amber_proto::InProgressItem>,
) -> WireEvent {
    WireEvent::encode(
        &amber_proto::Event {
            seq: None,
            session_id: shared.id.clone(),
            turn_id: None,
            agent_id: None,
            time: now_rfc3339(),
            kind: EventKind::Synced {
                last_seq,
                in_progress,
            },
        },
        shared.hub.limits(),
    )
}

/// The error object sent as the subscription's last notification.
fn close(code: CloseCode, message: String, last_seq: u64) -> SubscriptionError {
    let reason = SubscriptionClosed {
        code,
        last_seq,
        message,
    };
    match serde_json::value::to_raw_value(&reason) {
        Ok(raw) => SubscriptionError::from_json(raw),
        Err(_) => SubscriptionError::from(reason.message),
    }
}
