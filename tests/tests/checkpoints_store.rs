//! End-to-end: what the checkpoint store keeps and what a rewind may promise,
//! through the real daemon.
//!
//! - Retention expires a checkpoint while the daemon runs: its content is collected without
//!   a restart, `checkpoint/list {all}` says `expired`, and a files rewind to it is refused
//!   with the reason naming the turn, while a conversation-only rewind still works.
//! - `session/delete` removes that session's checkpoint content and keeps the others'.
//! - A checkpoint that could not be taken (the store cannot be opened) never stops the turn,
//!   and a files rewind to it is refused with that reason.

use crate::support::checkpoints as support;

use std::fs;
use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::steps::{
    Events, FAST_RETRIES, connect, done, eventually, new_session, prompt_turn, spawn, spawn_config,
    stop_reason,
};
use amber_tests::tool_calls::{bash, call, calls, put};
use serde_json::{Value, json};
use support::{blobs_holding, error_code, list, list_all, messages, user_texts};

/// Files in the workspace: enough that rewriting them all is stored as a full snapshot
/// (a small change is stored as a delta, which keeps its base's content reachable).
const FILES: usize = 20;

/// One command that rewrites every file (targets spelled out: a redirection the policy
/// cannot resolve would ask for approval).
fn rewrite_all(id: &str, generation: &str) -> MockTurn {
    let each: Vec<String> = (0..FILES)
        .map(|i| format!("echo {generation}-{i} > f{i}.txt"))
        .collect();
    bash(id, &each.join(" && "))
}

