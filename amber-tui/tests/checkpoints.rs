//! `/rewind`, `/diff` and `/fork` without a daemon: the app asks for each call as an
//! [`Action`], the test answers it as the runtime would, and the screen is snapshot — the
//! picker with its diff preview, the files / conversation / both choice, the result, a
//! turn's diff in the transcript, and the switch to a fork.

use crate::common::{CHECKPOINTS_NOW, TURN_DIFF, app_with, checkpoint_rows, ev, info, screen};
use amber_proto::{
    Approval, CheckpointDiffResult, CommandInfo, NoCheckpoint, SessionRewindResult, SessionState,
};
use amber_tui::app::{
    Action, App, CheckpointsFor, DiffFor, RewindRequest, RewindStage, resolve_turn,
};
use amber_tui::transcript::{Cell, InfoKind};
use insta::assert_snapshot;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn char(c: char) -> KeyEvent {
    key(KeyCode::Char(c))
}

/// Types `text` and presses Enter; returns the actions of the Enter.
fn submit(app: &mut App, text: &str) -> Vec<Action> {
    for ch in text.chars() {
        app.on_key(char(ch));
    }
    app.on_key(key(KeyCode::Enter))
}

fn diff_answer(diff: &str) -> Result<CheckpointDiffResult, String> {
    Ok(CheckpointDiffResult {
        diff: diff.into(),
        changed: Vec::new(),
    })
}

/// An idle session with one finished turn.
fn idle() -> App {
    app_with(&[
        ev(
            Some(1),
            json!({"type": "turn_started", "prompt": "add a test"}),
        ),
        ev(
            Some(2),
            json!({"type": "message_completed", "itemId": "i_1", "role": "assistant", "text": "Added `tests/a.rs`."}),
        ),
        ev(
            Some(3),
            json!({"type": "turn_completed", "stopReason": "end_turn", "usage": {}}),
        ),
    ])
}

/// An app with the `/rewind` picker open on [`checkpoint_rows`] and the newest turn's diff.
fn picker() -> App {
    let mut app = idle();
    assert_eq!(
        submit(&mut app, "/rewind"),
        [Action::ListCheckpoints(CheckpointsFor::Rewind)]
    );
    assert_eq!(
        app.rewind.as_ref().map(|v| v.stage),
        Some(RewindStage::Loading)
    );
    app.on_checkpoints(
        CheckpointsFor::Rewind,
        Ok(checkpoint_rows()),
        CHECKPOINTS_NOW,
    );
    assert_eq!(
        app.drain_actions(),
        [Action::CheckpointDiff {
            turn_id: "turn_d".into(),
            into: DiffFor::Preview
        }],
        "the newest turn is selected and its diff asked for"
    );
    app.on_checkpoint_diff("turn_d".into(), DiffFor::Preview, diff_answer(TURN_DIFF));
    app
}

fn infos(app: &App) -> Vec<(String, InfoKind)> {
    app.transcript
        .cells()
        .filter_map(|c| match c {
            Cell::Info { text, kind } => Some((text.clone(), *kind)),
            _ => None,
        })
        .collect()
}

