//! Tests of `watch.rs` with real sessions (a manager without a store or an LLM): which
//! changes reach a watcher and with which info, the bounded fan-out, and approver watches
//! as the session gate sees them.

use std::time::Duration;

use amber_proto::{Decision, Mode, SessionNewParams, SessionState, ToolCall};
use serde_json::{Value, json};

use super::*;
use crate::session::SessionManager;
use crate::session::gate::SessionGate;
use crate::session::services::Services;
use amber_tools::gate::{Gate, GateCall, GateVerdict};

const WAIT: Duration = Duration::from_secs(10);

struct Setup {
    services: Arc<Services>,
    manager: SessionManager,
    _dir: tempfile::TempDir,
    workspace: tempfile::TempDir,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let services = Services::new(
        crate::config::Config::default(),
        &|_| None,
        dir.path().into(),
    )
    .unwrap();
    let services = Arc::new(services);
    Setup {
        manager: SessionManager::new(services.clone()),
        services,
        _dir: dir,
        workspace: tempfile::tempdir().unwrap(),
    }
}

impl Setup {
    fn watchers(&self) -> &Watchers {
        &self.services.watchers
    }

    fn new_session(&self) -> String {
        let params = SessionNewParams {
            cwd: self.workspace.path().display().to_string(),
            ..SessionNewParams::default()
        };
        self.manager.create(params).unwrap().session_id
    }
}

/// The next item, as JSON.
async fn next(rx: &mut WatchReceiver) -> Value {
    let change = tokio::time::timeout(WAIT, rx.recv())
        .await
        .unwrap()
        .unwrap();
    serde_json::from_str(change.get()).unwrap()
}

/// Whether an item is waiting now.
async fn nothing_waits(rx: &mut WatchReceiver) -> bool {
    tokio::time::timeout(Duration::from_millis(50), rx.recv())
        .await
        .is_err()
}

#[tokio::test]
async fn a_watcher_sees_creation_events_with_the_info_after_them_and_the_deletion() {
    let s = setup();
    let mut rx = s.watchers().subscribe();
    let id = s.new_session();
    let created = next(&mut rx).await;
    assert_eq!(created["change"], "updated", "{created}");
    assert_eq!(created["session"]["sessionId"], id.as_str());
    assert_eq!(created["session"]["state"], "idle");
    assert!(created.get("event").is_none(), "{created}");

    let shared = s.manager.get(&id).unwrap().shared.clone();
    shared.set_mode(Mode::Read);
    let mode = next(&mut rx).await;
    assert_eq!(mode["session"]["mode"], "read", "{mode}");
    assert!(mode.get("event").is_none(), "{mode}");

    // No endpoint is configured: the turn ends at once with an error, which is enough.
    s.manager.prompt(&id, "first line\nsecond".into()).unwrap();
    let queued = next(&mut rx).await;
    assert_eq!(queued["event"]["type"], "prompt_queued", "{queued}");
    assert_eq!(queued["session"]["state"], "running", "{queued}");
    assert_eq!(
        queued["session"]["title"], "first line",
        "titled with it: {queued}"
    );
    let started = next(&mut rx).await;
    assert_eq!(started["event"]["type"], "turn_started", "{started}");
    assert_eq!(started["session"]["state"], "running");
    let completed = next(&mut rx).await;
    assert_eq!(completed["event"]["type"], "turn_completed", "{completed}");
    assert_eq!(
        completed["session"]["state"], "idle",
        "the last turn ended: {completed}"
    );
    assert!(completed["event"]["seq"].as_u64() > started["event"]["seq"].as_u64());

    // Deltas and events a console does not need are not sent; nor is a fork's copied history.
    shared.hub.publish(
        None,
        amber_proto::EventKind::MessageDelta {
            item_id: "i".into(),
            delta: "x".into(),
        },
    );
    shared
        .hub
        .publish(None, amber_proto::EventKind::TodoUpdated { todos: vec![] });
    let mut copy: amber_proto::Event = serde_json::from_value(started["event"].clone()).unwrap();
    copy.seq = None;
    shared.hub.publish_copy(copy);
    assert!(nothing_waits(&mut rx).await);

    s.manager.delete(&id).await.unwrap();
    let deleted = next(&mut rx).await;
    assert_eq!(deleted["change"], "deleted", "{deleted}");
    assert_eq!(deleted["session"]["sessionId"], id.as_str());
    // Nothing of it after its deletion.
    shared.hub.publish(
        None,
        amber_proto::EventKind::TurnStarted { prompt: "p".into() },
    );
    shared.hub.notify_watchers(SessionChangeKind::Updated);
    assert!(nothing_waits(&mut rx).await);
}

