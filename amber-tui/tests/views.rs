//! Snapshot tests of every view on ratatui's `TestBackend`: the transcript with each cell
//! type (narrow 80×24 and wide 140×40), streaming, the approval overlay, the picker, the
//! status line, panels, the input popups, the help overlay and the session switcher (its
//! tree of background sub-agents folded and unfolded).

use crate::common::{app_with, draw, ev, every_cell, info, screen};
use amber_proto::{
    Approval, ChildState, CommandInfo, ContextUse, PanelGetResult, PanelInfo, SessionState,
    StatusSegmentInfo, Usage,
};
use amber_tui::app::{App, Scroll};
use amber_tui::picker::Picker;
use insta::assert_snapshot;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::style::Color;
use serde_json::json;

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

fn type_text(app: &mut App, text: &str) {
    for ch in text.chars() {
        app.on_key(key(KeyCode::Char(ch)));
    }
}

fn with_status(mut app: App) -> App {
    let seg = |name: &str, text: &str| StatusSegmentInfo {
        name: name.into(),
        text: text.into(),
    };
    app.set_status(
        vec![
            seg("model", "mock-model"),
            seg("mode", "write"),
            seg("state", "idle"),
            seg("context", "ctx 12%"),
            seg("tokens", "15k tok"),
            seg("git", "⎇ main"),
        ],
        Some(ContextUse {
            tokens: 15_360,
            window: 128_000,
        }),
    );
    app.live.seed(&Usage {
        total_tokens: 15_000,
        ..Usage::default()
    });
    app
}

#[test]
fn transcript_every_cell_wide() {
    let mut app = with_status(app_with(&every_cell()));
    assert_snapshot!(screen(&mut app, 140, 100));
}

#[test]
fn transcript_every_cell_narrow_follows_the_bottom() {
    let mut app = with_status(app_with(&every_cell()));
    assert_snapshot!(screen(&mut app, 80, 24));
}

#[test]
fn transcript_expanded_details() {
    let mut app = app_with(&every_cell());
    app.on_key(ctrl('o'));
    assert!(app.expanded);
    app.scroll = Scroll::Anchor { cell: 3, row: 0 };
    assert_snapshot!(screen(&mut app, 80, 40));
}

#[test]
fn transcript_scrolled_up_shows_more_below() {
    let mut app = with_status(app_with(&every_cell()));
    draw(&mut app, 80, 24);
    app.on_key(key(KeyCode::PageUp));
    assert!(matches!(app.scroll, Scroll::Anchor { .. }));
    assert_snapshot!(screen(&mut app, 80, 24));
    // Paging back down to the bottom follows new output again.
    for _ in 0..10 {
        app.on_key(key(KeyCode::PageDown));
    }
    draw(&mut app, 80, 24);
    assert_eq!(app.scroll, Scroll::Follow);
}

#[test]
fn streaming_reply_shows_the_partial_line_but_never_raw_markup() {
    let mut app = app_with(&[ev(
        Some(1),
        json!({"type": "turn_started", "prompt": "explain"}),
    )]);
    for d in [
        "# Ti",
        "tle\n\nSome **bold** te",
        "xt and `co",
        "de`\n\n- a **half",
    ] {
        app.apply_event(ev(
            None,
            json!({"type": "message_delta", "itemId": "i_1", "delta": d}),
        ));
    }
    assert!(app.running);
    let s = screen(&mut app, 80, 16);
    assert!(!s.contains("**"), "raw markup on screen:\n{s}");
    assert_snapshot!(s);
}

#[test]
fn edit_and_write_diffs_are_coloured() {
    let mut app = app_with(&every_cell()[4..8]);
    let t = draw(&mut app, 80, 24);
    let buf = t.backend().buffer();
    let row_of = |needle: &str| {
        (0..buf.area.height)
            .find(|&y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol())
                    .collect::<String>()
                    .contains(needle)
            })
            .unwrap_or_else(|| panic!("{needle:?} not on screen"))
    };
    let colour_at = |y: u16, sym: &str| {
        (0..buf.area.width)
            .find(|&x| buf[(x, y)].symbol() == sym)
            .map(|x| buf[(x, y)].fg)
    };
    assert_eq!(colour_at(row_of("-     1"), "-"), Some(Color::Red));
    assert_eq!(colour_at(row_of("+     2"), "+"), Some(Color::Green));
    assert_eq!(colour_at(row_of("+ first"), "+"), Some(Color::Green));
}

