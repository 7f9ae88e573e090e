//! One attached session: `session/get`, then `session/subscribe {afterSeq: 0}` whose replay is
//! the transcript, then live events. Terminal input, events, answers to calls and a tick are
//! multiplexed here; the app's [`Action`]s run as tasks so the screen never waits on the
//! daemon. A lagged subscription resumes from the last `seq`; a lost connection reconnects;
//! a session deleted meanwhile ends the screen ([`Outcome::Deleted`]).

use std::path::PathBuf;
use std::time::Duration;

use amber_client::{
    Client, ClientError, ConnectOptions, RawEvent, RawEventStream, SessionWatchStream,
};
use amber_proto::methods as m;
use amber_proto::{
    CheckpointDiffParams, CheckpointDiffResult, CheckpointInfo, CheckpointListParams, CommandInfo,
    CommandRunResult, PanelGetResult, PanelInfo, SessionChange, SessionForkParams, SessionInfo,
    SessionRewindParams, SessionRewindResult, StatusGetResult,
};
use futures::{FutureExt, StreamExt};
use ratatui::crossterm::event::{Event, MouseEventKind};
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};

use crate::Error;
use crate::app::{
    Action, App, CheckpointsFor, DiffFor, ModelChoice, NoticeKind, RewindRequest, Sessions,
    ShellOutcome, TICK_MS, alert_for, model_choices,
};
use crate::notify::{Alert, Notifier};
use crate::terminal::Tui;
use crate::{files, rpc, ui};

use super::shell;

/// Shortest time between two frames (~60 fps): bursts of deltas are drawn together.
const FRAME: Duration = Duration::from_millis(16);
/// Events applied at most before a frame is drawn.
const EVENT_BATCH: usize = 2048;
/// Ticks between status refreshes when nothing else asked for one (~5 s).
const STATUS_TICKS: u32 = 20;
/// Pause between attempts to find the session again after the subscription ended.
const RETRY: Duration = Duration::from_secs(1);
/// How long a daemon that said "session not found" must stay up to mean "deleted".
const CONFIRM_GONE: Duration = Duration::from_secs(3);

/// How an attached session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Detach,
    Switch(String),
    /// The session was deleted (by another client): there is nothing left to show.
    Deleted,
}

/// What survives switching sessions: the prompt history, the command list, a note for the
/// next session (where a fork came from), and the console over every session — the watch,
/// the sessions it keeps current, the focus and the notifier.
pub struct Carry {
    pub history: Vec<String>,
    pub commands: Vec<CommandInfo>,
    pub panels: Vec<PanelInfo>,
    pub note: Option<String>,
    pub sessions: Sessions,
    pub focused: bool,
    pub console: Console,
    /// The transcript of the session left last, as text for the terminal's scrollback.
    pub scrollback: Option<String>,
}

/// The daemon-wide side of the screen, outside any one session.
pub struct Console {
    /// `session/watch {approvals: true}`: every session's changes; `None` while it is down
    /// (an older daemon, or the connection was lost).
    pub watch: Option<SessionWatchStream>,
    pub notifier: Notifier,
}

impl Carry {
    pub fn new(console: Console) -> Self {
        Carry {
            history: Vec::new(),
            commands: Vec::new(),
            panels: Vec::new(),
            note: None,
            sessions: Sessions::default(),
            focused: true,
            console,
            scrollback: None,
        }
    }
}

/// Starts the watch; `None` (logged in the notice line by the caller) when the daemon
/// cannot: the TUI then works as before, without the live list and other sessions' alerts.
pub async fn start_watch(client: &Client) -> Option<SessionWatchStream> {
    client.watch_sessions(true).await.ok()
}

