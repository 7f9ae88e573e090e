//! Pending approval requests of one session and the approvers watching it.
//!
//! **Invariants:** a request is answered at most once — the first `respond` wins and later
//! ones get `accepted: false`; a request nobody can answer is never opened (the caller
//! checks `has_approver` first, so a headless session never hangs); cancelling the turn or
//! deleting the session resolves every pending request as denied.
//!
//! Two counts make the session's approvers: approver connections subscribed to it, and the
//! daemon-wide count of `session/watch {approvals: true}` watches (`watch.rs`), which
//! approve for every session. `has_approver` and `no_approver_left` read both.

use amber_proto::sync::Locked;
use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use amber_proto::{Approval, Decision};
use tokio::sync::{oneshot, watch};

/// `approval/respond` named a request this session never had.
#[derive(Debug, thiserror::Error)]
#[error("approval request not found: {0}")]
pub struct UnknownRequest(pub String);

struct Pending {
    approval: Approval,
    answer: oneshot::Sender<Decision>,
}

#[derive(Default)]
struct Inner {
    pending: HashMap<String, Pending>,
    /// Requests already answered, in order of opening (for `accepted: false`).
    resolved: HashSet<String>,
    /// What the person who denied a request said about it, until its call takes it.
    feedback: HashMap<String, String>,
    /// The values an approver gave with an allowing answer to an MCP elicitation, until
    /// the asking server takes them.
    content: HashMap<String, serde_json::Value>,
    order: Vec<String>,
}

/// Approval requests and approvers of one session.
pub struct Approvals {
    inner: Mutex<Inner>,
    /// How many approver connections are subscribed to the session.
    approvers: watch::Sender<usize>,
    /// How many approver watches the daemon has: they approve for every session.
    everywhere: watch::Sender<usize>,
}

impl Default for Approvals {
    /// A session whose only approvers are its own subscribers.
    fn default() -> Self {
        Self::new(watch::Sender::new(0))
    }
}

impl Approvals {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every critical section leaves `Inner` consistent.
        self.inner.locked()
    }

    /// `everywhere`: the daemon-wide approver count (`Watchers::approvers`).
    pub fn new(everywhere: watch::Sender<usize>) -> Self {
        Self {
            inner: Mutex::default(),
            approvers: watch::Sender::new(0),
            everywhere,
        }
    }

    /// Counts an approver subscribed to this session while the guard lives.
    pub fn approver(&self) -> ApproverGuard {
        ApproverGuard::count(&self.approvers)
    }

    /// Whether anyone can answer a request now: an approver subscribed to this session or
    /// an approver watch of the daemon.
    pub fn has_approver(&self) -> bool {
        *self.approvers.borrow() > 0 || *self.everywhere.borrow() > 0
    }

    /// Resolves once no approver of either kind is left (at once if there is none).
    pub async fn no_approver_left(&self) {
        let mut here = self.approvers.subscribe();
        let mut everywhere = self.everywhere.subscribe();
        loop {
            // Read-and-mark both before waiting: a change after this wakes `changed`, so
            // the last approver leaving between the check and the wait is not missed.
            let none_here = *here.borrow_and_update() == 0;
            let none_everywhere = *everywhere.borrow_and_update() == 0;
            if none_here && none_everywhere {
                return;
            }
            // The senders live in `self`, so neither channel can close while we wait.
            let closed = tokio::select! {
                changed = here.changed() => changed.is_err(),
                changed = everywhere.changed() => changed.is_err(),
            };
            if closed {
                return;
            }
        }
    }

    /// Registers a request; the receiver yields the first answer.
    pub fn open(&self, approval: Approval) -> oneshot::Receiver<Decision> {
        let (answer, rx) = oneshot::channel();
        let mut inner = self.lock();
        inner.order.push(approval.request_id.clone());
        inner
            .pending
            .insert(approval.request_id.clone(), Pending { approval, answer });
        rx
    }

    /// The first answer wins (`Ok(true)`); a later one gets `Ok(false)`.
    pub fn respond(
        &self,
        request_id: &str,
        decision: Decision,
        feedback: Option<String>,
    ) -> Result<bool, UnknownRequest> {
        self.respond_with(request_id, decision, feedback, None)
    }

    /// [`Approvals::respond`] with the values of an MCP elicitation's form (kept only
    /// with an allowing decision, and only from the answer that wins).
    pub fn respond_with(
        &self,
        request_id: &str,
        decision: Decision,
        feedback: Option<String>,
        content: Option<serde_json::Value>,
    ) -> Result<bool, UnknownRequest> {
        let mut inner = self.lock();
        if let Some(pending) = inner.pending.remove(request_id) {
            inner.resolved.insert(request_id.to_owned());
            // Before the answer: the waiting call reads it as soon as it wakes.
            if let Some(feedback) = feedback.filter(|_| decision == Decision::Deny) {
                inner.feedback.insert(request_id.to_owned(), feedback);
            }
            if let Some(content) = content.filter(|_| decision != Decision::Deny) {
                inner.content.insert(request_id.to_owned(), content);
            }
            // The waiting turn may have just been cancelled; the answer is still "taken".
            let _ = pending.answer.send(decision);
            return Ok(true);
        }
        if inner.resolved.contains(request_id) {
            return Ok(false);
        }
        Err(UnknownRequest(request_id.to_owned()))
    }

    /// The form values given with an allowing answer to `request_id`, once.
    pub fn take_content(&self, request_id: &str) -> Option<serde_json::Value> {
        self.lock().content.remove(request_id)
    }

    /// What the person said when denying `request_id` (`approval/respond {feedback}`), once.
    pub fn take_feedback(&self, request_id: &str) -> Option<String> {
        self.lock().feedback.remove(request_id)
    }

    /// Marks a request resolved without an answer (cancelled turn, no approver).
    pub fn close(&self, request_id: &str) -> bool {
        let mut inner = self.lock();
        inner.resolved.insert(request_id.to_owned());
        inner.pending.remove(request_id).is_some()
    }

    /// Open requests, oldest first.
    pub fn pending(&self) -> Vec<Approval> {
        let inner = self.lock();
        inner
            .order
            .iter()
            .filter_map(|id| inner.pending.get(id).map(|p| p.approval.clone()))
            .collect()
    }
}

