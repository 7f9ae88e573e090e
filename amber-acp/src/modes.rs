//! amber's modes as ACP session modes, kept current: the mode told to the client per
//! followed session, and amberd's `session/watch`, through which a mode changed by another
//! client (the TUI, a `/mode` command, another editor) becomes a `current_mode_update`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use amber_client::Client;
use amber_proto::Mode;
use serde_json::{Value, json};

use super::Bridge;

/// What a followed session's client was last told of its mode.
#[derive(Debug, Default)]
pub(crate) struct Told {
    mode: Mode,
    /// How many of the session's changes the watch reported so far.
    watched: u64,
}

/// amber's modes as ACP's `SessionModeState`.
pub(crate) fn state(current: Mode) -> Value {
    json!({
        "currentModeId": current.as_str(),
        "availableModes": [
            {"id": "read", "name": "Read", "description": "Only read-only tools run"},
            {"id": "write", "name": "Write", "description": "File tools in the workspace and benign commands run; the rest asks"},
            {"id": "yolo", "name": "Yolo", "description": "Nothing asks; workspace confinement still holds"},
        ],
    })
}

/// `current_mode_update`.
pub(crate) fn update(mode: Mode) -> Value {
    json!({"sessionUpdate": "current_mode_update", "currentModeId": mode.as_str()})
}

impl Bridge {
    /// Starts following `session/watch` on `client` unless it runs, and returns when it is
    /// subscribed: called before a session is made or read, so no later mode change can
    /// slip past.
    pub(crate) async fn ensure_watch(self: &Arc<Self>, client: &Client) {
        if self.watching.swap(true, Ordering::SeqCst) {
            return;
        }
        match client.watch_sessions(false).await {
            Ok(changes) => {
                let bridge = self.clone();
                tokio::spawn(async move { bridge.watch_modes(changes).await });
            }
            Err(e) => {
                // The next session tries again.
                self.watching.store(false, Ordering::SeqCst);
                tracing::warn!(
                    "acp: session/watch: {e}; mode changes by other clients are not shown"
                );
            }
        }
    }

    /// Remembers the mode the client was told. A change made between reading the session
    /// and this (the watch passed it over: the session was not followed yet) is caught by
    /// reading the mode once more.
    pub(crate) async fn follow_mode(&self, client: &Client, session_id: &str, told: Mode) {
        let asked_at = self.modes.lock().ok().map(|mut modes| {
            let known = modes.entry(session_id.to_owned()).or_default();
            known.mode = told;
            known.watched
        });
        // The info with the newest message only: the smallest page amberd serves.
        match client.session_snapshot(session_id).await {
            // A change the watch reported since the snapshot was asked for is at least as
            // new as it: the snapshot would only tell an older mode again.
            Ok(now) if self.watched(session_id) == asked_at => {
                self.mode_seen(session_id, now.session.mode, false);
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(
                "acp: session/get {session_id}: {e}; a mode changed meanwhile is not shown"
            ),
        }
    }

    /// The client was told `mode` (by `session/set_mode`'s own update).
    pub(crate) fn mode_told(&self, session_id: &str, mode: Mode) {
        if let Ok(mut modes) = self.modes.lock() {
            modes.entry(session_id.to_owned()).or_default().mode = mode;
        }
    }

    /// A mode amberd reports for `session_id`: told to the client when it differs from
    /// what the client was last told.
    /// `watched`: reported by the watch (counted, so a snapshot asked for earlier defers).
    fn mode_seen(&self, session_id: &str, mode: Mode, watched: bool) {
        let changed =
            self.modes
                .lock()
                .ok()
                .is_some_and(|mut modes| match modes.get_mut(session_id) {
                    Some(known) => {
                        known.watched += u64::from(watched);
                        let changed = known.mode != mode;
                        known.mode = mode;
                        changed
                    }
                    None => false,
                });
        if changed {
            self.update(session_id, update(mode));
        }
    }

    /// Follows `session/watch`: a followed session whose mode changed elsewhere gets a
    /// `current_mode_update`. When the watch ends (amberd went away), the next session
    /// made or read starts it again.
    async fn watch_modes(self: Arc<Self>, mut changes: amber_client::SessionWatchStream) {
        use futures::StreamExt;
        while let Some(Ok(change)) = changes.next().await {
            self.mode_seen(&change.session.session_id, change.session.mode, true);
        }
        self.watching.store(false, Ordering::SeqCst);
    }

    /// How many changes of `session_id` the watch reported so far.
    fn watched(&self, session_id: &str) -> Option<u64> {
        let modes = self.modes.lock().ok()?;
        modes.get(session_id).map(|known| known.watched)
    }
}
