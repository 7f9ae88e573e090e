//! End-to-end: checkpoints, diff, rewind and fork through the real daemon.
//!
//! - A turn that writes with `write`, edits with `edit` and `apply_patch`, and creates,
//!   modifies, renames and deletes files with `bash` (one in a new subdirectory): the
//!   checkpoint lists exactly those, `checkpoint/diff` shows them, a rewind restores the
//!   tree byte for byte, pops the conversation, appends a durable `rewound`, and the next
//!   prompt works. Ignored and oversized files are reported as skipped and left alone; the
//!   user's `.git` is byte-identical before and after everything.
//! - Rewind across three turns; a file edited outside amber is a conflict, left alone, then
//!   overwritten with `force`.
//! - Fork at a middle turn; the original is untouched.
//! - A turn without file-changing calls takes no checkpoint; a running session refuses a
//!   rewind; kill -9 in the middle of a rewind, then a restart, finishes it.

use crate::support::checkpoints as support;

use std::fs;
use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::steps::{
    Events, FAST_RETRIES, connect, done, eventually, git, new_session, of_type, prompt_turn, spawn,
    spawn_config, stop_reason,
};
use amber_tests::tool_calls::{bash, call, calls, put};
use amber_tests::{DaemonOptions, TestDaemon};
use serde_json::{Value, json};
use support::{changed, error_code, list, messages, tree, user_texts};

