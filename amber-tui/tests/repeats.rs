//! Nothing said twice, nothing shown raw: an endpoint error appears once, a `task` call's
//! output is left to its sub-agent cells (rendered as markdown), the replayed prompts feed the
//! editor's history once, and a replay short of `session/get`'s `lastSeq` is pointed out.

use crate::common::{app_with, ev, info, screen};
use amber_proto::SessionState;
use amber_tui::app::{App, Incoming};
use insta::assert_snapshot;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

#[test]
fn an_endpoint_error_is_shown_once() {
    let message = "upstream returned 500: internal error";
    let mut app = app_with(&[
        ev(Some(1), json!({"type": "turn_started", "prompt": "hi"})),
        ev(
            Some(2),
            json!({"type": "error", "code": "endpoint_error", "message": message, "retryable": false}),
        ),
        ev(
            Some(3),
            json!({"type": "turn_completed", "stopReason": "error", "usage": {},
                   "error": {"code": "endpoint_error", "message": message}}),
        ),
    ]);
    let s = screen(&mut app, 80, 24);
    assert_eq!(s.matches(message).count(), 1, "{s}");
    assert!(s.contains("turn ended: error"), "{s}");
    assert!(s.contains("✗ error endpoint_error"), "{s}");
}

#[test]
fn a_turn_error_without_an_error_event_keeps_its_text() {
    let mut app = app_with(&[
        ev(Some(1), json!({"type": "turn_started", "prompt": "hi"})),
        ev(
            Some(2),
            json!({"type": "turn_completed", "stopReason": "error", "usage": {},
                   "error": {"code": "tool_loop", "message": "too many iterations"}}),
        ),
    ]);
    let s = screen(&mut app, 80, 24);
    assert!(
        s.contains("turn ended: error — tool_loop: too many iterations"),
        "{s}"
    );
}

#[test]
fn a_refusal_shows_what_the_model_said_once_and_names_the_stop() {
    let said = "I can't help with that.";
    let mut app = app_with(&[
        ev(Some(1), json!({"type": "turn_started", "prompt": "hi"})),
        ev(
            Some(2),
            json!({"type": "message_completed", "itemId": "i_1", "role": "assistant", "text": said}),
        ),
        ev(
            Some(3),
            json!({"type": "turn_completed", "stopReason": "refusal", "usage": {},
                   "error": {"code": "refusal", "message": said}}),
        ),
    ]);
    let s = screen(&mut app, 80, 24);
    assert_eq!(s.matches(said).count(), 1, "{s}");
    assert!(s.contains("turn ended: the model refused to answer"), "{s}");
}

#[test]
fn a_reply_cut_at_max_tokens_says_so() {
    let mut app = app_with(&[
        ev(Some(1), json!({"type": "turn_started", "prompt": "hi"})),
        ev(
            Some(2),
            json!({"type": "turn_completed", "stopReason": "max_tokens", "usage": {},
                   "error": {"code": "max_tokens", "message": "the reply was cut"}}),
        ),
    ]);
    let s = screen(&mut app, 80, 24);
    assert!(
        s.contains("turn ended: max tokens — max_tokens: the reply was cut"),
        "{s}"
    );
}

const RESULT: &str = "## Callers\n\nFound **3 callers** of `a()`:\n\n- src/lib.rs\n- src/main.rs";

fn task_events() -> Vec<Incoming> {
    vec![
        ev(
            Some(1),
            json!({"type": "turn_started", "prompt": "find callers"}),
        ),
        ev(
            Some(2),
            json!({"type": "tool_call_started", "itemId": "i_1", "callId": "c_1", "name": "task",
                   "arguments": {"prompt": "find the callers of a()", "description": "find callers"}}),
        ),
        ev(
            Some(3),
            json!({"type": "subagent_started", "agentId": "a_1", "task": "find callers"}),
        ),
        ev(
            Some(4),
            json!({"type": "subagent_completed", "agentId": "a_1", "task": "find callers", "result": RESULT}),
        ),
        ev(
            Some(5),
            json!({"type": "tool_call_completed", "callId": "c_1", "status": "ok", "output": RESULT, "durationMs": 2100}),
        ),
        ev(
            Some(6),
            json!({"type": "turn_completed", "stopReason": "end_turn", "usage": {}}),
        ),
    ]
}

