//! Sessions: each session's shared state; the manager (create, list, find, delete) is in
//! `manager.rs`.
//!
//! **Invariant:** only a session's actor (`actor.rs`) writes its `Context`. Everything
//! else — RPC handlers, subscribers — reads `SessionShared`: an info snapshot, the latest
//! message snapshot, and the event hub.

mod acp_subagent;
pub(crate) mod actor;
pub(crate) mod approvals;
mod build;
pub(crate) mod directory;
pub(crate) mod feature;
pub(crate) mod features;
pub(crate) mod gate;
pub mod hub;
pub(crate) mod inbox;
mod listing;
pub(crate) mod manager;
pub(crate) mod names;
pub(crate) mod persist;
pub(crate) mod queue;
mod restore;
pub mod services;
mod subagent_budget;
pub(crate) mod subagent_slots;
pub(crate) mod subagents;
pub(crate) mod trust;
mod view;
pub(crate) mod watch;
pub(crate) mod workspace_root;

use amber_proto::sync::Locked;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use amber_policy::{Grants, WorkspaceRules};
use amber_proto::{
    EventKind, Message, Mode, SessionChangeKind, SessionInfo, SessionState, StopReason, Usage,
};
use amber_store::SessionMeta;
use amber_store::context::Context;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::clock::now_rfc3339;
use actor::Command;
pub(crate) use actor::PromptOptions;
use amber_tools::{SessionTools, ToolRegistry};
use approvals::Approvals;
use hub::EventHub;
pub use manager::SessionManager;
use persist::Persistence;

