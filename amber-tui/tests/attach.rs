//! The attach seam and the app's reactions, without a terminal: replay, `synced` with
//! `inProgress`, live deltas, authoritative `message_completed`, resubscription after a lag,
//! queued prompts, and the keys that cancel, quit and detach.

use crate::common::{ev, info, screen};
use amber_proto::{CommandAction, CommandRunResult, SessionState};
use amber_tui::app::{Action, App, Incoming, Scroll};
use amber_tui::transcript::{Assistant, Cell};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;

fn assistant_texts(app: &App) -> Vec<String> {
    app.transcript
        .cells()
        .filter_map(|c| match c {
            Cell::Assistant(Assistant::Done(t)) => Some(t.clone()),
            Cell::Assistant(Assistant::Streaming(md)) => Some(md.source().to_owned()),
            _ => None,
        })
        .collect()
}

fn attached(state: SessionState) -> App {
    let mut app = App::new("s_1");
    app.load_snapshot(info(state), Vec::new(), Vec::new());
    app.drain_actions();
    app
}

fn delta(item: &str, d: &str) -> Incoming {
    ev(
        None,
        json!({"type": "message_delta", "itemId": item, "delta": d}),
    )
}

#[test]
fn attaching_mid_reply_shows_the_whole_reply_once() {
    let mut app = attached(SessionState::Running);
    app.apply_event(ev(Some(1), json!({"type": "turn_started", "prompt": "hi"})));
    app.apply_event(ev(
        None,
        json!({"type": "synced", "lastSeq": 1,
        "inProgress": [{"itemId": "i_1", "kind": "message", "text": "Hello wor"}]}),
    ));
    assert!(app.synced);
    app.apply_event(delta("i_1", "ld, and **more**\n"));
    assert_eq!(assistant_texts(&app), ["Hello world, and **more**\n"]);
    app.apply_event(ev(Some(2), json!({"type": "message_completed", "itemId": "i_1", "role": "assistant", "text": "Hello world, and **more**"})));
    // A late delta of a completed item changes nothing.
    app.apply_event(delta("i_1", "stale"));
    app.apply_event(ev(
        Some(3),
        json!({"type": "turn_completed", "stopReason": "end_turn", "usage": {}}),
    ));
    assert_eq!(assistant_texts(&app), ["Hello world, and **more**"]);
    assert!(!app.running);
    let s = screen(&mut app, 80, 12);
    assert_eq!(s.matches("Hello world").count(), 1, "{s}");
    assert!(!s.contains("**"), "{s}");
}

#[test]
fn completed_text_is_authoritative() {
    let mut app = attached(SessionState::Running);
    app.apply_event(delta("i_1", "draft that was wrong"));
    app.apply_event(ev(
        Some(1),
        json!({"type": "message_completed", "itemId": "i_1", "role": "assistant", "text": "final"}),
    ));
    assert_eq!(assistant_texts(&app), ["final"]);
}

#[test]
fn resubscribing_after_a_lag_neither_duplicates_nor_loses() {
    let mut app = attached(SessionState::Running);
    app.apply_event(ev(Some(1), json!({"type": "turn_started", "prompt": "hi"})));
    app.apply_event(ev(None, json!({"type": "synced", "lastSeq": 1})));
    app.apply_event(delta("i_1", "Hel"));
    app.apply_event(ev(Some(2), json!({"type": "tool_call_started", "itemId": "i_0", "callId": "c_1", "name": "bash", "arguments": {"command": "ls"}})));
    assert_eq!(app.last_seq, 2);
    // The subscription lagged; the new one replays from afterSeq = 2 — but a daemon may
    // also resend older events: they are dropped by seq.
    app.apply_event(ev(Some(2), json!({"type": "tool_call_started", "itemId": "i_0", "callId": "c_1", "name": "bash", "arguments": {"command": "ls"}})));
    app.apply_event(ev(
        None,
        json!({"type": "synced", "lastSeq": 2,
        "inProgress": [{"itemId": "i_1", "kind": "message", "text": "Hello the"}]}),
    ));
    app.apply_event(delta("i_1", "re"));
    assert_eq!(assistant_texts(&app), ["Hello there"]);
    let tools = app
        .transcript
        .cells()
        .filter(|c| matches!(c, Cell::Tool(_)))
        .count();
    assert_eq!(tools, 1);
}

#[test]
fn reasoning_in_progress_and_then_finished() {
    let mut app = attached(SessionState::Running);
    app.apply_event(ev(
        None,
        json!({"type": "synced", "lastSeq": 0,
        "inProgress": [{"itemId": "r_1", "kind": "reasoning", "text": "thinking about it"}]}),
    ));
    app.apply_event(ev(
        None,
        json!({"type": "reasoning_delta", "itemId": "r_1", "delta": " some more"}),
    ));
    app.apply_event(ev(
        Some(1),
        json!({"type": "message_completed", "itemId": "i_1", "role": "assistant", "text": "done"}),
    ));
    let reasoning: Vec<_> = app
        .transcript
        .cells()
        .filter_map(|c| match c {
            Cell::Reasoning { text, done } => Some((text.clone(), *done)),
            _ => None,
        })
        .collect();
    assert_eq!(
        reasoning,
        [("thinking about it some more".to_owned(), true)]
    );
}