fn approval(id: &str, tool: &str, args: serde_json::Value) -> Approval {
    Approval {
        request_id: id.into(),
        call_id: format!("c_{id}"),
        tool: tool.into(),
        arguments: args,
        reason: "destructive command".into(),
        scope: "bash: rm".into(),
        unsandboxed: false,
        person_only: false,
        mcp: None,
    }
}

#[test]
fn approval_overlay_bash_narrow() {
    let mut app = App::new("s_1");
    let long =
        "rm -rf build && cargo build --release --all-features --workspace 2>&1 | tee build.log";
    app.load_snapshot(
        info(SessionState::WaitingApproval),
        vec![
            approval("r_1", "bash", json!({"command": long})),
            approval("r_2", "write", json!({"path": "a", "content": "x"})),
        ],
        Vec::new(),
    );
    app.apply_event(ev(None, json!({"type": "synced", "lastSeq": 0})));
    assert_snapshot!(screen(&mut app, 80, 24));
}

#[test]
fn approval_overlay_edit_diff_wide() {
    let mut app = app_with(&every_cell()[..3]);
    app.apply_event(ev(Some(4), json!({"type": "approval_requested", "requestId": "r_9", "callId": "c_9", "tool": "edit",
        "arguments": {"path": "src/main.rs", "old_string": "let a = 1;\nlet b = 2;", "new_string": "let a = 1;\nlet b = 3;\nlet c = 4;"},
        "reason": "outside the write rules", "scope": "write: src/"})));
    assert_snapshot!(screen(&mut app, 140, 40));
}

#[test]
fn approval_keys_answer_and_queue() {
    let mut app = App::new("s_1");
    app.load_snapshot(
        info(SessionState::WaitingApproval),
        vec![
            approval("r_1", "bash", json!({"command": "rm a"})),
            approval("r_2", "bash", json!({"command": "rm b"})),
        ],
        Vec::new(),
    );
    app.drain_actions();
    let actions = app.on_key(key(KeyCode::Char('n')));
    assert_eq!(
        actions,
        [amber_tui::app::Action::Approve {
            request_id: "r_1".into(),
            decision: amber_proto::Decision::Deny,
            feedback: None,
            content: None,
        }]
    );
    assert_eq!(app.approvals.len(), 1);
    // Answered elsewhere: the overlay closes here.
    app.apply_event(ev(Some(1), json!({"type": "approval_resolved", "requestId": "r_2", "decision": "allow_once", "by": "client"})));
    assert!(app.approvals.is_empty());
    let actions = app.on_key(key(KeyCode::Char('A')));
    assert!(actions.is_empty(), "no overlay, `A` is typed: {actions:?}");
    assert_eq!(app.input.text(), "A");
}

fn sessions() -> Vec<amber_proto::SessionInfo> {
    let mut a = info(SessionState::Running);
    a.session_id = "s_1".into();
    a.title = "fix the build".into();
    a.updated_at = "2025-01-02T03:00:00Z".into();
    let mut b = info(SessionState::Idle);
    b.session_id = "s_2".into();
    b.title = "write the release notes for version 2 of the product".into();
    b.cwd = "/home/u/a/very/long/path/to/some/deeply/nested/project".into();
    b.updated_at = "2025-01-01T03:04:05Z".into();
    let mut c = info(SessionState::WaitingApproval);
    c.session_id = "s_3".into();
    c.title = String::new();
    c.updated_at = "2025-01-02T03:04:00Z".into();
    vec![a, b, c]
}

fn picker_screen(p: &Picker, w: u16, h: u16) -> String {
    let mut terminal = ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h)).unwrap();
    terminal
        .draw(|f| amber_tui::ui::picker::draw(p, f))
        .unwrap();
    crate::common::assert_ansi_only(&terminal);
    terminal.backend().to_string()
}

