//! The pure state of the TUI: everything the screen shows, changed only by protocol events
//! ([`App::apply_event`]), keys ([`App::on_key`]) and the answers to the [`Action`]s it asked
//! the runtime to perform. No I/O here, so every view can be driven and snapshot in tests.

mod checkpoints;
mod complete;
mod events;
pub mod form;
pub use keys::elicitation_form as form_of;
mod incoming;
mod input;
mod keys;
mod live;
mod models;
mod notice;
mod sessions;
mod shell;

use std::collections::{HashSet, VecDeque};

use amber_proto::{
    Approval, CommandAction, CommandInfo, CommandRunResult, ContextUse, Decision, PanelGetResult,
    PanelInfo, SessionInfo, SessionState, StatusSegmentInfo, Todo,
};

pub use checkpoints::{
    CheckpointsFor, DiffFor, LOCAL_COMMANDS, Preview, RewindRequest, RewindStage, RewindView,
    change_counts, no_checkpoint_text, one_line, resolve_turn,
};
pub use complete::{Popup, PopupKind, match_files, popup_for};
pub use incoming::{Incoming, UnknownEvent};
pub use input::Input;
pub use live::{LiveStatus, elapsed};
pub use models::{ModelChoice, ModelPicker, choices as model_choices};
pub use notice::{CANCEL_TICKS, ERROR_TICKS, INFO_TICKS, Notice, NoticeKind};
pub use sessions::{SessionRow, Sessions, Switcher, alert_for, label as session_label};
pub use shell::ShellOutcome;

use crate::transcript::{Cell, InfoKind, Transcript};

/// Ticks (of [`TICK_MS`]) a first Ctrl-C at idle stays armed for the second.
const CTRL_C_TICKS: u32 = 8;
/// The runtime calls [`App::tick`] this often.
pub const TICK_MS: u64 = 250;

/// Something the runtime must do for the app: an RPC, or leaving.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// `session/prompt`; the answer comes back through [`App::on_prompt_sent`].
    Prompt { local_id: u64, text: String },
    /// `session/cancel`.
    Cancel,
    /// `approval/respond`.
    Approve {
        request_id: String,
        decision: Decision,
        /// With a deny: what the person wants instead (the model reads it).
        feedback: Option<String>,
        /// With an allow of an MCP server's form: the values filled in.
        content: Option<serde_json::Value>,
    },
    /// `command/run`; the answer comes back through [`App::on_command_result`].
    RunCommand { name: String, args: String },
    /// `status/get` → [`App::set_status`].
    RefreshStatus,
    /// `panel/get` → [`App::set_panel`].
    RefreshPanel(String),
    /// Leave the TUI; the session keeps running in the daemon.
    Detach,
    /// Put this text on the terminal's clipboard (OSC 52).
    Copy(String),
    /// Run a `!` command as the user in `cwd` (the session's; `None`: the TUI's own) →
    /// [`App::on_shell`].
    Shell {
        command: String,
        cwd: Option<String>,
    },
    /// `session/rename` (`None`: clear the name) → [`App::on_renamed`].
    Rename(Option<String>),
    /// `provider/list` and `provider/check {provider}` → [`App::on_models`] (`/model`).
    ListModels { provider: Option<String> },
    /// Attach to another session.
    SwitchSession(String),
    /// `session/list` → [`Sessions::set_listed`] (the switcher opened).
    ListSessions,
    /// Read the session again from the start (after `/clear`).
    Reload,
    /// `checkpoint/list` → [`App::on_checkpoints`].
    ListCheckpoints(CheckpointsFor),
    /// `checkpoint/diff` → [`App::on_checkpoint_diff`].
    CheckpointDiff { turn_id: String, into: DiffFor },
    /// `session/rewind` → [`App::on_rewound`].
    Rewind(RewindRequest),
    /// `session/fork` → [`App::on_forked`] with `label` (how the turn was named: "turn 2").
    Fork {
        turn_id: Option<String>,
        label: Option<String>,
    },
}

/// Where the transcript view is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scroll {
    /// The bottom is on screen and new output scrolls in.
    Follow,
    /// Scrolled up: this (cell, row) is the top row on screen and stays there.
    Anchor { cell: usize, row: usize },
}

/// A prompt sent but whose turn has not started yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    pub local_id: u64,
    pub turn_id: Option<String>,
    pub text: String,
}

/// The panel on screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PanelView {
    pub name: String,
    pub title: String,
    pub lines: Vec<String>,
}