#[tokio::test]
async fn a_watcher_that_falls_a_ring_behind_is_cut_off_and_one_that_keeps_up_is_not() {
    let watchers = Watchers::new(16, WireLimits::default());
    let mut slow = watchers.subscribe();
    let mut keeping_up = watchers.subscribe();
    let info: SessionInfo = serde_json::from_value(json!({
        "sessionId": "s", "cwd": "/w", "mode": "write", "model": "m", "title": "",
        "state": "idle", "createdAt": "1", "updatedAt": "1",
        "usage": {"promptTokens": 0, "completionTokens": 0, "cachedTokens": 0, "totalTokens": 0}
    }))
    .unwrap();
    for _ in 0..40 {
        watchers.send(SessionChangeKind::Updated, &info, None);
        keeping_up.recv().await.unwrap();
    }
    assert_eq!(slow.recv().await.unwrap_err(), WatchEnd::Lagged);

    // At shutdown what was sent is still delivered, then the stream ends.
    watchers.send(SessionChangeKind::Deleted, &info, None);
    watchers.close();
    assert!(keeping_up.recv().await.is_ok());
    assert_eq!(keeping_up.recv().await.unwrap_err(), WatchEnd::Closed);
}

#[test]
fn without_watchers_nothing_is_built_or_kept() {
    let watchers = Watchers::new(16, WireLimits::default());
    assert!(!watchers.watched());
    let rx = watchers.subscribe();
    assert!(watchers.watched());
    drop(rx);
    assert!(!watchers.watched());
}

/// Asks the session's gate about `rm -rf build` (a destructive command: it asks) in a task.
fn ask_rm(s: &Setup, id: &str) -> (tokio::task::JoinHandle<GateVerdict>, Arc<SessionShared>) {
    let shared = s.manager.get(id).unwrap().shared.clone();
    let services = s.services.clone();
    let asking = shared.clone();
    let task = tokio::spawn(async move {
        let cancel = tokio_util::sync::CancellationToken::new();
        let gate = SessionGate {
            shared: &asking,
            services: &services,
            turn_id: "t",
            cancel: &cancel,
            mode_ceiling: None,
        };
        let args = json!({"command": "rm -rf build"});
        let call = ToolCall {
            id: "call_rm".into(),
            name: "bash".into(),
            arguments: args.to_string(),
        };
        gate.check(GateCall {
            call: &call,
            tool: &amber_tools::bash::BashTool,
            args: &args,
        })
        .await
    });
    (task, shared)
}

async fn until_waiting(shared: &SessionShared) {
    tokio::time::timeout(WAIT, async {
        while shared.approvals.pending().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn an_approver_watch_keeps_a_request_waiting_and_its_end_denies_it() {
    let s = setup();
    let id = s.new_session();
    let mut rx = s.watchers().subscribe();
    let approver = s.watchers().approver();
    let (task, shared) = ask_rm(&s, &id);
    until_waiting(&shared).await;
    let asked = next(&mut rx).await;
    assert_eq!(asked["event"]["type"], "approval_requested", "{asked}");
    assert_eq!(
        asked["session"]["state"], "waiting_approval",
        "the state changed before the event: {asked}"
    );
    assert_eq!(shared.state(), SessionState::WaitingApproval);

    drop(approver);
    let verdict = tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
    assert!(
        matches!(&verdict, GateVerdict::Deny(reason) if reason.contains("last approver")),
        "{verdict:?}"
    );
    let resolved = next(&mut rx).await;
    assert_eq!(resolved["event"]["type"], "approval_resolved", "{resolved}");
    assert_eq!(resolved["event"]["by"], "no_approver");
    assert_eq!(resolved["session"]["state"], "running", "{resolved}");
}

#[tokio::test]
async fn an_approver_watch_can_answer_and_without_one_the_request_is_denied_at_once() {
    let s = setup();
    let id = s.new_session();
    let approver = s.watchers().approver();
    let (task, shared) = ask_rm(&s, &id);
    until_waiting(&shared).await;
    let request = shared.approvals.pending()[0].request_id.clone();
    assert!(
        shared
            .approvals
            .respond(&request, Decision::AllowOnce, None)
            .unwrap()
    );
    let verdict = tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
    assert_eq!(verdict, GateVerdict::Allow);
    drop(approver);

    // A watcher without the approver count is no approver.
    let mut rx = s.watchers().subscribe();
    let (task, shared) = ask_rm(&s, &id);
    let verdict = tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
    assert!(
        matches!(&verdict, GateVerdict::Deny(reason) if reason.contains("no approver")),
        "{verdict:?}"
    );
    assert!(shared.approvals.pending().is_empty());
    let asked = next(&mut rx).await;
    assert_eq!(asked["event"]["type"], "approval_requested");
    let resolved = next(&mut rx).await;
    assert_eq!(resolved["event"]["by"], "no_approver", "{resolved}");
}
