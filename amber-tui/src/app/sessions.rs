//! Every session of the daemon, kept live from `session/watch`, and the switcher over them
//! (`Ctrl-S`, `/sessions`): sessions waiting for an approval first, then running ones, then
//! idle ones, each group by last activity. Enter switches the attached session.

use std::collections::HashMap;

use amber_proto::{EventKind, SessionChange, SessionChangeKind, SessionInfo, SessionState};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::{Action, App};
use crate::notify::Alert;

/// The daemon's sessions by id.
#[derive(Debug, Default, Clone)]
pub struct Sessions {
    by_id: HashMap<String, SessionInfo>,
    /// `session/list` answered (before that the switcher says it is loading).
    pub listed: bool,
    /// The watch is up: the list stays current by itself.
    pub live: bool,
}

/// The open switcher.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Switcher {
    /// The selected row of [`Sessions::ordered`].
    pub selected: usize,
}

impl Sessions {
    /// `session/list`'s answer. Entries the watch already updated keep the newer info (the
    /// list may have been read before the change).
    pub fn set_listed(&mut self, sessions: Vec<SessionInfo>) {
        for info in sessions {
            match self.by_id.get(&info.session_id) {
                Some(known) if known.updated_at > info.updated_at => {}
                _ => {
                    self.by_id.insert(info.session_id.clone(), info);
                }
            }
        }
        self.listed = true;
    }

    /// One change of the watch.
    pub fn apply(&mut self, change: &SessionChange) {
        let id = &change.session.session_id;
        match change.change {
            SessionChangeKind::Deleted => {
                self.by_id.remove(id);
            }
            SessionChangeKind::Updated => {
                self.by_id.insert(id.clone(), change.session.clone());
            }
        }
    }

    /// A session's info changed through the attached session's own events.
    pub fn update(&mut self, info: &SessionInfo) {
        if let Some(known) = self.by_id.get_mut(&info.session_id) {
            *known = info.clone();
        }
    }

    pub fn get(&self, id: &str) -> Option<&SessionInfo> {
        self.by_id.get(id)
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Waiting for approval first, then running, then idle; newest activity first in each.
    pub fn ordered(&self) -> Vec<&SessionInfo> {
        let mut all: Vec<&SessionInfo> = self.by_id.values().collect();
        all.sort_by(|a, b| {
            rank(a.state)
                .cmp(&rank(b.state))
                .then_with(|| b.updated_at.cmp(&a.updated_at))
                .then_with(|| a.session_id.cmp(&b.session_id))
        });
        all
    }

    /// Sessions other than `attached` waiting for an approval.
    pub fn waiting_elsewhere(&self, attached: &str) -> usize {
        self.by_id
            .values()
            .filter(|s| s.session_id != attached && s.state == SessionState::WaitingApproval)
            .count()
    }
}

fn rank(state: SessionState) -> u8 {
    match state {
        SessionState::WaitingApproval => 0,
        SessionState::Running => 1,
        SessionState::Idle => 2,
    }
}

/// How a session is named in one line: its title, else the last part of its workspace.
pub fn label(info: &SessionInfo) -> String {
    let title = info.title.trim();
    if let Some(name) = info.name.as_deref() {
        return match title {
            "" => name.to_owned(),
            title => format!("{name} · {}", title.replace('\n', " ")),
        };
    }
    if !title.is_empty() {
        return title.replace('\n', " ");
    }
    let dir = info
        .cwd
        .rsplit('/')
        .find(|p| !p.is_empty())
        .unwrap_or(&info.cwd);
    format!("{dir} ({})", info.session_id)
}

/// The notification a watched change calls for, if any: an approval requested, or a turn
/// ended.
#[deny(clippy::wildcard_enum_match_arm)] // a new event kind is a decision here
pub fn alert_for(change: &SessionChange) -> Option<Alert> {
    let event = change.event.as_ref()?;
    let name = label(&change.session);
    match &event.kind {
        EventKind::ApprovalRequested(amber_proto::Approval {
            request_id,
            tool,
            reason,
            ..
        }) => Some(Alert {
            key: format!("approval:{request_id}"),
            text: format!("{name}: approval needed for {tool} ({reason})"),
        }),
        EventKind::TurnCompleted { stop_reason, .. } => Some(Alert {
            key: format!("turn:{}", event.turn_id.as_deref().unwrap_or_default()),
            text: format!(
                "{name}: turn ended ({})",
                stop_reason.as_str().replace('_', " ")
            ),
        }),
        EventKind::PromptQueued { .. }
        | EventKind::TurnStarted { .. }
        | EventKind::MessageDelta { .. }
        | EventKind::ReasoningDelta { .. }
        | EventKind::MessageCompleted { .. }
        | EventKind::ToolCallStarted { .. }
        | EventKind::ToolOutputDelta { .. }
        | EventKind::Retrying { .. }
        | EventKind::ToolCallCompleted { .. }
        | EventKind::ApprovalResolved { .. }
        | EventKind::Steer { .. }
        | EventKind::CompactionStarted { .. }
        | EventKind::CompactionCompleted { .. }
        | EventKind::CompactionFailed { .. }
        | EventKind::Usage { .. }
        | EventKind::TodoUpdated { .. }
        | EventKind::SubagentStarted { .. }
        | EventKind::SubagentCompleted { .. }
        | EventKind::McpStatus(_)
        | EventKind::Error { .. }
        | EventKind::Rewound { .. }
        | EventKind::HookFailed { .. }
        | EventKind::EnvironmentConnected { .. }
        | EventKind::EnvironmentLost { .. }
        | EventKind::EnvironmentResumed { .. }
        | EventKind::FleetChanged { .. }
        | EventKind::FleetSetup { .. }
        | EventKind::FleetPushed { .. }
        | EventKind::Synced { .. } => None,
    }
}

impl App {
    /// Opens the switcher on the attached session's row (or closes it).
    pub fn toggle_switcher(&mut self) {
        if self.switcher.take().is_some() {
            return;
        }
        let selected = self
            .sessions
            .ordered()
            .iter()
            .position(|s| s.session_id == self.session_id)
            .unwrap_or(0);
        self.switcher = Some(Switcher { selected });
        self.request(Action::ListSessions);
    }

