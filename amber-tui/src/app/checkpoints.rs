//! Checkpoints in the TUI, handled by the client rather than `command/run`:
//! `/rewind` opens a picker of the session's turns (`checkpoint/list {all}`: those without a
//! checkpoint too) with a preview of each one's diff, then asks files / conversation / both
//! and calls `session/rewind` — only the conversation when the files cannot be restored
//! (a checkpoint from that turn on expired, is incomplete, or was never recorded); `/diff
//! [TURN]` puts a turn's diff (the last checkpoint's by default) in the transcript; `/fork
//! [TURN]` calls `session/fork` and switches to the fork. A TURN is a turn number as the
//! picker shows it (the `turn` field of `checkpoint/list`) or a turn id, as for `amber-cli`.
//!
//! Every call is an [`Action`] whose answer comes back through an `on_*` method here, so
//! the whole flow is pure state and tested without a daemon.

use std::collections::{BTreeSet, HashMap};

use amber_proto::{
    ChangeStatus, CheckpointDiffResult, CheckpointInfo, NoCheckpoint, SessionInfo,
    SessionRewindResult,
};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::{Action, App, NoticeKind, Scroll};
use crate::transcript::{Cell, InfoKind};

/// The slash commands this client runs itself: (name, description) for the `/` popup.
pub const LOCAL_COMMANDS: &[(&str, &str)] = &[
    (
        "sessions",
        "switch to another session of the daemon (also Ctrl-S)",
    ),
    (
        "rewind",
        "undo turns: pick one, preview its diff, restore files and/or conversation",
    ),
    ("diff", "what the last turn changed (/diff TURN: that turn)"),
    (
        "fork",
        "continue in a new session with this conversation (/fork TURN: before that turn)",
    ),
    (
        "detach",
        "leave amber; the session keeps running in amberd (also /quit, /exit, Ctrl-D)",
    ),
    ("quit", "leave amber (as /detach)"),
    ("exit", "leave amber (as /detach)"),
    ("help", "list every command, amber's own and the daemon's"),
    (
        "init",
        "have the model look at this repository and write (or improve) its AGENTS.md",
    ),
    (
        "copy",
        "copy the last reply to the clipboard (OSC 52: works over ssh and in tmux)",
    ),
    (
        "model",
        "pick the session's model from what its providers offer (/model NAME [@PROVIDER]: set it)",
    ),
    (
        "rename",
        "name this session (/rename NAME; alone: clear it); amber --session NAME comes back to it",
    ),
];

/// What `/init` asks the model.
pub(crate) const INIT_PROMPT: &str = "Look at this repository — its layout, how it is built, tested and \
linted, its conventions — and write an AGENTS.md at its root for coding agents working in it: \
the commands to build, test and lint, where things are, and the conventions to follow. If an \
AGENTS.md exists, improve it, keeping what is still true. Keep it short and concrete.";

/// Rows the preview scrolls per PgUp / PgDn.
const PREVIEW_PAGE: usize = 10;

/// Why `checkpoint/list {all: true}` was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckpointsFor {
    /// To fill the `/rewind` picker.
    Rewind,
    /// `/diff [TURN]`: the turn as typed, if one was.
    Diff(Option<String>),
    /// `/fork TURN` with a turn number to resolve.
    Fork(String),
}

/// Where a `checkpoint/diff` answer goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffFor {
    /// The `/rewind` picker's preview of that turn.
    Preview,
    /// A transcript cell with this title.
    Transcript { title: String },
}

/// A `session/rewind` call and what the answer needs to report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewindRequest {
    pub turn_id: String,
    /// The turn's number, as the picker shows it.
    pub turn: u32,
    pub prompt: String,
    pub files: bool,
    pub conversation: bool,
    pub force: bool,
}

/// The diff preview of one turn in the picker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Preview {
    Loading,
    Ready(String),
    Failed(String),
}

/// Where the `/rewind` flow is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewindStage {
    /// `checkpoint/list` is on its way.
    Loading,
    /// Choosing the turn (with its diff).
    Pick,
    /// Choosing what to restore.
    Confirm,
    /// `session/rewind` is on its way.
    Running,
}