fn errors(app: &App) -> Vec<(String, String)> {
    app.transcript
        .cells()
        .filter_map(|c| match c {
            Cell::Error { code, message } => Some((code.clone(), message.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn rewind_picker_lists_turns_newest_first_with_the_diff() {
    let mut app = picker();
    assert_snapshot!(screen(&mut app, 80, 24));
}

#[test]
fn rewind_picker_fetches_each_preview_once() {
    let mut app = picker();
    // Turn 3 has no checkpoint: no diff to ask for, the picker says why.
    assert_eq!(app.on_key(key(KeyCode::Down)), []);
    let s = screen(&mut app, 80, 24);
    assert!(
        s.contains("no checkpoint: it changed no files (no file-changing tool call)"),
        "{s}"
    );
    let actions = app.on_key(key(KeyCode::Down));
    assert_eq!(
        actions,
        [Action::CheckpointDiff {
            turn_id: "turn_b".into(),
            into: DiffFor::Preview
        }]
    );
    // Back to a turn whose diff is here: no second call.
    assert_eq!(app.on_key(key(KeyCode::Up)), []);
    assert_eq!(app.on_key(key(KeyCode::Up)), []);
    assert_eq!(app.on_key(char('j')), []);
    assert_eq!(app.on_key(char('j')), []);
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("loading the diff…"), "{s}");
    app.on_checkpoint_diff("turn_b".into(), DiffFor::Preview, Err("gone".into()));
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("no diff: gone"), "{s}");
}

#[test]
fn rewind_picker_scrolls_the_preview_not_the_transcript() {
    let mut app = picker();
    let long: String = (0..60).map(|i| format!("+line {i}\n")).collect();
    app.on_checkpoint_diff("turn_d".into(), DiffFor::Preview, diff_answer(&long));
    app.on_key(key(KeyCode::PageDown));
    assert_eq!(app.rewind.as_ref().unwrap().preview_scroll, 10);
    assert_eq!(app.scroll, amber_tui::app::Scroll::Follow);
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("+line 10") && !s.contains("+line 9 "), "{s}");
    app.on_key(key(KeyCode::PageUp));
    assert_eq!(app.rewind.as_ref().unwrap().preview_scroll, 0);
}

#[test]
fn rewind_asks_files_conversation_or_both() {
    let mut app = picker();
    app.on_key(key(KeyCode::Down));
    app.on_key(key(KeyCode::Down));
    app.on_key(key(KeyCode::Enter));
    assert_eq!(
        app.rewind.as_ref().map(|v| v.stage),
        Some(RewindStage::Confirm)
    );
    app.on_key(char('!'));
    assert_snapshot!(screen(&mut app, 80, 24));
    let actions = app.on_key(char('f'));
    assert_eq!(
        actions,
        [Action::Rewind(RewindRequest {
            turn_id: "turn_b".into(),
            turn: 2,
            prompt: "fix the build\nand run the tests".into(),
            files: true,
            conversation: false,
            force: true,
        })]
    );
    assert_eq!(
        app.rewind.as_ref().map(|v| v.stage),
        Some(RewindStage::Running)
    );
    // Keys wait for the answer.
    assert_eq!(app.on_key(char('b')), []);
}

#[test]
fn rewind_keys_choose_what_is_restored() {
    for (k, files, conversation) in [
        (key(KeyCode::Enter), true, true),
        (char('b'), true, true),
        (char('f'), true, false),
        (char('c'), false, true),
    ] {
        let mut app = picker();
        app.on_key(key(KeyCode::Enter));
        let actions = app.on_key(k);
        let [Action::Rewind(request)] = &actions[..] else {
            panic!("{k:?}: {actions:?}");
        };
        assert_eq!(
            (
                request.turn_id.as_str(),
                request.files,
                request.conversation,
                request.force
            ),
            ("turn_d", files, conversation, false),
            "{k:?}"
        );
    }
}

#[test]
fn rewind_result_lists_paths_and_gives_the_prompt_back() {
    let mut app = picker();
    app.on_key(key(KeyCode::Enter));
    let [Action::Rewind(request)] = &app.on_key(key(KeyCode::Enter))[..] else {
        panic!("no rewind")
    };
    // The durable event arrives on the subscription, the answer on the call.
    app.apply_event(ev(
        Some(4),
        json!({"type": "rewound", "turnId": "turn_d", "restored": ["src/lib.rs", "tests/a.rs"],
               "conflicts": ["notes.md"], "removedTurns": 1}),
    ));
    app.on_rewound(
        request.clone(),
        Ok(SessionRewindResult {
            restored: vec!["src/lib.rs".into(), "tests/a.rs".into()],
            conflicts: vec!["notes.md".into()],
            removed_turns: 1,
        }),
    );
    assert!(app.rewind.is_none());
    assert_eq!(app.input.text(), "add a test");
    let (text, kind) = infos(&app).pop().unwrap();
    assert_eq!(kind, InfoKind::Warn, "conflicts were left alone");
    assert_eq!(
        text,
        "rewound to before turn 4 (files and conversation)\n\
         restored: src/lib.rs, tests/a.rs\n\
         left alone, changed outside amber since: notes.md\n\
         its prompt is back in the editor"
    );
    assert!(app.drain_actions().contains(&Action::RefreshStatus));
    assert_snapshot!(screen(&mut app, 80, 24));
}

#[test]
fn rewind_of_files_only_keeps_the_editor_and_says_so_plainly() {
    let mut app = picker();
    let request = RewindRequest {
        turn_id: "turn_a".into(),
        turn: 1,
        prompt: "write the notes".into(),
        files: true,
        conversation: false,
        force: false,
    };
    app.on_rewound(request.clone(), Ok(SessionRewindResult::default()));
    assert_eq!(app.input.text(), "");
    assert_eq!(
        infos(&app).pop().unwrap(),
        (
            "rewound to before turn 1 (files only)\nno file needed restoring".into(),
            InfoKind::Command
        )
    );
    // Forced: the daemon still lists the conflicts, but they were put back.
    app.on_rewound(
        RewindRequest {
            force: true,
            ..request.clone()
        },
        Ok(SessionRewindResult {
            restored: vec!["a.rs".into()],
            conflicts: vec!["a.rs".into()],
            removed_turns: 0,
        }),
    );
    assert_eq!(
        infos(&app).pop().unwrap(),
        (
            "rewound to before turn 1 (files only)\nrestored: a.rs\nchanged outside amber since, put back too: a.rs".into(),
            InfoKind::Command
        )
    );
    // A prompt already being typed is not replaced.
    app.input.set("my draft");
    app.on_rewound(
        RewindRequest {
            conversation: true,
            files: false,
            ..request
        },
        Ok(SessionRewindResult::default()),
    );
    assert_eq!(app.input.text(), "my draft");
}

#[test]
fn rewind_errors_show_in_the_transcript() {
    let mut app = picker();
    app.on_key(key(KeyCode::Enter));
    let [Action::Rewind(request)] = &app.on_key(key(KeyCode::Enter))[..] else {
        panic!("no rewind")
    };
    app.on_rewound(
        request.clone(),
        Err("daemon error -32602: the session is running; wait for the turn to end".into()),
    );
    assert!(app.rewind.is_none());
    assert_eq!(
        errors(&app),
        [(
            "rewind".into(),
            "daemon error -32602: the session is running; wait for the turn to end".into()
        )]
    );
    // A failed list closes the picker too.
    let mut app = app_with(&[]);
    submit(&mut app, "/rewind");
    app.on_checkpoints(CheckpointsFor::Rewind, Err("no such session".into()), 0);
    assert!(app.rewind.is_none());
    assert_eq!(errors(&app), [("rewind".into(), "no such session".into())]);
}

#[test]
fn rewind_of_an_incomplete_checkpoint_offers_the_conversation_only() {
    let mut app = app_with(&[]);
    submit(&mut app, "/rewind");
    let mut rows = checkpoint_rows();
    rows[3].incomplete = Some("big.bin could not be read".into());
    app.on_checkpoints(CheckpointsFor::Rewind, Ok(rows), CHECKPOINTS_NOW);
    app.drain_actions();
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("incomplete · add a test"), "{s}");
    app.on_key(key(KeyCode::Enter));
    let s = screen(&mut app, 80, 24);
    assert!(
        s.contains("! files cannot be restored (turn 4: incomplete checkpoint: big.bin"),
        "{s}"
    );
    assert_eq!(app.on_key(char('b')), []);
    assert_eq!(app.on_key(char('f')), []);
    let notice = app.notice.as_ref().map(|n| n.text.clone()).unwrap();
    assert!(notice.contains("the files cannot be restored"), "{notice}");
    // An earlier turn cannot have its files back either: the rewind would cross turn 4.
    app.on_key(key(KeyCode::Esc));
    app.on_key(key(KeyCode::End));
    app.on_key(key(KeyCode::Enter));
    assert_eq!(app.on_key(char('f')), []);
    let notice = app.notice.as_ref().map(|n| n.text.clone()).unwrap();
    assert!(notice.contains("turn 4: incomplete checkpoint"), "{notice}");
    let actions = app.on_key(char('c'));
    assert!(
        matches!(&actions[..], [Action::Rewind(r)] if r.turn_id == "turn_a" && !r.files && r.conversation),
        "{actions:?}"
    );
}

#[test]
fn rewind_lists_every_turn_and_an_expired_one_offers_the_conversation_only() {
    let mut app = app_with(&[]);
    submit(&mut app, "/rewind");
    let mut rows = checkpoint_rows();
    rows[0].checkpoint = Some(NoCheckpoint::Expired);
    rows[0].changed.clear();
    app.on_checkpoints(CheckpointsFor::Rewind, Ok(rows), CHECKPOINTS_NOW);
    app.drain_actions();
    assert_snapshot!(screen(&mut app, 80, 24));

    // A turn that changed no files: a files rewind to it puts back the later turns'.
    app.on_key(key(KeyCode::Down));
    app.on_key(key(KeyCode::Enter));
    let s = screen(&mut app, 80, 24);
    assert!(
        s.contains("files go back to before it: src/lib.rs, tests/a.rs"),
        "{s}"
    );
    assert!(!s.contains("cannot be restored"), "{s}");
    let actions = app.on_key(char('b'));
    assert!(
        matches!(&actions[..], [Action::Rewind(r)] if r.turn_id == "turn_c" && r.files && r.conversation),
        "{actions:?}"
    );

    // The expired one: its files are gone, its conversation is not.
    let mut app = app_with(&[]);
    submit(&mut app, "/rewind");
    let mut rows = checkpoint_rows();
    rows[0].checkpoint = Some(NoCheckpoint::Expired);
    app.on_checkpoints(CheckpointsFor::Rewind, Ok(rows), CHECKPOINTS_NOW);
    app.on_key(key(KeyCode::End));
    assert_eq!(app.drain_actions(), [], "no diff asked for an expired turn");
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("no checkpoint: it expired"), "{s}");
    app.on_key(key(KeyCode::Enter));
    assert_eq!(app.on_key(char('f')), []);
    let notice = app.notice.as_ref().map(|n| n.text.clone()).unwrap();
    assert!(
        notice.contains("turn 1: its checkpoint expired"),
        "{notice}"
    );
    let actions = app.on_key(char('c'));
    assert!(
        matches!(&actions[..], [Action::Rewind(r)] if r.turn_id == "turn_a" && !r.files),
        "{actions:?}"
    );
}

