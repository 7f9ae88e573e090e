//! End-to-end: `session/watch` over a real daemon — a watcher hears of sessions created,
//! their turns (with the state after each change: `idle` at the last `turn_completed`) and
//! their deletion, without subscribing to any of them; an approver watch keeps an approval
//! request of a session nobody subscribed to waiting (`waiting_approval`) and answers it,
//! while a watch without approvals, or from a connection that is no approver, leaves it
//! denied `no_approver` at once; an approver watch that disconnects while a request waits
//! leaves it denied.

use std::time::Duration;

use amber_client::{Client, SessionWatchStream};
use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::{Decision, EventKind, Mode, SessionChange, SessionChangeKind, SessionState};
use amber_tests::TestDaemon;
use amber_tests::steps::{connect, done, new_session, spawn, within};
use amber_tests::tool_calls::{bash, connect_approver, get_raw, respond};
use futures::StreamExt;

/// The changes a console may be told of; anything else (a delta) must never come.
const WATCHED: &[&str] = &[
    "prompt_queued",
    "turn_started",
    "approval_requested",
    "approval_resolved",
    "turn_completed",
    "usage",
    "rewound",
];

struct Watch {
    stream: SessionWatchStream,
}

impl Watch {
    async fn start(client: &Client, approvals: bool) -> Watch {
        let stream = within("session/watch", client.watch_sessions(approvals))
            .await
            .expect("session/watch");
        Watch { stream }
    }

    /// The next change of any session.
    async fn next(&mut self) -> SessionChange {
        match within("the next session change", self.stream.next()).await {
            Some(Ok(change)) => {
                if let Some(event) = &change.event {
                    let ty = event.kind.type_name();
                    assert!(WATCHED.contains(&ty), "a watcher got `{ty}`: {change:?}");
                    assert_eq!(event.session_id, change.session.session_id);
                    assert!(event.seq.is_some(), "only durable events: {change:?}");
                }
                change
            }
            Some(Err(err)) => panic!("the watch ended: {err}"),
            None => panic!("the watch stream ended"),
        }
    }

    /// The changes of `session` up to and including the first that `last` accepts; other
    /// sessions' changes are skipped.
    async fn until(
        &mut self,
        session: &str,
        last: impl Fn(&SessionChange) -> bool,
    ) -> Vec<SessionChange> {
        let mut seen = Vec::new();
        loop {
            let change = self.next().await;
            if change.session.session_id != session {
                continue;
            }
            let done = last(&change);
            seen.push(change);
            if done {
                return seen;
            }
        }
    }

    /// The changes of `session` up to its next change caused by an event of type `ty`.
    async fn until_event(&mut self, session: &str, ty: &str) -> Vec<SessionChange> {
        self.until(session, |c| event_type(c) == Some(ty)).await
    }
}

fn event_type(change: &SessionChange) -> Option<&'static str> {
    change.event.as_ref().map(|e| e.kind.type_name())
}

/// `rm -rf build` (destructive: it asks in write mode), then a reply and the confirm.
fn rm_script() -> Vec<MockTurn> {
    vec![
        bash("call_rm", "rm -rf build"),
        MockTurn::text("Handled build."),
        done(),
    ]
}

/// A write-mode session with a `build` directory to remove; prompted by `client`.
async fn prompt_rm(client: &Client, daemon: &TestDaemon) -> String {
    std::fs::create_dir_all(daemon.workspace.join("build/obj")).unwrap();
    let sid = new_session(client, daemon, Some(Mode::Write)).await;
    within(
        "session/prompt",
        client.session_prompt(&sid, "remove build"),
    )
    .await
    .expect("session/prompt");
    sid
}

/// The `requestId` of an `approval_requested` change.
fn request_of(change: &SessionChange) -> String {
    match change.event.as_ref().map(|e| &e.kind) {
        Some(EventKind::ApprovalRequested(amber_proto::Approval { request_id, .. })) => {
            request_id.clone()
        }
        _ => panic!("not an approval request: {change:?}"),
    }
}