/// The whole state of the attached-session screen.
#[derive(Debug)]
pub struct App {
    pub session_id: String,
    pub session: Option<SessionInfo>,
    pub transcript: Transcript,
    pub queued: Vec<Queued>,
    /// Pending approval requests, oldest first; the first is the overlay.
    pub approvals: VecDeque<Approval>,
    pub todos: Vec<Todo>,
    pub input: Input,
    pub popup: Option<Popup>,
    pub commands: Vec<CommandInfo>,
    /// Workspace paths for `@` completion (relative, `/`-separated).
    pub files: Vec<String>,
    pub status: Vec<StatusSegmentInfo>,
    /// Tokens, context use, elapsed time and queue as they move between status refreshes.
    pub live: LiveStatus,
    /// Now, in Unix milliseconds: set by the runtime before each frame (tests set it).
    pub now_ms: i64,
    pub panels: Vec<PanelInfo>,
    pub panel: Option<PanelView>,
    pub help: bool,
    /// The `/rewind` picker, when open.
    pub rewind: Option<RewindView>,
    /// Every session of the daemon (from `session/watch`), for the switcher and the rule.
    pub sessions: Sessions,
    /// The session switcher, when open.
    pub switcher: Option<Switcher>,
    /// The `/model` picker, when open.
    pub model_picker: Option<ModelPicker>,
    /// The terminal has the focus (focus reporting; assumed until it says otherwise).
    pub focused: bool,
    /// Live events of the attached session worth a notification, for the runtime.
    pub alerts: Vec<crate::notify::Alert>,
    /// Tool outputs, diffs and reasoning shown in full.
    pub expanded: bool,
    /// A turn is running (from events; seeded by `session/get`).
    pub running: bool,
    /// Replay is over (the `synced` event arrived).
    pub synced: bool,
    /// The connection to amberd is lost and the runtime is reconnecting (shown in the rule
    /// for as long as it lasts; the notice that said why expires).
    pub reconnecting: bool,
    /// The highest durable `seq` applied.
    pub last_seq: u64,
    pub scroll: Scroll,
    /// Top (cell, row) of the last frame, set by the drawing code: where scrolling up starts.
    pub view_top: (usize, usize),
    /// Transcript width and height of the last frame.
    pub view_size: (u16, u16),
    /// A short message in the status line (errors of calls, hints); it expires with ticks.
    pub notice: Option<Notice>,
    /// `session/get`'s `lastSeq` at attach: the replay must reach it before `synced`.
    pub snapshot_seq: u64,
    /// Turn ids whose `turn_started` was seen: a prompt answer arriving after it is not queued.
    started_turns: HashSet<String>,
    /// (code, message) of the `error` events of the current turn.
    turn_errors: Vec<(String, String)>,
    /// The first replay fed the editor's history (a reload after `/clear` must not again).
    history_seeded: bool,
    next_local_id: u64,
    ctrl_c_armed: u32,
    /// The approval being denied with words (`e` in the overlay): its request id, and the
    /// words typed so far.
    pub denying: Option<(String, String)>,
    /// The MCP elicitation form being filled in (`f` in the overlay).
    pub form: Option<form::ElicitForm>,
    pending: Vec<Action>,
    /// A note to add once the transcript has been reloaded.
    pub(crate) reload_note: Option<String>,
    /// A note for the session this one switches to (a fork says where it came from).
    pub switch_note: Option<String>,
    /// The `!` commands run since the last prompt, for the next one (`shell.rs`).
    pub(crate) shell_context: Vec<String>,
}

impl App {
    pub fn new(session_id: impl Into<String>) -> Self {
        App {
            session_id: session_id.into(),
            session: None,
            transcript: Transcript::new(),
            queued: Vec::new(),
            approvals: VecDeque::new(),
            todos: Vec::new(),
            input: Input::default(),
            popup: None,
            commands: Vec::new(),
            files: Vec::new(),
            status: Vec::new(),
            live: LiveStatus::default(),
            now_ms: 0,
            panels: Vec::new(),
            panel: None,
            help: false,
            rewind: None,
            sessions: Sessions::default(),
            switcher: None,
            model_picker: None,
            focused: true,
            alerts: Vec::new(),
            expanded: false,
            running: false,
            synced: false,
            reconnecting: false,
            last_seq: 0,
            scroll: Scroll::Follow,
            view_top: (0, 0),
            view_size: (80, 20),
            notice: None,
            snapshot_seq: 0,
            started_turns: HashSet::new(),
            turn_errors: Vec::new(),
            history_seeded: false,
            next_local_id: 1,
            ctrl_c_armed: 0,
            denying: None,
            form: None,
            pending: Vec::new(),
            reload_note: None,
            switch_note: None,
            shell_context: Vec::new(),
        }
    }

