//! Every view drawn on terminals too small for it (down to 1×1) must not panic: a resize to
//! a sliver is a normal event, not a crash. Also the status line with a notice beside the
//! segments and the hint row of a scrolled-up transcript.

use crate::common::{
    CHECKPOINTS_NOW, TURN_DIFF, app_with, checkpoint_rows, draw, ev, every_cell, info, screen,
};
use amber_proto::{
    Approval, CheckpointDiffResult, CommandInfo, PanelGetResult, PanelInfo, SessionState,
    StatusSegmentInfo,
};
use amber_tui::app::{App, CheckpointsFor, DiffFor, NoticeKind, Scroll};
use amber_tui::picker::Picker;
use insta::assert_snapshot;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;

/// The audit's sizes and the neighbours of every threshold in the layout.
const SIZES: &[(u16, u16)] = &[
    (1, 1),
    (80, 1),
    (80, 2),
    (10, 5),
    (1, 24),
    (2, 2),
    (3, 3),
    (4, 4),
    (20, 3),
    (40, 6),
    (100, 5),
    (140, 4),
];

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn type_text(app: &mut App, text: &str) {
    for ch in text.chars() {
        app.on_key(key(KeyCode::Char(ch)));
    }
}

fn with_status(mut app: App) -> App {
    app.set_status(
        vec![
            StatusSegmentInfo {
                name: "model".into(),
                text: "mock-model".into(),
            },
            StatusSegmentInfo {
                name: "mode".into(),
                text: "write".into(),
            },
            StatusSegmentInfo {
                name: "context".into(),
                text: "ctx 12%".into(),
            },
        ],
        None,
    );
    app
}

/// One app per view the session screen has.
fn every_view() -> Vec<(&'static str, App)> {
    let mut views = Vec::new();
    views.push(("welcome", with_status(app_with(&[]))));
    views.push(("transcript", with_status(app_with(&every_cell()))));

    let mut scrolled = with_status(app_with(&every_cell()));
    scrolled.scroll = Scroll::Anchor { cell: 2, row: 0 };
    views.push(("scrolled up", scrolled));

    let mut approval = App::new("s_1");
    approval.load_snapshot(
        info(SessionState::WaitingApproval),
        vec![Approval {
            request_id: "r_1".into(),
            call_id: "c_1".into(),
            tool: "edit".into(),
            arguments: json!({"path": "a.rs", "old_string": "a\nb", "new_string": "a\nc"}),
            reason: "outside the write rules".into(),
            scope: "write: a.rs".into(),
            unsandboxed: false,
            person_only: false,
            mcp: None,
        }],
        Vec::new(),
    );
    approval.apply_event(ev(None, json!({"type": "synced", "lastSeq": 0})));
    views.push(("approval", approval));

    let mut help = app_with(&every_cell()[..3]);
    help.on_key(key(KeyCode::Char('?')));
    views.push(("help", help));

    let mut panel = with_status(app_with(&every_cell()[..5]));
    panel.panels = vec![PanelInfo {
        name: "todos".into(),
        title: "Todos".into(),
    }];
    panel.on_key(KeyEvent::new(KeyCode::Char('t'), KeyModifiers::CONTROL));
    panel.set_panel(PanelGetResult {
        name: "todos".into(),
        title: "Todos".into(),
        lines: vec!["[x] one".into(), "[ ] two".into()],
    });
    views.push(("panel", panel));

    let mut commands = app_with(&every_cell()[..3]);
    commands.commands = ["model", "mode"]
        .iter()
        .map(|n| CommandInfo {
            name: (*n).into(),
            description: format!("the {n} command"),
        })
        .collect();
    type_text(&mut commands, "/mo");
    views.push(("command popup", commands));

    let mut files = app_with(&every_cell()[..3]);
    files.files = vec!["src/lib.rs".into(), "src/main.rs".into()];
    type_text(&mut files, "a long prompt that wraps, then a file @src");
    views.push(("file popup", files));

    let mut queued = with_status(app_with(&every_cell()[..3]));
    queued.running = true;
    type_text(&mut queued, "next");
    queued.on_key(key(KeyCode::Enter));
    queued.on_error("approval failed: the daemon went away");
    views.push(("queued and notice", queued));

    // The `/rewind` picker at each step, and a `/diff` cell.
    let mut rewind = app_with(&every_cell()[..3]);
    type_text(&mut rewind, "/rewind");
    rewind.on_key(key(KeyCode::Enter));
    views.push(("rewind loading", clone_rewind(&rewind)));
    let mut rows = checkpoint_rows();
    rows[0].incomplete = Some("a file could not be read, which is a long reason".into());
    rewind.on_checkpoints(CheckpointsFor::Rewind, Ok(rows), CHECKPOINTS_NOW);
    let long: String = (0..40)
        .map(|i| format!("+a long diff line {i} {}\n", "x".repeat(90)))
        .collect();
    rewind.on_checkpoint_diff(
        "turn_d".into(),
        DiffFor::Preview,
        Ok(CheckpointDiffResult {
            diff: long,
            changed: Vec::new(),
        }),
    );
    rewind.on_key(key(KeyCode::PageDown));
    views.push(("rewind picker", clone_rewind(&rewind)));
    rewind.on_key(key(KeyCode::End));
    rewind.on_key(key(KeyCode::Enter));
    views.push(("rewind confirm", rewind));

    let mut diff = app_with(&every_cell()[..3]);
    diff.on_checkpoint_diff(
        "turn_d".into(),
        DiffFor::Transcript {
            title: "turn 4 · a title long enough to be cut on a narrow terminal".into(),
        },
        Ok(CheckpointDiffResult {
            diff: TURN_DIFF.into(),
            changed: Vec::new(),
        }),
    );
    views.push(("diff cell", diff));
    views
}