const SMALL_FILES: &str = "[provider]\nmax_retries = 1\nretry_base_ms = 10\nretry_max_ms = 50\n\
                           [checkpoints]\nmax_file_bytes = 1024\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_of_every_kind_of_change_is_listed_diffed_and_rewound_byte_for_byte() {
    let patch = "*** Begin Patch\n*** Update File: b.txt\n@@\n one\n-two\n+TWO\n*** End Patch\n";
    let script = "mkdir -p sub/dir && echo made > sub/dir/made.txt && rm gone.txt \
                  && mv old.txt renamed.txt && echo more >> a.txt && echo log > build.log \
                  && head -c 4096 /dev/zero > big.bin; echo ok";
    let mock = MockLlm::start(vec![
        calls(vec![
            call(
                "w",
                "write",
                &json!({"path": "new.txt", "content": "brand new\n"}),
            ),
            call(
                "e",
                "edit",
                &json!({"path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"}),
            ),
            call("p", "apply_patch", &json!({"patch": patch})),
        ]),
        bash("b", script),
        MockTurn::text("Changed."),
        done(),
        MockTurn::text("Hello again."),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, SMALL_FILES);
    let ws = daemon.workspace.clone();
    // The sandbox makes it (read-only) for the first command if it is missing.
    fs::create_dir_all(ws.join(".amber")).unwrap();
    put(&ws.join("a.txt"), "alpha\n");
    put(&ws.join("b.txt"), "one\ntwo\nthree\n");
    put(&ws.join("gone.txt"), "bye\n");
    put(&ws.join("old.txt"), "moving\n");
    put(&ws.join(".gitignore"), "*.log\n");
    git(&ws, &["init", "-q"]);
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "start"]);
    let git_before = tree(&ws.join(".git"), true, &|_| false);
    let untracked = |rel: &str| rel == "build.log" || rel == "big.bin";
    let before = tree(&ws, false, &untracked);

    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "change everything").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    assert_eq!(
        fs::read_to_string(ws.join("b.txt")).unwrap(),
        "one\nTWO\nthree\n"
    );

    let rows = list(&daemon, &sid);
    assert_eq!(rows.len(), 1, "{rows:#?}");
    let row = &rows[0];
    assert_eq!(row["prompt"], "change everything");
    assert_eq!(row["turn"], 1);
    assert!(row["seq"].as_u64().unwrap() > 0, "{row}");
    let expected: Vec<(String, String)> = [
        ("a.txt", "modified"),
        ("b.txt", "modified"),
        ("gone.txt", "deleted"),
        ("new.txt", "added"),
        ("old.txt", "deleted"),
        ("renamed.txt", "added"),
        ("sub/dir/made.txt", "added"),
    ]
    .iter()
    .map(|(p, s)| ((*p).to_owned(), (*s).to_owned()))
    .collect();
    assert_eq!(changed(row), expected);
    let skipped: Vec<&str> = row["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert!(skipped.contains(&"big.bin"), "oversized is skipped: {row}");
    assert!(skipped.contains(&"build.log"), "ignored is skipped: {row}");
    let turn_id = row["turnId"].as_str().unwrap().to_owned();

    let diff = daemon.rpc_ok(
        "checkpoint/diff",
        json!({"sessionId": sid, "turnId": turn_id}),
    );
    let text = diff["diff"].as_str().unwrap();
    assert!(
        text.contains("+++ b/new.txt") && text.contains("+brand new"),
        "{text}"
    );
    assert!(
        text.contains("--- a/gone.txt") && text.contains("-bye"),
        "{text}"
    );
    assert!(text.contains("-alpha") && text.contains("+ALPHA"), "{text}");
    assert!(text.contains("+made"), "{text}");
    assert_eq!(diff["changed"].as_array().unwrap().len(), expected.len());
    let one = daemon.rpc_ok(
        "checkpoint/diff",
        json!({"sessionId": sid, "turnId": turn_id, "path": "b.txt"}),
    );
    let one_text = one["diff"].as_str().unwrap();
    assert!(
        one_text.contains("+TWO") && !one_text.contains("new.txt"),
        "{one_text}"
    );
    assert_eq!(
        changed(&json!({"changed": one["changed"]})),
        vec![("b.txt".into(), "modified".into())]
    );

    let rewound = daemon.rpc_ok(
        "session/rewind",
        json!({"sessionId": sid, "turnId": turn_id}),
    );
    assert_eq!(rewound["conflicts"], json!([]), "{rewound}");
    assert_eq!(rewound["removedTurns"], 1, "{rewound}");
    let restored: Vec<&str> = rewound["restored"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(restored.len(), expected.len(), "{rewound}");
    assert_eq!(
        tree(&ws, false, &untracked),
        before,
        "the tree is back byte for byte"
    );
    assert!(
        ws.join("build.log").exists() && ws.join("big.bin").exists(),
        "skipped files stay"
    );
    let event = events.until("rewound").await;
    let event = event.last().unwrap();
    assert_eq!(event["turnId"], turn_id.as_str());
    assert_eq!(event["removedTurns"], 1);
    assert!(event["seq"].as_u64().is_some(), "durable: {event}");
    assert_eq!(
        user_texts(&messages(&daemon, &sid)),
        Vec::<String>::new(),
        "the turn is popped"
    );
    assert!(
        list(&daemon, &sid).is_empty(),
        "its checkpoint is gone with it"
    );

    let next = prompt_turn(&client, &mut events, &sid, "hello").await;
    assert_eq!(stop_reason(&next), "end_turn", "{next:#?}");
    assert_eq!(
        user_texts(&messages(&daemon, &sid)),
        vec!["hello".to_owned()]
    );
    let last = mock.requests().last().cloned().unwrap();
    let sent: Vec<String> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect();
    assert!(
        !sent.iter().any(|c| c.contains("change everything")),
        "the model no longer sees the rewound turn"
    );

    assert_eq!(
        tree(&ws.join(".git"), true, &|_| false),
        git_before,
        "the user's .git is untouched"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn rewind_across_three_turns_reports_a_conflict_then_force_overwrites_it() {
    let mut script = Vec::new();
    for n in 1..=3 {
        script.push(bash(
            &format!("b{n}"),
            &format!("echo {n} > f{n}.txt && echo turn{n} >> shared.txt"),
        ));
        script.push(MockTurn::text(format!("turn {n}")));
        script.push(done());
    }
    let mock = MockLlm::start(script).await;
    let daemon = spawn(&mock);
    let ws = daemon.workspace.clone();
    // The sandbox makes it (read-only) for the first command if it is missing.
    fs::create_dir_all(ws.join(".amber")).unwrap();
    put(&ws.join("shared.txt"), "start\n");
    let before = tree(&ws, false, &|_| false);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    for n in 1..=3 {
        let turn = prompt_turn(&client, &mut events, &sid, &format!("turn {n}")).await;
        assert_eq!(stop_reason(&turn), "end_turn");
    }
    let rows = list(&daemon, &sid);
    assert_eq!(rows.len(), 3);
    assert_eq!(
        rows.iter()
            .map(|r| r["turn"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    let first = rows[0]["turnId"].as_str().unwrap().to_owned();

    // Edited outside amber after the turns touched it: a conflict, left alone.
    put(&ws.join("shared.txt"), "the user's own edit\n");
    let files_only = daemon.rpc_ok(
        "session/rewind",
        json!({"sessionId": sid, "turnId": first, "conversation": false}),
    );
    assert_eq!(
        files_only["conflicts"],
        json!(["shared.txt"]),
        "{files_only}"
    );
    assert_eq!(files_only["removedTurns"], 0);
    assert_eq!(
        fs::read_to_string(ws.join("shared.txt")).unwrap(),
        "the user's own edit\n"
    );
    for n in 1..=3 {
        assert!(!ws.join(format!("f{n}.txt")).exists(), "f{n}.txt removed");
    }
    assert_eq!(
        user_texts(&messages(&daemon, &sid)).len(),
        3,
        "conversation kept"
    );

    let forced = daemon.rpc_ok(
        "session/rewind",
        json!({"sessionId": sid, "turnId": first, "force": true}),
    );
    // f1..f3 were changed since too (the first rewind removed them), but they are already
    // as before the turn: no conflict.
    assert_eq!(forced["conflicts"], json!(["shared.txt"]), "{forced}");
    assert!(
        forced["restored"]
            .as_array()
            .unwrap()
            .contains(&json!("shared.txt")),
        "{forced}"
    );
    assert_eq!(forced["removedTurns"], 3);
    assert_eq!(tree(&ws, false, &|_| false), before);
    assert!(user_texts(&messages(&daemon, &sid)).is_empty());

    // Replay shows the history as it happened: the three turns with their calls, as they
    // were, then the two rewinds in order.
    let mut replay = Events::subscribe(&client, &sid, Some(0)).await;
    let history = replay.until("synced").await;
    let prompts: Vec<&str> = of_type(&history, "turn_started")
        .iter()
        .map(|e| e["prompt"].as_str().unwrap())
        .collect();
    assert_eq!(prompts, ["turn 1", "turn 2", "turn 3"], "{history:#?}");
    assert_eq!(of_type(&history, "turn_completed").len(), 3);
    let commands: Vec<&str> = of_type(&history, "tool_call_started")
        .iter()
        .map(|e| e["arguments"]["command"].as_str().unwrap())
        .collect();
    assert_eq!(commands.len(), 3, "{history:#?}");
    assert!(commands[2].contains("f3.txt"), "{commands:?}");
    let rewinds = of_type(&history, "rewound");
    assert_eq!(rewinds.len(), 2, "{history:#?}");
    assert_eq!(
        (&rewinds[0]["removedTurns"], &rewinds[0]["conflicts"]),
        (&json!(0), &json!(["shared.txt"]))
    );
    assert_eq!(rewinds[1]["removedTurns"], 3);
    assert!(rewinds.iter().all(|r| r["turnId"] == first.as_str()));
    let seq = |e: &Value| e["seq"].as_u64().unwrap();
    let last_turn_event = of_type(&history, "turn_completed")
        .iter()
        .map(|e| seq(e))
        .max()
        .unwrap();
    assert!(
        last_turn_event < seq(rewinds[0]) && seq(rewinds[0]) < seq(rewinds[1]),
        "the rewinds come after the turns they undo: {history:#?}"
    );

    // Gone from the history: no second rewind to it.
    let again = daemon.rpc("session/rewind", json!({"sessionId": sid, "turnId": first}));
    assert_eq!(error_code(&again), -32602, "{again}");
}

#[tokio::test(flavor = "multi_thread")]
async fn fork_at_a_middle_turn_keeps_the_history_before_it() {
    let mut script = Vec::new();
    for n in 1..=3 {
        script.push(MockTurn::text(format!("answer {n}")));
        script.push(done());
    }
    let mock = MockLlm::start(script).await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    daemon.rpc_ok("session/setMode", json!({"sessionId": sid, "mode": "read"}));
    let mut events = Events::live(&client, &sid).await;
    let mut turn_ids = Vec::new();
    for n in 1..=3 {
        let turn = prompt_turn(&client, &mut events, &sid, &format!("question {n}")).await;
        turn_ids.push(
            of_type(&turn, "turn_started")[0]["turnId"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    assert!(
        list(&daemon, &sid).is_empty(),
        "no file-changing call, no checkpoint"
    );

    let fork = daemon.rpc_ok(
        "session/fork",
        json!({"sessionId": sid, "turnId": turn_ids[1]}),
    );
    let fid = fork["sessionId"].as_str().unwrap();
    assert_ne!(fid, sid);
    assert_eq!(fork["cwd"], daemon.workspace.display().to_string());
    assert_eq!(fork["mode"], "read", "same settings: {fork}");
    assert_eq!(
        user_texts(&messages(&daemon, fid)),
        vec!["question 1".to_owned()]
    );
    let assistant: Vec<Value> = messages(&daemon, fid)
        .into_iter()
        .filter(|m| m["role"] == "assistant")
        .collect();
    assert_eq!(assistant.len(), 1);
    assert_eq!(
        user_texts(&messages(&daemon, &sid)).len(),
        3,
        "the original is untouched"
    );
    // Its log starts with the events of the turns it continues, as they happened.
    let mut replay = Events::subscribe(&client, fid, Some(0)).await;
    let history = replay.until("synced").await;
    let prompts: Vec<&str> = of_type(&history, "turn_started")
        .iter()
        .map(|e| e["prompt"].as_str().unwrap())
        .collect();
    assert_eq!(prompts, ["question 1"], "{history:#?}");
    assert_eq!(of_type(&history, "turn_completed").len(), 1);
    assert!(
        history.iter().all(|e| e["sessionId"] == fid),
        "{history:#?}"
    );

    let whole = daemon.rpc_ok("session/fork", json!({"sessionId": sid}));
    let wid = whole["sessionId"].as_str().unwrap();
    assert_eq!(user_texts(&messages(&daemon, wid)).len(), 3);
    let unknown = daemon.rpc(
        "session/fork",
        json!({"sessionId": sid, "turnId": "turn_nope"}),
    );
    assert_eq!(error_code(&unknown), -32602, "{unknown}");
    let missing = daemon.rpc("session/fork", json!({"sessionId": "nope"}));
    assert_eq!(error_code(&missing), -32001, "{missing}");

    // Cleared since: the history before a turn is gone, and the refusal says so.
    daemon.rpc_ok("command/run", json!({"sessionId": sid, "name": "clear"}));
    let cleared = daemon.rpc(
        "session/fork",
        json!({"sessionId": sid, "turnId": turn_ids[1]}),
    );
    assert_eq!(error_code(&cleared), -32602, "{cleared}");
    let why = cleared["error"]["message"].as_str().unwrap();
    assert!(why.contains("compacted or cleared after turn"), "{why}");
    assert!(!why.contains("  "), "no gap in the message: {why}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_session_refuses_a_rewind() {
    let mock = MockLlm::start(vec![
        bash("first", "echo one > one.txt"),
        MockTurn::text("one"),
        done(),
        bash("slow", "sleep 3; echo two > two.txt"),
        MockTurn::text("two"),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "one").await;
    let first = list(&daemon, &sid)[0]["turnId"]
        .as_str()
        .unwrap()
        .to_owned();
    client.session_prompt(&sid, "two").await.unwrap();
    events.until("tool_call_started").await;
    let busy = daemon.rpc("session/rewind", json!({"sessionId": sid, "turnId": first}));
    assert_eq!(error_code(&busy), -32602, "{busy}");
    let why = busy["error"]["message"].as_str().unwrap();
    assert!(why.contains("idle"), "{busy}");
    assert!(!why.contains("  "), "no gap in the message: {why}");
    events.turn().await;
    let unknown = daemon.rpc(
        "session/rewind",
        json!({"sessionId": sid, "turnId": "turn_nope"}),
    );
    assert_eq!(error_code(&unknown), -32602, "{unknown}");
    let diff_unknown = daemon.rpc(
        "checkpoint/diff",
        json!({"sessionId": sid, "turnId": "turn_nope"}),
    );
    assert_eq!(error_code(&diff_unknown), -32602, "{diff_unknown}");
    let done = daemon.rpc_ok("session/rewind", json!({"sessionId": sid, "turnId": first}));
    assert_eq!(done["removedTurns"], 2, "{done}");
    assert!(
        !daemon.workspace.join("one.txt").exists() && !daemon.workspace.join("two.txt").exists()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_in_the_middle_of_a_rewind_is_finished_by_the_restart() {
    let mock = MockLlm::start(vec![
        bash(
            "b",
            "rm keep.txt && echo changed > edit.txt && echo new > made.txt",
        ),
        MockTurn::text("done"),
        done(),
    ])
    .await;
    let mut daemon = TestDaemon::spawn_with(DaemonOptions {
        base_url: Some(mock.base_url()),
        config_toml: FAST_RETRIES.to_owned(),
        env: vec![("AMBER_TEST_REWIND_PAUSE_MS".into(), "60000".into())],
    });
    let ws = daemon.workspace.clone();
    // The sandbox makes it (read-only) for the first command if it is missing.
    fs::create_dir_all(ws.join(".amber")).unwrap();
    put(&ws.join("keep.txt"), "keep me\n");
    put(&ws.join("edit.txt"), "original\n");
    let before = tree(&ws, false, &|_| false);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "change").await;
    let turn_id = list(&daemon, &sid)[0]["turnId"]
        .as_str()
        .unwrap()
        .to_owned();

    // Deletions first, then a long pause before the writes: kill in between.
    let socket_daemon = daemon.socket.clone();
    let _pending = std::thread::spawn(move || {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "session/rewind",
                          "params": {"sessionId": sid, "turnId": turn_id}});
        let _ = amber_tests::unix_http::post(
            &socket_daemon,
            &body.to_string(),
            Duration::from_secs(90),
        );
    });
    eventually(
        "the rewind to delete made.txt",
        Duration::from_secs(20),
        || !ws.join("made.txt").exists(),
    )
    .await;
    assert!(
        !ws.join("keep.txt").exists(),
        "half done: the writes have not happened"
    );
    daemon.kill(9);
    daemon.wait_exit(Duration::from_secs(10));

    let mut restarted = daemon;
    restarted.restart();
    eventually(
        "the restart to finish the rewind",
        Duration::from_secs(20),
        || tree(&ws, false, &|_| false) == before,
    )
    .await;
    let list = restarted.rpc_ok("session/list", json!({}));
    let sid = list["sessions"][0]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    // The files are put back first, then the context: on an executor the two are further
    // apart (the restore crosses the link).
    eventually(
        "the context to match the files",
        Duration::from_secs(20),
        || user_texts(&messages(&restarted, &sid)).is_empty(),
    )
    .await;
    let client = connect(&restarted).await;
    let mut replay = Events::subscribe(&client, &sid, Some(0)).await;
    let rewound = replay.until("rewound").await;
    assert_eq!(rewound.last().unwrap()["removedTurns"], 1);
    let journal = restarted
        .dir
        .path()
        .join("data/sessions")
        .join(&sid)
        .join("rewind.json");
    assert!(
        !journal.exists(),
        "the journal is gone once the rewind is done"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_without_file_changing_calls_takes_no_checkpoint() {
    let mock = MockLlm::start(vec![
        calls(vec![
            call("r", "read", &json!({"path": "a.txt"})),
            call("s", "search", &json!({"pattern": "alpha"})),
        ]),
        MockTurn::text("Read it."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    put(&daemon.workspace.join("a.txt"), "alpha\n");
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "read a.txt").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    assert!(list(&daemon, &sid).is_empty());
    let store = daemon.dir.path().join("data/checkpoints");
    assert!(!store.exists(), "no snapshot was taken, nothing was stored");
}

#[tokio::test(flavor = "multi_thread")]
async fn what_a_sub_agent_writes_belongs_to_its_parent_turn() {
    const SUBAGENT_MARK: &str = "You are a sub-agent of amber";
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(|request: &Value| {
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        let sub = messages[0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with(SUBAGENT_MARK));
        let text = |m: &Value| m["content"].as_str().unwrap_or_default().to_owned();
        if messages
            .iter()
            .rev()
            .take(2)
            .any(|m| text(m).contains("Are you finished"))
        {
            return MockTurn::text("DONE");
        }
        let after_tool = messages.iter().rev().take(2).any(|m| m["role"] == "tool");
        match (sub, after_tool) {
            (true, false) => MockTurn::tool_call(
                "write",
                &json!({"path": "from_sub.txt", "content": "written by a sub-agent\n"}),
            ),
            (true, true) => MockTurn::text("wrote it"),
            (false, false) => MockTurn::tool_call("task", &json!({"prompt": "write the file"})),
            (false, true) => MockTurn::text("the sub-agent wrote it"),
        }
    });
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "delegate").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    assert!(daemon.workspace.join("from_sub.txt").exists());
    let rows = list(&daemon, &sid);
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(
        changed(&rows[0]),
        vec![("from_sub.txt".to_owned(), "added".to_owned())]
    );
    let turn_id = rows[0]["turnId"].as_str().unwrap();
    daemon.rpc_ok(
        "session/rewind",
        json!({"sessionId": sid, "turnId": turn_id}),
    );
    assert!(!daemon.workspace.join("from_sub.txt").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn with_checkpoints_disabled_only_the_conversation_rewinds() {
    let mock = MockLlm::start(vec![
        bash("b", "echo one > one.txt"),
        MockTurn::text("one"),
        done(),
    ])
    .await;
    let daemon = spawn_config(
        &mock,
        &format!("{FAST_RETRIES}[checkpoints]\nenabled = false\n"),
    );
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "one").await;
    let turn_id = of_type(&turn, "turn_started")[0]["turnId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(list(&daemon, &sid).is_empty());
    assert!(!daemon.dir.path().join("data/checkpoints").exists());
    let files = daemon.rpc(
        "session/rewind",
        json!({"sessionId": sid, "turnId": turn_id}),
    );
    assert_eq!(error_code(&files), -32602, "{files}");
    assert!(
        files["error"]["message"]
            .as_str()
            .unwrap()
            .contains("files: false"),
        "{files}"
    );
    let talk = daemon.rpc_ok(
        "session/rewind",
        json!({"sessionId": sid, "turnId": turn_id, "files": false}),
    );
    assert_eq!(talk["removedTurns"], 1, "{talk}");
    assert!(user_texts(&messages(&daemon, &sid)).is_empty());
    assert!(daemon.workspace.join("one.txt").exists(), "files untouched");
}
