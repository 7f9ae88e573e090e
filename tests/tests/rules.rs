//! End-to-end: stored rules through the daemon — config `[[rules]]` and the workspace's
//! `.amber/rules.toml` together, deny > ask > allow: a deny rule wins in every mode (yolo
//! included), an ask rule asks even where an allow rule matches, an allow rule lets an
//! otherwise-asking command run.

use std::path::Path;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::{Decision, Mode};
use amber_tests::steps::{
    Events, FAST_RETRIES, done, new_session, of_type, prompt_turn, run_bounded, spawn_config,
    stop_reason,
};
use amber_tests::tool_calls::{
    bash, call, calls, connect_approver, envelope_for, next_approval, put, request_id, respond,
    result_of,
};
use serde_json::json;

const RULES: &str = r#"
[[rules]]
tool = "bash"
pattern = "git*"
decision = "allow"

[[rules]]
tool = "bash"
pattern = "git push*"
decision = "ask"

[[rules]]
tool = "write"
pattern = "secrets/**"
decision = "deny"
"#;

/// The workspace's own rule: deny beats the config's `git*` allow.
const WORKSPACE_RULES: &str = r#"
[[rules]]
tool = "bash"
pattern = "git reset --hard*"
decision = "deny"
"#;

fn git(workspace: &Path, args: &[&str]) {
    let mut cmd = std::process::Command::new("git");
    cmd.args(args)
        .current_dir(workspace)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", workspace.parent().unwrap().join("home"));
    let (code, _, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(0), "git {args:?}: {stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn deny_beats_ask_beats_allow_across_config_and_workspace_rules() {
    let mock = MockLlm::start(vec![
        calls(vec![
            // Destructive (would ask), but the config allows `git*`.
            call("c_clean", "bash", &json!({"command": "git clean -f -q"})),
            // The workspace denies it although the config allows `git*`.
            call("c_reset", "bash", &json!({"command": "git reset --hard"})),
            // Denied by the config for write; another folder is fine.
            call(
                "c_secret",
                "write",
                &json!({"path": "secrets/key.txt", "content": "k"}),
            ),
            call(
                "c_public",
                "write",
                &json!({"path": "public/ok.txt", "content": "ok"}),
            ),
        ]),
        // `git push*` asks, though `git*` allows.
        bash("c_push", "git push origin main"),
        MockTurn::text("Some of it was refused."),
        done(),
    ])
    .await;
    let config = format!("{FAST_RETRIES}{RULES}");
    let daemon = spawn_config(&mock, &config);
    let ws = daemon.workspace.clone();
    git(&ws, &["init", "-q"]);
    put(&ws.join("junk.txt"), "untracked\n");
    put(&ws.join(".amber/rules.toml"), WORKSPACE_RULES);
    let client = connect_approver(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;

    client.session_prompt(&sid, "tidy the repo").await.unwrap();
    let (before, asked) = next_approval(&mut events).await;
    // Only the ask rule asked.
    assert_eq!(asked["callId"], "c_push", "{asked}");
    assert!(
        asked["reason"].as_str().unwrap().contains("git push"),
        "the reason names the rule: {asked}"
    );
    let (status, output) = result_of(&before, "c_clean");
    assert_eq!(status, "ok", "allowed by the config rule: {output}");
    assert!(!ws.join("junk.txt").exists(), "git clean did not run");
    let (status, output) = result_of(&before, "c_reset");
    assert_eq!(status, "denied", "{output}");
    assert!(
        output.contains("rule"),
        "the denial names the rule: {output}"
    );
    let (status, output) = result_of(&before, "c_secret");
    assert_eq!(status, "denied", "{output}");
    assert!(output.contains("secrets/**"), "{output}");
    assert!(!ws.join("secrets").exists());
    assert_eq!(result_of(&before, "c_public").0, "ok");
    assert_eq!(
        std::fs::read_to_string(ws.join("public/ok.txt")).unwrap(),
        "ok"
    );

    assert!(
        respond(&client, &sid, &request_id(&asked), Decision::Deny)
            .await
            .unwrap()
    );
    let rest = events.turn().await;
    assert_eq!(stop_reason(&rest), "end_turn", "{rest:#?}");
    assert_eq!(result_of(&rest, "c_push").0, "denied");
    assert_eq!(envelope_for(&mock, "c_reset")["status"], "denied");
    assert_eq!(envelope_for(&mock, "c_secret")["status"], "denied");
    // Rule denials are decided without asking: the push was the only request.
    assert!(of_type(&before, "approval_requested").is_empty());
    assert!(of_type(&rest, "approval_requested").is_empty(), "{rest:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn deny_rules_hold_in_yolo_where_nothing_asks() {
    let mock = MockLlm::start(vec![
        calls(vec![
            call(
                "y_secret",
                "write",
                &json!({"path": "secrets/nested/key.txt", "content": "k"}),
            ),
            call("y_reset", "bash", &json!({"command": "git reset --hard"})),
            call(
                "y_push",
                "bash",
                &json!({"command": "git push origin main"}),
            ),
            call("y_rm", "bash", &json!({"command": "rm -rf build"})),
        ]),
        MockTurn::text("Yolo, within the rules."),
        done(),
    ])
    .await;
    let config = format!("{FAST_RETRIES}{RULES}");
    let daemon = spawn_config(&mock, &config);
    let ws = daemon.workspace.clone();
    git(&ws, &["init", "-q"]);
    put(&ws.join(".amber/rules.toml"), WORKSPACE_RULES);
    std::fs::create_dir_all(ws.join("build")).unwrap();
    let client = connect_approver(&daemon).await;
    let sid = new_session(&client, &daemon, Some(Mode::Yolo)).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "go").await;

    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    assert!(
        of_type(&turn, "approval_requested").is_empty(),
        "yolo asked: {turn:#?}"
    );
    assert_eq!(result_of(&turn, "y_secret").0, "denied");
    assert!(!ws.join("secrets").exists());
    assert_eq!(result_of(&turn, "y_reset").0, "denied");
    // The ask rule does not ask in yolo: the push runs (and fails: there is no remote).
    assert_ne!(result_of(&turn, "y_push").0, "denied");
    assert_eq!(result_of(&turn, "y_rm").0, "ok");
    assert!(!ws.join("build").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workspace_rules_file_edited_while_the_daemon_runs_is_applied() {
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "w_note",
            "write",
            &json!({"path": "drafts/a.txt", "content": "a"}),
        )]),
        MockTurn::text("Wrote the draft."),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, FAST_RETRIES);
    let ws = daemon.workspace.clone();
    let client = connect_approver(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "draft").await;
    assert_eq!(result_of(&turn, "w_note").0, "ok");

    // A deny rule added to the file now applies to the running session.
    put(
        &ws.join(".amber/rules.toml"),
        "[[rules]]\ntool = \"write\"\npattern = \"drafts/**\"\ndecision = \"deny\"\n",
    );
    mock.push([
        calls(vec![call(
            "w_again",
            "write",
            &json!({"path": "drafts/b.txt", "content": "b"}),
        )]),
        MockTurn::text("Refused."),
        done(),
    ]);
    let turn = prompt_turn(&client, &mut events, &sid, "draft again").await;
    let (status, output) = result_of(&turn, "w_again");
    assert_eq!(status, "denied", "{output}");
    assert!(!ws.join("drafts/b.txt").exists());
}