/// Answers from tasks.
enum Msg {
    Prompted(u64, Result<String, String>),
    Command(Result<CommandRunResult, String>),
    Status(StatusGetResult),
    Panel(PanelGetResult),
    Commands(Vec<CommandInfo>),
    Panels(Vec<PanelInfo>),
    Files(Vec<String>),
    Checkpoints(CheckpointsFor, Result<Vec<CheckpointInfo>, String>),
    Diff(String, DiffFor, Result<CheckpointDiffResult, String>),
    Rewound(RewindRequest, Result<SessionRewindResult, String>),
    /// The fork's label (see [`Action::Fork`]) and the answer.
    // Boxed: a SessionInfo is several times the size of every other message.
    Forked(Option<String>, Result<Box<SessionInfo>, String>),
    /// `session/list`'s answer, for the switcher.
    Sessions(Vec<SessionInfo>),
    /// A new watch (after a reconnection), with the list read after it.
    Watch(SessionWatchStream, Vec<SessionInfo>),
    Error(String),
    Reconnected(Client),
    /// A call said the session does not exist any more.
    Deleted,
    /// A `!` command ended: the command and how.
    Shell(String, Result<ShellOutcome, String>),
    /// The `/model` picker's rows.
    Models(Result<Vec<ModelChoice>, String>),
    /// `session/rename`'s answer.
    // Boxed: a SessionInfo is several times the size of every other message.
    Renamed(Result<Box<SessionInfo>, String>),
}

struct Ctx<'a> {
    client: Client,
    opts: &'a ConnectOptions,
    tx: mpsc::UnboundedSender<Msg>,
    session_id: String,
    /// Set when the daemon says the session is gone: the screen ends.
    deleted: bool,
}

/// The daemon's "session not found". It means "deleted" only from a daemon that stays up: one
/// shutting down forgets its sessions too (and drops its connections right after).
fn session_gone(e: &ClientError) -> bool {
    e.code() == Some(amber_proto::errors::SESSION_NOT_FOUND)
}

/// Shows `session_id` until the user detaches or switches, or the session is deleted.
pub async fn attached(
    client: &Client,
    opts: &ConnectOptions,
    session_id: &str,
    tui: &mut Tui,
    keys: &mut mpsc::UnboundedReceiver<Event>,
    carry: &mut Carry,
) -> Result<Outcome, Error> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut ctx = Ctx {
        client: client.clone(),
        opts,
        tx,
        session_id: session_id.to_owned(),
        deleted: false,
    };
    let mut app = carry.take_into(App::new(session_id));
    let mut stream = Some(attach(&ctx.client, &mut app).await?);
    spawn_lists(&ctx, &app);
    let outcome = run_screen(
        &mut ctx,
        &mut app,
        &mut stream,
        tui,
        keys,
        &mut rx,
        &mut carry.console,
    )
    .await?;
    carry.keep_from(&mut app);
    if outcome == Outcome::Detach {
        let width = ratatui::crossterm::terminal::size().map_or(80, |(w, _)| w);
        carry.scrollback = Some(app.transcript.plain_text(width, SCROLLBACK_LINES));
    }
    if let Some(s) = stream {
        // Best effort: the daemon drops the subscription with the connection anyway.
        let _ = tokio::time::timeout(Duration::from_millis(300), s.unsubscribe()).await;
    }
    Ok(outcome)
}

/// The most of a transcript left in the scrollback on exit.
const SCROLLBACK_LINES: usize = 2000;

impl Carry {
    /// Hands what survives to the next session's app.
    fn take_into(&mut self, mut app: App) -> App {
        app.input.set_history(std::mem::take(&mut self.history));
        // Merged with the client's own commands even before `command/list` answers.
        app.set_commands(self.commands.clone());
        app.panels = self.panels.clone();
        app.reload_note = self.note.take();
        app.sessions = std::mem::take(&mut self.sessions);
        app.sessions.live = self.console.watch.is_some();
        app.focused = self.focused;
        app
    }

    /// Keeps what survives from the app that is leaving.
    fn keep_from(&mut self, app: &mut App) {
        self.history = app.input.history().to_vec();
        self.commands = app.commands.clone();
        self.panels = app.panels.clone();
        self.note = app.switch_note.take();
        self.sessions = std::mem::take(&mut app.sessions);
        self.focused = app.focused;
    }
}

/// Redraws at most once per [`FRAME`], and only after something changed.
struct Frames {
    dirty: bool,
    last: Instant,
}

impl Frames {
    fn new() -> Self {
        Frames {
            dirty: true,
            last: Instant::now() - FRAME,
        }
    }

    fn draw_if_due(&mut self, tui: &mut Tui, app: &mut App) -> Result<(), Error> {
        if self.dirty && self.last.elapsed() >= FRAME {
            app.now_ms = crate::run::now_unix_ms();
            tui.terminal.draw(|f| ui::draw(app, f))?;
            self.last = Instant::now();
            self.dirty = false;
        }
        Ok(())
    }

