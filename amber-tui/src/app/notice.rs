//! Transient messages of the status line (a failed call, a reconnect, "cancelling…", the
//! Ctrl-C quit arm). Each one expires after a few ticks so the status segments come back;
//! the cancel notice also ends with the turn it cancels.

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
        };
        self.notice = Some(Notice::new(kind, text, ticks));
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::app::Action;
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use serde_json::json;

    fn running_app() -> App {
        let mut app = App::new("s_1");
        app.apply_event(
            &json!({"type": "turn_started", "seq": 1, "turnId": "t_1", "prompt": "hi"}),
        );
        app.apply_event(&json!({"type": "synced", "lastSeq": 1}));
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
        app.apply_event(&json!({"type": "turn_completed", "seq": 2, "turnId": "t_1", "stopReason": "cancelled"}));
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
    fn turn_completed_keeps_an_error_notice() {
        let mut app = running_app();
        app.on_error("cancel failed: gone");
        app.apply_event(
            &json!({"type": "turn_completed", "seq": 2, "turnId": "t_1", "stopReason": "end_turn"}),
        );
        assert_eq!(app.notice.as_ref().unwrap().kind, NoticeKind::Error);
    }
}