    /// Seeds the state from `session/get` (info, pending approvals, todos). The transcript
    /// comes from the replay that follows.
    pub fn load_snapshot(
        &mut self,
        session: SessionInfo,
        approvals: Vec<Approval>,
        todos: Vec<Todo>,
    ) {
        self.running = session.state != SessionState::Idle;
        self.live.seed(&session.usage);
        self.sessions.update(&session);
        self.session_id = session.session_id.clone();
        self.session = Some(session);
        for a in approvals {
            if !self.approvals.iter().any(|p| p.request_id == a.request_id) {
                self.approvals.push_back(a);
            }
        }
        self.todos = todos;
        self.request(Action::RefreshStatus);
    }

    /// Forgets the transcript (before replaying it again), keeping input, history and caches.
    pub fn reset_transcript(&mut self) {
        self.transcript = Transcript::new();
        self.live = LiveStatus::default();
        self.approvals.clear();
        self.synced = false;
        self.last_seq = 0;
        self.scroll = Scroll::Follow;
        self.started_turns.clear();
    }

    /// The actions asked for since the last call, duplicates of refreshes dropped.
    pub fn drain_actions(&mut self) -> Vec<Action> {
        let mut out: Vec<Action> = Vec::new();
        for a in self.pending.drain(..) {
            let dup =
                matches!(a, Action::RefreshStatus | Action::RefreshPanel(_)) && out.contains(&a);
            if !dup {
                out.push(a);
            }
        }
        out
    }

    pub(crate) fn request(&mut self, action: Action) {
        self.pending.push(action);
    }

    /// Called every [`TICK_MS`]: expires the Ctrl-C arm and the status-line notice.
    pub fn tick(&mut self) {
        if self.ctrl_c_armed > 0 {
            self.ctrl_c_armed -= 1;
            if self.ctrl_c_armed == 0 {
                self.clear_notice(NoticeKind::QuitArmed);
            }
        }
        self.tick_notice();
    }

    /// A prompt the user sent: shown as queued until its turn starts.
    pub(crate) fn send_prompt(&mut self, text: String) {
        let text = self.with_shell_context(text);
        let local_id = self.next_local_id;
        self.next_local_id += 1;
        self.queued.push(Queued {
            local_id,
            turn_id: None,
            text: text.clone(),
        });
        self.request(Action::Prompt { local_id, text });
        self.scroll = Scroll::Follow;
    }

    /// The answer to [`Action::Prompt`].
    pub fn on_prompt_sent(&mut self, local_id: u64, result: Result<String, String>) {
        match result {
            Ok(turn_id) if self.started_turns.contains(&turn_id) => {
                self.queued.retain(|q| q.local_id != local_id);
            }
            Ok(turn_id) => {
                if let Some(q) = self.queued.iter_mut().find(|q| q.local_id == local_id) {
                    q.turn_id = Some(turn_id);
                }
            }
            Err(e) => {
                self.queued.retain(|q| q.local_id != local_id);
                self.transcript.push(Cell::Error {
                    code: "prompt".into(),
                    message: e,
                });
            }
        }
    }

    /// The answer to [`Action::RunCommand`].
    /// `/copy`: the last reply of the model, as it was written (markdown), to the clipboard.
    pub(crate) fn copy_last_reply(&mut self) {
        let last = self.transcript.cells().rev().find_map(|cell| match cell {
            Cell::Assistant(crate::transcript::cell::Assistant::Done(text)) => Some(text.clone()),
            _ => None,
        });
        match last {
            Some(text) => {
                let chars = text.chars().count();
                self.request(Action::Copy(text));
                self.transcript.push(Cell::Info {
                    text: format!("copied the last reply ({chars} characters)"),
                    kind: InfoKind::Command,
                });
            }
            None => {
                self.transcript.push(Cell::Info {
                    text: "nothing to copy yet: no reply of the model in this session".to_owned(),
                    kind: InfoKind::Command,
                });
            }
        }
        self.scroll = Scroll::Follow;
    }

