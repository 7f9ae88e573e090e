//! Sessions: the manager (create, list, find, delete) and each session's shared state.
//!
//! **Invariant:** only a session's actor (`actor.rs`) writes its `Context`. Everything
//! else — RPC handlers, subscribers — reads `SessionShared`: an info snapshot, the latest
//! message snapshot, and the event hub.

pub mod actor;
pub mod approvals;
pub mod deps;
pub mod gate;
pub mod hub;
pub mod queue;
pub mod subagents;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use amber_proto::{
    Message, Mode, SessionCompactResult, SessionInfo, SessionNewParams, SessionState, Usage,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::agent::prompt::default_system_prompt;
use crate::context::Context;
use crate::policy::grants::Grants;
use crate::policy::rules::WorkspaceRules;
use crate::tools::SessionTools;
use actor::Command;
use approvals::Approvals;
use deps::Deps;
use hub::{EventHub, now_rfc3339};

/// Errors of session operations, mapped to protocol error codes by `rpc/`.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("session not found: {0}")]
    NotFound(String),
    #[error("invalid workspace {path}: {reason}")]
    InvalidWorkspace { path: String, reason: String },
    #[error("the daemon is shutting down")]
    ShuttingDown,
}

/// State of a session readable by anyone.
pub struct SessionShared {
    pub id: String,
    pub workspace: PathBuf,
    /// Where compaction saves the skills it extracts for this workspace.
    pub skills_dir: PathBuf,
    pub system_prompt: String,
    pub hub: EventHub,
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
        let mut live = self.lock_live();
        live.info.mode = mode;
        live.info.updated_at = now_rfc3339();
        live.info.clone()
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
            let line = prompt.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            live.info.title = line.trim().chars().take(60).collect();
        }
    }
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
    sessions: RwLock<HashMap<String, Arc<SessionHandle>>>,
    closing: std::sync::atomic::AtomicBool,
}

impl SessionManager {
    pub fn new(deps: Arc<Deps>) -> Self {
        Self {
            deps,
            sessions: RwLock::new(HashMap::new()),
            closing: std::sync::atomic::AtomicBool::new(false),
        }
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

    pub fn count(&self) -> usize {
        self.read().len()
    }

    pub fn create(&self, params: SessionNewParams) -> Result<SessionInfo, SessionError> {
        if self.closing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(SessionError::ShuttingDown);
        }
        let workspace = validate_workspace(&params.cwd)?;
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
            model: params.model.unwrap_or_else(|| deps.endpoint.model.clone()),
            title: params.title.unwrap_or_default(),
            state: SessionState::Idle,
            created_at: now.clone(),
            updated_at: now,
            usage: Usage::default(),
        };
        // What the actor's context starts with, readable before the actor first runs.
        let first_messages = vec![Message::system(system_prompt.clone())];
        let rules = WorkspaceRules::new(&workspace);
        let shared = Arc::new_cyclic(|weak: &std::sync::Weak<SessionShared>| SessionShared {
            tools: Arc::new(SessionTools::new({
                let weak = weak.clone();
                move |kind| {
                    if let Some(shared) = weak.upgrade() {
                        let turn = shared.lock_live().turn_id.clone();
                        shared.hub.publish(turn.as_deref(), kind);
                    }
                }
            })),
            id: id.clone(),
            skills_dir: crate::compaction::workspace_skills_dir(&deps.data_dir, &workspace),
            workspace,
            system_prompt,
            hub: EventHub::new(id.clone(), deps.config.server.subscriber_buffer),
            closed: CancellationToken::new(),
            approvals: Approvals::default(),
            grants: Mutex::new(Grants::default()),
            rules: Mutex::new(rules),
            live: Mutex::new(Live {
                info: info.clone(),
                turn_id: None,
                messages: Arc::new(first_messages),
                cancel: None,
            }),
        });
        shared
            .tools
            .set_subagents(Arc::new(subagents::SessionSubagents {
                shared: Arc::downgrade(&shared),
                deps: self.deps.clone(),
            }));
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(actor::run(shared.clone(), self.deps.clone(), rx));
        let handle = Arc::new(SessionHandle {
            shared,
            commands: tx,
            task: Mutex::new(Some(task)),
        });
        self.write().insert(id, handle);
        Ok(info)
    }

    pub fn get(&self, id: &str) -> Result<Arc<SessionHandle>, SessionError> {
        self.read()
            .get(id)
            .cloned()
            .ok_or_else(|| SessionError::NotFound(id.to_owned()))
    }

    /// Newest first; the cursor is the number of sessions already returned.
    pub fn list(
        &self,
        cursor: Option<&str>,
        limit: Option<u32>,
    ) -> (Vec<SessionInfo>, Option<String>) {
        let mut all: Vec<SessionInfo> = self.read().values().map(|h| h.shared.info()).collect();
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

    /// Removes a session: cancels its turn, stops its actor, ends its subscriptions.
    pub async fn delete(&self, id: &str) -> Result<(), SessionError> {
        let handle = self
            .write()
            .remove(id)
            .ok_or_else(|| SessionError::NotFound(id.to_owned()))?;
        stop_session(&handle).await;
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

fn validate_workspace(cwd: &str) -> Result<PathBuf, SessionError> {
    let invalid = |reason: &str| SessionError::InvalidWorkspace {
        path: cwd.to_owned(),
        reason: reason.to_owned(),
    };
    let path = PathBuf::from(cwd);
    if cwd.is_empty() {
        return Err(invalid("cwd is empty"));
    }
    if !path.is_absolute() {
        return Err(invalid("cwd must be an absolute path"));
    }
    let canonical = path
        .canonicalize()
        .map_err(|e| invalid(&format!("cannot resolve: {e}")))?;
    if !canonical.is_dir() {
        return Err(invalid("not a directory"));
    }
    Ok(canonical)
}