/// The `by` of an `approval_resolved` change, as on the wire.
fn resolved_by(change: &SessionChange) -> String {
    let event = change.event.as_ref().expect("an event");
    let json = serde_json::to_value(event).unwrap();
    assert_eq!(json["type"], "approval_resolved", "{json}");
    json["by"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_watcher_sees_sessions_created_their_turns_and_their_deletion() {
    let mock = MockLlm::start(vec![MockTurn::text("Hello there."), done()]).await;
    let daemon = spawn(&mock);
    let watcher = connect(&daemon).await;
    let mut watch = Watch::start(&watcher, false).await;
    // Watch first, then list: nothing yet.
    assert!(watcher.session_list_all().await.unwrap().is_empty());

    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let created = watch.next().await;
    assert_eq!(created.change, SessionChangeKind::Updated);
    assert_eq!(created.session.session_id, sid);
    assert_eq!(created.session.state, SessionState::Idle);
    assert!(created.event.is_none(), "{created:?}");

    within(
        "session/prompt",
        client.session_prompt(&sid, "say hello\nand nothing else"),
    )
    .await
    .unwrap();
    let turn = watch.until_event(&sid, "turn_completed").await;
    let types: Vec<_> = turn.iter().filter_map(event_type).collect();
    let position = |ty: &str| {
        types
            .iter()
            .position(|t| *t == ty)
            .unwrap_or_else(|| panic!("no {ty}: {types:?}"))
    };
    assert!(
        position("prompt_queued") < position("turn_started"),
        "{types:?}"
    );
    assert_eq!(types.last(), Some(&"turn_completed"));
    for change in &turn[..turn.len() - 1] {
        assert_eq!(change.session.state, SessionState::Running, "{change:?}");
    }
    let last = turn.last().unwrap();
    assert_eq!(
        last.session.state,
        SessionState::Idle,
        "the last turn ended: {last:?}"
    );
    assert_eq!(
        turn[0].session.title, "say hello",
        "titled by its first prompt"
    );
    // The event is the one session/subscribe sends: durable seqs, rising.
    let seqs: Vec<u64> = turn
        .iter()
        .filter_map(|c| c.event.as_ref().and_then(|e| e.seq))
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    // What the list says now is what the last change said.
    let listed = watcher.session_list_all().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state, SessionState::Idle);
    assert_eq!(listed[0].usage, last.session.usage);

    within("session/delete", client.session_delete(&sid))
        .await
        .unwrap();
    let deleted = watch.until(&sid, |_| true).await;
    assert_eq!(deleted[0].change, SessionChangeKind::Deleted, "{deleted:?}");

    // Unwatching ends it; the connection stays usable.
    within("session/unwatch", watch.stream.unsubscribe())
        .await
        .unwrap();
    watcher.daemon_status().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approver_watch_keeps_a_request_of_an_unsubscribed_session_waiting_and_answers_it() {
    let mock = MockLlm::start(rm_script()).await;
    let daemon = spawn(&mock);
    let approver = connect_approver(&daemon).await;
    let mut watch = Watch::start(&approver, true).await;
    let client = connect(&daemon).await;
    // A first session, idle: the request comes from the second.
    let _first = new_session(&client, &daemon, Some(Mode::Write)).await;
    let sid = prompt_rm(&client, &daemon).await;

    let asked = watch.until_event(&sid, "approval_requested").await;
    let asked = asked.last().unwrap();
    assert_eq!(
        asked.session.state,
        SessionState::WaitingApproval,
        "{asked:?}"
    );
    // Still waiting a while later: nobody is subscribed, but the watch approves.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got = get_raw(&client, &sid).await;
    assert_eq!(got["session"]["state"], "waiting_approval", "{got}");
    assert_eq!(
        got["pendingApprovals"].as_array().unwrap().len(),
        1,
        "{got}"
    );
    assert!(
        daemon.workspace.join("build").exists(),
        "ran before approval"
    );

    // The watcher's connection answers, as any approver does.
    let rid = request_of(asked);
    assert!(
        respond(&approver, &sid, &rid, Decision::AllowOnce)
            .await
            .unwrap()
    );
    let rest = watch.until_event(&sid, "turn_completed").await;
    let resolved = rest
        .iter()
        .find(|c| event_type(c) == Some("approval_resolved"))
        .unwrap_or_else(|| panic!("no approval_resolved: {rest:?}"));
    assert_eq!(resolved_by(resolved), "client");
    assert_eq!(resolved.session.state, SessionState::Running);
    assert_eq!(rest.last().unwrap().session.state, SessionState::Idle);
    assert!(
        !daemon.workspace.join("build").exists(),
        "the approved command ran"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_watch_without_approvals_or_from_a_non_approver_is_no_approver() {
    let mut script = rm_script();
    script.extend(rm_script());
    let mock = MockLlm::start(script).await;
    let daemon = spawn(&mock);
    // An approver connection watching without approvals, and a plain connection asking
    // for them: neither approves.
    let approver = connect_approver(&daemon).await;
    let mut without = Watch::start(&approver, false).await;
    let plain = connect(&daemon).await;
    let _asking = Watch::start(&plain, true).await;

    for round in 0..2 {
        let sid = prompt_rm(&plain, &daemon).await;
        let changes = without.until_event(&sid, "approval_resolved").await;
        let asked = changes
            .iter()
            .find(|c| event_type(c) == Some("approval_requested"))
            .unwrap_or_else(|| panic!("round {round}: no approval_requested: {changes:?}"));
        assert_ne!(
            asked.session.state,
            SessionState::WaitingApproval,
            "round {round}: nobody could answer, so it never waited: {asked:?}"
        );
        assert_eq!(
            resolved_by(changes.last().unwrap()),
            "no_approver",
            "round {round}"
        );
        let end = without.until_event(&sid, "turn_completed").await;
        assert_eq!(end.last().unwrap().session.state, SessionState::Idle);
        assert!(
            daemon.workspace.join("build").exists(),
            "round {round}: the denied command did not run"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approver_watch_that_disconnects_while_a_request_waits_leaves_it_denied() {
    let mock = MockLlm::start(rm_script()).await;
    let daemon = spawn(&mock);
    let observer = connect(&daemon).await;
    let mut observing = Watch::start(&observer, false).await;
    let approver = connect_approver(&daemon).await;
    let approving = Watch::start(&approver, true).await;
    let sid = prompt_rm(&observer, &daemon).await;

    let asked = observing.until_event(&sid, "approval_requested").await;
    assert_eq!(
        asked.last().unwrap().session.state,
        SessionState::WaitingApproval
    );
    // The approver goes away (its connection closes).
    drop(approving);
    drop(approver);
    let resolved = observing.until_event(&sid, "approval_resolved").await;
    let resolved = resolved.last().unwrap();
    assert_eq!(resolved_by(resolved), "no_approver");
    assert_eq!(resolved.session.state, SessionState::Running);
    let end = observing.until_event(&sid, "turn_completed").await;
    assert_eq!(end.last().unwrap().session.state, SessionState::Idle);
    assert!(
        daemon.workspace.join("build").exists(),
        "the denied command did not run"
    );
}
