//! Shared fixtures of the view tests: events as the daemon sends them, an app fed with them,
//! and drawing on ratatui's `TestBackend`.
#![allow(dead_code)]

use amber_proto::{Mode, SessionInfo, SessionState, Usage};
use amber_tui::app::{App, Incoming};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::Color;
use serde_json::{Value, json};

/// An event with the envelope filled in (durable ones get `seq`), decoded from its JSON as
/// the runtime decodes what the daemon sends. It must be one this build knows.
pub(crate) fn ev(seq: Option<u64>, body: Value) -> Incoming {
    let incoming = Incoming::from_json(&envelope(seq, body).to_string());
    assert!(
        matches!(incoming, Incoming::Known(_)),
        "the fixture does not decode: {incoming:?}"
    );
    incoming
}

/// `body` with the envelope filled in, as JSON.
pub(crate) fn envelope(seq: Option<u64>, mut body: Value) -> Value {
    body["sessionId"] = json!("s_1");
    body["time"] = json!("2025-01-02T03:04:05Z");
    if body.get("turnId").is_none() {
        body["turnId"] = json!("t_1");
    }
    if let Some(seq) = seq {
        body["seq"] = json!(seq);
    }
    body
}

pub(crate) fn info(state: SessionState) -> SessionInfo {
    SessionInfo {
        parent: None,
        goal: None,
        routine: None,
        session_id: "s_1".into(),
        cwd: "/home/u/proj".into(),
        mode: Mode::Write,
        model: "mock-model".into(),
        title: "fix the build".into(),
        name: None,
        state,
        created_at: "2025-01-02T03:04:05Z".into(),
        updated_at: "2025-01-02T03:04:05Z".into(),
        usage: Usage::default(),
        provider: None,
        agent: None,
        sandbox: None,
        worktree: None,
        max_budget_usd: None,
        max_tokens_total: None,
        environment: None,
    }
}

/// An app attached to `s_1` that has applied `events` and `synced`.
pub(crate) fn app_with(events: &[Incoming]) -> App {
    let mut app = App::new("s_1");
    app.load_snapshot(info(SessionState::Idle), Vec::new(), Vec::new());
    for e in events {
        app.apply_event(e.clone());
    }
    app.apply_event(ev(None, json!({"type": "synced", "lastSeq": events.len()})));
    app.drain_actions();
    app
}

/// Draws `app` on a `width`×`height` test terminal.
pub(crate) fn draw(app: &mut App, width: u16, height: u16) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test terminal");
    terminal
        .draw(|f| amber_tui::ui::draw(app, f))
        .expect("draw");
    assert_ansi_only(&terminal);
    terminal
}

/// The screen as text (what the snapshots record).
pub(crate) fn screen(app: &mut App, width: u16, height: u16) -> String {
    draw(app, width, height).backend().to_string()
}

/// Only the 16 ANSI colours (and the terminal's defaults): the TUI follows the theme.
pub(crate) fn assert_ansi_only(terminal: &Terminal<TestBackend>) {
    for cell in terminal.backend().buffer().content() {
        for c in [cell.fg, cell.bg] {
            assert!(
                !matches!(c, Color::Rgb(..) | Color::Indexed(_)),
                "non-ANSI colour {c:?} at symbol {:?}",
                cell.symbol()
            );
        }
    }
}

/// A long markdown reply used by several views.
pub(crate) const REPLY: &str = "## Plan\n\nI will **fix** the build in `src/lib.rs`:\n\n1. read the error\n2. edit the file\n\n> quoted note\n\n```rust\nfn main() {}\n```\n\nSee [docs](https://example.com).";

