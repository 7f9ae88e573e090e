//! systemd notifications (sd_notify(3) via the `sd-notify` crate): `READY=1` once state is
//! loaded and the socket is served, `STOPPING=1` when shutdown begins, `WATCHDOG=1` at half
//! the watchdog interval. Every call is a no-op without `NOTIFY_SOCKET`, i.e. outside systemd.
//!
//! `NOTIFY_SOCKET` stays in the environment (the crate reads it on every send), so children
//! inherit it; the unit sets `NotifyAccess=main`, which makes systemd ignore anything a child
//! sends there. The watchdog variables are read once and removed before threads exist.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sd_notify::NotifyState;
use tokio_util::sync::CancellationToken;

/// What systemd asked of this process, read at start-up.
#[derive(Debug, Default)]
pub struct Notifier {
    /// `WATCHDOG_USEC`, when `WATCHDOG_PID` is ours or absent.
    watchdog: Option<Duration>,
    stopping_sent: AtomicBool,
}

impl Notifier {
    /// Reads `WATCHDOG_USEC` / `WATCHDOG_PID` and removes them, so a child (a bash command, an
    /// MCP server, another amberd) never believes the watchdog is meant for it.
    ///
    /// # Safety
    /// Edits the environment: call it while the process is single-threaded (before the
    /// tokio runtime starts).
    pub unsafe fn from_env() -> Notifier {
        // SAFETY: the caller guarantees no other thread reads or writes the environment.
        let watchdog = unsafe { sd_notify::watchdog_enabled_and_unset_env() };
        Notifier {
            watchdog: watchdog.filter(|d| !d.is_zero()),
            stopping_sent: AtomicBool::new(false),
        }
    }

    pub fn watchdog(&self) -> Option<Duration> {
        self.watchdog
    }

    /// `READY=1` with a human status line (`systemctl status` shows it).
    pub fn ready(&self, status: &str) {
        send(&[NotifyState::Ready, NotifyState::Status(status)]);
    }

    /// `STATUS=…` alone.
    pub fn status(&self, status: &str) {
        send(&[NotifyState::Status(status)]);
    }

    /// `STOPPING=1`, once: both the shutdown watcher and the end of `main` call it, whichever
    /// comes first sends it.
    pub fn stopping(&self, status: &str) {
        if !self.stopping_sent.swap(true, Ordering::SeqCst) {
            send(&[NotifyState::Stopping, NotifyState::Status(status)]);
        }
    }

    /// Pings `WATCHDOG=1` every half interval (sd_watchdog_enabled(3) advises sending well
    /// within it) until `stop` fires. The ping runs on the runtime, so a wedged runtime
    /// stops pinging and systemd restarts the daemon. Nothing is spawned without a watchdog.
    pub fn spawn_watchdog(self: &Arc<Self>, stop: CancellationToken) {
        let Some(interval) = self.watchdog.map(|d| d / 2) else {
            return;
        };
        tracing::info!(?interval, "systemd watchdog enabled");
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = ticks.tick() => send(&[NotifyState::Watchdog]),
                    () = stop.cancelled() => return,
                }
            }
        });
    }

    /// Sends `STOPPING=1` as soon as `shutdown` fires, wherever it was fired from (a signal,
    /// `daemon/shutdown`, idle exit).
    pub fn spawn_stopping_on(self: &Arc<Self>, shutdown: CancellationToken) {
        let notifier = self.clone();
        tokio::spawn(async move {
            shutdown.cancelled().await;
            notifier.stopping("stopping: persisting sessions");
        });
    }
}

fn send(states: &[NotifyState<'_>]) {
    if let Err(err) = sd_notify::notify(states) {
        // systemd going away must not take the daemon down; it is only worth a line.
        tracing::warn!(%err, "cannot notify the service manager");
    }
}
