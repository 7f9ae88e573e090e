//! End-to-end: `amber-cli checkpoints`, `diff`, `rewind` and `fork` against the real daemon,
//! after real turns that write files — one turn in the middle changes none.
//! Turn numbers are 1-based as `checkpoints` prints them; a number names any turn of the
//! history (the middle one too); `--json` prints the method's answer.

use crate::support::checkpoints as support;

use std::fs;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::TestDaemon;
use amber_tests::steps::{Events, connect, done, new_session, prompt_turn, run_bounded, spawn};
use amber_tests::tool_calls::{call, calls};
use serde_json::{Value, json};
use support::{messages, user_texts};

/// `amber-cli ARGS` against the daemon: exit code, stdout, stderr.
fn cli(daemon: &TestDaemon, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = daemon.cli();
    cmd.arg("--no-autostart").args(args);
    run_bounded(cmd)
}

fn cli_ok(daemon: &TestDaemon, args: &[&str]) -> String {
    let (code, out, err) = cli(daemon, args);
    assert_eq!(code, Some(0), "amber-cli {args:?}: {err}\n{out}");
    out
}

fn cli_json(daemon: &TestDaemon, args: &[&str]) -> Value {
    let mut with = args.to_vec();
    with.push("--json");
    let out = cli_ok(daemon, &with);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("amber-cli {with:?}: {e}: {out}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_checkpoint_commands_list_diff_fork_and_rewind_real_turns() {
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "w1",
            "write",
            &json!({"path": "notes.md", "content": "one\n"}),
        )]),
        MockTurn::text("Wrote the notes."),
        done(),
        MockTurn::text("It is a typo."),
        done(),
        calls(vec![
            call(
                "e3",
                "edit",
                &json!({"path": "notes.md", "old_string": "one", "new_string": "ONE"}),
            ),
            call(
                "w3",
                "write",
                &json!({"path": "src/new.rs", "content": "fn new() {}\n"}),
            ),
        ]),
        MockTurn::text("Done."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let ws = daemon.workspace.clone();
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    for prompt in ["write the notes", "explain the error", "fix it"] {
        prompt_turn(&client, &mut events, &sid, prompt).await;
    }
    assert_eq!(fs::read_to_string(ws.join("notes.md")).unwrap(), "ONE\n");
    assert!(ws.join("src/new.rs").exists());

    // `checkpoints`: the turns that changed files, numbered in the whole history.
    let table = cli_ok(&daemon, &["checkpoints", &sid]);
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        [
            "TURN", "TIME", "ADDED", "MODIFIED", "DELETED", "SKIPPED", "PROMPT"
        ],
        "{table}"
    );
    assert_eq!(lines.len(), 3, "{table}");
    assert_eq!(
        (lines[1][0], &lines[1][2..6], &lines[1][6..]),
        (
            "1",
            &["1", "0", "0", "0"][..],
            &["write", "the", "notes"][..]
        ),
        "{table}"
    );
    assert_eq!(
        (lines[2][0], &lines[2][2..6], &lines[2][6..]),
        ("3", &["1", "1", "0", "0"][..], &["fix", "it"][..]),
        "{table}"
    );
    let listed = cli_json(&daemon, &["checkpoints", &sid]);
    let rows = listed["checkpoints"].as_array().unwrap();
    let turns: Vec<u64> = rows.iter().map(|r| r["turn"].as_u64().unwrap()).collect();
    assert_eq!(turns, [1, 3]);
    let t3 = rows[1]["turnId"].as_str().unwrap().to_owned();

    // `diff` by turn number, by path, by default the last checkpoint, and as JSON.
    let whole = cli_ok(&daemon, &["diff", &sid, "3"]);
    assert!(
        whole.contains("-one") && whole.contains("+ONE") && whole.contains("+++ b/src/new.rs"),
        "{whole}"
    );
    assert_eq!(
        cli_ok(&daemon, &["diff", &sid]),
        whole,
        "the last checkpoint"
    );
    assert_eq!(cli_ok(&daemon, &["diff", &sid, &t3]), whole, "by turn id");
    let one = cli_ok(&daemon, &["diff", &sid, "3", "--", "notes.md"]);
    assert!(one.contains("+ONE") && !one.contains("src/new.rs"), "{one}");
    let first = cli_json(&daemon, &["diff", &sid, "1"]);
    assert_eq!(
        first["changed"],
        json!([{"path": "notes.md", "status": "added"}])
    );
    assert!(first["diff"].as_str().unwrap().contains("+one"), "{first}");
    // Turn 2 has a number but changed nothing: the daemon says it has no checkpoint.
    let (code, out, err) = cli(&daemon, &["diff", &sid, "2"]);
    assert_eq!((code, out.as_str()), (Some(1), ""), "{err}");
    assert!(err.contains("no checkpoint of turn"), "{err}");

    // `fork`: before turn 3, and the whole history as JSON; the original is untouched.
    let fork = cli_ok(&daemon, &["fork", &sid, "3"]);
    let fid = fork.trim();
    assert!(!fid.is_empty() && fid != sid, "{fork}");
    assert_eq!(
        user_texts(&messages(&daemon, fid)),
        ["write the notes", "explain the error"]
    );
    let whole_fork = cli_json(&daemon, &["fork", &sid]);
    let wid = whole_fork["sessionId"].as_str().unwrap();
    assert_eq!(whole_fork["cwd"], ws.display().to_string());
    assert_eq!(user_texts(&messages(&daemon, wid)).len(), 3);
    assert_eq!(user_texts(&messages(&daemon, &sid)).len(), 3);

    // `rewind` by number: the files of turn 3 only, then the conversation to turn 2 (which
    // has no checkpoint), then everything to turn 1.
    let files = cli_ok(&daemon, &["rewind", &sid, "3", "--files-only"]);
    assert_eq!(
        files,
        "restored  notes.md\nrestored  src/new.rs\n\
         rewound to before turn 3: 2 file(s) restored, 0 turn(s) removed from the conversation\n"
    );
    assert_eq!(fs::read_to_string(ws.join("notes.md")).unwrap(), "one\n");
    assert!(!ws.join("src/new.rs").exists());
    assert_eq!(user_texts(&messages(&daemon, &sid)).len(), 3);

    let talk = cli_json(&daemon, &["rewind", &sid, "2", "--conversation-only"]);
    assert_eq!(
        talk,
        json!({"restored": [], "conflicts": [], "removedTurns": 2})
    );
    assert_eq!(user_texts(&messages(&daemon, &sid)), ["write the notes"]);
    assert_eq!(fs::read_to_string(ws.join("notes.md")).unwrap(), "one\n");

    let back = cli_json(&daemon, &["rewind", &sid, "1"]);
    assert_eq!(
        back,
        json!({"restored": ["notes.md"], "conflicts": [], "removedTurns": 1})
    );
    assert!(!ws.join("notes.md").exists(), "turn 1 created it");
    assert!(user_texts(&messages(&daemon, &sid)).is_empty());
    let (code, _, err) = cli(&daemon, &["rewind", &sid, "1"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("has no turn 1 (it has none yet)"), "{err}");
    let empty = cli_ok(&daemon, &["checkpoints", &sid]);
    assert_eq!(empty, "", "the note goes to stderr");
}
