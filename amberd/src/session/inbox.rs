//! A session's inbox: results from outside its turns (`agent::delivery`) wait here until
//! the loop takes them between two rounds. Each is taken once: the ids already in the
//! conversation (read back from the log at load) and the ids taken since are refused.
//!
//! **Invariant:** whether a result waits for a turn or wakes the session is decided under
//! the session's one lock, together with its turn and its queue: a result that arrives
//! while no turn runs and no prompt waits queues one wake prompt; one that arrives while
//! a turn runs is taken by its next round, or, when the turn ends first, wakes the session
//! then. So no result waits in an idle session.

use std::collections::HashSet;
use std::sync::Weak;

use crate::agent::delivery::Delivery;

use super::{PromptOptions, SessionHandle, SessionShared};

/// The prompt of a turn started to take results the session received while idle.
pub(crate) const WAKE_PROMPT: &str =
    "[amber] Results of background sub-agents arrived; they follow as task_wait results.";

/// What waits, and what was taken.
#[derive(Debug, Default)]
pub(super) struct Inbox {
    waiting: Vec<Delivery>,
    taken: HashSet<String>,
    /// A wake prompt is queued and its turn has not begun.
    wake_queued: bool,
}

impl Inbox {
    /// A turn began (under the session's lock): a wake prompt, if one was queued, is no
    /// longer waiting.
    pub(super) fn turn_began(&mut self) {
        self.wake_queued = false;
    }
}

/// The answer to an offered result.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Offer {
    /// Already taken or already waiting: dropped.
    Duplicate,
    /// A running or queued turn will take it.
    Waiting,
    /// The session is idle: a wake prompt was queued for it.
    Woken,
}

impl SessionShared {
    /// Ids already in the conversation when the session was loaded.
    pub(super) fn seed_delivered(&self, ids: impl IntoIterator<Item = String>) {
        self.lock_live().inbox.taken.extend(ids);
    }

    /// Whether result `id` was taken into the conversation.
    pub(crate) fn delivered(&self, id: &str) -> bool {
        self.lock_live().inbox.taken.contains(id)
    }

    /// Whether result `id` waits in the inbox or was taken into the conversation.
    pub(crate) fn holds(&self, id: &str) -> bool {
        let live = self.lock_live();
        live.inbox.taken.contains(id) || live.inbox.waiting.iter().any(|d| d.id == id)
    }

    /// Offers one result; wakes the session when nothing would take it.
    pub(crate) fn offer(&self, delivery: Delivery) -> Offer {
        let wake = {
            let mut live = self.lock_live();
            let inbox = &live.inbox;
            if inbox.taken.contains(&delivery.id)
                || inbox.waiting.iter().any(|d| d.id == delivery.id)
            {
                return Offer::Duplicate;
            }
            let idle = live.turn_id.is_none() && live.queued == 0;
            live.inbox.waiting.push(delivery);
            let wake = idle && !live.inbox.wake_queued;
            live.inbox.wake_queued |= wake;
            wake
        };
        if wake {
            self.wake();
            Offer::Woken
        } else {
            Offer::Waiting
        }
    }

    /// Takes every waiting result (the loop pushes them now).
    pub(crate) fn take_deliveries(&self) -> Vec<Delivery> {
        let mut live = self.lock_live();
        let taken = std::mem::take(&mut live.inbox.waiting);
        live.inbox.taken.extend(taken.iter().map(|d| d.id.clone()));
        taken
    }

    /// A turn ended: results that came after its last round wake the session, unless a
    /// queued prompt will take them.
    pub(super) fn inbox_turn_ended(&self) {
        let wake = {
            let mut live = self.lock_live();
            let wake = !live.inbox.waiting.is_empty()
                && live.turn_id.is_none()
                && live.queued == 0
                && !live.inbox.wake_queued;
            live.inbox.wake_queued |= wake;
            wake
        };
        if wake {
            self.wake();
        }
    }

    /// Installs how the session queues its wake prompt (once, when its handle is made).
    pub(super) fn set_waker(&self, handle: Weak<SessionHandle>) {
        let _ = self.waker.set(handle);
    }

    fn wake(&self) {
        let Some(handle) = self.waker.get().and_then(Weak::upgrade) else {
            return;
        };
        let turn_id = format!("turn_{}", uuid::Uuid::new_v4().simple());
        if let Err(err) =
            handle.queue_prompt(&turn_id, WAKE_PROMPT.to_owned(), PromptOptions::default())
        {
            tracing::warn!(session = %self.id, %err, "cannot queue the wake prompt");
            self.lock_live().inbox.wake_queued = false;
        }
    }
}