#[test]
fn rewind_esc_goes_back_then_closes() {
    let mut app = picker();
    app.on_key(key(KeyCode::Enter));
    app.on_key(key(KeyCode::Esc));
    assert_eq!(
        app.rewind.as_ref().map(|v| v.stage),
        Some(RewindStage::Pick)
    );
    app.on_key(key(KeyCode::Esc));
    assert!(app.rewind.is_none());
    // Ctrl-C closes it too, without arming quit or cancelling anything.
    let mut app = picker();
    let actions = app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
    assert_eq!(actions, []);
    assert!(app.rewind.is_none() && app.notice.is_none());
    // Typing in the picker does not reach the editor.
    let mut app = picker();
    app.on_key(char('x'));
    app.on_paste("pasted");
    assert_eq!(app.input.text(), "");
}

#[test]
fn rewind_without_turns_says_so() {
    let mut app = app_with(&[]);
    submit(&mut app, "/rewind");
    app.on_checkpoints(CheckpointsFor::Rewind, Ok(Vec::new()), 0);
    assert!(app.rewind.is_none());
    assert_eq!(
        infos(&app),
        [("no turns yet: nothing to rewind".into(), InfoKind::Note)]
    );
}

#[test]
fn an_approval_is_answered_over_the_picker() {
    let mut app = picker();
    app.load_snapshot(
        info(SessionState::WaitingApproval),
        vec![Approval {
            request_id: "r_1".into(),
            call_id: "c_1".into(),
            tool: "bash".into(),
            arguments: json!({"command": "ls"}),
            reason: "asks".into(),
            scope: "bash: ls".into(),
            unsandboxed: false,
            person_only: false,
            mcp: None,
        }],
        Vec::new(),
    );
    app.drain_actions();
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("Approval needed"), "{s}");
    let actions = app.on_key(char('y'));
    assert!(
        matches!(&actions[..], [Action::Approve { .. }]),
        "{actions:?}"
    );
    assert!(app.rewind.is_some(), "the picker is still there");
}

