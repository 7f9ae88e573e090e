//! Exit when idle (`[server] idle_exit_secs`), for socket activation only: with no client
//! connected, no turn running or waiting for an approval and no background process alive
//! for that long, and no routine due within that time (systemd's timer wakes the daemon for
//! later ones), the daemon shuts down exactly as on SIGTERM (sessions persisted, exit 0).
//! systemd keeps the listening socket, so the next client's connection starts it again.
//!
//! main only arms this when systemd handed over the socket: a daemon that bound the socket
//! itself would take it away on exit, and `--no-autostart` clients, scripts on curl and
//! anything else that expects the socket to be served would then find nothing there.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::daemon::Daemon;

/// When the daemon became idle, and whether it has been idle long enough. Pure: the
/// caller observes, the clock decides.
#[derive(Debug, Clone)]
pub struct IdleClock {
    after: Duration,
    since: Option<Instant>,
}

impl IdleClock {
    pub fn new(after: Duration) -> IdleClock {
        IdleClock { after, since: None }
    }

    /// Records one observation; true once the daemon has been idle for `after` without a
    /// busy observation in between.
    pub fn observe(&mut self, idle: bool, now: Instant) -> bool {
        if !idle {
            self.since = None;
            return false;
        }
        let since = *self.since.get_or_insert(now);
        now.duration_since(since) >= self.after
    }
}

/// Whether nothing would be cut short by exiting now.
pub fn is_idle(daemon: &Daemon) -> bool {
    daemon.connections() == 0 && daemon.sessions.busy() == 0
}

/// Polls [`is_idle`] and fires `daemon.shutdown` once the daemon has been idle for `after`.
/// A connection that arrives at that moment waits in the socket's backlog, which systemd
/// holds, and starts the next daemon.
pub fn spawn(daemon: Arc<Daemon>, after: Duration) {
    let every = (after / 4).clamp(Duration::from_millis(50), Duration::from_secs(5));
    tokio::spawn(async move {
        let mut clock = IdleClock::new(after);
        loop {
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                () = daemon.shutdown.cancelled() => return,
            }
            // A routine due before the daemon would be back anyway keeps it up.
            let routine_due = daemon
                .routines
                .due_within(&crate::routines::configured(&daemon), after.as_secs());
            if clock.observe(is_idle(&daemon) && !routine_due, Instant::now()) {
                tracing::info!(
                    idle_secs = after.as_secs(),
                    "idle: exiting; the systemd socket starts amberd again on the next connection"
                );
                daemon.shutdown.cancel();
                return;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fires_only_after_an_unbroken_idle_stretch() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut clock = IdleClock::new(s(10));
        assert!(!clock.observe(true, t0));
        assert!(!clock.observe(true, t0 + s(9)));
        // Busy once: the stretch starts over.
        assert!(!clock.observe(false, t0 + s(9)));
        assert!(!clock.observe(true, t0 + s(12)));
        assert!(!clock.observe(true, t0 + s(21)));
        assert!(clock.observe(true, t0 + s(22)));
    }
}
