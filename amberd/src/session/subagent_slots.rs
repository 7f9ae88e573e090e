//! How many sub-agents run at once in the daemon: `[agents] max_running` counts the
//! foreground sub-agents of every `task` call together with the background children that
//! run. A foreground sub-agent past the cap waits (its session is told: `subagent_queued`)
//! until one ends; background children queue in their own order (`features::
//! background_agents`), counting the foreground ones running here.

use std::sync::{Mutex, OnceLock};

use amber_proto::sync::Locked;
use tokio_util::sync::CancellationToken;

/// The daemon's count of foreground sub-agents running, and who waits for a slot.
#[derive(Default)]
pub(crate) struct SubagentSlots {
    foreground: Mutex<usize>,
    freed: tokio::sync::Notify,
    /// Run when a foreground sub-agent ends: background children may start then.
    on_freed: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

/// A running foreground sub-agent's slot; dropping it frees the slot.
pub(crate) struct Slot<'a> {
    slots: &'a SubagentSlots,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        {
            let mut running = self.slots.foreground.locked();
            *running = running.saturating_sub(1);
        }
        self.slots.freed();
        if let Some(on_freed) = self.slots.on_freed.get() {
            on_freed();
        }
    }
}

impl SubagentSlots {
    /// Foreground sub-agents running now.
    pub(crate) fn foreground(&self) -> usize {
        *self.foreground.locked()
    }

    /// A slot ended elsewhere (a background child): waiting sub-agents look again.
    pub(crate) fn freed(&self) {
        self.freed.notify_waiters();
    }

    /// Installs what runs when a foreground slot is freed (once).
    pub(crate) fn set_on_freed(&self, on_freed: Box<dyn Fn() + Send + Sync>) {
        let _ = self.on_freed.set(on_freed);
    }

    /// Takes a slot once fewer than `most` sub-agents run (`background()` counts the
    /// background ones); `queued` runs once if it has to wait. `None`: cancelled first.
    pub(crate) async fn enter(
        &self,
        most: usize,
        background: impl Fn() -> usize,
        cancel: &CancellationToken,
        queued: impl FnOnce(),
    ) -> Option<Slot<'_>> {
        let mut queued = Some(queued);
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            {
                let mut running = self.foreground.locked();
                if *running + background() < most.max(1) {
                    *running += 1;
                    return Some(Slot { slots: self });
                }
            }
            if let Some(queued) = queued.take() {
                queued();
            }
            tokio::select! {
                () = &mut freed => {}
                () = cancel.cancelled() => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn past_the_cap_a_sub_agent_waits_for_a_slot_and_says_so_once() {
        let slots = SubagentSlots::default();
        let cancel = CancellationToken::new();
        let first = slots.enter(2, || 1, &cancel, || panic!("queued")).await;
        assert!(first.is_some());
        assert_eq!(slots.foreground(), 1);
        // One foreground and one background run: the next waits.
        let told = std::sync::atomic::AtomicUsize::new(0);
        let tell = || {
            told.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        };
        let waiting = slots.enter(2, || 1, &cancel, tell);
        tokio::pin!(waiting);
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(50), &mut waiting)
                .await
                .is_err()
        );
        drop(first);
        let second = waiting.await;
        assert!(second.is_some());
        assert_eq!(told.load(std::sync::atomic::Ordering::SeqCst), 1);
        // A cancel ends the wait.
        let cancelled = CancellationToken::new();
        cancelled.cancel();
        assert!(slots.enter(1, || 0, &cancelled, || {}).await.is_none());
    }
}