/// The `/rewind` picker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewindView {
    pub stage: RewindStage,
    /// Every turn of the history, newest first.
    pub rows: Vec<CheckpointInfo>,
    pub selected: usize,
    /// By turn id: fetched once per turn while the picker is open.
    pub previews: HashMap<String, Preview>,
    /// First preview line shown.
    pub preview_scroll: usize,
    /// Overwrite files changed outside amber (toggled with `!`).
    pub force: bool,
    /// Unix seconds when the list came, for "5m ago".
    pub now: i64,
}

impl RewindView {
    fn new() -> Self {
        RewindView {
            stage: RewindStage::Loading,
            rows: Vec::new(),
            selected: 0,
            previews: HashMap::new(),
            preview_scroll: 0,
            force: false,
            now: 0,
        }
    }

    pub fn selected_row(&self) -> Option<&CheckpointInfo> {
        self.rows.get(self.selected)
    }

    /// Why a files rewind to the selected turn would be refused, if it would: the first
    /// turn from it on (the newest first) whose changes cannot be put back, as the daemon
    /// judges it.
    pub fn files_refusal(&self) -> Option<String> {
        let rows = self.rows.get(..=self.selected).unwrap_or_default();
        rows.iter().rev().find_map(|r| {
            let why = match (r.checkpoint, &r.incomplete) {
                (Some(NoCheckpoint::Expired), _) => "its checkpoint expired".to_owned(),
                (Some(NoCheckpoint::Disabled), _) => "it ran with checkpoints disabled".into(),
                (_, Some(why)) => format!("incomplete checkpoint: {why}"),
                _ => return None,
            };
            Some(format!("turn {}: {why}", r.turn))
        })
    }

    /// The paths the selected turn and every later one changed: what a files rewind puts
    /// back (as far as the checkpoints know).
    pub fn paths_to_restore(&self) -> Vec<String> {
        let rows = self.rows.get(..=self.selected).unwrap_or_default();
        let paths: BTreeSet<&str> = rows
            .iter()
            .flat_map(|r| r.changed.iter().map(|c| c.path.as_str()))
            .collect();
        paths.into_iter().map(str::to_owned).collect()
    }
}

/// `(added, modified, deleted)` paths of a checkpoint row.
pub fn change_counts(row: &CheckpointInfo) -> (usize, usize, usize) {
    let n = |s: ChangeStatus| row.changed.iter().filter(|c| c.status == s).count();
    (
        n(ChangeStatus::Added),
        n(ChangeStatus::Modified),
        n(ChangeStatus::Deleted),
    )
}

/// The turn id `arg` names: digits only are a turn number, looked up in `rows` (every turn,
/// oldest first, as `checkpoint/list {all}` answers); anything else is a turn id as is. Also
/// the row, when one matches.
pub fn resolve_turn<'a>(
    rows: &'a [CheckpointInfo],
    arg: &str,
) -> Result<(String, Option<&'a CheckpointInfo>), String> {
    let arg = arg.trim();
    if !arg.is_empty() && arg.bytes().all(|b| b.is_ascii_digit()) {
        let n = arg.parse::<u64>().ok();
        let row = rows.iter().find(|r| Some(u64::from(r.turn)) == n);
        return match row {
            Some(r) => Ok((r.turn_id.clone(), Some(r))),
            None => Err(format!("no turn {arg} in this session")),
        };
    }
    Ok((arg.to_owned(), rows.iter().find(|r| r.turn_id == arg)))
}

/// How a turn is named in titles: "turn 3 · fix the build".
fn turn_title(row: Option<&CheckpointInfo>, turn_id: &str) -> String {
    match row {
        Some(r) => format!("turn {} · {}", r.turn, one_line(&r.prompt)),
        None => format!("turn {turn_id}"),
    }
}

impl App {
    /// Merges [`LOCAL_COMMANDS`] into the daemon's commands (unless it has one of the name),
    /// for the `/` popup.
    pub fn set_commands(&mut self, mut commands: Vec<amber_proto::CommandInfo>) {
        for (name, description) in LOCAL_COMMANDS {
            if !commands.iter().any(|c| c.name == *name) {
                commands.push(amber_proto::CommandInfo {
                    name: (*name).to_owned(),
                    description: (*description).to_owned(),
                });
            }
        }
        self.commands = commands;
    }