#[test]
fn diff_shows_the_last_turn_in_the_transcript() {
    let mut app = idle();
    assert_eq!(
        submit(&mut app, "/diff"),
        [Action::ListCheckpoints(CheckpointsFor::Diff(None))]
    );
    app.on_checkpoints(
        CheckpointsFor::Diff(None),
        Ok(checkpoint_rows()),
        CHECKPOINTS_NOW,
    );
    let title = "turn 4 · add a test".to_owned();
    assert_eq!(
        app.drain_actions(),
        [Action::CheckpointDiff {
            turn_id: "turn_d".into(),
            into: DiffFor::Transcript {
                title: title.clone()
            }
        }]
    );
    app.on_checkpoint_diff(
        "turn_d".into(),
        DiffFor::Transcript { title },
        diff_answer(TURN_DIFF),
    );
    assert_snapshot!(screen(&mut app, 80, 24));
}

#[test]
fn diff_of_a_turn_resolves_numbers_and_ids() {
    let mut app = app_with(&[]);
    assert_eq!(
        submit(&mut app, "/diff 2"),
        [Action::ListCheckpoints(CheckpointsFor::Diff(Some(
            "2".into()
        )))]
    );
    app.on_checkpoints(
        CheckpointsFor::Diff(Some("2".into())),
        Ok(checkpoint_rows()),
        0,
    );
    assert_eq!(
        app.drain_actions(),
        [Action::CheckpointDiff {
            turn_id: "turn_b".into(),
            into: DiffFor::Transcript {
                title: "turn 2 · fix the build and run the tests".into()
            }
        }]
    );
    app.on_checkpoints(
        CheckpointsFor::Diff(Some("turn_zz".into())),
        Ok(checkpoint_rows()),
        0,
    );
    assert_eq!(
        app.drain_actions(),
        [Action::CheckpointDiff {
            turn_id: "turn_zz".into(),
            into: DiffFor::Transcript {
                title: "turn turn_zz".into()
            }
        }]
    );
    app.on_checkpoints(
        CheckpointsFor::Diff(Some("3".into())),
        Ok(checkpoint_rows()),
        0,
    );
    app.on_checkpoints(
        CheckpointsFor::Diff(Some("7".into())),
        Ok(checkpoint_rows()),
        0,
    );
    // The last checkpoint, not the last turn.
    let mut rows = checkpoint_rows();
    rows.pop();
    app.on_checkpoints(CheckpointsFor::Diff(None), Ok(rows), 0);
    assert!(
        matches!(&app.drain_actions()[..], [Action::CheckpointDiff { turn_id, .. }] if turn_id == "turn_b")
    );
    let mut rows = checkpoint_rows();
    rows.retain(|r| r.checkpoint.is_some());
    app.on_checkpoints(CheckpointsFor::Diff(None), Ok(rows), 0);
    app.on_checkpoints(CheckpointsFor::Diff(None), Ok(Vec::new()), 0);
    app.on_checkpoint_diff(
        "turn_b".into(),
        DiffFor::Transcript { title: "t".into() },
        Err("unknown turn".into()),
    );
    assert_eq!(
        errors(&app),
        [
            (
                "diff".into(),
                "turn 3 has no checkpoint: it changed no files (no file-changing tool call)".into()
            ),
            ("diff".into(), "no turn 7 in this session".into()),
            ("diff".into(), "unknown turn".into()),
        ]
    );
    let note = (
        "no checkpoints yet: a turn gets one when it first changes files".to_owned(),
        InfoKind::Note,
    );
    assert_eq!(infos(&app), [note.clone(), note]);
}

