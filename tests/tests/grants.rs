//! End-to-end: what an approval answer grants — `allow_session` covers the program's scope
//! inside the workspace for the rest of that session only, `allow_always` is persisted to
//! `.amber/rules.toml` and holds for new sessions; cancelling the turn or deleting the
//! session resolves a pending request as denied.

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::Decision;
use amber_tests::steps::{
    Events, FAST_RETRIES, done, new_session, of_type, spawn, spawn_config, stop_reason, within,
};
use amber_tests::tool_calls::{
    bash, call, calls, connect_approver, get_raw, next_approval, request_id, respond, result_of,
};
use serde_json::json;

fn dirs(daemon: &amber_tests::TestDaemon, names: &[&str]) {
    for name in names {
        std::fs::create_dir_all(daemon.workspace.join(name).join("sub")).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn allow_session_covers_the_program_inside_the_workspace_for_that_session() {
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    let mock = MockLlm::start(vec![
        bash("call_b2", "rm -rf build2"),
        bash("call_b3", "rm -rf build3"),
        bash("call_out", &format!("rm -rf {}", victim.display())),
        MockTurn::text("Cleaned what I could."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    dirs(&daemon, &["build2", "build3", "build4"]);
    let client = connect_approver(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    client.session_prompt(&sid, "clean up").await.unwrap();

    let (_, first) = next_approval(&mut events).await;
    assert_eq!(first["callId"], "call_b2");
    assert_eq!(first["scope"], "bash: rm", "{first}");
    let rid = request_id(&first);
    assert!(
        respond(&client, &sid, &rid, Decision::AllowSession)
            .await
            .unwrap()
    );

    // build3: covered by the grant, no new request. The outside path: asks anyway.
    let (between, outside_ask) = next_approval(&mut events).await;
    assert_eq!(
        outside_ask["callId"], "call_out",
        "rm -rf build3 asked again despite allow_session: {outside_ask}"
    );
    assert_eq!(result_of(&between, "call_b2").0, "ok");
    assert_eq!(result_of(&between, "call_b3").0, "ok");
    assert!(!daemon.workspace.join("build2").exists());
    assert!(!daemon.workspace.join("build3").exists());
    assert_ne!(
        outside_ask["scope"], "bash: rm",
        "an outside write is never grantable: {outside_ask}"
    );
    let rid = request_id(&outside_ask);
    assert!(respond(&client, &sid, &rid, Decision::Deny).await.unwrap());
    let rest = events.turn().await;
    assert_eq!(stop_reason(&rest), "end_turn", "{rest:#?}");
    assert_eq!(result_of(&rest, "call_out").0, "denied");
    assert!(victim.exists(), "the outside directory was removed");

    // A new session has no grants: it asks again.
    mock.push([
        bash("call_b4", "rm -rf build4"),
        MockTurn::text("Left build4 alone."),
        done(),
    ]);
    let other = new_session(&client, &daemon, None).await;
    let mut other_events = Events::live(&client, &other).await;
    client.session_prompt(&other, "clean build4").await.unwrap();
    let (_, again) = next_approval(&mut other_events).await;
    assert_eq!(again["callId"], "call_b4");
    let rid = request_id(&again);
    assert!(
        respond(&client, &other, &rid, Decision::Deny)
            .await
            .unwrap()
    );
    let rest = other_events.turn().await;
    assert_eq!(result_of(&rest, "call_b4").0, "denied");
    assert!(daemon.workspace.join("build4").exists());
    // allow_session wrote nothing to disk.
    assert!(!daemon.workspace.join(".amber/rules.toml").exists());
}

/// File tools are granted by folder: `allow_session` on `docs/a.md` covers `docs/` and its
/// subfolders (asked once per scope), for that session only.
#[tokio::test(flavor = "multi_thread")]
async fn allow_session_on_a_file_tool_covers_its_folder() {
    let ask_docs = "[[rules]]\ntool = \"write\"\npattern = \"docs/**\"\ndecision = \"ask\"\n";
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "f_a",
            "write",
            &json!({"path": "docs/a.md", "content": "a"}),
        )]),
        calls(vec![
            call(
                "f_b",
                "write",
                &json!({"path": "docs/sub/b.md", "content": "b"}),
            ),
            call(
                "f_c",
                "write",
                &json!({"path": "notes/c.md", "content": "c"}),
            ),
        ]),
        MockTurn::text("Wrote the docs."),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, &format!("{FAST_RETRIES}{ask_docs}"));
    let client = connect_approver(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    client.session_prompt(&sid, "write docs").await.unwrap();
    let (_, asked) = next_approval(&mut events).await;
    assert_eq!(asked["callId"], "f_a");
    assert_eq!(asked["scope"], "write: docs/", "{asked}");
    assert!(
        respond(&client, &sid, &request_id(&asked), Decision::AllowSession)
            .await
            .unwrap()
    );
    let rest = events.turn().await;
    assert!(
        of_type(&rest, "approval_requested").is_empty(),
        "asked again inside the granted folder: {rest:#?}"
    );
    for id in ["f_a", "f_b", "f_c"] {
        assert_eq!(result_of(&rest, id).0, "ok", "{id}");
    }
    assert!(daemon.workspace.join("docs/sub/b.md").is_file());

    // Another session asks again.
    mock.push([
        calls(vec![call(
            "f_d",
            "write",
            &json!({"path": "docs/d.md", "content": "d"}),
        )]),
        MockTurn::text("Not allowed."),
        done(),
    ]);
    let other = new_session(&client, &daemon, None).await;
    let mut other_events = Events::live(&client, &other).await;
    client.session_prompt(&other, "write d").await.unwrap();
    let (_, again) = next_approval(&mut other_events).await;
    assert_eq!(again["callId"], "f_d");
    assert!(
        respond(&client, &other, &request_id(&again), Decision::Deny)
            .await
            .unwrap()
    );
    let rest = other_events.turn().await;
    assert_eq!(result_of(&rest, "f_d").0, "denied");
    assert!(!daemon.workspace.join("docs/d.md").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn allow_always_is_stored_in_the_workspace_rules_and_holds_for_new_sessions() {
    let mock = MockLlm::start(vec![
        bash("call_b5", "rm -rf build5"),
        MockTurn::text("Removed build5."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    dirs(&daemon, &["build5", "build6"]);
    let client = connect_approver(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    client.session_prompt(&sid, "remove build5").await.unwrap();
    let (_, asked) = next_approval(&mut events).await;
    let rid = request_id(&asked);
    assert!(
        respond(&client, &sid, &rid, Decision::AllowAlways)
            .await
            .unwrap()
    );
    let rest = events.turn().await;
    let resolved = of_type(&rest, "approval_resolved");
    assert_eq!(resolved[0]["decision"], "allow_always");
    assert_eq!(resolved[0]["by"], "client");
    assert_eq!(result_of(&rest, "call_b5").0, "ok");
    assert!(!daemon.workspace.join("build5").exists());

    let stored = std::fs::read_to_string(daemon.workspace.join(".amber/rules.toml"))
        .expect("allow_always writes .amber/rules.toml");
    let parsed: toml_like::Rules = toml_like::parse(&stored);
    assert!(
        parsed
            .iter()
            .any(|r| r.tool == "bash" && r.pattern.starts_with("rm") && r.decision == "allow"),
        "no allow rule for rm in:\n{stored}"
    );

    // A new session runs it without asking.
    mock.push([
        bash("call_b6", "rm -rf build6"),
        MockTurn::text("Removed build6."),
        done(),
    ]);
    let other = new_session(&client, &daemon, None).await;
    let mut other_events = Events::live(&client, &other).await;
    client
        .session_prompt(&other, "remove build6")
        .await
        .unwrap();
    let rest = other_events.turn().await;
    assert!(
        of_type(&rest, "approval_requested").is_empty(),
        "asked despite the stored rule: {rest:#?}"
    );
    assert_eq!(result_of(&rest, "call_b6").0, "ok");
    assert!(!daemon.workspace.join("build6").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_the_turn_denies_the_pending_request() {
    let mock = MockLlm::start(vec![bash("call_rm", "rm -rf build")]).await;
    let daemon = spawn(&mock);
    dirs(&daemon, &["build"]);
    let client = connect_approver(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    client.session_prompt(&sid, "remove build").await.unwrap();
    let (_, asked) = next_approval(&mut events).await;
    let rid = request_id(&asked);

    assert!(
        within("session/cancel", client.session_cancel(&sid))
            .await
            .unwrap()
            .cancelled
    );
    let rest = events.turn().await;
    assert_eq!(stop_reason(&rest), "cancelled", "{rest:#?}");
    let resolved = of_type(&rest, "approval_resolved");
    assert_eq!(resolved.len(), 1, "{rest:#?}");
    assert_eq!(resolved[0]["requestId"], rid.as_str());
    assert_eq!(resolved[0]["decision"], "deny");
    assert_eq!(resolved[0]["by"], "policy");
    assert!(daemon.workspace.join("build").exists());
    assert_eq!(mock.request_count(), 1, "no LLM call after the cancel");
    let got = get_raw(&client, &sid).await;
    assert_eq!(got["pendingApprovals"], json!([]));
    assert_eq!(got["session"]["state"], "idle");
    // Too late to answer now.
    assert!(
        !respond(&client, &sid, &rid, Decision::AllowOnce)
            .await
            .unwrap()
    );
    assert!(daemon.workspace.join("build").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn deleting_the_session_resolves_the_pending_request() {
    let mock = MockLlm::start(vec![bash("call_rm", "rm -rf build")]).await;
    let daemon = spawn(&mock);
    dirs(&daemon, &["build"]);
    let client = connect_approver(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    client.session_prompt(&sid, "remove build").await.unwrap();
    let (_, asked) = next_approval(&mut events).await;

    within("session/delete", client.session_delete(&sid))
        .await
        .unwrap();
    let mut rest = Vec::new();
    while let Ok(event) = events.try_next().await {
        rest.push(event);
    }
    let resolved = of_type(&rest, "approval_resolved");
    assert_eq!(resolved.len(), 1, "{rest:#?}");
    assert_eq!(resolved[0]["requestId"], asked["requestId"]);
    assert_eq!(resolved[0]["decision"], "deny");
    assert!(daemon.workspace.join("build").exists());
    let gone = respond(&client, &sid, &request_id(&asked), Decision::AllowOnce)
        .await
        .expect_err("the session is gone");
    assert_eq!(gone.code(), Some(-32001), "{gone}");
    assert!(daemon.workspace.join("build").exists());
}

/// Just enough TOML reading for `[[rules]]` tables of `key = "value"` lines.
mod toml_like {
    pub(super) struct Rule {
        pub tool: String,
        pub pattern: String,
        pub decision: String,
    }
    pub(super) type Rules = Vec<Rule>;

    pub(super) fn parse(text: &str) -> Rules {
        let mut rules: Rules = Vec::new();
        for line in text.lines().map(str::trim) {
            if line == "[[rules]]" {
                rules.push(Rule {
                    tool: String::new(),
                    pattern: String::new(),
                    decision: String::new(),
                });
                continue;
            }
            let (Some(rule), Some((key, value))) = (rules.last_mut(), line.split_once('=')) else {
                continue;
            };
            let value = value
                .trim()
                .trim_matches(|c| c == '"' || c == '\'')
                .to_owned();
            match key.trim() {
                "tool" => rule.tool = value,
                "pattern" => rule.pattern = value,
                "decision" => rule.decision = value,
                _ => {}
            }
        }
        rules
    }
}