#[test]
fn a_task_result_shows_once_as_rendered_markdown() {
    let mut app = app_with(&task_events());
    app.on_key(KeyEvent::new(KeyCode::Char('o'), KeyModifiers::CONTROL));
    let s = screen(&mut app, 80, 24);
    assert_eq!(s.matches("src/main.rs").count(), 1, "{s}");
    assert!(
        !s.contains("**") && !s.contains("## "),
        "raw markdown:\n{s}"
    );
    assert_snapshot!(s);
}

#[test]
fn a_failed_task_keeps_its_output() {
    let mut events = task_events();
    events[4] = ev(
        Some(5),
        json!({"type": "tool_call_completed", "callId": "c_1", "status": "error", "output": "[sub-agent stopped: cancelled]", "durationMs": 10}),
    );
    let mut app = app_with(&events);
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("│ [sub-agent stopped: cancelled]"), "{s}");
}

#[test]
fn replayed_prompts_seed_the_history_once() {
    let mut app = App::new("s_1");
    app.load_snapshot(info(SessionState::Idle), Vec::new(), Vec::new());
    for (seq, (turn, prompt)) in [("t_1", "first"), ("t_2", "second")].iter().enumerate() {
        app.apply_event(ev(
            Some(seq as u64 * 2 + 1),
            json!({"type": "turn_started", "turnId": turn, "prompt": prompt}),
        ));
        app.apply_event(ev(
            Some(seq as u64 * 2 + 2),
            json!({"type": "turn_completed", "turnId": turn, "stopReason": "end_turn", "usage": {}}),
        ));
    }
    app.apply_event(ev(None, json!({"type": "synced", "lastSeq": 4})));
    assert_eq!(app.input.history(), ["first", "second"]);
    app.on_key(key(KeyCode::Up));
    assert_eq!(app.input.text(), "second");
    app.on_key(key(KeyCode::Up));
    assert_eq!(app.input.text(), "first");
    app.on_key(key(KeyCode::Down));
    app.on_key(key(KeyCode::Down));
    assert_eq!(app.input.text(), "");
    // A prompt typed here is in the history once, though its turn_started follows live.
    for ch in "third".chars() {
        app.on_key(key(KeyCode::Char(ch)));
    }
    app.on_key(key(KeyCode::Enter));
    app.apply_event(ev(
        Some(5),
        json!({"type": "turn_started", "turnId": "t_3", "prompt": "third"}),
    ));
    // A prompt sent by another client is not this editor's history.
    app.apply_event(ev(
        Some(6),
        json!({"type": "turn_started", "turnId": "t_4", "prompt": "from elsewhere"}),
    ));
    assert_eq!(app.input.history(), ["first", "second", "third"]);
    // A reload (after `/clear`) replays again without adding the prompts twice.
    app.reset_transcript();
    app.apply_event(ev(
        Some(1),
        json!({"type": "turn_started", "turnId": "t_1", "prompt": "first"}),
    ));
    app.apply_event(ev(None, json!({"type": "synced", "lastSeq": 1})));
    assert_eq!(app.input.history(), ["first", "second", "third"]);
}

#[test]
fn a_replay_short_of_the_snapshot_is_pointed_out() {
    let mut app = App::new("s_1");
    app.snapshot_seq = 9;
    app.load_snapshot(info(SessionState::Idle), Vec::new(), Vec::new());
    app.apply_event(ev(Some(1), json!({"type": "turn_started", "prompt": "hi"})));
    app.apply_event(ev(None, json!({"type": "synced", "lastSeq": 1})));
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("history incomplete"), "{s}");

    let mut whole = App::new("s_1");
    whole.snapshot_seq = 1;
    whole.load_snapshot(info(SessionState::Idle), Vec::new(), Vec::new());
    whole.apply_event(ev(Some(1), json!({"type": "turn_started", "prompt": "hi"})));
    whole.apply_event(ev(None, json!({"type": "synced", "lastSeq": 1})));
    assert!(!screen(&mut whole, 80, 24).contains("history incomplete"));
}