/// Keeps an approver counted.
pub struct ApproverGuard(watch::Sender<usize>);

impl ApproverGuard {
    /// Adds one to `count` until the guard drops.
    pub(crate) fn count(count: &watch::Sender<usize>) -> Self {
        count.send_modify(|n| *n += 1);
        Self(count.clone())
    }
}

impl Drop for ApproverGuard {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approval(id: &str) -> Approval {
        Approval {
            request_id: id.into(),
            call_id: "c".into(),
            tool: "bash".into(),
            arguments: serde_json::json!({"command": "rm -rf x"}),
            reason: "destructive".into(),
            scope: "bash: rm".into(),
            unsandboxed: false,
            person_only: false,
            mcp: None,
        }
    }

    #[test]
    fn the_first_answer_wins() {
        let a = Approvals::default();
        let mut rx = a.open(approval("r1"));
        assert_eq!(a.pending().len(), 1);
        assert!(a.respond("r1", Decision::Deny, None).unwrap());
        assert!(!a.respond("r1", Decision::AllowOnce, None).unwrap());
        assert_eq!(rx.try_recv().unwrap(), Decision::Deny);
        assert!(a.pending().is_empty());
        assert!(a.respond("nope", Decision::Deny, None).is_err());
    }

    #[test]
    fn a_denial_keeps_what_the_person_said_for_its_call_once() {
        let a = Approvals::default();
        // (the answer, the words given with it, what the call reads)
        let table = [
            (
                Decision::Deny,
                Some("use cargo nextest instead"),
                Some("use cargo nextest instead"),
            ),
            (Decision::Deny, None, None),
            // Words with an allow mean nothing: nothing was refused.
            (Decision::AllowOnce, Some("fine"), None),
        ];
        for (i, (decision, words, kept)) in table.into_iter().enumerate() {
            let id = format!("r{i}");
            let _rx = a.open(approval(&id));
            assert!(a.respond(&id, decision, words.map(str::to_owned)).unwrap());
            assert_eq!(a.take_feedback(&id).as_deref(), kept, "{decision:?}");
            assert_eq!(a.take_feedback(&id), None, "taken once");
        }
        // A later answer to a resolved request leaves no words behind.
        assert!(
            !a.respond("r0", Decision::Deny, Some("late".into()))
                .unwrap()
        );
        assert_eq!(a.take_feedback("r0"), None);
    }

    #[test]
    fn closing_resolves_without_an_answer() {
        let a = Approvals::default();
        let _rx = a.open(approval("r1"));
        assert!(a.close("r1"));
        assert!(!a.respond("r1", Decision::AllowOnce, None).unwrap());
    }

    #[test]
    fn approvers_are_counted_by_guard() {
        let a = Approvals::default();
        assert!(!a.has_approver());
        let g = a.approver();
        assert!(a.has_approver());
        drop(g);
        assert!(!a.has_approver());
    }

    #[tokio::test]
    async fn a_daemon_wide_approver_counts_until_both_counts_are_zero() {
        let everywhere = watch::Sender::new(0);
        let a = Approvals::new(everywhere.clone());
        let b = Approvals::new(everywhere.clone());
        let watch = ApproverGuard::count(&everywhere);
        assert!(
            a.has_approver() && b.has_approver(),
            "one watch approves everywhere"
        );
        let local = a.approver();
        drop(watch);
        assert!(a.has_approver(), "its own subscriber still approves for a");
        assert!(!b.has_approver(), "b had only the watch");
        // b's wait ends at once; a's only when its subscriber leaves too.
        tokio::time::timeout(std::time::Duration::from_secs(1), b.no_approver_left())
            .await
            .unwrap();
        let watch = ApproverGuard::count(&everywhere);
        let waiting = a.no_approver_left();
        tokio::pin!(waiting);
        let pending = futures::poll!(waiting.as_mut());
        assert!(pending.is_pending(), "two approvers left");
        drop(local);
        assert!(
            futures::poll!(waiting.as_mut()).is_pending(),
            "the watch is left"
        );
        drop(watch);
        tokio::time::timeout(std::time::Duration::from_secs(1), waiting)
            .await
            .unwrap();
    }
}
