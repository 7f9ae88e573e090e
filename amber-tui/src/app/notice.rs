//! Transient messages of the status line (a failed call, a reconnect, "cancelling…", the
//! Ctrl-C quit arm, "retrying in 8 s: 429 rate limited"). Each one expires after a few ticks
//! so the status segments come back; the cancel notice also ends with the turn it cancels,
//! the retry notice with the next event of the session.

use super::{App, TICK_MS};

/// Ticks an informational notice stays (~4 s).
pub const INFO_TICKS: u32 = (4_000 / TICK_MS) as u32;
/// Ticks an error notice stays (~6 s): it may need reading.
pub const ERROR_TICKS: u32 = (6_000 / TICK_MS) as u32;
/// Ticks "cancelling the turn…" stays at most if `turn_completed` never comes (~10 s).
pub const CANCEL_TICKS: u32 = (10_000 / TICK_MS) as u32;

/// What a notice says, which decides its colour and what clears it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeKind {
    /// A fact (reconnected, …).
    Info,
    /// A call that failed.
    Error,
    /// The first Ctrl-C at idle: a second one quits.
    QuitArmed,
    /// A cancel was asked for: cleared when the turn completes.
    Cancelling,
    /// The daemon waits to retry an LLM request (`retrying`): cleared by the next event.
    Retrying,
}

/// A message in the status line and the ticks it has left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub text: String,
    pub kind: NoticeKind,
    ticks_left: u32,
}

impl Notice {
    pub fn new(kind: NoticeKind, text: impl Into<String>, ticks: u32) -> Self {
        Notice {
            text: text.into(),
            kind,
            ticks_left: ticks.max(1),
        }
    }
}

impl App {
    /// Shows `text` in the status line for the default time of its kind.
    pub fn set_notice(&mut self, kind: NoticeKind, text: impl Into<String>) {
        let ticks = match kind {
            NoticeKind::Info => INFO_TICKS,
            NoticeKind::Error => ERROR_TICKS,
            NoticeKind::QuitArmed => super::CTRL_C_TICKS,
            NoticeKind::Cancelling => CANCEL_TICKS,
            // Normally cleared by the next event long before; a fallback only.
            NoticeKind::Retrying => CANCEL_TICKS,
        };
        self.notice = Some(Notice::new(kind, text, ticks));
    }

    /// A `retrying` event: "retrying in 8 s: 429 rate limited" until the next event, or
    /// until the wait and a grace period are over if none comes.
    pub(crate) fn show_retry(&mut self, delay_ms: u64, reason: &str) {
        let text = if reason.is_empty() {
            format!("retrying in {}", wait_text(delay_ms))
        } else {
            format!("retrying in {}: {reason}", wait_text(delay_ms))
        };
        let ticks = u32::try_from(delay_ms / TICK_MS)
            .unwrap_or(u32::MAX)
            .saturating_add(CANCEL_TICKS);
        self.notice = Some(Notice::new(NoticeKind::Retrying, text, ticks));
    }

    /// Removes the notice if it is of `kind`.
    pub(crate) fn clear_notice(&mut self, kind: NoticeKind) {
        if self.notice.as_ref().is_some_and(|n| n.kind == kind) {
            self.notice = None;
        }
    }

    /// One tick passed: the notice expires when its time is up.
    pub(crate) fn tick_notice(&mut self) {
        if let Some(n) = self.notice.as_mut() {
            n.ticks_left = n.ticks_left.saturating_sub(1);
            if n.ticks_left == 0 {
                self.notice = None;
            }
        }
    }
}