    /// `/rewind`, `/diff`, `/fork`: true when `name` is one of them (and was handled).
    pub(crate) fn local_command(&mut self, name: &str, args: &str) -> bool {
        let args = args.trim();
        match name {
            // The daemon's `/sessions` prints a list; here the switcher does better.
            "sessions" => self.toggle_switcher(),
            "init" => self.send_prompt(INIT_PROMPT.to_owned()),
            "copy" => self.copy_last_reply(),
            "rename" => self.request(Action::Rename((!args.is_empty()).then(|| args.to_owned()))),
            // With a name it is the daemon's `/model NAME [@PROVIDER]`.
            "model" if args.is_empty() => self.open_model_picker(),
            "rewind" => {
                self.rewind = Some(RewindView::new());
                self.request(Action::ListCheckpoints(CheckpointsFor::Rewind));
            }
            "diff" => {
                let turn = (!args.is_empty()).then(|| args.to_owned());
                self.request(Action::ListCheckpoints(CheckpointsFor::Diff(turn)));
            }
            "fork" if args.is_empty() => self.request(Action::Fork {
                turn_id: None,
                label: None,
            }),
            "fork" if args.bytes().all(|b| b.is_ascii_digit()) => {
                self.request(Action::ListCheckpoints(CheckpointsFor::Fork(
                    args.to_owned(),
                )));
            }
            "fork" => self.request(Action::Fork {
                turn_id: Some(args.to_owned()),
                label: Some(args.to_owned()),
            }),
            _ => return false,
        }
        true
    }

    /// The answer to [`Action::ListCheckpoints`]; `now` is the time it came (unix seconds).
    pub fn on_checkpoints(
        &mut self,
        purpose: CheckpointsFor,
        result: Result<Vec<CheckpointInfo>, String>,
        now: i64,
    ) {
        let rows = match result {
            Ok(rows) => rows,
            Err(e) => {
                let code = match purpose {
                    CheckpointsFor::Rewind => {
                        self.rewind = None;
                        "rewind"
                    }
                    CheckpointsFor::Diff(_) => "diff",
                    CheckpointsFor::Fork(_) => "fork",
                };
                return self.call_failed(code, e);
            }
        };
        match purpose {
            CheckpointsFor::Rewind => self.fill_picker(rows, now),
            CheckpointsFor::Diff(turn) => {
                let chosen = match turn.as_deref() {
                    Some(arg) => resolve_turn(&rows, arg).and_then(|(id, row)| {
                        match row.and_then(|r| r.checkpoint.map(|why| (r.turn, why))) {
                            Some((n, why)) => Err(no_diff(n, why)),
                            None => Ok((id, row)),
                        }
                    }),
                    // Nothing to show is a fact, not a failure: a note, as `/rewind` says it.
                    None => match rows.iter().rfind(|r| r.checkpoint.is_none()) {
                        Some(r) => Ok((r.turn_id.clone(), Some(r))),
                        None => return self.note(no_checkpoints()),
                    },
                };
                match chosen {
                    Ok((turn_id, row)) => {
                        let title = turn_title(row, &turn_id);
                        self.request(Action::CheckpointDiff {
                            turn_id,
                            into: DiffFor::Transcript { title },
                        });
                    }
                    Err(e) => self.call_failed("diff", e),
                }
            }
            CheckpointsFor::Fork(arg) => match resolve_turn(&rows, &arg) {
                Ok((turn_id, _)) => self.request(Action::Fork {
                    turn_id: Some(turn_id),
                    label: Some(format!("turn {arg}")),
                }),
                Err(e) => self.call_failed("fork", e),
            },
        }
    }

    fn fill_picker(&mut self, mut rows: Vec<CheckpointInfo>, now: i64) {
        let Some(view) = self.rewind.as_mut() else {
            return;
        };
        if view.stage != RewindStage::Loading {
            return;
        }
        if rows.is_empty() {
            self.rewind = None;
            self.note("no turns yet: nothing to rewind".to_owned());
            return;
        }
        rows.reverse();
        view.rows = rows;
        view.now = now;
        view.stage = RewindStage::Pick;
        self.request_preview();
    }

