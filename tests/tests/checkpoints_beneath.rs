//! End-to-end: a rewind writes only inside the workspace, through the real daemon and
//! `amber-cli rewind`.
//!
//! - A turn removes `d/` and `e/`; afterwards a background process swaps them for links to
//!   `.git` and to a directory outside the workspace. The rewind (with and without
//!   `--force`) writes nothing through them: `.git` and the outside directory keep exactly
//!   their sentinel files, the paths are reported as conflicts, `amber-cli` exits 1.
//! - The racing variant: the swap happens while the rewind runs, between the directories it
//!   made and the files it writes in them; every write is refused as it happens.
//! - A path in `.amber` that a turn's checkpoint holds is never restored, even forced.
//! - A hand edit made during a turn, between the agent's calls, is a conflict left alone,
//!   not undone; `--force` puts it back.

use crate::support::checkpoints as support;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::steps::{
    Events, FAST_RETRIES, connect, done, eventually, new_session, prompt_turn, run_bounded, spawn,
};
use amber_tests::tool_calls::{bash, put};
use amber_tests::{DaemonOptions, TestDaemon};
use serde_json::Value;
use support::{list, tree};

/// `amber-cli rewind SID N --json [extra]`: the exit code and the daemon's answer.
fn cli_rewind(daemon: &TestDaemon, sid: &str, turn: &str, extra: &[&str]) -> (i32, Value) {
    let mut cmd = daemon.cli();
    cmd.args(["--no-autostart", "rewind", sid, turn, "--json"])
        .args(extra);
    let (code, out, err) = run_bounded(cmd);
    let got = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    (code.unwrap(), got)
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

/// A workspace with a `.git` holding sentinel files, a directory outside the workspace with
/// one sentinel, and the files the turn will delete: `d/config`, `d/hooks/post-checkout`
/// and `e/planted.txt`.
struct Scene {
    ws: PathBuf,
    outside: PathBuf,
}

impl Scene {
    fn new(daemon: &TestDaemon) -> Self {
        let ws = daemon.workspace.clone();
        let outside = daemon.dir.path().join("outside");
        fs::create_dir_all(&outside).unwrap();
        put(&outside.join("sentinel"), "outside\n");
        put(&ws.join(".git/config"), "[core]\n\tsentinel = true\n");
        fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        // The sandbox makes it (read-only) for the first command if it is missing.
        fs::create_dir_all(ws.join(".amber")).unwrap();
        put(&ws.join("d/config"), "[core]\n\tfsmonitor = ./pwn\n");
        put(&ws.join("d/hooks/post-checkout"), "#!/bin/sh\necho pwned\n");
        put(&ws.join("e/planted.txt"), "planted\n");
        Self { ws, outside }
    }

    fn swap_for_links(&self) {
        symlink(self.ws.join(".git"), self.ws.join("d")).unwrap();
        symlink(&self.outside, self.ws.join("e")).unwrap();
    }

    /// `.git` and the outside directory hold exactly what the scene put there.
    fn assert_untouched(&self) {
        let git = tree(&self.ws.join(".git"), true, &|_| false);
        let names: Vec<&str> = git.keys().map(String::as_str).collect();
        assert_eq!(names, ["config", "hooks/"], "written in .git: {git:?}");
        assert_eq!(git["config"], b"[core]\n\tsentinel = true\n");
        let outside = tree(&self.outside, true, &|_| false);
        assert_eq!(
            outside.keys().map(String::as_str).collect::<Vec<_>>(),
            ["sentinel"],
            "written outside the workspace"
        );
        assert_eq!(outside["sentinel"], b"outside\n");
        for link in ["d", "e"] {
            let meta = fs::symlink_metadata(self.ws.join(link)).unwrap();
            assert!(meta.is_symlink(), "{link} is still the link, not replaced");
        }
    }
}

const SWAPPED: [&str; 3] = ["d/config", "d/hooks/post-checkout", "e/planted.txt"];

/// One turn that removes `d` and `e` (and writes `kept.txt`); its turn id.
async fn turn_removing(daemon: &TestDaemon) -> (String, String) {
    let client = connect(daemon).await;
    let sid = new_session(&client, daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "clean up").await;
    assert!(!daemon.workspace.join("d").exists());
    let turn_id = list(daemon, &sid)[0]["turnId"].as_str().unwrap().to_owned();
    (sid, turn_id)
}

fn removing_script() -> Vec<MockTurn> {
    vec![
        bash(
            "b",
            "rm d/config d/hooks/post-checkout e/planted.txt && rmdir d/hooks d e \
             && echo new > kept.txt",
        ),
        MockTurn::text("cleaned"),
        done(),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn a_parent_swapped_for_a_link_after_the_turn_is_a_conflict_never_followed() {
    let mock = MockLlm::start(removing_script()).await;
    let daemon = spawn(&mock);
    let scene = Scene::new(&daemon);
    let (sid, _) = turn_removing(&daemon).await;
    scene.swap_for_links();

    let (code, got) = cli_rewind(&daemon, &sid, "1", &["--files-only"]);
    assert_eq!(code, 1, "conflicts were left alone: {got}");
    assert_eq!(strings(&got["conflicts"]), SWAPPED, "{got}");
    assert_eq!(strings(&got["restored"]), ["kept.txt"], "{got}");
    assert!(!scene.ws.join("kept.txt").exists());
    scene.assert_untouched();

    // `--force` overwrites conflicts, but never follows a link.
    let (code, got) = cli_rewind(&daemon, &sid, "1", &["--force"]);
    assert_eq!(code, 1, "forced, yet left alone: {got}");
    assert_eq!(strings(&got["conflicts"]), SWAPPED, "{got}");
    assert!(strings(&got["restored"]).is_empty(), "{got}");
    scene.assert_untouched();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_parent_swapped_for_a_link_while_the_rewind_runs_is_refused_as_it_writes() {
    let mock = MockLlm::start(removing_script()).await;
    let daemon = TestDaemon::spawn_with(DaemonOptions {
        base_url: Some(mock.base_url()),
        config_toml: FAST_RETRIES.to_owned(),
        // Between the rewind's deletions and directories and its writes.
        env: vec![("AMBER_TEST_REWIND_PAUSE_MS".into(), "3000".into())],
    });
    let scene = Scene::new(&daemon);
    let (sid, _) = turn_removing(&daemon).await;

    let mut cmd = daemon.cli();
    cmd.args(["--no-autostart", "rewind", &sid, "1", "--json"]);
    let rewind = std::thread::spawn(move || run_bounded(cmd));
    // The plan saw real (absent) directories; the rewind has made them and now pauses.
    let made = |p: &str| {
        let meta = fs::symlink_metadata(scene.ws.join(p));
        meta.is_ok_and(|m| m.is_dir())
    };
    eventually(
        "the rewind to make d/hooks and e",
        Duration::from_secs(20),
        || made("d/hooks") && made("e"),
    )
    .await;
    for dir in ["d", "e"] {
        fs::remove_dir_all(scene.ws.join(dir)).unwrap();
    }
    scene.swap_for_links();

    let (code, out, err) = rewind.join().unwrap();
    let got: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    assert_eq!(code, Some(1), "{got}\n{err}");
    assert_eq!(strings(&got["conflicts"]), SWAPPED, "{got}");
    assert_eq!(strings(&got["restored"]), ["kept.txt"], "{got}");
    scene.assert_untouched();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_path_in_amber_held_by_a_checkpoint_is_never_restored() {
    let mock = MockLlm::start(vec![
        bash("b", "sleep 2; echo agent > a.txt"),
        MockTurn::text("done"),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let ws = daemon.workspace.clone();
    put(&ws.join(".amber/notes.md"), "v1\n");
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    client.session_prompt(&sid, "write").await.unwrap();
    events.until("tool_call_started").await;
    // Changed while the agent's call runs: the turn's checkpoint holds both versions.
    put(&ws.join(".amber/notes.md"), "v2\n");
    events.turn().await;
    let changed = support::changed(&list(&daemon, &sid)[0]);
    assert!(
        changed.contains(&(".amber/notes.md".to_owned(), "modified".to_owned())),
        "{changed:?}"
    );

    let (code, got) = cli_rewind(&daemon, &sid, "1", &["--force"]);
    assert_eq!(code, 1, "{got}");
    assert_eq!(strings(&got["conflicts"]), [".amber/notes.md"], "{got}");
    assert_eq!(strings(&got["restored"]), ["a.txt"], "{got}");
    assert_eq!(
        fs::read_to_string(ws.join(".amber/notes.md")).unwrap(),
        "v2\n"
    );
    assert!(!ws.join("a.txt").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hand_edit_made_during_a_turn_is_a_conflict_not_undone() {
    let mock = MockLlm::start(vec![
        bash("b1", "echo agent > a.txt && mv old.txt moved.txt"),
        // The model thinks for a while: the user edits meanwhile.
        MockTurn::Delay {
            ms: 3000,
            then: Box::new(bash("b2", "echo two > b.txt")),
        },
        MockTurn::text("done"),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let ws = daemon.workspace.clone();
    fs::create_dir_all(ws.join(".amber")).unwrap();
    put(&ws.join("notes.md"), "the user's notes\n");
    put(&ws.join("old.txt"), "moving\n");
    let before = tree(&ws, false, &|_| false);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    client.session_prompt(&sid, "work").await.unwrap();
    events.until("tool_call_completed").await;
    // The batch's window closes right after its calls complete: the user's edit comes
    // later, while the model thinks (3 s).
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    put(&ws.join("notes.md"), "edited by hand during the turn\n");
    put(&ws.join("hand.txt"), "made by hand during the turn\n");
    events.turn().await;
    assert!(ws.join("b.txt").exists(), "the second call ran");

    // The agent's changes (a rename included) go back; the hand edits stay.
    let (code, got) = cli_rewind(&daemon, &sid, "1", &["--files-only"]);
    assert_eq!(code, 1, "{got}");
    assert_eq!(
        strings(&got["conflicts"]),
        ["hand.txt", "notes.md"],
        "{got}"
    );
    assert_eq!(
        strings(&got["restored"]),
        ["a.txt", "b.txt", "moved.txt", "old.txt"],
        "{got}"
    );
    assert_eq!(
        fs::read_to_string(ws.join("notes.md")).unwrap(),
        "edited by hand during the turn\n"
    );
    assert!(ws.join("hand.txt").exists());

    let (code, got) = cli_rewind(&daemon, &sid, "1", &["--force"]);
    assert_eq!(code, 0, "{got}");
    assert_eq!(tree(&ws, false, &|_| false), before);
}