    /// `/help`: this client's commands, then the daemon's (`command/list`), and the keys.
    pub(crate) fn show_help(&mut self) {
        let local = checkpoints::LOCAL_COMMANDS
            .iter()
            .map(|(name, description)| ((*name).to_owned(), (*description).to_owned()));
        let daemon = self
            .commands
            .iter()
            .filter(|c| {
                !checkpoints::LOCAL_COMMANDS
                    .iter()
                    .any(|(n, _)| *n == c.name)
            })
            .map(|c| (c.name.clone(), c.description.clone()));
        let rows: Vec<(String, String)> = local.chain(daemon).collect();
        let width = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(0) + 1;
        let mut text: Vec<String> = rows
            .iter()
            .map(|(name, description)| format!("/{name:<width$}  {description}"))
            .collect();
        text.push(format!(
            "!{:<w$}  run a shell command yourself (as you, in the session's directory); \
             its output goes with your next prompt",
            "CMD",
            w = width - 1
        ));
        text.push(String::new());
        text.push(
            "Enter sends · Shift-Enter a new line · Ctrl-C cancels the turn (twice: leave) · \
             Ctrl-D on an empty prompt leaves · Shift-Tab cycles the mode · Ctrl-S sessions · \
             @ completes a file"
                .to_owned(),
        );
        self.transcript.push(Cell::Info {
            text: text.join("\n"),
            kind: InfoKind::Command,
        });
        self.scroll = Scroll::Follow;
    }

    pub fn on_command_result(&mut self, result: Result<CommandRunResult, String>) {
        let result = match result {
            Ok(r) => r,
            Err(e) => {
                self.transcript.push(Cell::Error {
                    code: "command".into(),
                    message: e,
                });
                return;
            }
        };
        match result.action {
            Some(CommandAction::Detach) => self.request(Action::Detach),
            Some(CommandAction::OpenSession { session_id }) => {
                self.request(Action::SwitchSession(session_id))
            }
            Some(CommandAction::Cleared) => {
                self.reload_note = Some(result.output);
                self.request(Action::Reload);
                return;
            }
            Some(CommandAction::Prompted { .. }) | None => {}
        }
        if !result.output.trim().is_empty() {
            self.transcript.push(Cell::Info {
                text: result.output,
                kind: InfoKind::Command,
            });
        }
        self.request(Action::RefreshStatus);
        self.scroll = Scroll::Follow;
    }

    /// The answer to [`Action::RefreshStatus`]: the daemon's segments and, when it sends
    /// them, the context numbers the live estimate starts from.
    pub fn set_status(&mut self, segments: Vec<StatusSegmentInfo>, context: Option<ContextUse>) {
        self.status = segments;
        self.live.set_context(context);
    }

    /// The status line's segments: the daemon's, with tokens and context use live.
    pub fn status_texts(&self) -> Vec<String> {
        self.live.segments(&self.status)
    }

    /// The answer to [`Action::RefreshPanel`]; ignored if another panel is open by now.
    pub fn set_panel(&mut self, panel: PanelGetResult) {
        if self.panel.as_ref().is_some_and(|p| p.name == panel.name) {
            self.panel = Some(PanelView {
                name: panel.name,
                title: panel.title,
                lines: panel.lines,
            });
        }
    }

    /// A call failed: say so in the status line (for a few seconds).
    pub fn on_error(&mut self, message: impl Into<String>) {
        self.set_notice(NoticeKind::Error, message);
    }

    /// Adds a note cell (connection lost, reattached…).
    pub fn note(&mut self, text: impl Into<String>) {
        self.transcript.push(Cell::Info {
            text: text.into(),
            kind: InfoKind::Note,
        });
    }

    /// Shows the next panel of `panel/list` (or closes the last one).
    pub(crate) fn cycle_panel(&mut self) {
        let next = match &self.panel {
            None => self.panels.first(),
            Some(open) => {
                let pos = self.panels.iter().position(|p| p.name == open.name);
                pos.and_then(|i| self.panels.get(i + 1))
            }
        };
        self.panel = next.map(|p| PanelView {
            name: p.name.clone(),
            title: p.title.clone(),
            lines: Vec::new(),
        });
        if let Some(name) = self.panel.as_ref().map(|p| p.name.clone()) {
            self.request(Action::RefreshPanel(name));
        }
    }

    fn refresh_panel(&mut self) {
        if let Some(name) = self.panel.as_ref().map(|p| p.name.clone()) {
            self.request(Action::RefreshPanel(name));
        }
    }
}