#[test]
fn picker_narrow_and_delete_confirm() {
    let now = amber_tui::picker::parse_rfc3339("2025-01-02T03:05:00Z").unwrap();
    let mut p = Picker::new(sessions(), now);
    assert_eq!(p.sessions[0].session_id, "s_3", "newest activity first");
    p.on_key(key(KeyCode::Down));
    assert_snapshot!("picker_narrow", picker_screen(&p, 80, 24));
    assert_eq!(p.on_key(key(KeyCode::Char('d'))), None);
    assert_snapshot!("picker_confirm_delete", picker_screen(&p, 80, 10));
    assert_eq!(
        p.on_key(key(KeyCode::Char('y'))),
        Some(amber_tui::picker::PickerAction::Delete("s_1".into()))
    );
    assert_eq!(
        p.on_key(key(KeyCode::Enter)),
        Some(amber_tui::picker::PickerAction::Attach("s_1".into()))
    );
    assert_eq!(
        p.on_key(key(KeyCode::Char('n'))),
        Some(amber_tui::picker::PickerAction::New)
    );
}

#[test]
fn picker_wide() {
    let now = amber_tui::picker::parse_rfc3339("2025-01-02T03:05:00Z").unwrap();
    assert_snapshot!(picker_screen(&Picker::new(sessions(), now), 140, 12));
}

#[test]
fn status_line_and_notice() {
    let mut app = with_status(app_with(&every_cell()[..3]));
    let s = screen(&mut app, 80, 24);
    assert_snapshot!("status_line", s.lines().last().unwrap());
    app.on_key(ctrl('c'));
    let s = screen(&mut app, 80, 24);
    assert_snapshot!("status_notice", s.lines().last().unwrap());
}

fn panels(app: &mut App) {
    app.panels = vec![
        PanelInfo {
            name: "todos".into(),
            title: "Todos".into(),
        },
        PanelInfo {
            name: "mcp".into(),
            title: "MCP servers".into(),
        },
    ];
    let actions = app.on_key(ctrl('t'));
    assert_eq!(
        actions,
        [amber_tui::app::Action::RefreshPanel("todos".into())]
    );
    app.set_panel(PanelGetResult {
        name: "todos".into(),
        title: "Todos".into(),
        lines: vec![
            "[x] read the error".into(),
            "[~] fix lib.rs".into(),
            "[ ] run the tests".into(),
        ],
    });
}

#[test]
fn panel_beside_the_transcript_when_wide() {
    let mut app = with_status(app_with(&every_cell()[..5]));
    panels(&mut app);
    assert_snapshot!(screen(&mut app, 140, 40));
}

#[test]
fn panel_under_the_transcript_when_narrow() {
    let mut app = with_status(app_with(&every_cell()[..5]));
    panels(&mut app);
    assert_snapshot!(screen(&mut app, 80, 24));
    app.on_key(ctrl('t'));
    assert_eq!(app.panel.as_ref().map(|p| p.name.as_str()), Some("mcp"));
    app.on_key(ctrl('t'));
    assert!(app.panel.is_none());
}

#[test]
fn command_popup() {
    let mut app = with_status(app_with(&every_cell()[..3]));
    app.commands = ["help", "mode", "model", "compact", "detach"]
        .iter()
        .map(|n| CommandInfo {
            name: (*n).into(),
            description: format!("the {n} command"),
        })
        .collect();
    type_text(&mut app, "/mo");
    app.on_key(key(KeyCode::Down));
    assert_snapshot!(screen(&mut app, 80, 24));
    app.on_key(key(KeyCode::Tab));
    assert_eq!(app.input.text(), "/model ");
    type_text(&mut app, "gpt-4o");
    let actions = app.on_key(key(KeyCode::Enter));
    assert_eq!(
        actions,
        [amber_tui::app::Action::RunCommand {
            name: "model".into(),
            args: "gpt-4o".into()
        }]
    );
}

