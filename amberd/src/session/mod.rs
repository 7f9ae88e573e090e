//! Sessions: the manager (create, list, find, delete) and each session's shared state.
//!
//! **Invariant:** only a session's actor (`actor.rs`) writes its `Context`. Everything
//! else — RPC handlers, subscribers — reads `SessionShared`: an info snapshot, the latest
//! message snapshot, and the event hub.

pub mod actor;
pub mod approvals;
mod build;
pub mod deps;
pub mod gate;
pub mod hub;
pub mod persist;
pub mod queue;
mod restore;
pub mod subagents;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use amber_proto::{
    EventKind, Message, Mode, SessionCompactResult, SessionInfo, SessionNewParams, SessionState,
    Usage,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::agent::prompt::default_system_prompt;
use crate::context::Context;
use crate::policy::grants::Grants;
use crate::policy::rules::WorkspaceRules;
use crate::store::SessionMeta;
use crate::tools::SessionTools;
use actor::Command;
use approvals::Approvals;
use deps::Deps;
use hub::{EventHub, EventStore, now_rfc3339};
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
    #[error("session store: {0}")]
    Store(String),
    /// A bad parameter (message starts with the field name).
    #[error("invalid params: {0}")]
    InvalidParams(String),
}

/// State of a session readable by anyone.
pub struct SessionShared {
    pub id: String,
    pub workspace: PathBuf,
    /// Where compaction saves the skills it extracts for this workspace.
    pub skills_dir: PathBuf,
    pub system_prompt: String,
    pub hub: EventHub,
    /// The session's handle on the store (none when the daemon runs without one).
    persistence: Option<Arc<Persistence>>,
    /// Cancelled when the session is deleted or the daemon stops.
    pub closed: CancellationToken,
    pub approvals: Approvals,
    /// Tool state of this session (todos, processes).
    pub tools: Arc<SessionTools>,
    grants: Mutex<Grants>,
    rules: Mutex<WorkspaceRules>,
    live: Mutex<Live>,
}

struct Live {
    info: SessionInfo,
    /// Last time the session did or was asked anything (for idle unloading).
    touched: std::time::Instant,
    /// The running turn, for events raised outside the agent loop (todo updates).
    turn_id: Option<String>,
    messages: Arc<Vec<Message>>,
    cancel: Option<CancellationToken>,
}

impl SessionShared {
    fn lock_live(&self) -> MutexGuard<'_, Live> {
        // Every writer leaves `Live` consistent between statements, so poison is harmless.
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn lock_grants(&self) -> MutexGuard<'_, Grants> {
        self.grants.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn lock_rules(&self) -> MutexGuard<'_, WorkspaceRules> {
        self.rules.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks the session as in use now (it will not be unloaded as idle for a while).
    pub fn touch(&self) {
        self.lock_live().touched = std::time::Instant::now();
    }