/// One event of every kind that makes a cell.
pub(crate) fn every_cell() -> Vec<Incoming> {
    let out: String = (1..=30).map(|i| format!("line {i}\n")).collect();
    vec![
        ev(
            Some(1),
            json!({"type": "turn_started", "prompt": "fix the build please"}),
        ),
        ev(
            None,
            json!({"type": "reasoning_delta", "itemId": "r_1", "delta": "The build fails in lib.rs.\nI should read it first.\nThen edit.\nThen run the tests."}),
        ),
        ev(
            Some(2),
            json!({"type": "message_completed", "itemId": "i_1", "role": "assistant", "text": REPLY}),
        ),
        ev(
            Some(3),
            json!({"type": "tool_call_started", "itemId": "i_2", "callId": "c_1", "name": "bash", "arguments": {"command": "cargo test --all"}}),
        ),
        ev(
            Some(4),
            json!({"type": "tool_call_completed", "callId": "c_1", "status": "ok", "output": out, "durationMs": 1532}),
        ),
        ev(
            Some(5),
            json!({"type": "tool_call_started", "itemId": "i_3", "callId": "c_2", "name": "edit", "arguments": {"path": "src/lib.rs", "old_string": "fn a() {\n    1\n}", "new_string": "fn a() {\n    2\n}"}}),
        ),
        ev(
            Some(6),
            json!({"type": "tool_call_completed", "callId": "c_2", "status": "ok", "output": "edited src/lib.rs", "durationMs": 3}),
        ),
        ev(
            Some(7),
            json!({"type": "tool_call_started", "itemId": "i_4", "callId": "c_3", "name": "write", "arguments": {"path": "notes.md", "content": "# Notes\nfirst\n"}}),
        ),
        ev(
            Some(8),
            json!({"type": "tool_call_completed", "callId": "c_3", "status": "ok", "output": "wrote notes.md", "durationMs": 2}),
        ),
        ev(
            Some(9),
            json!({"type": "approval_requested", "requestId": "r_1", "callId": "c_4", "tool": "bash", "arguments": {"command": "rm -rf build"}, "reason": "destructive command", "scope": "bash: rm"}),
        ),
        ev(
            Some(10),
            json!({"type": "approval_resolved", "requestId": "r_1", "decision": "deny", "by": "client"}),
        ),
        ev(
            Some(11),
            json!({"type": "tool_call_started", "itemId": "i_5", "callId": "c_4", "name": "bash", "arguments": {"command": "rm -rf build"}}),
        ),
        ev(
            Some(12),
            json!({"type": "tool_call_completed", "callId": "c_4", "status": "denied", "output": "denied by the user", "durationMs": 0}),
        ),
        ev(
            Some(13),
            json!({"type": "steer", "reason": "repeated_text", "text": "You repeated yourself."}),
        ),
        ev(
            Some(14),
            json!({"type": "compaction_started", "tokensBefore": 104000}),
        ),
        ev(
            Some(15),
            json!({"type": "compaction_completed", "tokensBefore": 104000, "tokensAfter": 21000}),
        ),
        ev(
            Some(16),
            json!({"type": "subagent_started", "agentId": "a_1", "task": "find callers"}),
        ),
        ev(
            Some(17),
            // The daemon tags a sub-agent's events twice, `agent` and `agentId`.
            json!({"type": "tool_call_started", "agent": "a_1", "agentId": "a_1", "itemId": "i_6", "callId": "c_5", "name": "search", "arguments": {"pattern": "fn a", "path": "src"}}),
        ),
        ev(
            Some(18),
            json!({"type": "tool_call_completed", "agent": "a_1", "callId": "c_5", "status": "ok", "output": "src/lib.rs:1", "durationMs": 12}),
        ),
        ev(
            Some(19),
            json!({"type": "subagent_completed", "agentId": "a_1", "task": "find callers", "result": "3 callers in src/"}),
        ),
        ev(
            Some(20),
            json!({"type": "error", "code": "rate_limited", "message": "429, retrying", "retryable": true}),
        ),
        ev(
            Some(21),
            json!({"type": "tool_call_started", "itemId": "i_7", "callId": "c_6", "name": "read", "arguments": {"path": "Cargo.toml", "offset": 10, "limit": 20}}),
        ),
        ev(
            Some(22),
            json!({"type": "turn_completed", "stopReason": "cancelled", "usage": {}}),
        ),
    ]
}

/// The rows of a session's four turns as `checkpoint/list {all: true}` answers them (oldest
/// first): turns 1, 2 and 4 with a checkpoint (the last one with a skipped path), turn 3
/// without (it changed no files).
pub(crate) fn checkpoint_rows() -> Vec<amber_proto::CheckpointInfo> {
    serde_json::from_value(json!([
        {"turnId": "turn_a", "seq": 1, "time": "2025-01-02T03:04:05Z", "turn": 1,
         "prompt": "write the notes", "skipped": [],
         "changed": [{"path": "notes.md", "status": "added"}]},
        {"turnId": "turn_b", "seq": 9, "time": "2025-01-02T03:10:05Z", "turn": 2,
         "prompt": "fix the build\nand run the tests", "skipped": [],
         "changed": [{"path": "src/lib.rs", "status": "modified"},
                     {"path": "old.rs", "status": "deleted"}]},
        {"turnId": "turn_c", "seq": 20, "time": "2025-01-02T03:15:05Z", "turn": 3,
         "prompt": "explain the error", "skipped": [], "changed": [], "checkpoint": "none"},
        {"turnId": "turn_d", "seq": 30, "time": "2025-01-02T03:20:05Z", "turn": 4,
         "prompt": "add a test", "skipped": ["target/big.bin"],
         "changed": [{"path": "tests/a.rs", "status": "added"},
                     {"path": "src/lib.rs", "status": "modified"}]}
    ]))
    .expect("checkpoint rows")
}

/// Unix seconds five minutes after the last checkpoint of [`checkpoint_rows`].
pub(crate) const CHECKPOINTS_NOW: i64 = 1_735_788_005 + 300;

/// A unified diff as `checkpoint/diff` answers it.
pub(crate) const TURN_DIFF: &str = "diff --git a/src/lib.rs b/src/lib.rs\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,3 +1,3 @@\n fn a() {\n-    1\n+    2\n }\ndiff --git a/tests/a.rs b/tests/a.rs\nnew file mode 100644\n--- /dev/null\n+++ b/tests/a.rs\n@@ -0,0 +1 @@\n+#[test] fn a() {}\n";