    /// When a changed screen may be drawn next.
    fn due(&self) -> Instant {
        self.last + FRAME
    }
}

/// The screen's loop: waits for a key, an event, an answer or a tick, applies it, draws, and
/// runs the actions the app asked for, until one of them (or the daemon) ends the screen.
async fn run_screen(
    ctx: &mut Ctx<'_>,
    app: &mut App,
    stream: &mut Option<RawEventStream>,
    tui: &mut Tui,
    keys: &mut mpsc::UnboundedReceiver<Event>,
    rx: &mut mpsc::UnboundedReceiver<Msg>,
    console: &mut Console,
) -> Result<Outcome, Error> {
    let mut tick = tokio::time::interval(Duration::from_millis(TICK_MS));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut ticks = 0u32;
    let mut frames = Frames::new();
    loop {
        frames.draw_if_due(tui, app)?;
        tokio::select! {
            ev = keys.recv() => {
                let Some(ev) = ev else { return Ok(Outcome::Detach) };
                on_terminal_event(app, ev);
                frames.dirty = true;
            }
            item = next_event(stream) => {
                on_stream_item(ctx, app, stream, item).await;
                frames.dirty = true;
            }
            msg = rx.recv() => {
                if let Some(msg) = msg {
                    on_msg(ctx, app, stream, console, msg).await;
                    frames.dirty = true;
                }
            }
            change = next_change(&mut console.watch) => {
                if !on_change(app, console, tui, change) && ctx.client.is_connected() {
                    // Closed under us (a watcher that fell behind): watch again and re-list.
                    spawn_watch(ctx);
                }
                frames.dirty = true;
            }
            _ = tick.tick() => {
                app.tick();
                if let Some(bytes) = console.notifier.flush(std::time::Instant::now()) {
                    ring(tui, &bytes);
                }
                ticks += 1;
                if ticks.is_multiple_of(STATUS_TICKS) && ctx.client.is_connected() {
                    spawn_status(ctx);
                }
                frames.dirty = true;
            }
            _ = tokio::time::sleep_until(frames.due()), if frames.dirty => {}
        }
        notify_attached(app, console, tui);
        match perform(ctx, app, stream).await {
            Some(outcome) => return Ok(outcome),
            None if ctx.deleted => return Ok(Outcome::Deleted),
            None => continue,
        }
    }
}

/// `session/get` seeds the app (info, pending approvals, todos, `lastSeq`), then the
/// subscription replays every durable event from the start: the events, not `messages`, are
/// what rebuilds tool cells, diffs, approvals, steers and sub-agents (see ARCHITECTURE.md).
async fn attach(client: &Client, app: &mut App) -> Result<RawEventStream, ClientError> {
    let got = client.session_snapshot(&app.session_id).await?;
    app.snapshot_seq = got.last_seq;
    app.load_snapshot(got.session, got.pending_approvals, got.todos);
    client.subscribe_raw(&app.session_id, Some(0)).await
}

