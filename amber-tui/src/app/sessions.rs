//! Every session of the daemon, kept live from `session/watch`, and the switcher over them
//! (`Ctrl-S`, `/sessions`): sessions waiting for an approval first, then running ones, then
//! idle ones, each group by last activity. Background sub-agents (sessions whose `parent`
//! names another) sit beneath the session that started them, folded until Tab unfolds them.
//! Enter switches the attached session.

use std::collections::{HashMap, HashSet};

use amber_proto::{
    CostUsd, EventKind, SessionChange, SessionChangeKind, SessionInfo, SessionState,
};
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
    /// The selected row of [`Sessions::rows`].
    pub selected: usize,
    /// The sessions whose children are shown (every other one's are folded).
    pub unfolded: HashSet<String>,
}

/// One row of the switcher: a session where it stands in the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow<'a> {
    pub info: &'a SessionInfo,
    /// What leads its title: nothing at the top, `├ ` or `└ ` (after `│ ` or two spaces for
    /// each level above) beneath.
    pub lead: String,
    /// How many children it has, shown or folded.
    pub children: usize,
    /// Its children are shown.
    pub unfolded: bool,
    /// A session folded away beneath it waits for an approval.
    pub waiting_below: bool,
    /// Tokens it and every session beneath it spent.
    pub tokens: u64,
    /// Dollars it and every session beneath it spent (`None`: no request had a known price).
    pub cost: Option<CostUsd>,
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

    /// The switcher's rows. Top-level sessions (and children whose parent is gone) come
    /// waiting for approval first, then running, then idle, newest activity first in each; a
    /// session counts as busy as the busiest beneath it, so a folded child waiting for an
    /// approval still brings its parent up. Children follow their parent in the order they
    /// were made, when the parent is in `unfolded`.
    pub fn rows(&self, unfolded: &HashSet<String>) -> Vec<SessionRow<'_>> {
        let tree = Tree::new(&self.by_id);
        let mut tops: Vec<(&str, Heat<'_>)> = tree
            .tops
            .iter()
            .map(|&id| (id, tree.heat(id, &mut HashSet::new())))
            .collect();
        tops.sort_by(|(a, ha), (b, hb)| {
            ha.rank
                .cmp(&hb.rank)
                .then_with(|| hb.updated_at.cmp(ha.updated_at))
                .then_with(|| a.cmp(b))
        });
        let mut rows = Vec::new();
        let mut seen = HashSet::new();
        for (id, _) in tops {
            tree.push_rows(id, "", "", unfolded, &mut seen, &mut rows);
        }
        rows
    }

    /// `id` and the sessions above it, nearest first (`id` alone for a top-level one).
    pub fn ancestry(&self, id: &str) -> Vec<String> {
        let mut chain = vec![id.to_owned()];
        let mut at = id;
        while let Some(up) = self
            .by_id
            .get(at)
            .and_then(|s| s.parent.as_ref())
            .map(|p| p.session_id.as_str())
            .filter(|up| self.by_id.contains_key(*up))
        {
            // A loop of parent links (no daemon makes one) ends the walk.
            if chain.iter().any(|c| c == up) {
                break;
            }
            chain.push(up.to_owned());
            at = up;
        }
        chain
    }

    /// Sessions waiting for an approval, children folded away included.
    pub fn waiting(&self) -> usize {
        self.by_id
            .values()
            .filter(|s| s.state == SessionState::WaitingApproval)
            .count()
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

/// The sessions as a tree: who is whose child.
struct Tree<'a> {
    by_id: &'a HashMap<String, SessionInfo>,
    /// Sessions with no parent here: none, one that is gone, or (a loop no daemon makes)
    /// themselves.
    tops: Vec<&'a str>,
    /// Each parent's children, in the order they were made.
    children: HashMap<&'a str, Vec<&'a SessionInfo>>,
}

/// How busy a subtree is and when it last moved, for the order of the top-level rows.
struct Heat<'a> {
    rank: u8,
    updated_at: &'a str,
}