    /// Asks for the selected turn's diff unless it is here or on its way.
    fn request_preview(&mut self) {
        let Some(view) = self.rewind.as_mut() else {
            return;
        };
        view.preview_scroll = 0;
        // A turn without a checkpoint has no diff to ask for: the picker says why.
        let Some(turn_id) = view
            .selected_row()
            .filter(|r| r.checkpoint.is_none())
            .map(|r| r.turn_id.clone())
        else {
            return;
        };
        if view.previews.contains_key(&turn_id) {
            return;
        }
        view.previews.insert(turn_id.clone(), Preview::Loading);
        self.request(Action::CheckpointDiff {
            turn_id,
            into: DiffFor::Preview,
        });
    }

    /// The answer to [`Action::CheckpointDiff`].
    pub fn on_checkpoint_diff(
        &mut self,
        turn_id: String,
        into: DiffFor,
        result: Result<CheckpointDiffResult, String>,
    ) {
        match into {
            DiffFor::Preview => {
                if let Some(view) = self.rewind.as_mut() {
                    let preview = match result {
                        Ok(d) => Preview::Ready(d.diff),
                        Err(e) => Preview::Failed(e),
                    };
                    view.previews.insert(turn_id, preview);
                }
            }
            DiffFor::Transcript { title } => match result {
                Ok(d) => {
                    self.transcript.push(Cell::Diff {
                        title,
                        diff: d.diff,
                    });
                    self.scroll = Scroll::Follow;
                }
                Err(e) => self.call_failed("diff", e),
            },
        }
    }

    /// The answer to [`Action::Rewind`]. The `rewound` event notes the rewind in the
    /// transcript as replay will; this adds what only the caller learns: the paths.
    pub fn on_rewound(
        &mut self,
        request: RewindRequest,
        result: Result<SessionRewindResult, String>,
    ) {
        self.rewind = None;
        let result = match result {
            Ok(r) => r,
            Err(e) => return self.call_failed("rewind", e),
        };
        let mut text = format!(
            "rewound to before turn {} ({})",
            request.turn,
            match (request.files, request.conversation) {
                (true, true) => "files and conversation",
                (true, false) => "files only",
                _ => "conversation only",
            }
        );
        if request.files {
            if result.restored.is_empty() {
                text.push_str("\nno file needed restoring");
            } else {
                text.push_str(&format!("\nrestored: {}", result.restored.join(", ")));
            }
        }
        // With force the daemon still lists the conflicts, but it put them back too.
        let left_alone = !result.conflicts.is_empty() && !request.force;
        if !result.conflicts.is_empty() {
            let how = if request.force {
                "changed outside amber since, put back too"
            } else {
                "left alone, changed outside amber since"
            };
            text.push_str(&format!("\n{how}: {}", result.conflicts.join(", ")));
        }
        // The undone prompt comes back to be edited and sent again, as an editor would.
        if request.conversation && self.input.is_empty() && !request.prompt.is_empty() {
            self.input.set(&request.prompt);
            text.push_str("\nits prompt is back in the editor");
        }
        self.transcript.push(Cell::Info {
            text,
            kind: if left_alone {
                InfoKind::Warn
            } else {
                InfoKind::Command
            },
        });
        self.scroll = Scroll::Follow;
        self.request(Action::RefreshStatus);
    }

    /// The answer to [`Action::Fork`]: switches to the new session, which says where it came
    /// from once its history is on screen.
    pub fn on_forked(&mut self, label: Option<String>, result: Result<SessionInfo, String>) {
        match result {
            Ok(info) => {
                let from = match label {
                    Some(t) => format!("the conversation before {t}"),
                    None => "the whole conversation".to_owned(),
                };
                self.switch_note = Some(format!(
                    "forked from session {} ({from}); the original is unchanged",
                    self.session_id
                ));
                self.request(Action::SwitchSession(info.session_id));
            }
            Err(e) => self.call_failed("fork", e),
        }
    }