/// A fresh app showing the same picker as `app` (an `App` is not `Clone`).
fn clone_rewind(app: &App) -> App {
    let mut copy = app_with(&every_cell()[..3]);
    copy.rewind = app.rewind.clone();
    copy
}

#[test]
fn every_view_draws_at_any_size_without_panicking() {
    for (name, mut app) in every_view() {
        for &(w, h) in SIZES {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                draw(&mut app, w, h);
            }));
            assert!(result.is_ok(), "{name} panicked at {w}×{h}");
        }
        // And it still draws normally afterwards.
        assert!(!screen(&mut app, 80, 24).trim().is_empty(), "{name}");
    }
}

#[test]
fn the_picker_draws_at_any_size_without_panicking() {
    let mut session = info(SessionState::Idle);
    session.title = "a title long enough to be cut".into();
    for sessions in [Vec::new(), vec![session]] {
        let picker = Picker::new(sessions, 0);
        for &(w, h) in SIZES {
            let mut terminal =
                ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h)).unwrap();
            terminal
                .draw(|f| amber_tui::ui::picker::draw(&picker, f))
                .unwrap_or_else(|e| panic!("picker at {w}×{h}: {e}"));
        }
    }
}

#[test]
fn the_editor_keeps_a_row_on_a_one_row_terminal() {
    let mut app = app_with(&every_cell());
    type_text(&mut app, "hi");
    let s = screen(&mut app, 20, 1);
    assert_eq!(s.trim_end(), "\"› hi                \"", "{s}");
}

#[test]
fn a_notice_sits_beside_the_status_segments() {
    let mut app = with_status(app_with(&every_cell()[..3]));
    app.on_error("cancel failed: gone");
    let s = screen(&mut app, 80, 24);
    let last = s.lines().last().unwrap();
    assert!(
        last.contains("cancel failed: gone") && last.contains("mock-model"),
        "{last}"
    );
    assert_snapshot!("status_error_notice_beside_segments", last);
    // Expired: only the segments.
    for _ in 0..amber_tui::app::ERROR_TICKS {
        app.tick();
    }
    let s = screen(&mut app, 80, 24);
    let last = s.lines().last().unwrap();
    assert!(!last.contains("cancel failed"), "{last}");
    assert!(last.contains("mock-model"), "{last}");
}

#[test]
fn the_cancel_notice_leaves_with_the_turn() {
    let mut app = with_status(app_with(&[ev(
        Some(1),
        json!({"type": "turn_started", "prompt": "go"}),
    )]));
    // app_with's `synced` came after the turn started: the turn is running.
    app.running = true;
    app.on_key(key(KeyCode::Esc));
    assert_eq!(
        app.notice.as_ref().map(|n| n.kind),
        Some(NoticeKind::Cancelling)
    );
    assert!(screen(&mut app, 80, 24).contains("cancelling the turn"));
    app.apply_event(ev(
        Some(2),
        json!({"type": "turn_completed", "stopReason": "cancelled", "usage": {}}),
    ));
    let s = screen(&mut app, 80, 24);
    assert!(!s.contains("cancelling the turn"), "{s}");
    assert!(s.lines().last().unwrap().contains("mock-model"), "{s}");
}

#[test]
fn the_more_below_hint_has_its_own_row() {
    let mut app = App::new("s_1");
    app.load_snapshot(info(SessionState::Idle), Vec::new(), Vec::new());
    for i in 0..30u64 {
        app.apply_event(ev(
            Some(i + 1),
            json!({"type": "message_completed", "itemId": format!("i_{i}"), "role": "assistant",
                   "text": format!("message number {i} with text that reaches far into the row")}),
        ));
    }
    app.apply_event(ev(None, json!({"type": "synced", "lastSeq": 30})));
    draw(&mut app, 80, 24);
    app.on_key(key(KeyCode::PageUp));
    assert!(matches!(app.scroll, Scroll::Anchor { .. }));
    let s = screen(&mut app, 80, 24);
    let rows: Vec<&str> = s.lines().collect();
    // The transcript is rows 0..=20; its last row is the hint's alone.
    let hint_row = rows
        .iter()
        .position(|r| r.contains("more below"))
        .unwrap_or_else(|| panic!("no hint:\n{s}"));
    assert!(!rows[hint_row].contains("message number"), "{s}");
    assert!(rows[hint_row - 1].contains("message number"), "{s}");
}

#[test]
fn the_rule_says_reconnecting_for_as_long_as_it_lasts() {
    let mut app = with_status(app_with(&every_cell()[..3]));
    app.on_error("lost amberd (connection closed); reconnecting…");
    app.reconnecting = true;
    for _ in 0..amber_tui::app::ERROR_TICKS * 3 {
        app.tick();
    }
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("reconnecting to amberd…"), "{s}");
    assert!(!s.contains("lost amberd"), "the notice expired:\n{s}");
    app.reconnecting = false;
    app.set_notice(NoticeKind::Info, "reconnected to amberd");
    let s = screen(&mut app, 80, 24);
    assert!(!s.contains("reconnecting to amberd…"), "{s}");
    assert!(s.contains("reconnected to amberd"), "{s}");
}