async fn next_event(stream: &mut Option<RawEventStream>) -> Option<Result<RawEvent, ClientError>> {
    match stream.as_mut() {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

async fn next_change(
    watch: &mut Option<SessionWatchStream>,
) -> Option<Result<SessionChange, ClientError>> {
    match watch.as_mut() {
        Some(w) => w.next().await,
        None => std::future::pending().await,
    }
}

/// One change of the watch: the sessions list follows it, and an approval requested or a
/// turn ended notifies when the user is not looking at that session. Returns `false` when
/// the watch ended: the list stays as it was until a new watch (on this connection, or the
/// reconnection's) takes over.
fn on_change(
    app: &mut App,
    console: &mut Console,
    tui: &mut Tui,
    change: Option<Result<SessionChange, ClientError>>,
) -> bool {
    let Some(Ok(change)) = change else {
        console.watch = None;
        app.sessions.live = false;
        return false;
    };
    app.sessions.apply(&change);
    app.clamp_switcher();
    let elsewhere = change.session.session_id != app.session_id;
    if let Some(alert) = alert_for(&change)
        && (elsewhere || !app.focused)
    {
        notify(console, tui, alert);
    }
    true
}

/// The attached session's own live alerts: only when the terminal is not focused.
fn notify_attached(app: &mut App, console: &mut Console, tui: &mut Tui) {
    for alert in std::mem::take(&mut app.alerts) {
        if !app.focused {
            notify(console, tui, alert);
        }
    }
}

fn notify(console: &mut Console, tui: &mut Tui, alert: Alert) {
    if let Some(bytes) = console.notifier.alert(alert, std::time::Instant::now()) {
        ring(tui, &bytes);
    }
}

/// Writes a bell / desktop notification to the terminal, between frames.
fn ring(tui: &mut Tui, bytes: &[u8]) {
    use std::io::Write;
    let out = tui.terminal.backend_mut();
    // A terminal that cannot take it now loses one notification, nothing else.
    let _ = out.write_all(bytes).and_then(|()| out.flush());
}

/// One item of the subscription: an event, applied with whatever else has already arrived
/// (so a burst becomes one frame), or the end of the subscription, which resubscribes.
async fn on_stream_item(
    ctx: &mut Ctx<'_>,
    app: &mut App,
    stream: &mut Option<RawEventStream>,
    item: Option<Result<RawEvent, ClientError>>,
) {
    let ended = match item {
        Some(Ok(raw)) => match apply_burst(app, stream, raw) {
            Some(e) => e,
            None => return,
        },
        Some(Err(e)) => e,
        None => ClientError::Transport("the event stream ended".into()),
    };
    *stream = None;
    resubscribe(ctx, app, stream, ended).await;
}

/// Applies `first` and up to [`EVENT_BATCH`] events already waiting; returns the error that
/// ended the subscription meanwhile, if one did.
fn apply_burst(
    app: &mut App,
    stream: &mut Option<RawEventStream>,
    first: RawEvent,
) -> Option<ClientError> {
    app.apply_event(first);
    for _ in 0..EVENT_BATCH {
        match stream.as_mut().and_then(|s| s.next().now_or_never()) {
            Some(Some(Ok(raw))) => app.apply_event(raw),
            Some(Some(Err(e))) => return Some(e),
            _ => break,
        }
    }
    None
}

fn on_terminal_event(app: &mut App, ev: Event) {
    match ev {
        Event::Key(key) => {
            // Actions are collected by `perform` through the app's queue.
            for a in app.on_key(key) {
                app.request(a);
            }
        }
        Event::Paste(text) => {
            for a in app.on_paste(&text) {
                app.request(a);
            }
        }
        Event::FocusGained => app.focused = true,
        Event::FocusLost => app.focused = false,
        Event::Mouse(m) => match m.kind {
            MouseEventKind::ScrollUp => app.on_wheel(-1),
            MouseEventKind::ScrollDown => app.on_wheel(1),
            MouseEventKind::Down(_)
            | MouseEventKind::Up(_)
            | MouseEventKind::Drag(_)
            | MouseEventKind::Moved
            | MouseEventKind::ScrollLeft
            | MouseEventKind::ScrollRight => {}
        },
        _ => {}
    }
}

/// After the subscription ended: resubscribe from the last `seq` on the same connection when
/// it is still up (a lagged subscriber), else find the session again in the background.
async fn resubscribe(
    ctx: &mut Ctx<'_>,
    app: &mut App,
    stream: &mut Option<RawEventStream>,
    why: ClientError,
) {
    let mut why = why;
    if ctx.client.is_connected() {
        match ctx
            .client
            .subscribe_raw(&ctx.session_id, Some(app.last_seq))
            .await
        {
            Ok(s) => {
                *stream = Some(s);
                return;
            }
            Err(e) => why = e,
        }
    }
    if session_gone(&why) {
        app.on_error("amberd no longer has this session; checking whether it was deleted…");
    } else {
        app.on_error(format!("lost amberd ({why}); reconnecting…"));
    }
    app.reconnecting = true;
    spawn_recover(ctx);
}

/// Finds the session again: on the current connection while it is up, else on a new one
/// (which may start amberd again). "Session not found" ends the screen only when the daemon
/// that said it is still up [`CONFIRM_GONE`] later and says it again.
fn spawn_recover(ctx: &Ctx<'_>) {
    let tx = ctx.tx.clone();
    let opts = ctx.opts.clone();
    let id = ctx.session_id.clone();
    let mut current = Some(ctx.client.clone());
    tokio::spawn(async move {
        // A socket that fails the trust check is not a daemon that is merely down: say why
        // (once per distinct reason), and keep trying without sending it anything.
        let mut refused: Option<String> = None;
        loop {
            tokio::time::sleep(RETRY).await;
            if tx.is_closed() {
                return;
            }
            let client = match current.take().filter(Client::is_connected) {
                Some(c) => c,
                None => match Client::connect(opts.clone()).await {
                    Ok(c) => c,
                    Err(e @ amber_client::ClientError::UntrustedSocket { .. }) => {
                        let why = e.to_string();
                        if refused.as_ref() != Some(&why) {
                            let _ = tx.send(Msg::Error(why.clone()));
                            refused = Some(why);
                        }
                        continue;
                    }
                    Err(_) => continue,
                },
            };
            match client.session_snapshot(&id).await {
                Ok(_) => {
                    let _ = tx.send(Msg::Reconnected(client));
                    return;
                }
                Err(e) if session_gone(&e) => {
                    tokio::time::sleep(CONFIRM_GONE).await;
                    let again = client.session_snapshot(&id).await;
                    if client.is_connected() && again.as_ref().is_err_and(session_gone) {
                        let _ = tx.send(Msg::Deleted);
                        return;
                    }
                }
                Err(_) => {}
            }
            current = Some(client);
        }
    });
}

async fn on_msg(
    ctx: &mut Ctx<'_>,
    app: &mut App,
    stream: &mut Option<RawEventStream>,
    console: &mut Console,
    msg: Msg,
) {
    match msg {
        Msg::Sessions(list) => {
            app.sessions.set_listed(list);
            app.clamp_switcher();
        }
        Msg::Watch(watch, list) => {
            console.watch = Some(watch);
            app.sessions.live = true;
            app.sessions.set_listed(list);
            app.clamp_switcher();
        }
        Msg::Prompted(id, r) => app.on_prompt_sent(id, r),
        Msg::Command(r) => app.on_command_result(r),
        Msg::Status(s) => app.set_status(s.segments, s.context),
        Msg::Panel(p) => app.set_panel(p),
        Msg::Commands(c) => app.set_commands(c),
        Msg::Checkpoints(purpose, r) => app.on_checkpoints(purpose, r, crate::run::now_unix()),
        Msg::Diff(turn_id, into, r) => app.on_checkpoint_diff(turn_id, into, r),
        Msg::Rewound(request, r) => app.on_rewound(request, r),
        Msg::Forked(label, r) => app.on_forked(label, r.map(|info| *info)),
        Msg::Shell(command, r) => app.on_shell(command, r),
        Msg::Models(r) => app.on_models(r),
        Msg::Renamed(r) => app.on_renamed(r.map(|info| *info)),
        Msg::Panels(p) => app.panels = p,
        Msg::Files(f) => app.files = f,
        Msg::Error(e) => app.on_error(e),
        Msg::Deleted => ctx.deleted = true,
        Msg::Reconnected(client) => {
            ctx.client = client;
            match ctx
                .client
                .subscribe_raw(&ctx.session_id, Some(app.last_seq))
                .await
            {
                Ok(s) => {
                    *stream = Some(s);
                    app.reconnecting = false;
                    app.set_notice(NoticeKind::Info, "reconnected to amberd");
                    spawn_status(ctx);
                    if console.watch.is_none() {
                        spawn_watch(ctx);
                    }
                }
                Err(e) => {
                    resubscribe(ctx, app, stream, e).await;
                }
            }
        }
    }
}

/// Runs the app's pending actions; `Some` when the session screen must end.
async fn perform(
    ctx: &mut Ctx<'_>,
    app: &mut App,
    stream: &mut Option<RawEventStream>,
) -> Option<Outcome> {
    for action in app.drain_actions() {
        let (c, tx, id) = (ctx.client.clone(), ctx.tx.clone(), ctx.session_id.clone());
        match action {
            Action::Detach => return Some(Outcome::Detach),
            Action::Copy(text) => {
                use base64::Engine;
                // OSC 52: the terminal (or tmux, or the ssh client's terminal) sets its
                // clipboard; no X or Wayland access needed here.
                let encoded = base64::engine::general_purpose::STANDARD.encode(text);
                let mut out = std::io::stdout().lock();
                let _ = std::io::Write::write_all(
                    &mut out,
                    format!("\x1b]52;c;{encoded}\x07").as_bytes(),
                );
                let _ = std::io::Write::flush(&mut out);
            }
            // The session's directory is on the daemon's host: running it here would run
            // it on the wrong machine.
            Action::Shell { command, .. } if ctx.opts.remote.is_some() => {
                let why = "the session is on another host (--remote): run the command there, \
                           or ask the model to run it";
                let _ = tx.send(Msg::Shell(command, Err(why.to_owned())));
            }
            Action::Shell { command, cwd } => {
                tokio::spawn(async move {
                    let r = shell::run(&command, cwd.as_deref()).await;
                    let _ = tx.send(Msg::Shell(command, r));
                });
            }
            Action::Rename(name) => {
                tokio::spawn(async move {
                    let params = amber_proto::SessionRenameParams {
                        session_id: id,
                        name,
                    };
                    let r = c
                        .request::<m::SessionRename>(&params)
                        .await
                        .map(Box::new)
                        .map_err(|e| e.to_string());
                    let _ = tx.send(Msg::Renamed(r));
                });
            }
            Action::ListModels { provider } => {
                tokio::spawn(async move {
                    let _ = tx.send(Msg::Models(list_models(&c, provider).await));
                });
            }
            Action::SwitchSession(next) => return Some(Outcome::Switch(next)),
            Action::Reload => {
                *stream = None;
                app.reset_transcript();
                match attach(&ctx.client, app).await {
                    Ok(s) => *stream = Some(s),
                    Err(e) => resubscribe(ctx, app, stream, e).await,
                }
            }
            Action::Prompt { local_id, text } => {
                tokio::spawn(async move {
                    let r = c
                        .session_prompt(&id, &text)
                        .await
                        .map(|r| r.turn_id)
                        .map_err(|e| e.to_string());
                    let _ = tx.send(Msg::Prompted(local_id, r));
                });
            }
            Action::Cancel => {
                tokio::spawn(async move {
                    if let Err(e) = c.session_cancel(&id).await {
                        let _ = tx.send(Msg::Error(format!("cancel failed: {e}")));
                    }
                });
            }
            Action::Approve {
                request_id,
                decision,
                feedback,
                content,
            } => {
                tokio::spawn(async move {
                    let params = amber_proto::ApprovalRespondParams {
                        session_id: id,
                        request_id,
                        decision,
                        feedback,
                        content,
                    };
                    match c
                        .request::<amber_proto::methods::ApprovalRespond>(&params)
                        .await
                    {
                        Ok(r) if !r.accepted => {
                            let _ = tx.send(Msg::Error(
                                "that approval was already answered elsewhere".into(),
                            ));
                        }
                        Ok(_) => {}
                        Err(e) => {
                            let _ = tx.send(Msg::Error(format!("approval failed: {e}")));
                        }
                    }
                });
            }
            Action::RunCommand { name, args } => {
                tokio::spawn(async move {
                    let r = rpc::command_run(&c, &id, &name, &args)
                        .await
                        .map_err(|e| e.to_string());
                    let _ = tx.send(Msg::Command(r));
                });
            }
            Action::ListCheckpoints(purpose) => {
                tokio::spawn(async move {
                    // Every turn: the picker offers those without a checkpoint too.
                    let params = CheckpointListParams {
                        session_id: id,
                        all: true,
                    };
                    let r = c
                        .request::<m::CheckpointList>(&params)
                        .await
                        .map(|l| l.checkpoints)
                        .map_err(|e| e.to_string());
                    let _ = tx.send(Msg::Checkpoints(purpose, r));
                });
            }
            Action::CheckpointDiff { turn_id, into } => {
                tokio::spawn(async move {
                    let params = CheckpointDiffParams {
                        session_id: id,
                        turn_id: turn_id.clone(),
                        path: None,
                    };
                    let r = c
                        .request::<m::CheckpointDiff>(&params)
                        .await
                        .map_err(|e| e.to_string());
                    let _ = tx.send(Msg::Diff(turn_id, into, r));
                });
            }
            Action::Rewind(request) => {
                tokio::spawn(async move {
                    let params = SessionRewindParams {
                        session_id: id,
                        turn_id: request.turn_id.clone(),
                        files: request.files,
                        conversation: request.conversation,
                        force: request.force,
                    };
                    let r = c
                        .request::<m::SessionRewind>(&params)
                        .await
                        .map_err(|e| e.to_string());
                    let _ = tx.send(Msg::Rewound(request, r));
                });
            }
            Action::Fork { turn_id, label } => {
                tokio::spawn(async move {
                    let params = SessionForkParams {
                        session_id: id,
                        turn_id,
                    };
                    let r = c
                        .request::<m::SessionFork>(&params)
                        .await
                        .map(Box::new)
                        .map_err(|e| e.to_string());
                    let _ = tx.send(Msg::Forked(label, r));
                });
            }
            Action::RefreshStatus => spawn_status(ctx),
            Action::ListSessions => spawn_session_list(ctx),
            Action::RefreshPanel(name) => {
                tokio::spawn(async move {
                    match rpc::panel_get(&c, &id, &name).await {
                        Ok(p) => {
                            let _ = tx.send(Msg::Panel(p));
                        }
                        Err(e) => {
                            let _ = tx.send(Msg::Error(format!("panel {name}: {e}")));
                        }
                    }
                });
            }
        }
    }
    None
}

/// The `/model` picker's rows: every provider's default, and what the session's lists.
async fn list_models(c: &Client, provider: Option<String>) -> Result<Vec<ModelChoice>, String> {
    let providers = c
        .request::<m::ProviderList>(&amber_proto::Empty {})
        .await
        .map_err(|e| e.to_string())?
        .providers;
    // A provider without a models list (or unreachable) still offers its default.
    let listed = c
        .request::<m::ProviderCheck>(&amber_proto::ProviderCheckParams {
            provider: provider.clone(),
        })
        .await
        .map(|check| check.models)
        .unwrap_or_default();
    Ok(model_choices(&providers, provider.as_deref(), &listed))
}

fn spawn_status(ctx: &Ctx<'_>) {
    let (c, tx, id) = (ctx.client.clone(), ctx.tx.clone(), ctx.session_id.clone());
    tokio::spawn(async move {
        if let Ok(s) = rpc::status_get(&c, &id).await {
            let _ = tx.send(Msg::Status(s));
        }
    });
}

fn spawn_session_list(ctx: &Ctx<'_>) {
    let (c, tx) = (ctx.client.clone(), ctx.tx.clone());
    tokio::spawn(async move {
        match c.session_list_all().await {
            Ok(list) => {
                let _ = tx.send(Msg::Sessions(list));
            }
            Err(e) => {
                let _ = tx.send(Msg::Error(format!("listing sessions failed: {e}")));
            }
        }
    });
}

/// A new watch on the (new) connection, then the list read after it: changes the list
/// missed arrive on the watch.
fn spawn_watch(ctx: &Ctx<'_>) {
    let (c, tx) = (ctx.client.clone(), ctx.tx.clone());
    tokio::spawn(async move {
        if let Some(watch) = start_watch(&c).await
            && let Ok(list) = c.session_list_all().await
        {
            let _ = tx.send(Msg::Watch(watch, list));
        }
    });
}

/// Commands, panels and workspace files, fetched once per attach in the background.
fn spawn_lists(ctx: &Ctx<'_>, app: &App) {
    spawn_session_list(ctx);
    let (c, tx) = (ctx.client.clone(), ctx.tx.clone());
    tokio::spawn(async move {
        if let Ok(list) = rpc::command_list(&c).await {
            let _ = tx.send(Msg::Commands(list.commands));
        }
        if let Ok(list) = rpc::panel_list(&c).await {
            let _ = tx.send(Msg::Panels(list.panels));
        }
    });
    if let Some(cwd) = app.session.as_ref().map(|s| PathBuf::from(&s.cwd)) {
        let tx = ctx.tx.clone();
        tokio::task::spawn_blocking(move || {
            let _ = tx.send(Msg::Files(files::walk(&cwd)));
        });
    }
}