/// `8 s`, `1.5 s`, `250 ms`: a wait as people read it.
pub(crate) fn wait_text(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms} ms");
    }
    let tenths = (ms + 50) / 100;
    if tenths.is_multiple_of(10) {
        format!("{} s", tenths / 10)
    } else {
        format!("{}.{} s", tenths / 10, tenths % 10)
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::app::{Action, Incoming};
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use serde_json::{Value, json};

    /// `body` with the rest of the envelope, decoded as the runtime decodes it.
    fn event(mut body: Value) -> Incoming {
        body["sessionId"] = json!("s_1");
        body["time"] = json!("2025-01-02T03:04:05Z");
        let incoming = Incoming::from_json(&body.to_string());
        assert!(matches!(incoming, Incoming::Known(_)), "{body}");
        incoming
    }

    fn running_app() -> App {
        let mut app = App::new("s_1");
        app.apply_event(event(
            json!({"type": "turn_started", "seq": 1, "turnId": "t_1", "prompt": "hi"}),
        ));
        app.apply_event(event(json!({"type": "synced", "lastSeq": 1})));
        app.drain_actions();
        app
    }

    fn ticks(app: &mut App, n: u32) {
        for _ in 0..n {
            app.tick();
        }
    }

    #[test]
    fn an_error_notice_expires() {
        let mut app = App::new("s_1");
        app.on_error("approval failed: boom");
        ticks(&mut app, ERROR_TICKS - 1);
        assert_eq!(app.notice.as_ref().unwrap().kind, NoticeKind::Error);
        app.tick();
        assert_eq!(app.notice, None);
    }

    #[test]
    fn the_reconnect_notice_expires() {
        let mut app = App::new("s_1");
        app.set_notice(NoticeKind::Info, "reconnected to amberd");
        ticks(&mut app, INFO_TICKS);
        assert_eq!(app.notice, None);
    }

    #[test]
    fn the_cancel_notice_clears_when_the_turn_completes() {
        let mut app = running_app();
        let actions = app.on_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
        assert_eq!(actions, [Action::Cancel]);
        assert_eq!(app.notice.as_ref().unwrap().kind, NoticeKind::Cancelling);
        ticks(&mut app, 2);
        assert!(app.notice.is_some());
        app.apply_event(event(json!({"type": "turn_completed", "seq": 2, "turnId": "t_1", "stopReason": "cancelled", "usage": {}})));
        assert_eq!(app.notice, None);
    }

    #[test]
    fn the_cancel_notice_expires_if_the_turn_never_completes() {
        let mut app = running_app();
        app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
        ticks(&mut app, CANCEL_TICKS);
        assert_eq!(app.notice, None);
    }

    #[test]
    fn a_retry_notice_shows_the_wait_and_reason_until_the_next_event() {
        let mut app = running_app();
        app.apply_event(event(
            json!({"type": "retrying", "turnId": "t_1", "attempt": 1,
            "maxAttempts": 4, "delayMs": 8000, "reason": "429 rate limited"}),
        ));
        let notice = app.notice.clone().unwrap();
        assert_eq!(notice.kind, NoticeKind::Retrying);
        assert_eq!(notice.text, "retrying in 8 s: 429 rate limited");
        // It outlasts the wait itself: only the next event of the turn ends it.
        ticks(&mut app, (8_000 / TICK_MS) as u32);
        assert_eq!(app.notice.as_ref().map(|n| &n.text), Some(&notice.text));
        app.apply_event(event(
            json!({"type": "message_delta", "turnId": "t_1", "itemId": "i_1", "delta": "Hi"}),
        ));
        assert_eq!(app.notice, None);
    }

    #[test]
    fn a_retry_notice_does_not_clear_other_notices_and_expires_without_events() {
        let mut app = running_app();
        app.on_error("approval failed: boom");
        app.apply_event(event(
            json!({"type": "message_delta", "turnId": "t_1", "itemId": "i_1", "delta": "Hi"}),
        ));
        assert_eq!(app.notice.as_ref().unwrap().kind, NoticeKind::Error);
        app.apply_event(event(
            json!({"type": "retrying", "turnId": "t_1", "attempt": 2,
            "maxAttempts": 4, "delayMs": 250, "reason": "stream idle for 30 s"}),
        ));
        assert_eq!(
            app.notice.as_ref().unwrap().text,
            "retrying in 250 ms: stream idle for 30 s"
        );
        ticks(&mut app, 1 + CANCEL_TICKS);
        assert_eq!(app.notice, None);
    }

    #[test]
    fn waits_read_as_people_say_them() {
        for (ms, want) in [
            (250, "250 ms"),
            (1000, "1 s"),
            (1500, "1.5 s"),
            (7960, "8 s"),
            (30_000, "30 s"),
        ] {
            assert_eq!(wait_text(ms), want);
        }
    }

    #[test]
    fn turn_completed_keeps_an_error_notice() {
        let mut app = running_app();
        app.on_error("cancel failed: gone");
        app.apply_event(event(
            json!({"type": "turn_completed", "seq": 2, "turnId": "t_1", "stopReason": "end_turn", "usage": {}})),
        );
        assert_eq!(app.notice.as_ref().unwrap().kind, NoticeKind::Error);
    }
}