#[test]
fn file_popup_and_multiline_input() {
    let mut app = with_status(app_with(&every_cell()[..3]));
    app.files = vec![
        "Cargo.toml".into(),
        "src/lib.rs".into(),
        "src/main.rs".into(),
        "docs/lib-notes.md".into(),
    ];
    type_text(&mut app, "first line");
    app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::SHIFT));
    app.on_key(ctrl('j'));
    type_text(&mut app, "look at @lib");
    assert_snapshot!(screen(&mut app, 80, 24));
    app.on_key(key(KeyCode::Enter));
    assert_eq!(app.input.text(), "first line\n\nlook at @src/lib.rs ");
}

#[test]
fn queued_prompt_until_its_turn_starts() {
    let mut app = with_status(app_with(&every_cell()[..3]));
    app.running = true;
    type_text(&mut app, "and then run the tests");
    let actions = app.on_key(key(KeyCode::Enter));
    assert!(matches!(
        &actions[..],
        [amber_tui::app::Action::Prompt { local_id: 1, .. }]
    ));
    app.on_prompt_sent(1, Ok("t_2".into()));
    assert_snapshot!(screen(&mut app, 80, 24));
    app.apply_event(ev(
        Some(4),
        json!({"type": "turn_started", "turnId": "t_2", "prompt": "and then run the tests"}),
    ));
    assert!(app.queued.is_empty());
}

#[test]
fn help_overlay() {
    let mut app = with_status(app_with(&every_cell()[..3]));
    app.on_key(key(KeyCode::Char('?')));
    assert!(app.help);
    assert_snapshot!(screen(&mut app, 80, 24));
}

#[test]
fn empty_session_welcome() {
    let mut app = with_status(app_with(&[]));
    assert_snapshot!(screen(&mut app, 80, 24));
}

#[test]
fn status_line_shows_a_retry_wait() {
    let mut app = with_status(app_with(&every_cell()[..3]));
    app.apply_event(ev(
        None,
        json!({"type": "retrying", "attempt": 1, "maxAttempts": 4, "delayMs": 8000,
               "reason": "429 rate limited"}),
    ));
    let s = screen(&mut app, 80, 24);
    assert_snapshot!("status_retrying", s.lines().last().unwrap());
}

#[test]
fn status_line_moves_while_a_reply_streams() {
    let mut app = with_status(app_with(&[
        ev(
            Some(1),
            json!({"type": "prompt_queued", "prompt": "explain", "turnId": "t_1"}),
        ),
        ev(
            Some(2),
            json!({"type": "prompt_queued", "prompt": "then test", "turnId": "t_2"}),
        ),
        ev(
            Some(3),
            json!({"type": "prompt_queued", "prompt": "then commit", "turnId": "t_3"}),
        ),
        ev(
            Some(4),
            json!({"type": "turn_started", "prompt": "explain", "turnId": "t_1"}),
        ),
    ]));
    // The envelope's time is 2025-01-02T03:04:05Z: 75 s later.
    app.now_ms = (amber_tui::picker::parse_rfc3339("2025-01-02T03:04:05Z").unwrap() + 75) * 1000;
    let idle_status = screen(&mut app, 80, 12);
    assert!(idle_status.contains("ctx 12% · 15k tok"), "{idle_status}");
    for _ in 0..200 {
        app.apply_event(ev(
            None,
            json!({"type": "message_delta", "itemId": "i_1", "delta": "The build fails because the "}),
        ));
    }
    let s = screen(&mut app, 80, 12);
    assert!(s.contains("working 1m15s · 2 queued"), "{s}");
    assert!(s.contains("ctx ~13% · ~16k tok"), "{s}");
    assert_snapshot!(s);
    // The call's usage replaces the estimate.
    app.apply_event(ev(
        Some(5),
        json!({"type": "usage", "promptTokens": 16000, "completionTokens": 1500, "cachedTokens": 0, "totalTokens": 17500,
               "usage": {"promptTokens": 16000, "completionTokens": 1500, "cachedTokens": 0, "totalTokens": 17500},
               "total": {"promptTokens": 30000, "completionTokens": 2500, "cachedTokens": 0, "totalTokens": 32500}}),
    ));
    let s = screen(&mut app, 80, 12);
    assert!(s.contains("ctx 13% · 32k tok"), "{s}");
}