#[test]
fn a_prompt_answer_after_its_turn_started_is_not_left_queued() {
    let mut app = attached(SessionState::Idle);
    for ch in "go".chars() {
        app.on_key(KeyEvent::new(KeyCode::Char(ch), KeyModifiers::NONE));
    }
    let actions = app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    assert_eq!(
        actions,
        [Action::Prompt {
            local_id: 1,
            text: "go".into()
        }]
    );
    assert_eq!(app.queued.len(), 1);
    app.apply_event(ev(
        Some(1),
        json!({"type": "turn_started", "turnId": "t_9", "prompt": "go"}),
    ));
    assert!(app.queued.is_empty());
    app.on_prompt_sent(1, Ok("t_9".into()));
    assert!(app.queued.is_empty());
    assert_eq!(app.input.history(), ["go"]);
}

fn press(app: &mut App, code: KeyCode, mods: KeyModifiers) -> Vec<Action> {
    app.on_key(KeyEvent::new(code, mods))
}

#[test]
fn cancel_quit_and_detach_keys() {
    let mut app = attached(SessionState::Running);
    assert_eq!(
        press(&mut app, KeyCode::Esc, KeyModifiers::NONE),
        [Action::Cancel]
    );
    assert_eq!(
        press(&mut app, KeyCode::Char('c'), KeyModifiers::CONTROL),
        [Action::Cancel]
    );
    app.apply_event(ev(
        Some(1),
        json!({"type": "turn_completed", "stopReason": "cancelled", "usage": {}}),
    ));
    app.drain_actions();
    // Idle: the first Ctrl-C arms, the second quits; the arm expires with ticks.
    assert!(press(&mut app, KeyCode::Char('c'), KeyModifiers::CONTROL).is_empty());
    for _ in 0..10 {
        app.tick();
    }
    assert!(press(&mut app, KeyCode::Char('c'), KeyModifiers::CONTROL).is_empty());
    assert_eq!(
        press(&mut app, KeyCode::Char('c'), KeyModifiers::CONTROL),
        [Action::Detach]
    );
    // Ctrl-D detaches only on an empty input.
    press(&mut app, KeyCode::Char('x'), KeyModifiers::NONE);
    assert!(press(&mut app, KeyCode::Char('d'), KeyModifiers::CONTROL).is_empty());
    press(&mut app, KeyCode::Backspace, KeyModifiers::NONE);
    assert_eq!(
        press(&mut app, KeyCode::Char('d'), KeyModifiers::CONTROL),
        [Action::Detach]
    );
    for ch in "/detach".chars() {
        press(&mut app, KeyCode::Char(ch), KeyModifiers::NONE);
    }
    assert_eq!(
        press(&mut app, KeyCode::Enter, KeyModifiers::NONE),
        [Action::Detach]
    );
}

#[test]
fn command_actions() {
    let mut app = attached(SessionState::Idle);
    let run = |output: &str, action| {
        Ok(CommandRunResult {
            output: output.into(),
            action,
        })
    };
    app.on_command_result(run("detached", Some(CommandAction::Detach)));
    assert!(app.drain_actions().contains(&Action::Detach));
    app.on_command_result(run(
        "new session s_2",
        Some(CommandAction::OpenSession {
            session_id: "s_2".into(),
        }),
    ));
    assert!(
        app.drain_actions()
            .contains(&Action::SwitchSession("s_2".into()))
    );
    app.on_command_result(run("cleared 6 messages", Some(CommandAction::Cleared)));
    assert_eq!(app.drain_actions(), [Action::Reload]);
    app.reset_transcript();
    app.apply_event(ev(None, json!({"type": "synced", "lastSeq": 0})));
    assert!(
        matches!(app.transcript.cells().last(), Some(Cell::Info { text, .. }) if text == "cleared 6 messages")
    );
    app.on_command_result(run("mode: read", None));
    assert!(
        matches!(app.transcript.cells().last(), Some(Cell::Info { text, .. }) if text == "mode: read")
    );
    app.on_command_result(Err("daemon error -32602: unknown command".into()));
    assert!(matches!(
        app.transcript.cells().last(),
        Some(Cell::Error { .. })
    ));
}

#[test]
fn scrolled_up_view_stays_put_while_output_arrives() {
    let mut app = attached(SessionState::Running);
    for i in 0..40u64 {
        app.apply_event(ev(Some(i + 1), json!({"type": "message_completed", "itemId": format!("i_{i}"), "role": "assistant", "text": format!("message {i}")})));
    }
    screen(&mut app, 80, 24);
    app.on_wheel(-2);
    let before = screen(&mut app, 80, 24);
    let Scroll::Anchor { .. } = app.scroll else {
        panic!("not scrolled: {:?}", app.scroll)
    };
    app.apply_event(ev(Some(41), json!({"type": "message_completed", "itemId": "i_new", "role": "assistant", "text": "newest"})));
    assert_eq!(screen(&mut app, 80, 24), before);
    app.on_key(KeyEvent::new(KeyCode::End, KeyModifiers::CONTROL));
    assert!(screen(&mut app, 80, 24).contains("newest"));
}

#[test]
fn resizing_reflows() {
    let mut app = attached(SessionState::Idle);
    let long = "word ".repeat(60);
    app.apply_event(ev(Some(1), json!({"type": "message_completed", "itemId": "i_1", "role": "assistant", "text": long.trim()})));
    let wide = screen(&mut app, 140, 20);
    let narrow = screen(&mut app, 40, 20);
    let rows = |s: &str| s.lines().filter(|l| l.contains("word")).count();
    assert!(
        rows(&narrow) > rows(&wide),
        "wide:\n{wide}\nnarrow:\n{narrow}"
    );
    assert!(
        narrow.lines().all(|l| !l.contains("wor\"")),
        "a word was cut:\n{narrow}"
    );
}