impl<'a> Tree<'a> {
    fn new(by_id: &'a HashMap<String, SessionInfo>) -> Tree<'a> {
        let mut tops = Vec::new();
        let mut children: HashMap<&str, Vec<&SessionInfo>> = HashMap::new();
        for info in by_id.values() {
            match info.parent.as_ref().map(|p| p.session_id.as_str()) {
                Some(parent) if parent != info.session_id && by_id.contains_key(parent) => {
                    children.entry(parent).or_default().push(info);
                }
                _ => tops.push(info.session_id.as_str()),
            }
        }
        for kids in children.values_mut() {
            kids.sort_by(|a, b| {
                let order = |s: &SessionInfo| s.parent.as_ref().map_or(0, |p| p.order);
                order(a)
                    .cmp(&order(b))
                    .then_with(|| a.session_id.cmp(&b.session_id))
            });
        }
        // Sessions in a loop of parent links reach no top: the first of each loop stands at
        // the top, so every session has a row.
        let mut reached = HashSet::new();
        let mut stack: Vec<&str> = tops.clone();
        while let Some(id) = stack.pop() {
            if reached.insert(id) {
                stack.extend(
                    children
                        .get(id)
                        .into_iter()
                        .flatten()
                        .map(|c| c.session_id.as_str()),
                );
            }
        }
        let mut stranded: Vec<&str> = by_id
            .keys()
            .map(String::as_str)
            .filter(|id| !reached.contains(id))
            .collect();
        stranded.sort_unstable();
        for id in stranded {
            if reached.contains(id) {
                continue;
            }
            let mut stack = vec![id];
            while let Some(id) = stack.pop() {
                if reached.insert(id) {
                    stack.extend(
                        children
                            .get(id)
                            .into_iter()
                            .flatten()
                            .map(|c| c.session_id.as_str()),
                    );
                }
            }
            tops.push(id);
        }
        Tree {
            by_id,
            tops,
            children,
        }
    }

    fn kids(&self, id: &str) -> &[&'a SessionInfo] {
        self.children.get(id).map_or(&[], Vec::as_slice)
    }

    /// The busiest state and the latest activity in `id`'s subtree.
    fn heat(&self, id: &str, seen: &mut HashSet<&'a str>) -> Heat<'a> {
        let Some((key, info)) = self.by_id.get_key_value(id) else {
            return Heat {
                rank: rank(SessionState::Idle),
                updated_at: "",
            };
        };
        seen.insert(key.as_str());
        let mut heat = Heat {
            rank: rank(info.state),
            updated_at: info.updated_at.as_str(),
        };
        for kid in self.kids(id) {
            if seen.contains(kid.session_id.as_str()) {
                continue;
            }
            let below = self.heat(&kid.session_id, seen);
            heat.rank = heat.rank.min(below.rank);
            heat.updated_at = heat.updated_at.max(below.updated_at);
        }
        heat
    }

    /// Tokens and dollars `id` and every session beneath it spent.
    fn spend(&self, id: &str, seen: &mut HashSet<&'a str>) -> (u64, Option<CostUsd>) {
        let Some((key, info)) = self.by_id.get_key_value(id) else {
            return (0, None);
        };
        seen.insert(key.as_str());
        let (mut tokens, mut cost) = (info.usage.total_tokens, info.usage.cost_usd);
        for kid in self.kids(id) {
            if seen.contains(kid.session_id.as_str()) {
                continue;
            }
            let (t, c) = self.spend(&kid.session_id, seen);
            tokens = tokens.saturating_add(t);
            cost = match (cost, c) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            };
        }
        (tokens, cost)
    }

    /// `id`'s row led by `lead`, then (unfolded) its children's, led by `indent` and a branch.
    fn push_rows(
        &self,
        id: &str,
        lead: &str,
        indent: &str,
        unfolded: &HashSet<String>,
        seen: &mut HashSet<&'a str>,
        rows: &mut Vec<SessionRow<'a>>,
    ) {
        let Some((key, info)) = self.by_id.get_key_value(id) else {
            return;
        };
        if !seen.insert(key.as_str()) {
            return;
        }
        let kids: Vec<&SessionInfo> = self
            .kids(id)
            .iter()
            .copied()
            .filter(|k| !seen.contains(k.session_id.as_str()))
            .collect();
        let open = !kids.is_empty() && unfolded.contains(id);
        let (tokens, cost) = self.spend(id, &mut HashSet::new());
        let waiting_below = !open
            && kids.iter().any(|k| {
                self.heat(&k.session_id, &mut HashSet::new()).rank
                    == rank(SessionState::WaitingApproval)
            });
        rows.push(SessionRow {
            info,
            lead: lead.to_owned(),
            children: kids.len(),
            unfolded: open,
            waiting_below,
            tokens,
            cost,
        });
        if !open {
            return;
        }
        let last = kids.len().saturating_sub(1);
        for (i, kid) in kids.iter().enumerate() {
            let (branch, under) = if i == last {
                ("└ ", "  ")
            } else {
                ("├ ", "│ ")
            };
            self.push_rows(
                &kid.session_id,
                &format!("{indent}{branch}"),
                &format!("{indent}{under}"),
                unfolded,
                seen,
                rows,
            );
        }
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
        // A routine's turn is told once, by its `routine_finished`.
        EventKind::TurnCompleted { .. }
            if change
                .session
                .routine
                .as_ref()
                .is_some_and(|run| run.turn_id.is_some() && run.turn_id == event.turn_id) =>
        {
            None
        }
        EventKind::RoutineFinished {
            name: routine,
            stop_reason,
            ..
        } => Some(Alert {
            key: format!("turn:{}", event.turn_id.as_deref().unwrap_or_default()),
            text: format!(
                "{name}: routine {routine} finished ({})",
                stop_reason.as_str().replace('_', " ")
            ),
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
        | EventKind::MessageSent { .. }
        | EventKind::MessageReceived { .. }
        | EventKind::GoalSet { .. }
        | EventKind::GoalCheck { .. }
        | EventKind::GoalMet { .. }
        | EventKind::SubagentQueued { .. }
        | EventKind::BudgetWarning { .. }
        | EventKind::NetworkConnection(_)
        | EventKind::Synced { .. } => None,
    }
}

impl App {
    /// Opens the switcher on the attached session's row (or closes it). Everything starts
    /// folded but the sessions above the attached one, so that its row is there.
    pub fn toggle_switcher(&mut self) {
        if self.switcher.take().is_some() {
            return;
        }
        let mut unfolded: HashSet<String> = self
            .sessions
            .ancestry(&self.session_id)
            .into_iter()
            .collect();
        unfolded.remove(&self.session_id);
        let selected = self
            .sessions
            .rows(&unfolded)
            .iter()
            .position(|r| r.info.session_id == self.session_id)
            .unwrap_or(0);
        self.switcher = Some(Switcher { selected, unfolded });
        self.request(Action::ListSessions);
    }

    /// Tab: unfolds or folds the selected session's children; on a child without children
    /// of its own, folds its parent and selects it.
    fn toggle_fold(&mut self) {
        let Some(switcher) = self.switcher.as_mut() else {
            return;
        };
        let rows = self.sessions.rows(&switcher.unfolded);
        let Some(row) = rows.get(switcher.selected) else {
            return;
        };
        if row.children > 0 {
            let id = row.info.session_id.clone();
            if !switcher.unfolded.remove(&id) {
                switcher.unfolded.insert(id);
            }
            return;
        }
        let Some(parent) = row.info.parent.as_ref().map(|p| p.session_id.clone()) else {
            return;
        };
        if !switcher.unfolded.remove(&parent) {
            return;
        }
        if let Some(at) = self
            .sessions
            .rows(&switcher.unfolded)
            .iter()
            .position(|r| r.info.session_id == parent)
        {
            switcher.selected = at;
        }
    }

    /// Keys while the switcher is open: it takes them all.
    pub(super) fn switcher_key(&mut self, key: KeyEvent) {
        let Some(switcher) = self.switcher.as_mut() else {
            return;
        };
        let count = self.sessions.rows(&switcher.unfolded).len();
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
            KeyCode::Tab => self.toggle_fold(),
            KeyCode::Enter => {
                let target = self
                    .sessions
                    .rows(&switcher.unfolded)
                    .get(switcher.selected)
                    .map(|r| r.info.session_id.clone());
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
        if let Some(s) = self.switcher.as_mut() {
            let count = self.sessions.rows(&s.unfolded).len();
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
            goal: None,
            routine: None,
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

    #[test]
    fn a_routines_run_is_told_once_by_its_routine_finished() {
        let mut session = info("3f2a9c1d", SessionState::Idle, "2026-01-01T00:00:00Z");
        session.name = Some("triage-runs".into());
        session.routine = Some(amber_proto::RoutineRun {
            name: "triage".into(),
            fire_time: "2025-01-06T07:00:00+01:00".into(),
            turn_id: Some("t_1".into()),
            stop_reason: Some(amber_proto::StopReason::EndTurn),
        });
        let change = |turn: &str, kind: EventKind| SessionChange {
            change: SessionChangeKind::Updated,
            session: session.clone(),
            event: Some(amber_proto::Event {
                seq: Some(9),
                session_id: "3f2a9c1d".into(),
                turn_id: Some(turn.into()),
                agent_id: None,
                time: "2025-01-06T07:00:05Z".into(),
                kind,
            }),
        };
        let completed = || EventKind::TurnCompleted {
            stop_reason: amber_proto::StopReason::EndTurn,
            error: None,
            usage: Usage::default(),
            output: None,
            cost_usd: None,
            session_cost_usd: None,
            confirm_usage: None,
        };
        assert_eq!(alert_for(&change("t_1", completed())), None);
        let finished = EventKind::RoutineFinished {
            name: "triage".into(),
            fire_time: "2025-01-06T07:00:00+01:00".into(),
            stop_reason: amber_proto::StopReason::EndTurn,
        };
        let alert = alert_for(&change("t_1", finished)).unwrap();
        assert_eq!(
            alert.text,
            "triage-runs: routine triage finished (end turn)"
        );
        // Another turn of that session (a person's prompt) is told as usual.
        assert!(alert_for(&change("t_2", completed())).is_some());
    }

    fn ids(s: &Sessions) -> Vec<&str> {
        s.rows(&HashSet::new())
            .iter()
            .map(|r| r.info.session_id.as_str())
            .collect()
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

    /// A background child of `parent`, made `order`-th, spending `tokens` at `usd`.
    fn child(
        id: &str,
        parent: &str,
        order: u64,
        state: SessionState,
        spend: (u64, f64),
    ) -> SessionInfo {
        let mut s = info(id, state, "2026-01-01T00:00:00Z");
        s.parent = Some(amber_proto::ParentLink {
            session_id: parent.into(),
            agent_id: format!("agent_{id}"),
            task: id.into(),
            prompt: format!("look at {id}"),
            order,
            state: amber_proto::ChildState::Running,
            caps: amber_proto::ChildCaps::default(),
            result: None,
            resumed: false,
        });
        s.usage.total_tokens = spend.0;
        s.usage.cost_usd = CostUsd::from_usd(spend.1);
        s
    }

    /// The rows as `lead id` (`+` after a folded parent, `-` after an unfolded one, `!` when
    /// one folded beneath waits for an approval).
    fn tree(s: &Sessions, unfolded: &[&str]) -> Vec<String> {
        let unfolded: HashSet<String> = unfolded.iter().map(|u| (*u).to_owned()).collect();
        s.rows(&unfolded)
            .iter()
            .map(|r| {
                let fold = match (r.children, r.unfolded) {
                    (0, _) => "",
                    (_, true) => "-",
                    (_, false) => "+",
                };
                let waiting = if r.waiting_below { "!" } else { "" };
                format!("{}{}{fold}{waiting}", r.lead, r.info.session_id)
            })
            .collect()
    }

    #[test]
    fn children_sit_under_their_parent_folded_until_unfolded() {
        let idle = SessionState::Idle;
        let family = || {
            vec![
                info("p", idle, "2026-01-01T00:00:05Z"),
                info("q", idle, "2026-01-01T00:00:09Z"),
                child("c2", "p", 2, idle, (0, 0.0)),
                child("c1", "p", 1, idle, (0, 0.0)),
                child("g", "c1", 1, idle, (0, 0.0)),
            ]
        };
        // What, the sessions, the unfolded ones, the rows.
        type Case<'a> = (&'a str, Vec<SessionInfo>, &'a [&'a str], &'a [&'a str]);
        let cases: Vec<Case> = vec![
            ("folded by default", family(), &[], &["q", "p+"]),
            (
                "unfolded: children by the order they were made",
                family(),
                &["p"],
                &["q", "p-", "├ c1+", "└ c2"],
            ),
            (
                "a grandchild under its parent",
                family(),
                &["p", "c1"],
                &["q", "p-", "├ c1-", "│ └ g", "└ c2"],
            ),
            (
                "a grandchild stays hidden while its grandparent is folded",
                family(),
                &["c1"],
                &["q", "p+"],
            ),
            (
                "a child whose parent is gone stands at the top",
                vec![
                    info("p", idle, "2026-01-01T00:00:05Z"),
                    child("o", "gone", 1, idle, (0, 0.0)),
                ],
                &[],
                &["p", "o"],
            ),
            (
                "a child waiting for approval brings its folded parent up",
                vec![
                    info("run", SessionState::Running, "2026-01-01T00:00:09Z"),
                    info("p", idle, "2026-01-01T00:00:01Z"),
                    child("c", "p", 1, SessionState::WaitingApproval, (0, 0.0)),
                ],
                &[],
                &["p+!", "run"],
            ),
            (
                "a grandchild waiting for approval marks the folded child above it",
                vec![
                    info("p", idle, "2026-01-01T00:00:01Z"),
                    child("c", "p", 1, idle, (0, 0.0)),
                    child("g", "c", 1, SessionState::WaitingApproval, (0, 0.0)),
                ],
                &["p"],
                &["p-", "└ c+!"],
            ),
            (
                "a loop of parent links keeps every session",
                vec![
                    child("x", "y", 1, idle, (0, 0.0)),
                    child("y", "x", 1, idle, (0, 0.0)),
                ],
                &["x"],
                &["x-", "└ y"],
            ),
        ];
        for (what, sessions, unfolded, want) in cases {
            let mut s = Sessions::default();
            s.set_listed(sessions);
            assert_eq!(tree(&s, unfolded), want, "{what}");
        }
    }

    #[test]
    fn a_parent_row_spends_with_its_children() {
        let mut s = Sessions::default();
        let mut p = info("p", SessionState::Idle, "2026-01-01T00:00:05Z");
        p.usage.total_tokens = 1000;
        p.usage.cost_usd = CostUsd::from_usd(0.5);
        s.set_listed(vec![
            p,
            child("c1", "p", 1, SessionState::Idle, (100, 0.25)),
            child("c2", "p", 2, SessionState::Idle, (10, 0.125)),
            child("g", "c2", 1, SessionState::Idle, (1, 0.125)),
        ]);
        let unfolded: HashSet<String> = ["p".to_owned()].into();
        let spend: Vec<(u64, Option<CostUsd>)> = s
            .rows(&unfolded)
            .iter()
            .map(|r| (r.tokens, r.cost))
            .collect();
        let usd = |v: f64| CostUsd::from_usd(v);
        assert_eq!(
            spend,
            [(1111, usd(1.0)), (100, usd(0.25)), (11, usd(0.25))],
            "p with all three; c2 (folded) with g"
        );
    }

    #[test]
    fn the_switcher_opens_on_an_attached_child_and_tab_folds() {
        let mut app = App::new("c2");
        app.sessions.set_listed(vec![
            info("p", SessionState::Idle, "2026-01-01T00:00:05Z"),
            child("c1", "p", 1, SessionState::Idle, (0, 0.0)),
            child("c2", "p", 2, SessionState::Idle, (0, 0.0)),
        ]);
        let tab = KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE);
        app.toggle_switcher();
        let selected = |app: &App| {
            let sw = app.switcher.as_ref().unwrap();
            let rows = app.sessions.rows(&sw.unfolded);
            (rows.len(), rows[sw.selected].info.session_id.clone())
        };
        assert_eq!(selected(&app), (3, "c2".to_owned()), "its parent unfolded");
        // Tab on a child folds its parent and selects it; again, unfolds it.
        app.switcher_key(tab);
        assert_eq!(selected(&app), (1, "p".to_owned()));
        app.switcher_key(tab);
        assert_eq!(selected(&app), (3, "p".to_owned()));
        app.switcher_key(KeyEvent::new(KeyCode::End, KeyModifiers::NONE));
        assert_eq!(selected(&app), (3, "c2".to_owned()));
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