/// Three sessions: the attached one idle, one running, one waiting for an approval.
fn three_sessions(app: &mut App) {
    let other = |id: &str, title: &str, cwd: &str, state: SessionState, updated: &str| {
        let mut s = info(state);
        s.session_id = id.into();
        s.title = title.into();
        s.cwd = cwd.into();
        s.updated_at = updated.into();
        s
    };
    app.sessions.set_listed(vec![
        info(SessionState::Idle),
        other(
            "s_2",
            "upgrade tokio",
            "/srv/api",
            SessionState::Running,
            "2025-01-02T03:05:00Z",
        ),
        other(
            "s_3",
            "",
            "/srv/web",
            SessionState::WaitingApproval,
            "2025-01-02T03:00:00Z",
        ),
    ]);
    app.sessions.live = true;
    app.now_ms = (amber_tui::picker::parse_rfc3339("2025-01-02T03:10:00Z").unwrap()) * 1000;
}

#[test]
fn session_switcher_lists_waiting_sessions_first() {
    let mut app = with_status(app_with(&[]));
    three_sessions(&mut app);
    let rule = screen(&mut app, 80, 24);
    assert!(
        rule.contains("1 other waiting for approval · Ctrl-S"),
        "{rule}"
    );
    let actions = app.on_key(KeyEvent::new(KeyCode::Char('s'), KeyModifiers::CONTROL));
    assert!(
        actions.contains(&amber_tui::app::Action::ListSessions),
        "{actions:?}"
    );
    let s = screen(&mut app, 80, 24);
    let rows: Vec<&str> = s.lines().filter(|l| l.contains("ago")).collect();
    assert_eq!(rows.len(), 3, "{s}");
    assert!(
        rows[0].contains("approval") && rows[0].contains("web (s_3)"),
        "{s}"
    );
    assert!(
        rows[1].contains("running") && rows[1].contains("upgrade tokio"),
        "{s}"
    );
    assert!(rows[2].contains("fix the build (here)"), "{s}");
    assert_snapshot!(s);
    // Up twice from the attached row, Enter: switch to the waiting one.
    app.on_key(KeyEvent::new(KeyCode::Up, KeyModifiers::NONE));
    app.on_key(KeyEvent::new(KeyCode::Up, KeyModifiers::NONE));
    let actions = app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    assert_eq!(
        actions,
        [amber_tui::app::Action::SwitchSession("s_3".into())]
    );
    assert!(app.switcher.is_none());
    // Enter on the attached session only closes it.
    app.on_key(KeyEvent::new(KeyCode::Char('s'), KeyModifiers::CONTROL));
    let actions = app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, amber_tui::app::Action::SwitchSession(_))),
        "{actions:?}"
    );
    assert!(app.switcher.is_none());
}

/// A parent that fanned out to two background children, beside an unrelated session: the
/// parent ran, the first child delivered its result, the second is still running.
fn a_parent_and_two_children(app: &mut App) {
    let session = |id: &str, title: &str, state: SessionState, tokens: u64, usd: f64| {
        let mut s = info(state);
        s.session_id = id.into();
        s.title = title.into();
        s.updated_at = "2025-01-02T03:08:00Z".into();
        s.usage.total_tokens = tokens;
        s.usage.cost_usd = amber_proto::CostUsd::from_usd(usd);
        s
    };
    let child = |id: &str, task: &str, order: u64, state: ChildState, tokens: u64, usd: f64| {
        let running = if state == ChildState::Running {
            SessionState::Running
        } else {
            SessionState::Idle
        };
        let mut s = session(id, task, running, tokens, usd);
        s.parent = Some(amber_proto::ParentLink {
            session_id: "s_p".into(),
            agent_id: format!("agent_{id}"),
            task: task.into(),
            prompt: format!("look at {task}"),
            order,
            state,
            caps: amber_proto::ChildCaps::default(),
            result: None,
            resumed: false,
        });
        s
    };
    app.sessions.set_listed(vec![
        info(SessionState::Idle),
        session(
            "s_p",
            "fan out the review",
            SessionState::Idle,
            12_000,
            0.02,
        ),
        child("s_c1", "alpha", 1, ChildState::Delivered, 3_000, 0.005),
        child("s_c2", "beta", 2, ChildState::Running, 1_500, 0.0025),
    ]);
    app.sessions.live = true;
    app.now_ms = (amber_tui::picker::parse_rfc3339("2025-01-02T03:10:00Z").unwrap()) * 1000;
}