    /// Keys while the switcher is open: it takes them all.
    pub(super) fn switcher_key(&mut self, key: KeyEvent) {
        let Some(switcher) = self.switcher.as_mut() else {
            return;
        };
        let count = self.sessions.len();
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') => self.switcher = None,
            KeyCode::Char('s') if ctrl => self.switcher = None,
            KeyCode::Up | KeyCode::Char('k') => {
                switcher.selected = switcher.selected.saturating_sub(1);
            }
            KeyCode::Char('p') if ctrl => switcher.selected = switcher.selected.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => {
                switcher.selected = (switcher.selected + 1).min(count.saturating_sub(1));
            }
            KeyCode::Char('n') if ctrl => {
                switcher.selected = (switcher.selected + 1).min(count.saturating_sub(1));
            }
            KeyCode::Home => switcher.selected = 0,
            KeyCode::End => switcher.selected = count.saturating_sub(1),
            KeyCode::Enter => {
                let target = self
                    .sessions
                    .ordered()
                    .get(switcher.selected)
                    .map(|s| s.session_id.clone());
                self.switcher = None;
                match target {
                    Some(id) if id != self.session_id => self.request(Action::SwitchSession(id)),
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// Keeps the selection on the list after it changed under it.
    pub(crate) fn clamp_switcher(&mut self) {
        let count = self.sessions.len();
        if let Some(s) = self.switcher.as_mut() {
            s.selected = s.selected.min(count.saturating_sub(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use amber_proto::{Mode, Usage};

    use super::*;

    fn info(id: &str, state: SessionState, updated: &str) -> SessionInfo {
        SessionInfo {
            parent: None,
            session_id: id.into(),
            cwd: format!("/w/{id}"),
            mode: Mode::Write,
            model: "m".into(),
            title: String::new(),
            name: None,
            state,
            created_at: "2026-01-01T00:00:00Z".into(),
            updated_at: updated.into(),
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

    #[test]
    fn a_label_leads_with_the_name_then_the_title() {
        let mut s = info("3f2a9c1d", SessionState::Idle, "2026-01-01T00:00:00Z");
        assert_eq!(label(&s), "3f2a9c1d (3f2a9c1d)");
        s.title = "fix the login".into();
        assert_eq!(label(&s), "fix the login");
        s.name = Some("fix-auth".into());
        assert_eq!(label(&s), "fix-auth · fix the login");
        s.title.clear();
        assert_eq!(label(&s), "fix-auth");
    }

    fn ids(s: &Sessions) -> Vec<&str> {
        s.ordered().iter().map(|i| i.session_id.as_str()).collect()
    }

    #[test]
    fn waiting_sessions_come_first_then_running_then_newest() {
        let mut s = Sessions::default();
        s.set_listed(vec![
            info("old", SessionState::Idle, "2026-01-01T00:00:01Z"),
            info("new", SessionState::Idle, "2026-01-01T00:00:09Z"),
            info("run", SessionState::Running, "2026-01-01T00:00:02Z"),
            info("ask", SessionState::WaitingApproval, "2026-01-01T00:00:00Z"),
        ]);
        assert_eq!(ids(&s), ["ask", "run", "new", "old"]);
        assert_eq!(s.waiting_elsewhere("run"), 1);
        assert_eq!(s.waiting_elsewhere("ask"), 0);
    }

    #[test]
    fn the_watch_updates_and_a_stale_list_does_not_undo_it() {
        let mut s = Sessions::default();
        s.apply(&SessionChange {
            change: SessionChangeKind::Updated,
            session: info("a", SessionState::Running, "2026-01-01T00:00:05Z"),
            event: None,
        });
        s.set_listed(vec![info("a", SessionState::Idle, "2026-01-01T00:00:01Z")]);
        assert_eq!(s.get("a").map(|i| i.state), Some(SessionState::Running));
        s.apply(&SessionChange {
            change: SessionChangeKind::Deleted,
            session: info("a", SessionState::Idle, "2026-01-01T00:00:06Z"),
            event: None,
        });
        assert!(s.is_empty());
    }
}