    /// The answer to [`Action::Rename`].
    pub fn on_renamed(&mut self, result: Result<SessionInfo, String>) {
        match result {
            Ok(info) => {
                let text = match info.name.as_deref() {
                    Some(name) => format!(
                        "this session is named {name}: `amber --session {name}` comes back to it"
                    ),
                    None => "this session has no name now".to_owned(),
                };
                self.sessions.update(&info);
                self.session = Some(info);
                self.transcript.push(Cell::Info {
                    text,
                    kind: InfoKind::Command,
                });
                self.scroll = Scroll::Follow;
            }
            Err(e) => self.call_failed("rename", e),
        }
    }

    fn call_failed(&mut self, code: &str, message: String) {
        self.transcript.push(Cell::Error {
            code: code.to_owned(),
            message,
        });
        self.scroll = Scroll::Follow;
    }

    /// Keys while the picker is open (it takes them all; approvals come first).
    pub(crate) fn rewind_key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let Some(view) = self.rewind.as_mut() else {
            return;
        };
        let close = matches!(key.code, KeyCode::Esc | KeyCode::Char('q'))
            || (ctrl && key.code == KeyCode::Char('c'));
        match view.stage {
            RewindStage::Loading | RewindStage::Running => {
                // The answer still arrives and is reported; only the view goes.
                if close {
                    self.rewind = None;
                }
            }
            RewindStage::Pick => match key.code {
                _ if close => self.rewind = None,
                KeyCode::Up | KeyCode::Char('k') => {
                    view.selected = view.selected.saturating_sub(1);
                    self.request_preview();
                }
                KeyCode::Down | KeyCode::Char('j') => {
                    if view.selected + 1 < view.rows.len() {
                        view.selected += 1;
                    }
                    self.request_preview();
                }
                KeyCode::Home => {
                    view.selected = 0;
                    self.request_preview();
                }
                KeyCode::End => {
                    view.selected = view.rows.len().saturating_sub(1);
                    self.request_preview();
                }
                KeyCode::PageDown => view.preview_scroll += PREVIEW_PAGE,
                KeyCode::PageUp => {
                    view.preview_scroll = view.preview_scroll.saturating_sub(PREVIEW_PAGE);
                }
                KeyCode::Enter => view.stage = RewindStage::Confirm,
                _ => {}
            },
            RewindStage::Confirm => {
                let (files, conversation) = match key.code {
                    KeyCode::Esc => {
                        view.stage = RewindStage::Pick;
                        return;
                    }
                    _ if close => {
                        self.rewind = None;
                        return;
                    }
                    KeyCode::Char('!') => {
                        view.force = !view.force;
                        return;
                    }
                    KeyCode::Enter | KeyCode::Char('b') => (true, true),
                    KeyCode::Char('f') => (true, false),
                    KeyCode::Char('c') => (false, true),
                    _ => return,
                };
                if files && let Some(why) = view.files_refusal() {
                    let text = format!(
                        "the files cannot be restored ({why}); c rewinds the conversation only"
                    );
                    self.set_notice(NoticeKind::Error, text);
                    return;
                }
                let Some(row) = view.selected_row() else {
                    return;
                };
                let request = RewindRequest {
                    turn_id: row.turn_id.clone(),
                    turn: row.turn,
                    prompt: row.prompt.clone(),
                    files,
                    conversation,
                    force: view.force,
                };
                view.stage = RewindStage::Running;
                self.request(Action::Rewind(request));
            }
        }
    }
}

/// A prompt on one line (whitespace runs, newlines included, become one space).
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn no_checkpoints() -> String {
    "no checkpoints yet: a turn gets one when it first changes files".to_owned()
}

/// Why turn `n` has no diff to show.
fn no_diff(n: u32, why: NoCheckpoint) -> String {
    format!("turn {n} has no checkpoint: {}", no_checkpoint_text(why))
}

/// What a turn without a checkpoint means, for the picker and `/diff`.
pub fn no_checkpoint_text(why: NoCheckpoint) -> &'static str {
    match why {
        NoCheckpoint::None => "it changed no files (no file-changing tool call)",
        NoCheckpoint::Expired => {
            "it expired ([checkpoints.retention]); what the turn changed can no longer be restored"
        }
        NoCheckpoint::Disabled => {
            "it ran with checkpoints disabled; what the turn changed was not recorded"
        }
    }
}