#[test]
fn session_switcher_folds_children_under_their_parent_with_their_spend() {
    let mut app = with_status(app_with(&[]));
    a_parent_and_two_children(&mut app);
    app.on_key(ctrl('s'));
    let folded = screen(&mut app, 80, 24);
    let rows: Vec<&str> = folded.lines().filter(|l| l.contains("ago")).collect();
    assert_eq!(rows.len(), 2, "children folded:\n{folded}");
    // The parent's spend counts its children's: 16.5k tokens, $0.0275.
    assert!(
        rows[0].contains("▸ fan out the review") && rows[0].contains("16k $0.03"),
        "{folded}"
    );
    assert!(folded.contains("Tab fold/unfold"), "{folded}");
    assert_snapshot!("session_switcher_folded", folded);
    // Tab on the parent (above the attached session) unfolds it: each child under it, with
    // its state and its own spend.
    app.on_key(key(KeyCode::Up));
    app.on_key(key(KeyCode::Tab));
    let unfolded = screen(&mut app, 80, 24);
    let rows: Vec<&str> = unfolded.lines().filter(|l| l.contains("ago")).collect();
    assert_eq!(rows.len(), 4, "{unfolded}");
    assert!(
        rows[0].contains("▾ fan out the review") && rows[0].contains("16k $0.03"),
        "{unfolded}"
    );
    assert!(
        rows[1].contains("delivered")
            && rows[1].contains("├ alpha")
            && rows[1].contains("3.0k $0.0050"),
        "{unfolded}"
    );
    assert!(
        rows[2].contains("running")
            && rows[2].contains("└ beta")
            && rows[2].contains("1.5k $0.0025"),
        "{unfolded}"
    );
    assert_snapshot!("session_switcher_unfolded", unfolded);
    // Down to a child, Enter: switch to it.
    app.on_key(key(KeyCode::Down));
    let actions = app.on_key(key(KeyCode::Enter));
    assert_eq!(
        actions,
        [amber_tui::app::Action::SwitchSession("s_c1".into())]
    );
    // A folded child asking for an approval marks its parent's row.
    let mut asking = app.sessions.get("s_c2").unwrap().clone();
    asking.state = SessionState::WaitingApproval;
    app.sessions.apply(&amber_proto::SessionChange {
        change: amber_proto::SessionChangeKind::Updated,
        session: asking,
        event: None,
    });
    app.on_key(ctrl('s'));
    let s = screen(&mut app, 80, 24);
    let rows: Vec<&str> = s.lines().filter(|l| l.contains("ago")).collect();
    assert_eq!(rows.len(), 2, "{s}");
    assert!(
        rows[0].contains("│! idle       ▸ fan out the review"),
        "{s}"
    );
    assert!(s.contains("1 waiting for approval"), "{s}");
}

#[test]
fn session_switcher_keeps_working_with_a_daemon_that_sends_no_parent() {
    // A session as an older daemon lists it: no `parent`, no `usage.costUsd`.
    let old: amber_proto::SessionInfo = serde_json::from_value(json!({
        "sessionId": "s_old", "cwd": "/srv/old", "mode": "write", "model": "m",
        "title": "from an older daemon", "state": "idle",
        "createdAt": "2025-01-02T03:00:00Z", "updatedAt": "2025-01-02T03:00:00Z",
        "usage": {"promptTokens": 900, "completionTokens": 300, "cachedTokens": 0, "totalTokens": 1200}
    }))
    .unwrap();
    let mut app = with_status(app_with(&[]));
    app.sessions.set_listed(vec![info(SessionState::Idle), old]);
    app.now_ms = (amber_tui::picker::parse_rfc3339("2025-01-02T03:10:00Z").unwrap()) * 1000;
    app.on_key(ctrl('s'));
    app.on_key(key(KeyCode::Tab));
    let s = screen(&mut app, 80, 24);
    let rows: Vec<&str> = s.lines().filter(|l| l.contains("ago")).collect();
    assert_eq!(rows.len(), 2, "{s}");
    assert!(
        rows.iter()
            .any(|r| r.contains("from an older daemon") && r.contains("1.2k tok")),
        "{s}"
    );
    assert!(!s.contains('▸') && !s.contains('├'), "{s}");
}