fn all_say(ws: &std::path::Path, generation: &str) -> bool {
    (0..FILES).all(|i| {
        fs::read_to_string(ws.join(format!("f{i}.txt"))).unwrap() == format!("{generation}-{i}\n")
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_checkpoint_is_collected_while_the_daemon_runs_and_refuses_a_files_rewind() {
    // Unique per test run: the markers are looked for in the store's blob files.
    let tag = format!("m{}", std::process::id());
    let (orig, one, two) = (
        format!("orig{tag}"),
        format!("one{tag}"),
        format!("two{tag}"),
    );
    let mock = MockLlm::start(vec![
        rewrite_all("b1", &one),
        MockTurn::text("one"),
        done(),
        rewrite_all("b2", &two),
        MockTurn::text("two"),
        done(),
    ])
    .await;
    let daemon = spawn_config(
        &mock,
        &format!("{FAST_RETRIES}[checkpoints.retention]\nturns = 1\n"),
    );
    let ws = daemon.workspace.clone();
    // The sandbox makes it (read-only) for the first command if it is missing.
    fs::create_dir_all(ws.join(".amber")).unwrap();
    for i in 0..FILES {
        put(&ws.join(format!("f{i}.txt")), &format!("{orig}-{i}\n"));
    }
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let first = prompt_turn(&client, &mut events, &sid, "first").await;
    assert_eq!(stop_reason(&first), "end_turn", "{first:#?}");
    assert!(all_say(&ws, &one), "{first:#?}");
    assert_eq!(
        blobs_holding(&daemon, &orig),
        FILES,
        "the state before turn 1"
    );
    let t1 = list(&daemon, &sid)[0]["turnId"]
        .as_str()
        .unwrap()
        .to_owned();

    let second = prompt_turn(&client, &mut events, &sid, "second").await;
    assert_eq!(stop_reason(&second), "end_turn", "{second:#?}");
    assert!(all_say(&ws, &two), "{second:#?}");
    // Retention keeps one: turn 1's checkpoint expired, and its content goes without a
    // restart (only turn 1's checkpoint held the state before it).
    eventually(
        "the expired checkpoint's content to be collected",
        Duration::from_secs(20),
        || blobs_holding(&daemon, &orig) == 0,
    )
    .await;
    assert_eq!(
        blobs_holding(&daemon, &one),
        FILES,
        "turn 2's checkpoint is kept"
    );
    assert_eq!(blobs_holding(&daemon, &two), FILES);

    let rows = list(&daemon, &sid);
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0]["turn"], 2);
    let t2 = rows[0]["turnId"].as_str().unwrap().to_owned();
    let every: Vec<(Value, Value)> = list_all(&daemon, &sid)
        .iter()
        .map(|r| (r["turn"].clone(), r["checkpoint"].clone()))
        .collect();
    assert_eq!(
        every,
        [(json!(1), json!("expired")), (json!(2), Value::Null)],
        "every turn, the expired one saying so"
    );

    // The kept checkpoint restores; the expired one refuses, naming its turn.
    let kept = daemon.rpc_ok(
        "session/rewind",
        json!({"sessionId": sid, "turnId": t2, "conversation": false}),
    );
    assert_eq!(kept["restored"].as_array().unwrap().len(), FILES, "{kept}");
    assert!(all_say(&ws, &one));
    let refused = daemon.rpc("session/rewind", json!({"sessionId": sid, "turnId": t1}));
    assert_eq!(error_code(&refused), -32602, "{refused}");
    let why = refused["error"]["message"].as_str().unwrap();
    assert!(
        why.contains(&format!("turn 1 ({t1})")) && why.contains("expired"),
        "{why}"
    );
    assert!(why.contains("files: false"), "{why}");
    assert!(all_say(&ws, &one), "nothing was touched");
    assert_eq!(
        user_texts(&messages(&daemon, &sid)).len(),
        2,
        "nor the conversation"
    );

    let talk = daemon.rpc_ok(
        "session/rewind",
        json!({"sessionId": sid, "turnId": t1, "files": false}),
    );
    assert_eq!(talk["removedTurns"], 2, "{talk}");
    assert!(user_texts(&messages(&daemon, &sid)).is_empty());
    assert!(all_say(&ws, &one), "the files stay as they are");
}

#[tokio::test(flavor = "multi_thread")]
async fn deleting_a_session_removes_its_checkpoint_content_and_keeps_the_others() {
    let tag = format!("m{}", std::process::id());
    let (alpha, beta) = (format!("alpha{tag}"), format!("beta{tag}"));
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "wa",
            "write",
            &json!({"path": "a.txt", "content": format!("{alpha}\n")}),
        )]),
        MockTurn::text("wrote a"),
        done(),
        calls(vec![call(
            "wb",
            "write",
            &json!({"path": "b.txt", "content": format!("{beta}\n")}),
        )]),
        MockTurn::text("wrote b"),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    // Two workspaces: each session's checkpoints hold only its own files.
    let mut sessions = Vec::new();
    for name in ["a", "b"] {
        let cwd = daemon.workspace.join(name);
        fs::create_dir_all(&cwd).unwrap();
        let info = daemon.rpc_ok("session/new", json!({"cwd": cwd.display().to_string()}));
        let sid = info["sessionId"].as_str().unwrap().to_owned();
        let mut events = Events::live(&client, &sid).await;
        let turn = prompt_turn(&client, &mut events, &sid, &format!("write {name}")).await;
        assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
        assert_eq!(list(&daemon, &sid).len(), 1);
        sessions.push(sid);
    }
    assert!(daemon.workspace.join("a/a.txt").exists());
    assert_eq!(blobs_holding(&daemon, &alpha), 1);
    assert_eq!(blobs_holding(&daemon, &beta), 1);
    let a_dir = daemon.dir.path().join("data/sessions").join(&sessions[0]);
    assert!(a_dir.join("checkpoints").exists());

    daemon.rpc_ok("session/delete", json!({"sessionId": sessions[0]}));
    eventually(
        "the deleted session's checkpoint content to go",
        Duration::from_secs(20),
        || blobs_holding(&daemon, &alpha) == 0,
    )
    .await;
    assert!(!a_dir.exists(), "its rows went with its directory");
    assert_eq!(
        blobs_holding(&daemon, &beta),
        1,
        "the other session's is kept"
    );
    assert!(
        daemon.workspace.join("a/a.txt").exists(),
        "the workspace is the user's: never touched by a deletion"
    );
    // And still works: its diff reads the kept blobs.
    let t = list(&daemon, &sessions[1])[0]["turnId"]
        .as_str()
        .unwrap()
        .to_owned();
    let diff = daemon.rpc_ok(
        "checkpoint/diff",
        json!({"sessionId": sessions[1], "turnId": t}),
    );
    assert!(
        diff["diff"].as_str().unwrap().contains(&format!("+{beta}")),
        "{diff}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_checkpoint_that_could_not_be_taken_refuses_a_files_rewind_with_its_reason() {
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "w",
            "write",
            &json!({"path": "a.txt", "content": "written\n"}),
        )]),
        MockTurn::text("wrote it"),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    // The store cannot be opened (its directory is a file): no snapshot can be taken.
    let store = daemon.dir.path().join("data/checkpoints");
    fs::create_dir_all(&store).unwrap();
    fs::write(store.join("objects"), "not a directory").unwrap();
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "write a").await;
    assert_eq!(stop_reason(&turn), "end_turn", "the turn ran: {turn:#?}");
    assert_eq!(
        fs::read_to_string(daemon.workspace.join("a.txt")).unwrap(),
        "written\n"
    );
    let rows = list(&daemon, &sid);
    assert_eq!(rows.len(), 1, "{rows:#?}");
    let reason = rows[0]["incomplete"].as_str().unwrap();
    assert!(reason.contains("checkpoint store"), "{reason}");
    let t = rows[0]["turnId"].as_str().unwrap().to_owned();

    let refused = daemon.rpc("session/rewind", json!({"sessionId": sid, "turnId": t}));
    assert_eq!(error_code(&refused), -32602, "{refused}");
    let why = refused["error"]["message"].as_str().unwrap();
    assert!(
        why.contains(&format!("turn 1 ({t})")) && why.contains("incomplete"),
        "{why}"
    );
    assert!(why.contains(reason), "the reason recorded: {why}");
    assert!(daemon.workspace.join("a.txt").exists(), "nothing restored");
    assert_eq!(user_texts(&messages(&daemon, &sid)), ["write a"]);

    let talk = daemon.rpc_ok(
        "session/rewind",
        json!({"sessionId": sid, "turnId": t, "files": false}),
    );
    assert_eq!(talk["removedTurns"], 1, "{talk}");
    assert!(user_texts(&messages(&daemon, &sid)).is_empty());
}
