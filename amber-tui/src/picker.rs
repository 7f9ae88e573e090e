//! `amber sessions`: the session picker's state and keys (pure, like [`crate::app::App`]).

use amber_proto::SessionInfo;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// What the picker asks the runtime to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PickerAction {
    Attach(String),
    New,
    Delete(String),
    Quit,
}

#[derive(Debug, Clone)]
pub struct Picker {
    /// Newest activity first.
    pub sessions: Vec<SessionInfo>,
    pub selected: usize,
    /// Waiting for `y` to delete the selected session.
    pub confirm_delete: bool,
    /// Unix seconds "now", for "5m ago".
    pub now: i64,
    pub notice: Option<String>,
}

impl Picker {
    pub fn new(mut sessions: Vec<SessionInfo>, now: i64) -> Self {
        sessions.sort_by(|a, b| b.updated_at.cmp(&a.updated_at));
        Picker {
            sessions,
            selected: 0,
            confirm_delete: false,
            now,
            notice: None,
        }
    }

    /// Replaces the list (after a delete), keeping the selection in range.
    pub fn set_sessions(&mut self, sessions: Vec<SessionInfo>) {
        let keep = self.selected;
        *self = Picker {
            notice: self.notice.take(),
            ..Picker::new(sessions, self.now)
        };
        self.selected = keep.min(self.sessions.len().saturating_sub(1));
    }

    pub fn on_key(&mut self, key: KeyEvent) -> Option<PickerAction> {
        if key.kind == KeyEventKind::Release {
            return None;
        }
        if self.confirm_delete {
            self.confirm_delete = false;
            if matches!(key.code, KeyCode::Char('y') | KeyCode::Char('Y')) {
                return self
                    .sessions
                    .get(self.selected)
                    .map(|s| PickerAction::Delete(s.session_id.clone()));
            }
            self.notice = None;
            return None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc => Some(PickerAction::Quit),
            KeyCode::Char('c') | KeyCode::Char('d') if ctrl => Some(PickerAction::Quit),
            KeyCode::Up | KeyCode::Char('k') => {
                self.selected = self.selected.saturating_sub(1);
                None
            }
            KeyCode::Down | KeyCode::Char('j') => {
                if self.selected + 1 < self.sessions.len() {
                    self.selected += 1;
                }
                None
            }
            KeyCode::Home => {
                self.selected = 0;
                None
            }
            KeyCode::End => {
                self.selected = self.sessions.len().saturating_sub(1);
                None
            }
            KeyCode::Enter => self
                .sessions
                .get(self.selected)
                .map(|s| PickerAction::Attach(s.session_id.clone())),
            KeyCode::Char('n') => Some(PickerAction::New),
            KeyCode::Char('d') | KeyCode::Delete => {
                if let Some(s) = self.sessions.get(self.selected) {
                    self.confirm_delete = true;
                    self.notice = Some(format!(
                        "delete session {} \"{}\"? y to confirm, any other key keeps it",
                        s.session_id, s.title
                    ));
                }
                None
            }
            _ => None,
        }
    }
}

/// "just now", "5m ago", "3h ago", "2d ago" between RFC 3339 `time` and `now` (unix seconds).
pub fn ago(time: &str, now: i64) -> String {
    let Some(t) = parse_rfc3339(time) else {
        return time.to_owned();
    };
    let d = (now - t).max(0);
    match d {
        0..=59 => "just now".into(),
        60..=3599 => format!("{}m ago", d / 60),
        3600..=86_399 => format!("{}h ago", d / 3600),
        _ => format!("{}d ago", d / 86_400),
    }
}

/// Unix seconds of an RFC 3339 time (`2025-01-02T03:04:05.678Z`, `…+02:00`).
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let num = |r: std::ops::Range<usize>| s.get(r).and_then(|x| x.parse::<i64>().ok());
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let rest = s.get(19..)?;
    let rest = rest
        .strip_prefix('.')
        .map_or(rest, |r| r.trim_start_matches(|c: char| c.is_ascii_digit()));
    let offset = match rest {
        "Z" | "z" | "" => 0,
        tz => {
            let sign = if tz.starts_with('-') { -1 } else { 1 };
            let hh = tz.get(1..3)?.parse::<i64>().ok()?;
            let mm = tz.get(4..6)?.parse::<i64>().ok()?;
            sign * (hh * 3600 + mm * 60)
        }
    };
    // Days from civil (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + mi * 60 + sec - offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rfc3339() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339("2025-01-02T03:04:05.678Z"),
            Some(1_735_787_045)
        );
        assert_eq!(
            parse_rfc3339("2025-01-02T05:04:05+02:00"),
            Some(1_735_787_045)
        );
        assert_eq!(ago("2025-01-02T03:04:05Z", 1_735_787_045 + 7200), "2h ago");
    }
}