#[test]
fn status_line_shows_the_session_cost_when_the_model_has_a_price() {
    let mut app = app_with(&every_cell()[..3]);
    let seg = |name: &str, text: &str| StatusSegmentInfo {
        name: name.into(),
        text: text.into(),
    };
    app.set_status(
        vec![
            seg("model", "claude-sonnet-4-5"),
            seg("tokens", "0 tok"),
            seg("cost", "$0.00"),
        ],
        None,
    );
    app.live.seed(&Usage::default());
    // A `usage` event's session total (`total.costUsd`) moves the segment at once.
    app.apply_event(ev(
        Some(9),
        json!({"type": "usage", "turnId": "t_1",
               "promptTokens": 1000, "completionTokens": 200, "cachedTokens": 0,
               "totalTokens": 1200, "costUsd": 0.2,
               "usage": {"promptTokens": 1000, "completionTokens": 200, "cachedTokens": 0,
                         "totalTokens": 1200, "costUsd": 0.2},
               "total": {"promptTokens": 30000, "completionTokens": 2000, "cachedTokens": 0,
                         "totalTokens": 32000, "costUsd": 0.4213},
               "sessionCostUsd": 0.4213}),
    ));
    let s = screen(&mut app, 80, 24);
    assert_snapshot!("status_line_cost", s.lines().last().unwrap());
}

/// An MCP server's form: `f` opens it on the approval, filled with the schema's defaults;
/// a bad value is said and nothing sent; Enter on the last field sends the values typed.
#[test]
fn an_elicitation_form_is_filled_in_and_sent_with_its_values() {
    let mut app = app_with(&every_cell()[..1]);
    app.apply_event(ev(Some(4), json!({"type": "approval_requested", "requestId": "r_f", "callId": "c_f",
        "tool": "mcp__forms__elicitation", "arguments": {}, "reason": "MCP server `forms` asks: Who are you?",
        "scope": "this request only", "personOnly": true,
        "mcp": {"server": "forms", "kind": "elicitation", "message": "Who are you?",
            "requestedSchema": {"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string", "description": "Your name", "default": "Ada"},
                "age": {"type": "integer"}}}}})));
    app.drain_actions();
    assert!(app.on_key(key(KeyCode::Char('f'))).is_empty());
    assert!(app.form.is_some());
    assert_snapshot!(screen(&mut app, 100, 30));
    // The fields in name order: `age` first. A word where a number goes is refused when
    // the form is sent (Enter on the last field), on the form, and the keys go back to it.
    for c in "old".chars() {
        app.on_key(key(KeyCode::Char(c)));
    }
    assert!(app.on_key(key(KeyCode::Tab)).is_empty());
    assert!(app.on_key(key(KeyCode::Enter)).is_empty());
    let form = app.form.as_ref().unwrap();
    assert!(
        form.error
            .as_deref()
            .unwrap_or_default()
            .contains("not a whole number"),
        "{form:?}"
    );
    assert_eq!(form.fields[form.at].name, "age");
    for _ in 0..3 {
        app.on_key(key(KeyCode::Backspace));
    }
    for c in "36".chars() {
        app.on_key(key(KeyCode::Char(c)));
    }
    // Enter moves on to the last field; there it sends.
    assert!(app.on_key(key(KeyCode::Enter)).is_empty());
    let actions = app.on_key(key(KeyCode::Enter));
    assert_eq!(
        actions,
        [amber_tui::app::Action::Approve {
            request_id: "r_f".into(),
            decision: amber_proto::Decision::AllowOnce,
            feedback: None,
            content: Some(json!({"name": "Ada", "age": 36})),
        }]
    );
    assert!(app.form.is_none());
    assert!(app.approvals.is_empty());
}