    /// Idle long enough, unwatched and with nothing running that unloading would kill.
    fn unloadable(&self, idle: Duration) -> bool {
        let live = self.lock_live();
        live.info.state == SessionState::Idle
            && live.touched.elapsed() >= idle
            && self.hub.subscriber_count() == 0
            && self.approvals.pending().is_empty()
            && self.tools.processes.running() == 0
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

    pub fn set_mode(&self, mode: Mode) -> SessionInfo {
        let info = {
            let mut live = self.lock_live();
            live.info.mode = mode;
            live.info.updated_at = now_rfc3339();
            live.info.clone()
        };
        self.save_meta();
        info
    }

    /// Switches the model and/or provider of later requests (`None` keeps the current).
    pub fn set_model(&self, model: Option<String>, provider: Option<String>) -> SessionInfo {
        let info = {
            let mut live = self.lock_live();
            if let Some(provider) = provider {
                live.info.provider = Some(provider).filter(|p| !p.is_empty());
            }
            if let Some(model) = model {
                live.info.model = model;
            }
            live.info.updated_at = now_rfc3339();
            live.info.clone()
        };
        self.save_meta();
        info
    }

    /// The provider of this session's requests (`None`: the configured default).
    pub fn provider(&self) -> Option<String> {
        self.lock_live().info.provider.clone()
    }

    fn add_usage(&self, usage: &Usage) -> Usage {
        let mut live = self.lock_live();
        live.info.usage.add(usage);
        live.info.usage
    }

    fn publish_messages(&self, context: &Context) {
        // The chain is verified where it matters, when the model's request is built.
        let snapshot = Arc::new(context.messages().to_vec());
        self.lock_live().messages = snapshot;
    }

    /// Writes the session's metadata (info, system prompt) to the store. Its fsyncs block
    /// this task only: the worker's other tasks move elsewhere meanwhile (`persist::blocking`),
    /// so the sessions streaming beside it are not held up.
    pub fn save_meta(&self) {
        if let Some(p) = &self.persistence {
            let meta = SessionMeta {
                info: self.info(),
                system_prompt: self.system_prompt.clone(),
            };
            persist::blocking(|| p.save_meta(&meta));
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

    fn set_title_if_empty(&self, prompt: &str) {
        let mut live = self.lock_live();
        if live.info.title.is_empty() {
            live.info.title = title_of(prompt);
        }
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
}

/// All sessions of the daemon.
pub struct SessionManager {
    deps: Arc<Deps>,
    /// Sessions in memory, with their actor running.
    sessions: RwLock<HashMap<String, Arc<SessionHandle>>>,
    /// Sessions only in the store (not loaded since start, or unloaded when idle).
    stored: RwLock<HashMap<String, SessionInfo>>,
    closing: std::sync::atomic::AtomicBool,
}

impl SessionManager {
    /// Lists the store's sessions (metadata only; logs are read on first use).
    pub fn new(deps: Arc<Deps>) -> Self {
        let mut stored = HashMap::new();
        if let Some(store) = &deps.store {
            match store.list() {
                Ok(metas) => {
                    for meta in metas {
                        stored.insert(meta.info.session_id.clone(), meta.info);
                    }
                }
                Err(err) => tracing::error!(%err, "cannot list stored sessions"),
            }
        }
        Self {
            deps,
            sessions: RwLock::new(HashMap::new()),
            stored: RwLock::new(stored),
            closing: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn stored(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, SessionInfo>> {
        self.stored.write().unwrap_or_else(|e| e.into_inner())
    }

    pub fn deps(&self) -> &Deps {
        &self.deps
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<SessionHandle>>> {
        self.sessions.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<SessionHandle>>> {
        self.sessions.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Sessions known to the daemon, loaded or not.
    pub fn count(&self) -> usize {
        self.read().len() + self.stored().len()
    }

    pub fn create(&self, params: SessionNewParams) -> Result<SessionInfo, SessionError> {
        if self.closing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(SessionError::ShuttingDown);
        }
        let workspace = build::validate_workspace(&params.cwd)?;
        let provider = self.provider_param(params.provider.as_deref())?;
        let id = uuid::Uuid::new_v4().to_string();
        let now = now_rfc3339();
        let deps = &self.deps;
        let system_prompt = params
            .system_prompt
            .clone()
            .or_else(|| deps.config.agent.system_prompt.clone())
            .unwrap_or_else(|| default_system_prompt(&workspace, &deps.data_dir));
        let info = SessionInfo {
            session_id: id.clone(),
            cwd: workspace.display().to_string(),
            mode: params.mode.unwrap_or_default(),
            model: params
                .model
                .clone()
                .filter(|m| !m.trim().is_empty())
                .unwrap_or_else(|| match &provider {
                    Some(p) => deps.llm.default_model(Some(p)),
                    None => deps.endpoint.model.clone(),
                }),
            title: params.title.unwrap_or_default(),
            state: SessionState::Idle,
            created_at: now.clone(),
            updated_at: now,
            usage: Usage::default(),
            provider,
        };
        let persistence = match &deps.store {
            Some(store) => {
                let meta = SessionMeta {
                    info: info.clone(),
                    system_prompt: system_prompt.clone(),
                };
                let log = store
                    .create(&meta)
                    .map_err(|e| SessionError::Store(e.to_string()))?;
                // The new files' fsyncs, off the request's path (the log's first sync
                // waits for them if they are not done by then).
                let owed = log.creation_sync();
                let session = id.clone();
                tokio::task::spawn_blocking(move || {
                    if let Err(err) = owed.settle() {
                        tracing::warn!(%session, %err, "cannot sync a new session's files yet");
                    }
                });
                Some(Persistence::new(store.clone(), id.clone(), log))
            }
            None => None,
        };
        let mut context = Context::new();
        if let Some(p) = &persistence {
            context.set_journal(p.journal());
        }
        context.push(Message::system(system_prompt.clone()));
        let hub = EventHub::restored(
            id.clone(),
            deps.config.server.subscriber_buffer,
            0,
            Vec::new(),
            persistence.clone().map(|p| p as Arc<dyn EventStore>),
        )
        .with_memory(deps.config.sessions.memory_events);
        let handle = build::spawn(
            &self.deps,
            build::Parts {
                info: info.clone(),
                workspace,
                system_prompt,
                context,
                hub,
                persistence,
            },
        );
        self.write().insert(id, handle);
        Ok(info)
    }

    /// The live session, loading it from the store on first use.
    pub fn get(&self, id: &str) -> Result<Arc<SessionHandle>, SessionError> {
        if let Some(handle) = self.read().get(id) {
            handle.shared.touch();
            return Ok(handle.clone());
        }
        // Loading under the write lock: two callers never load one session twice.
        let mut sessions = self.write();
        if let Some(handle) = sessions.get(id) {
            return Ok(handle.clone());
        }
        let (Some(store), true) = (&self.deps.store, self.stored().contains_key(id)) else {
            return Err(SessionError::NotFound(id.to_owned()));
        };
        let handle = persist::blocking(|| restore::load(&self.deps, store, id))?;
        self.stored().remove(id);
        sessions.insert(id.to_owned(), handle.clone());
        Ok(handle)
    }

    /// Newest first; the cursor is the number of sessions already returned.
    pub fn list(
        &self,
        cursor: Option<&str>,
        limit: Option<u32>,
    ) -> (Vec<SessionInfo>, Option<String>) {
        let mut all: Vec<SessionInfo> = self.read().values().map(|h| h.shared.info()).collect();
        all.extend(self.stored().values().cloned());
        all.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| b.session_id.cmp(&a.session_id))
        });
        let start = cursor.and_then(|c| c.parse::<usize>().ok()).unwrap_or(0);
        let limit = limit.map_or(100, |l| l.clamp(1, 1000) as usize);
        let end = start.saturating_add(limit).min(all.len());
        let page = all.get(start..end).map(<[_]>::to_vec).unwrap_or_default();
        let next = (end < all.len()).then(|| end.to_string());
        (page, next)
    }

    /// Queues a prompt; returns its turn id.
    pub fn prompt(&self, id: &str, text: String) -> Result<String, SessionError> {
        let handle = self.get(id)?;
        let turn_id = format!("turn_{}", uuid::Uuid::new_v4().simple());
        handle.shared.set_title_if_empty(&text);
        handle
            .commands
            .send(Command::Prompt {
                turn_id: turn_id.clone(),
                text,
            })
            .map_err(|_| SessionError::NotFound(id.to_owned()))?;
        Ok(turn_id)
    }

    /// Unloads sessions that have been idle for `idle` (only with a store: an unloaded
    /// session must be loadable again).
    pub async fn unload_idle(&self, idle: Duration) {
        if self.deps.store.is_none() {
            return;
        }
        let idle_ones: Vec<Arc<SessionHandle>> = {
            let mut sessions = self.write();
            let ids: Vec<String> = sessions
                .iter()
                .filter(|(_, h)| h.shared.unloadable(idle))
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| sessions.remove(id)).collect()
        };
        for handle in idle_ones {
            tracing::debug!(session = %handle.shared.id, "unloading an idle session");
            stop_session(&handle).await;
            handle.shared.save_meta();
            self.stored()
                .insert(handle.shared.id.clone(), handle.shared.info());
        }
    }

    /// Publishes a daemon-wide event (MCP status) to every loaded session, outside turns.
    pub fn publish_all(&self, kind: EventKind) {
        let handles: Vec<Arc<SessionHandle>> = self.read().values().cloned().collect();
        for handle in handles {
            handle.shared.hub.publish(None, kind.clone());
        }
    }

    /// Sessions currently in memory.
    pub fn loaded(&self) -> usize {
        self.read().len()
    }

    /// Loaded sessions with a turn running, an approval pending or a background process
    /// alive: what exiting when idle (`service::idle`) must not cut short. Sessions only in
    /// the store are idle by construction.
    pub fn busy(&self) -> usize {
        self.read()
            .values()
            .filter(|h| {
                let s = &h.shared;
                s.state() != SessionState::Idle
                    || !s.approvals.pending().is_empty()
                    || s.tools.processes.running() > 0
            })
            .count()
    }

    /// Re-walks the session's persisted hash chain (`session/verify`).
    pub fn verify(&self, id: &str) -> Result<amber_proto::SessionVerifyResult, SessionError> {
        let known = self.read().contains_key(id) || self.stored().contains_key(id);
        let Some(store) = self.deps.store.as_ref().filter(|_| known) else {
            return Err(SessionError::NotFound(id.to_owned()));
        };
        let report = store
            .verify(id)
            .map_err(|e| SessionError::Store(e.to_string()))?;
        Ok(amber_proto::SessionVerifyResult {
            ok: report.first_broken.is_none() && !report.torn_tail,
            messages: report.messages as u64,
            events: report.events as u64,
            first_broken: report.first_broken.map(|b| amber_proto::BrokenLink {
                index: b.index as u64,
                stored: format!("{:016x}", b.stored),
                computed: format!("{:016x}", b.computed),
            }),
            torn_tail: report.torn_tail,
        })
    }

    /// Compacts a session's context between turns (queued behind running prompts).
    pub async fn compact(
        &self,
        id: &str,
    ) -> Result<Result<SessionCompactResult, String>, SessionError> {
        let handle = self.get(id)?;
        let (reply, answer) = tokio::sync::oneshot::channel();
        handle
            .commands
            .send(Command::Compact { reply })
            .map_err(|_| SessionError::NotFound(id.to_owned()))?;
        answer
            .await
            .map_err(|_| SessionError::NotFound(id.to_owned()))
    }

    /// `session/new`'s `provider`: a known name, or `None` for the default.
    fn provider_param(&self, provider: Option<&str>) -> Result<Option<String>, SessionError> {
        match provider {
            Some(p) => self
                .deps
                .llm
                .selection(p)
                .map_err(|e| SessionError::InvalidParams(format!("provider: {e}"))),
            None => Ok(None),
        }
    }

    /// Clears a session's conversation between turns (`/clear`); returns the number of
    /// messages dropped.
    pub async fn clear(&self, id: &str) -> Result<usize, SessionError> {
        let handle = self.get(id)?;
        let (reply, answer) = tokio::sync::oneshot::channel();
        handle
            .commands
            .send(Command::Clear { reply })
            .map_err(|_| SessionError::NotFound(id.to_owned()))?;
        answer
            .await
            .map_err(|_| SessionError::NotFound(id.to_owned()))
    }

    /// Removes a session: cancels its turn, stops its actor, ends its subscriptions.
    pub async fn delete(&self, id: &str) -> Result<(), SessionError> {
        let handle = self.write().remove(id);
        let was_stored = self.stored().remove(id).is_some();
        match handle {
            Some(handle) => stop_session(&handle).await,
            None if was_stored => {}
            None => return Err(SessionError::NotFound(id.to_owned())),
        }
        if let Some(store) = &self.deps.store
            && let Err(err) = store.delete(id)
        {
            tracing::error!(session = id, %err, "cannot delete the session from the store");
        }
        Ok(())
    }

    /// Cancels every turn and waits (bounded) for the actors to wind down.
    pub async fn shutdown(&self, grace: Duration) {
        self.closing
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let handles: Vec<Arc<SessionHandle>> = self.write().drain().map(|(_, h)| h).collect();
        let stops = handles.iter().map(|h| stop_session(h));
        if tokio::time::timeout(grace, futures::future::join_all(stops))
            .await
            .is_err()
        {
            tracing::warn!("some sessions did not stop within {grace:?}");
        }
    }
}

async fn stop_session(handle: &SessionHandle) {
    // Closing cancels the running turn (its token is a child) and ends the actor loop
    // and every subscription of the session.
    handle.shared.closed.cancel();
    let task = handle.task.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(mut task) = task
        && tokio::time::timeout(Duration::from_secs(2), &mut task)
            .await
            .is_err()
    {
        tracing::warn!(session = %handle.shared.id, "session did not stop in time; aborting");
        task.abort();
    }
    // Normally the actor did this itself; after an abort, subscribers must still end.
    handle.shared.finish();
    // Background processes belong to the session and end with it.
    handle.shared.tools.shutdown_and_wait().await;
}