#[test]
fn fork_switches_to_the_new_session() {
    let mut app = app_with(&[]);
    assert_eq!(
        submit(&mut app, "/fork"),
        [Action::Fork {
            turn_id: None,
            label: None
        }]
    );
    let mut forked = info(SessionState::Idle);
    forked.session_id = "s_2".into();
    app.on_forked(None, Ok(forked.clone()));
    assert_eq!(app.drain_actions(), [Action::SwitchSession("s_2".into())]);
    assert_eq!(
        app.switch_note.as_deref(),
        Some("forked from session s_1 (the whole conversation); the original is unchanged")
    );
    // A turn id goes as is; a number through the checkpoints.
    assert_eq!(
        submit(&mut app, "/fork turn_b"),
        [Action::Fork {
            turn_id: Some("turn_b".into()),
            label: Some("turn_b".into())
        }]
    );
    assert_eq!(
        submit(&mut app, "/fork 2"),
        [Action::ListCheckpoints(CheckpointsFor::Fork("2".into()))]
    );
    app.on_checkpoints(CheckpointsFor::Fork("2".into()), Ok(checkpoint_rows()), 0);
    assert_eq!(
        app.drain_actions(),
        [Action::Fork {
            turn_id: Some("turn_b".into()),
            label: Some("turn 2".into())
        }]
    );
    app.on_forked(Some("turn 2".into()), Ok(forked));
    assert_eq!(
        app.switch_note.as_deref(),
        Some("forked from session s_1 (the conversation before turn 2); the original is unchanged")
    );
    app.on_forked(Some("turn 2".into()), Err("unknown turn".into()));
    assert_eq!(errors(&app), [("fork".into(), "unknown turn".into())]);
    // Any turn forks, one that changed no files too.
    submit(&mut app, "/fork 3");
    app.drain_actions();
    app.on_checkpoints(CheckpointsFor::Fork("3".into()), Ok(checkpoint_rows()), 0);
    assert_eq!(
        app.drain_actions(),
        [Action::Fork {
            turn_id: Some("turn_c".into()),
            label: Some("turn 3".into())
        }]
    );
}

