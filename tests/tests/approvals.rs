//! End-to-end: approvals over the socket — every approver sees the request, the first
//! answer wins and later ones get `accepted: false`; a client attaching while a request is
//! pending finds it in `session/get` and answers it; with no approver subscribed the call is
//! denied at once; only approver connections may answer.

use std::time::{Duration, Instant};

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::Decision;
use amber_tests::steps::{
    Events, connect, done, new_session, of_type, spawn, stop_reason, types, within,
};
use amber_tests::tool_calls::{
    bash, connect_approver, envelope_for, get_raw, next_approval, request_id, respond, result_of,
};
use serde_json::{Value, json};

fn rm_script() -> Vec<MockTurn> {
    vec![
        bash("call_rm", "rm -rf build"),
        MockTurn::text("Handled build."),
        done(),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn two_approvers_see_the_request_and_the_first_answer_wins() {
    let mock = MockLlm::start(rm_script()).await;
    let daemon = spawn(&mock);
    std::fs::create_dir_all(daemon.workspace.join("build/obj")).unwrap();
    let first = connect_approver(&daemon).await;
    let second = connect_approver(&daemon).await;
    let sid = new_session(&first, &daemon, None).await;
    let mut a = Events::live(&first, &sid).await;
    let mut b = Events::live(&second, &sid).await;

    first.session_prompt(&sid, "remove build").await.unwrap();
    let (before, asked_a) = next_approval(&mut a).await;
    let (_, asked_b) = next_approval(&mut b).await;
    assert!(
        of_type(&before, "tool_call_completed").is_empty(),
        "the call ran before it was approved: {before:#?}"
    );
    assert_eq!(asked_a, asked_b, "both approvers see the same request");
    // The call was announced (durably, lower seq) before its approval was requested.
    let started = before
        .iter()
        .find(|e| e["type"] == "tool_call_started" && e["callId"] == "call_rm")
        .unwrap_or_else(|| panic!("no tool_call_started before the approval: {before:#?}"));
    assert!(
        started["seq"].as_u64().unwrap() < asked_a["seq"].as_u64().unwrap(),
        "{started} / {asked_a}"
    );
    assert_eq!(asked_a["callId"], "call_rm");
    assert_eq!(asked_a["tool"], "bash");
    assert_eq!(asked_a["arguments"], json!({"command": "rm -rf build"}));
    assert!(asked_a["seq"].is_u64(), "approval_requested is durable");
    assert!(asked_a["turnId"].is_string(), "{asked_a}");
    let reason = asked_a["reason"].as_str().unwrap();
    assert!(!reason.is_empty(), "{asked_a}");
    let scope = asked_a["scope"].as_str().unwrap();
    assert!(
        scope.contains("rm"),
        "the scope names the program: {asked_a}"
    );
    let rid = request_id(&asked_a);
    assert!(
        daemon.workspace.join("build").exists(),
        "ran before approval"
    );

    // Pending: listed by session/get, and the session says so.
    let got = get_raw(&second, &sid).await;
    assert_eq!(got["session"]["state"], "waiting_approval", "{got}");
    let pending = got["pendingApprovals"].as_array().unwrap();
    assert_eq!(pending.len(), 1, "{got}");
    assert_eq!(pending[0]["requestId"], rid.as_str());
    assert_eq!(pending[0]["callId"], "call_rm");
    assert_eq!(pending[0]["tool"], "bash");
    assert_eq!(pending[0]["arguments"], asked_a["arguments"]);
    assert_eq!(pending[0]["reason"], asked_a["reason"]);
    assert_eq!(pending[0]["scope"], asked_a["scope"]);

    // First answer wins; the second is refused (not an error).
    assert!(
        respond(&first, &sid, &rid, Decision::AllowOnce)
            .await
            .unwrap()
    );
    assert!(!respond(&second, &sid, &rid, Decision::Deny).await.unwrap());

    let rest_a = within("the first approver's turn", a.turn()).await;
    let rest_b = within("the second approver's turn", b.turn()).await;
    for rest in [&rest_a, &rest_b] {
        let resolved = of_type(rest, "approval_resolved");
        assert_eq!(resolved.len(), 1, "{rest:#?}");
        assert_eq!(resolved[0]["requestId"], rid.as_str());
        assert_eq!(
            resolved[0]["decision"], "allow_once",
            "the first answer counts"
        );
        assert_eq!(resolved[0]["by"], "client");
        assert!(resolved[0]["seq"].is_u64());
        assert_eq!(stop_reason(rest), "end_turn", "{rest:#?}");
    }
    let kinds = types(&rest_a);
    let resolved_at = kinds
        .iter()
        .position(|t| *t == "approval_resolved")
        .unwrap();
    let completed_at = kinds
        .iter()
        .position(|t| *t == "tool_call_completed")
        .unwrap();
    assert!(resolved_at < completed_at, "{kinds:?}");
    assert_eq!(result_of(&rest_a, "call_rm").0, "ok");
    assert!(
        !daemon.workspace.join("build").exists(),
        "the approved command did not run"
    );
    assert_eq!(envelope_for(&mock, "call_rm")["status"], "ok");

    let after = get_raw(&first, &sid).await;
    assert_eq!(after["pendingApprovals"], json!([]));
    assert_eq!(after["session"]["state"], "idle");
    // Answering again after the fact: still refused, never an error.
    assert!(
        !respond(&first, &sid, &rid, Decision::AllowOnce)
            .await
            .unwrap()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_attaching_while_an_approval_is_pending_answers_it() {
    let mock = MockLlm::start(rm_script()).await;
    let daemon = spawn(&mock);
    std::fs::create_dir_all(daemon.workspace.join("build")).unwrap();
    // The first approver only watches: it keeps the request open, never answers.
    let watcher = connect_approver(&daemon).await;
    let sid = new_session(&watcher, &daemon, None).await;
    let mut watching = Events::live(&watcher, &sid).await;
    watcher.session_prompt(&sid, "remove build").await.unwrap();
    let (_, asked) = next_approval(&mut watching).await;
    let rid = request_id(&asked);

    // A plain client attaching sees the request but may not answer it.
    let plain = connect(&daemon).await;
    let got = get_raw(&plain, &sid).await;
    assert_eq!(got["session"]["state"], "waiting_approval");
    assert_eq!(got["pendingApprovals"][0]["requestId"], rid.as_str());
    let refused = respond(&plain, &sid, &rid, Decision::AllowOnce)
        .await
        .expect_err("a non-approver answered an approval");
    assert_eq!(refused.code(), Some(-32600), "{refused}");
    assert!(refused.to_string().contains("approver"), "{refused}");
    // A stateless HTTP POST is never an approver either.
    let http = daemon.rpc(
        "approval/respond",
        json!({"sessionId": sid, "requestId": rid, "decision": "allow_once"}),
    );
    assert!(http["error"]["code"].is_i64(), "{http}");
    assert!(
        daemon.workspace.join("build").exists(),
        "a refused answer let it run"
    );
    assert_eq!(
        get_raw(&plain, &sid).await["pendingApprovals"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "a refused answer resolved the request"
    );

    // An approver attaching: session/get, subscribe from lastSeq, answer.
    let late = connect_approver(&daemon).await;
    let got = get_raw(&late, &sid).await;
    let pending = got["pendingApprovals"].as_array().unwrap();
    assert_eq!(pending.len(), 1, "{got}");
    assert_eq!(pending[0]["tool"], "bash");
    let last_seq = got["lastSeq"].as_u64().unwrap();
    assert!(last_seq >= asked["seq"].as_u64().unwrap());
    let mut events = Events::subscribe(&late, &sid, Some(last_seq)).await;
    let synced = events.next().await;
    assert_eq!(
        synced["type"], "synced",
        "nothing newer to replay: {synced}"
    );
    let pending_id = pending[0]["requestId"].as_str().unwrap();
    assert!(
        respond(&late, &sid, pending_id, Decision::Deny)
            .await
            .unwrap()
    );

    let rest = events.turn().await;
    assert_eq!(stop_reason(&rest), "end_turn", "{rest:#?}");
    let resolved = of_type(&rest, "approval_resolved");
    assert_eq!(resolved.len(), 1, "{rest:#?}");
    assert_eq!(resolved[0]["decision"], "deny");
    assert_eq!(resolved[0]["by"], "client");
    assert!(
        of_type(&rest, "approval_requested").is_empty(),
        "no replay before lastSeq"
    );
    let (status, output) = result_of(&rest, "call_rm");
    assert_eq!(status, "denied", "{output}");
    assert!(daemon.workspace.join("build").exists(), "denied but ran");
    let seen = envelope_for(&mock, "call_rm");
    assert_eq!(seen["status"], "denied", "{seen}");
    assert!(
        seen["output"].as_str().unwrap().contains("denied"),
        "{seen}"
    );
    // The watcher saw the same resolution.
    let watched = watching.turn().await;
    assert_eq!(
        of_type(&watched, "approval_resolved")[0]["decision"],
        "deny"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_subscribed_approver_the_call_is_denied_at_once() {
    let mock = MockLlm::start(rm_script()).await;
    let daemon = spawn(&mock);
    std::fs::create_dir_all(daemon.workspace.join("build")).unwrap();
    let plain = connect(&daemon).await;
    // Connected as an approver but not subscribed: it approves nothing for the session.
    let idle_approver = connect_approver(&daemon).await;
    let sid = new_session(&plain, &daemon, None).await;
    let mut events = Events::live(&plain, &sid).await;

    let started = Instant::now();
    plain.session_prompt(&sid, "remove build").await.unwrap();
    let turn = events.turn().await;
    let took = started.elapsed();
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    assert!(took < Duration::from_secs(10), "the turn hung: {took:?}");
    let kinds = types(&turn);
    let asked_at = kinds
        .iter()
        .position(|t| *t == "approval_requested")
        .unwrap_or_else(|| panic!("no approval_requested: {kinds:?}"));
    assert_eq!(
        kinds[asked_at + 1],
        "approval_resolved",
        "resolved right away: {kinds:?}"
    );
    let asked = &turn[asked_at];
    let resolved = &turn[asked_at + 1];
    assert_eq!(resolved["requestId"], asked["requestId"]);
    assert_eq!(resolved["decision"], "deny");
    assert_eq!(resolved["by"], "no_approver");
    let (status, output) = result_of(&turn, "call_rm");
    assert_eq!(status, "denied", "{output}");
    assert!(
        daemon.workspace.join("build").exists(),
        "ran without approval"
    );
    let seen = envelope_for(&mock, "call_rm");
    assert_eq!(seen["status"], "denied");
    assert!(
        seen["output"].as_str().unwrap().contains("approver"),
        "the model is told why: {seen}"
    );
    let got = get_raw(&plain, &sid).await;
    assert_eq!(got["pendingApprovals"], json!([]));
    assert_eq!(got["session"]["state"], "idle");

    // The resolved request: an approver's late answer is refused, not an error.
    let rid = request_id(asked);
    assert!(
        !respond(&idle_approver, &sid, &rid, Decision::AllowOnce)
            .await
            .unwrap()
    );
    // An unknown request id, and an unknown session.
    let unknown = respond(&idle_approver, &sid, "apr_nope", Decision::AllowOnce)
        .await
        .expect_err("unknown request accepted");
    assert_eq!(unknown.code(), Some(-32005), "{unknown}");
    let no_session = respond(&idle_approver, "no-such-session", &rid, Decision::Deny)
        .await
        .expect_err("unknown session accepted");
    assert_eq!(no_session.code(), Some(-32001), "{no_session}");
    // A non-approver is refused whatever the request.
    let refused = respond(&plain, &sid, &rid, Decision::AllowOnce)
        .await
        .expect_err("a non-approver answered");
    assert_ne!(refused.code(), Some(-32005), "{refused}");
    assert!(refused.code().is_some(), "{refused}");
}

/// An approver that leaves while its request is pending: the request is denied by
/// `no_approver` and the turn goes on.
#[tokio::test(flavor = "multi_thread")]
async fn the_last_approver_leaving_denies_the_pending_request() {
    let mock = MockLlm::start(rm_script()).await;
    let daemon = spawn(&mock);
    std::fs::create_dir_all(daemon.workspace.join("build")).unwrap();
    let plain = connect(&daemon).await;
    let sid = new_session(&plain, &daemon, None).await;
    let mut events = Events::live(&plain, &sid).await;
    let approver = connect_approver(&daemon).await;
    let approving: Events = Events::live(&approver, &sid).await;
    plain.session_prompt(&sid, "remove build").await.unwrap();
    let (_, asked) = next_approval(&mut events).await;
    drop(approving);
    drop(approver);
    let rest: Vec<Value> = events.turn().await;
    let resolved = of_type(&rest, "approval_resolved");
    assert_eq!(resolved.len(), 1, "{rest:#?}");
    assert_eq!(resolved[0]["requestId"], asked["requestId"]);
    assert_eq!(resolved[0]["by"], "no_approver");
    assert_eq!(resolved[0]["decision"], "deny");
    assert_eq!(result_of(&rest, "call_rm").0, "denied");
    assert_eq!(stop_reason(&rest), "end_turn");
    assert!(daemon.workspace.join("build").exists());
}

/// A client answering the moment it sees `approval_requested` (as `amber-cli run --yes`
/// does) must find the request open: the request is registered before it is announced.
#[tokio::test(flavor = "multi_thread")]
async fn an_answer_sent_the_moment_the_request_arrives_is_accepted() {
    const ROUNDS: usize = 25;
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    let client = connect_approver(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    for round in 0..ROUNDS {
        let dir = format!("build{round}");
        std::fs::create_dir_all(daemon.workspace.join(&dir)).unwrap();
        let id = format!("call_{round}");
        mock.push([
            bash(&id, &format!("rm -rf {dir}")),
            MockTurn::text(format!("Removed {dir}.")),
            done(),
        ]);
        client.session_prompt(&sid, "remove it").await.unwrap();
        let (_, asked) = next_approval(&mut events).await;
        let answer = respond(&client, &sid, &request_id(&asked), Decision::AllowOnce).await;
        assert!(
            matches!(answer, Ok(true)),
            "round {round}: an immediate answer was not accepted: {answer:?}"
        );
        let rest = events.turn().await;
        assert_eq!(result_of(&rest, &id).0, "ok", "round {round}");
        assert!(!daemon.workspace.join(&dir).exists(), "round {round}");
    }
}