/// Errors of session operations, mapped to protocol error codes by `rpc/`.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("session not found: {0}")]
    NotFound(String),
    #[error("invalid workspace {path}: {reason}")]
    InvalidWorkspace { path: String, reason: String },
    #[error("the daemon is shutting down")]
    ShuttingDown,
    /// The session store failed; its error keeps the source.
    #[error("session store: {0}")]
    Store(#[from] amber_store::StoreError),
    /// The store refused to log a prompt's `prompt_queued`: nothing was queued.
    #[error("the prompt was not queued: {0}")]
    NotQueued(#[source] amber_store::StoreError),
    /// Work on the daemon's side failed (a background task, git, the file system).
    #[error("{0}")]
    Internal(String),
    /// A feature's own failure, its error (and source chain) kept as it is.
    #[error(transparent)]
    Failed(Box<dyn std::error::Error + Send + Sync>),
    /// A bad parameter (message starts with the field name).
    #[error("invalid params: {0}")]
    InvalidParams(String),
}

/// State of a session readable by anyone.
pub struct SessionShared {
    pub id: String,
    pub workspace: PathBuf,
    /// Where the session reads its workspace's configuration (instruction files, rules,
    /// agents, skills): the workspace itself, or for a session whose tools run on an
    /// executor, the mirror amberd keeps of those files (`environment::mirror`).
    pub config_root: PathBuf,
    /// Where compaction saves the skills it extracts for this workspace.
    pub skills_dir: PathBuf,
    pub system_prompt: String,
    /// The head blocks every request of the session starts with (after a system prompt).
    pub(crate) head: crate::agent::prompt::PromptHead,
    pub hub: EventHub,
    /// The session's handle on the store (none when the daemon runs without one).
    persistence: Option<Arc<Persistence>>,
    /// Cancelled when the session is deleted or the daemon stops.
    pub closed: CancellationToken,
    pub approvals: Approvals,
    /// Tool state of this session (todos, processes, the sandbox of its commands).
    pub tools: Arc<SessionTools>,
    /// Held while a mode is put in force, so two switches at once leave the features'
    /// installations and `SessionInfo` agreeing.
    switching: Mutex<()>,
    /// The workspace configuration versions this session trusts beyond the daemon's store.
    pub(crate) trust: trust::SessionTrust,
    /// What the daemon's features keep of this session (`feature.rs`).
    pub(crate) features: feature::Features,
    grants: Mutex<Grants>,
    rules: Mutex<WorkspaceRules>,
    live: Mutex<Live>,
    /// The session's own handle, for the prompt that wakes it (`inbox.rs`).
    waker: std::sync::OnceLock<std::sync::Weak<SessionHandle>>,
}

struct Live {
    info: SessionInfo,
    /// Last time the session did or was asked anything (for idle unloading).
    touched: std::time::Instant,
    /// The running turn, for events raised outside the agent loop (todo updates).
    turn_id: Option<String>,
    messages: Arc<Vec<Message>>,
    cancel: Option<CancellationToken>,
    /// What the running turn's sub-agents spent: part of the turn's `turn_completed.usage`.
    subagent_usage: Usage,
    /// Prompts accepted by `session/prompt` whose turn has not begun: the session reads
    /// `running` from the moment a prompt is accepted until the last queued turn ends.
    queued: usize,
    /// The model is the configured default's, whatever that becomes (`SessionMeta`).
    model_follows_config: bool,
    /// Whether this session's busy marker is on disk (`amber-store`'s `busy.rs`): created
    /// when the session goes from idle to having work, removed when it is idle again.
    marked: bool,
    /// Results from outside its turns, waiting for the next round (`inbox.rs`).
    inbox: inbox::Inbox,
}

impl SessionShared {
    fn lock_live(&self) -> MutexGuard<'_, Live> {
        // Every writer leaves `Live` consistent between statements, so poison is harmless.
        self.live.locked()
    }

    pub fn lock_grants(&self) -> MutexGuard<'_, Grants> {
        self.grants.locked()
    }

    pub fn lock_rules(&self) -> MutexGuard<'_, WorkspaceRules> {
        self.rules.locked()
    }

    /// This session's part of feature `T`, when the daemon has that feature.
    pub(crate) fn feature<T: feature::SessionFeature>(&self) -> Option<Arc<T>> {
        self.features.get::<T>()
    }

    /// Prompts accepted whose turn has not begun.
    pub(crate) fn queued(&self) -> usize {
        self.lock_live().queued
    }

    /// Marks the session as in use now (it will not be unloaded as idle for a while).
    pub fn touch(&self) {
        self.lock_live().touched = std::time::Instant::now();
    }

    /// Idle long enough, unwatched and with nothing running that unloading would kill.
    fn unloadable(&self, idle: Duration) -> bool {
        let quiet = {
            let live = self.lock_live();
            live.info.state == SessionState::Idle && live.touched.elapsed() >= idle
        };
        // `live` is released first: the hub's lock is taken before `live` (its watch tap
        // reads the info under it), never after.
        quiet
            && self.hub.subscriber_count() == 0
            && self.approvals.pending().is_empty()
            && self.tools.processes_running() == 0
    }

    /// A prompt is being accepted (before its `prompt_queued` is synced, before the actor
    /// picks it up): the session is busy now. Going busy creates the busy marker, under
    /// the lock so it cannot race the unlink of `settle_marker`.
    pub(crate) fn prompt_queued(&self) {
        let mut live = self.lock_live();
        live.queued += 1;
        if !live.marked
            && let Some(p) = &self.persistence
        {
            p.set_busy(true);
            live.marked = true;
        }
        live.touched = std::time::Instant::now();
        if live.info.state == SessionState::Idle {
            live.info.state = SessionState::Running;
            live.info.updated_at = now_rfc3339();
        }
    }

    /// A rewind is starting: the busy marker makes a daemon that crashes before it ends
    /// load the session at its next start, which finishes the rewind (`rewind::recover`).
    pub(crate) fn mark_busy(&self) {
        let mut live = self.lock_live();
        if !live.marked
            && let Some(p) = &self.persistence
        {
            p.set_busy(true);
            live.marked = true;
        }
    }

    /// The queued prompt never reached the actor (it stopped): undo `prompt_queued`.
    pub(crate) fn prompt_dropped(&self) {
        let mut live = self.lock_live();
        live.queued = live.queued.saturating_sub(1);
        if live.queued == 0 && live.turn_id.is_none() {
            live.info.state = SessionState::Idle;
        }
        drop(live);
        self.settle_marker();
        // No event says the session went back to idle.
        self.hub.notify_watchers(SessionChangeKind::Updated);
    }

    /// Removes the busy marker once nothing runs and nothing waits. Called when a turn
    /// ends, and after a restore (a marker left by a crash with no work left).
    pub(crate) fn settle_marker(&self) {
        let mut live = self.lock_live();
        if live.queued == 0 && live.turn_id.is_none() {
            if let Some(p) = &self.persistence {
                p.set_busy(false);
            }
            live.marked = false;
        }
    }

    pub fn set_state(&self, state: SessionState) {
        let mut live = self.lock_live();
        live.info.state = state;
        live.info.updated_at = now_rfc3339();
    }

    pub fn info(&self) -> SessionInfo {
        self.lock_live().info.clone()
    }

    pub fn mode(&self) -> Mode {
        self.lock_live().info.mode
    }

    pub fn model(&self) -> String {
        self.lock_live().info.model.clone()
    }

    pub fn state(&self) -> SessionState {
        self.lock_live().info.state
    }

    pub fn messages(&self) -> Arc<Vec<Message>> {
        self.lock_live().messages.clone()
    }

    /// Switches the mode of later tool calls, and what the features install with it (the
    /// sandbox: read mode is always `read-only`).
    pub fn set_mode(&self, mode: Mode) -> SessionInfo {
        let info = self.install_mode(Some(mode));
        self.hub.notify_watchers(SessionChangeKind::Updated);
        self.save_meta();
        info
    }

    /// Puts the session's mode (`mode`, else the current one) in force: the features build
    /// what it needs (the sandbox), then install it under the session's lock together with
    /// the mode itself: at creation, restore and every mode change.
    pub(crate) fn install_mode(&self, mode: Option<Mode>) -> SessionInfo {
        let _switching = self.switching.locked();
        let in_force = mode.unwrap_or_else(|| self.mode());
        let steps = self.features.mode_in_force(self, in_force);
        let mut live = self.lock_live();
        if mode.is_some() {
            live.info.mode = in_force;
            live.info.updated_at = now_rfc3339();
        }
        for step in steps {
            step(&mut live.info);
        }
        live.info.clone()
    }

    /// Switches the model and/or provider of later requests (`None` keeps the current); a
    /// model or provider chosen so stays, whatever the configuration says later.
    pub fn set_model(&self, model: Option<String>, provider: Option<String>) -> SessionInfo {
        let info = {
            let mut live = self.lock_live();
            live.model_follows_config = false;
            if let Some(provider) = provider {
                live.info.provider = Some(provider).filter(|p| !p.is_empty());
            }
            if let Some(model) = model {
                live.info.model = model;
            }
            live.info.updated_at = now_rfc3339();
            live.info.clone()
        };
        self.hub.notify_watchers(SessionChangeKind::Updated);
        self.save_meta();
        info
    }

    /// Puts `name` in the session's info (the manager keeps names unique and tells the
    /// watchers); the info after it.
    pub(crate) fn put_name(&self, name: Option<String>) -> SessionInfo {
        let mut live = self.lock_live();
        live.info.name = name;
        live.info.updated_at = now_rfc3339();
        live.info.clone()
    }

    /// A session nobody chose a model for takes the configured default's, as it is now
    /// (`configured`): a config fixed after the session was made applies to its next turn.
    /// Whether the model changed.
    pub(crate) fn follow_configured_model(&self, configured: &str) -> bool {
        {
            let mut live = self.lock_live();
            if !live.model_follows_config
                || live.info.provider.is_some()
                || live.info.model == configured
            {
                return false;
            }
            configured.clone_into(&mut live.info.model);
            live.info.updated_at = now_rfc3339();
        }
        self.hub.notify_watchers(SessionChangeKind::Updated);
        self.save_meta();
        true
    }

    /// The tools this session's turns are offered: `all` less what its agent withholds.
    pub(crate) fn offered_tools(&self, mut all: ToolRegistry) -> ToolRegistry {
        self.features.offer_tools(&mut all);
        all
    }

    /// Whether this session's agent lets its turns use `tool` (`tool/list {sessionId}`).
    pub(crate) fn allows_tool(&self, tool: &str) -> bool {
        self.features.allows_tool(tool)
    }

    /// The iteration cap of this session's turns: its agent's, else `default`.
    pub(crate) fn max_iterations(&self, default: u32) -> u32 {
        self.features.max_iterations(default)
    }

    /// The provider of this session's requests (`None`: the configured default).
    pub fn provider(&self) -> Option<String> {
        self.lock_live().info.provider.clone()
    }

    fn add_usage(&self, usage: &Usage, model: &str) -> Usage {
        let total = {
            let mut live = self.lock_live();
            live.info.usage.add(usage);
            live.info.usage
        };
        self.features.usage_added(usage, model);
        total
    }

    /// A sub-agent's call: the session total and the running turn's sub-agent share.
    fn add_subagent_usage(&self, usage: &Usage, model: &str) -> Usage {
        let total = {
            let mut live = self.lock_live();
            live.subagent_usage.add(usage);
            live.info.usage.add(usage);
            live.info.usage
        };
        self.features.usage_added(usage, model);
        total
    }

    /// Why the session may make no further model request (a spent budget), if it may not.
    pub(crate) fn refuses_requests(&self) -> Option<crate::agent::ledger::Spent> {
        self.features.refuses_requests()
    }

    /// The sub-agent share of the running turn, taken (it is reported once).
    fn take_subagent_usage(&self) -> Usage {
        std::mem::take(&mut self.lock_live().subagent_usage)
    }

    pub(crate) fn publish_messages(&self, context: &Context) {
        // The chain is verified where it matters, when the model's request is built.
        let snapshot = Arc::new(context.messages().to_vec());
        self.lock_live().messages = snapshot;
    }

    /// Writes the session's metadata (info, system prompt) to the store. Its fsyncs block
    /// this task only: the worker's other tasks move elsewhere meanwhile (`persist::blocking`),
    /// so the sessions streaming beside it are not held up.
    pub fn save_meta(&self) {
        if let Some(p) = &self.persistence {
            let mut info = self.info();
            // A session comes back from the store idle (restore.rs): saved mid-turn (a
            // mode switch), `running` would be what a crash leaves listed.
            info.state = SessionState::Idle;
            let model_follows_config = self.lock_live().model_follows_config;
            let mut meta = SessionMeta {
                info,
                system_prompt: self.system_prompt.clone(),
                agent: None,
                sandbox: None,
                mcp_servers: Vec::new(),
                executor: None,
                model_follows_config,
            };
            self.features.save(&mut meta);
            persist::blocking(|| p.save_meta(&meta));
        }
    }

    /// Syncs and closes the session's log, releasing its lock for a later load.
    fn close_log(&self) {
        if let Some(p) = &self.persistence {
            persist::blocking(|| p.close());
        }
    }

    /// Marks the session's event stream as ended: subscribers get what was published,
    /// then a close.
    pub fn finish(&self) {
        self.hub.close();
    }

    /// Cancels the running turn, if any.
    pub fn cancel(&self) -> bool {
        match &self.lock_live().cancel {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Titles an untitled session after `prompt`; whether it did.
    fn set_title_if_empty(&self, prompt: &str) -> bool {
        let mut live = self.lock_live();
        let untitled = live.info.title.is_empty();
        if untitled {
            live.info.title = title_of(prompt);
        }
        untitled
    }

    /// Undoes `set_title_if_empty` for a prompt that was not queued after all.
    fn clear_title(&self) {
        self.lock_live().info.title.clear();
    }
}

/// A session's title from its first prompt: the first non-blank line, 60 characters.
fn title_of(prompt: &str) -> String {
    let line = prompt.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    line.trim().chars().take(60).collect()
}

/// A running session: its shared state and the way into its actor.
pub struct SessionHandle {
    pub shared: Arc<SessionShared>,
    commands: mpsc::UnboundedSender<Command>,
    task: Mutex<Option<JoinHandle<()>>>,
    /// Held from a prompt's `prompt_queued` to its hand-off to the actor, so prompts reach
    /// the actor in the order their events are logged (`queue_prompt`).
    prompt_order: Mutex<()>,
}

impl SessionHandle {
    /// Runs `work` in the session's actor between turns, with the context it owns (queued
    /// behind the prompts already accepted); its answer.
    pub(crate) async fn between_turns<T: Send + 'static>(
        &self,
        work: impl for<'a> FnOnce(
            &'a Arc<SessionShared>,
            &'a mut Context,
        ) -> futures::future::BoxFuture<'a, T>
        + Send
        + 'static,
    ) -> Result<T, SessionError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job = actor::BetweenTurns(Box::new(move |shared, context| {
            Box::pin(async move {
                let result = work(shared, context).await;
                // The caller may have gone away; the work stands either way.
                let _ = reply.send(result);
            })
        }));
        self.commands
            .send(Command::BetweenTurns(job))
            .map_err(|_| SessionError::NotFound(self.shared.id.clone()))?;
        answer
            .await
            .map_err(|_| SessionError::NotFound(self.shared.id.clone()))
    }

    /// Queues an accepted prompt: durable first (`prompt_queued`, on disk before this
    /// returns), then handed to the actor. Err: the store refused it (nothing queued) or
    /// the actor is gone (the prompt is closed as cancelled, so it never runs later).
    fn queue_prompt(
        &self,
        turn_id: &str,
        text: String,
        options: PromptOptions,
    ) -> Result<(), SessionError> {
        let _order = self.prompt_order.locked();
        let queued = EventKind::PromptQueued {
            prompt: text.clone(),
        };
        // Counted (and the busy marker created) before the event's fdatasync, which then
        // carries the marker's directory entry to disk (`amber-store`'s `busy.rs`).
        self.shared.prompt_queued();
        // Titled before the event, so the watchers' `prompt_queued` carries the title.
        let titled = self.shared.set_title_if_empty(&text);
        if let Err(e) = self.shared.hub.publish_stored(Some(turn_id), queued) {
            if titled {
                self.shared.clear_title();
            }
            self.shared.prompt_dropped();
            return Err(SessionError::NotQueued(e));
        }
        let sent = self.commands.send(Command::Prompt {
            turn_id: turn_id.to_owned(),
            text,
            options,
        });
        if sent.is_err() {
            // Deleted or stopping: acknowledged nowhere, so it must not run after a restart.
            self.shared.prompt_dropped();
            self.shared.hub.publish(
                Some(turn_id),
                EventKind::TurnCompleted {
                    stop_reason: StopReason::Cancelled,
                    error: None,
                    usage: Usage::default(),
                    output: None,
                    cost_usd: None,
                    session_cost_usd: None,
                    confirm_usage: None,
                },
            );
            return Err(SessionError::NotFound(self.shared.id.clone()));
        }
        Ok(())
    }

    /// Hands a prompt restored from the log (its `prompt_queued` is there) to the actor.
    fn requeue_prompt(&self, turn_id: String, text: String) {
        let _order = self.prompt_order.locked();
        self.shared.prompt_queued();
        // The actor was just started and nobody can have stopped it yet; if it is gone the
        // prompt stays waiting in the log for the next load.
        if self
            .commands
            .send(Command::Prompt {
                turn_id,
                text,
                options: PromptOptions::default(),
            })
            .is_err()
        {
            self.shared.prompt_dropped();
        } else {
            // Its `prompt_queued` is old news in the log: the session is running again.
            self.shared.hub.notify_watchers(SessionChangeKind::Updated);
        }
    }
}