#[test]
fn the_local_commands_are_in_the_popup_once() {
    let mut app = app_with(&[]);
    app.set_commands(vec![
        CommandInfo {
            name: "help".into(),
            description: "the help".into(),
        },
        // A daemon that has one of the names keeps its description; it is not listed twice.
        CommandInfo {
            name: "diff".into(),
            description: "the daemon's diff".into(),
        },
    ]);
    let names: Vec<&str> = app.commands.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "help", "diff", "sessions", "rewind", "fork", "detach", "quit", "exit", "init", "copy",
            "model", "rename"
        ]
    );
    for ch in "/re".chars() {
        app.on_key(char(ch));
    }
    let popup = app.popup.as_ref().expect("a popup");
    assert_eq!(popup.items[0].0, "rewind");
}

#[test]
fn turn_arguments_resolve_through_the_turn_numbers() {
    let rows = checkpoint_rows();
    assert_eq!(resolve_turn(&rows, "4").unwrap().0, "turn_d");
    assert_eq!(resolve_turn(&rows, "004").unwrap().0, "turn_d");
    assert_eq!(resolve_turn(&rows, " 1 ").unwrap().0, "turn_a");
    assert_eq!(
        resolve_turn(&rows, "3").unwrap().0,
        "turn_c",
        "a turn without a checkpoint has its number too"
    );
    assert!(resolve_turn(&rows, "5").is_err());
    assert!(resolve_turn(&rows, "0").is_err());
    let (id, row) = resolve_turn(&rows, "turn_b").unwrap();
    assert_eq!((id.as_str(), row.map(|r| r.turn)), ("turn_b", Some(2)));
    let (id, row) = resolve_turn(&rows, "turn_x").unwrap();
    assert_eq!((id.as_str(), row), ("turn_x", None));
}
