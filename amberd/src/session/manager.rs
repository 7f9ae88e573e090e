//! `SessionManager`: every session of the daemon, loaded (actor running) or only in the
//! store, and the ways to create, find, list, unload and delete them.
//!
//! **Invariants:** one lock guards both maps, so a session is in exactly one of them at
//! every instant and never missing from `list`/`get` while it moves; an idle unload puts
//! the session in `stored` *before* its actor stops, and a load that races the unload
//! waits until the old actor has stopped and released its log. A stored session is
//! listed `idle`: only a loaded session can be running.

use amber_proto::sync::Locked;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use amber_proto::{
    EventKind, Message, SessionChangeKind, SessionCompactResult, SessionInfo, SessionNewParams,
    SessionState, Usage,
};
use amber_store::SessionMeta;
use amber_store::context::Context;

use super::feature::{Draft, NewSession};
use super::hub::{EventHub, EventStore};
use super::names::{self, NameIndex};
use super::persist::{self, Persistence};
use super::services::Services;
use super::{Command, SessionError, SessionHandle, build, listing, restore};
use crate::agent::prompt::default_system_prompt;
use crate::clock::now_rfc3339;

/// How long a load waits for an unloading session's actor to let go of its log.
const UNLOAD_WAIT: Duration = Duration::from_secs(10);

/// All sessions of the daemon.
pub struct SessionManager {
    services: Arc<Services>,
    registry: Mutex<Registry>,
    closing: AtomicBool,
}

/// The shortest prefix of a session id that stands for it (`amber-cli sessions` shows eight).
pub(crate) const MIN_ID_PREFIX: usize = 4;

#[derive(Default)]
struct Registry {
    /// Sessions in memory, with their actor running.
    loaded: HashMap<String, Arc<SessionHandle>>,
    /// Sessions only in the store (not loaded since start, or unloaded when idle).
    stored: HashMap<String, SessionInfo>,
    /// Sessions in `stored` whose old actor is still stopping.
    unloading: HashMap<String, Arc<Unloading>>,
    /// The names of the sessions of both maps (and of sessions being created).
    names: NameIndex,
}

/// Set once an unloaded session's actor has stopped and its log is closed.
#[derive(Default)]
struct Unloading {
    done: Mutex<bool>,
    changed: Condvar,
}

impl Unloading {
    fn finish(&self) {
        *self.done.locked() = true;
        self.changed.notify_all();
    }

    /// Whether it finished within `timeout`.
    fn wait(&self, timeout: Duration) -> bool {
        let done = self.done.locked();
        let (done, _) = self
            .changed
            .wait_timeout_while(done, timeout, |done| !*done)
            .unwrap_or_else(|e| e.into_inner());
        *done
    }
}

impl SessionManager {
    /// Lists the store's sessions (metadata only; logs are read on first use).
    pub fn new(services: Arc<Services>) -> Self {
        let mut stored = HashMap::new();
        let mut names = NameIndex::default();
        if let Some(store) = &services.store {
            match store.list() {
                Ok(metas) => {
                    for mut meta in metas {
                        // Nothing runs before a session is loaded (older daemons could
                        // save `running`; a crash left it so).
                        meta.info.state = SessionState::Idle;
                        for feature in &services.features {
                            feature.describe_stored(&mut meta, &services);
                        }
                        if let Some(name) = &meta.info.name
                            && let Err(err) = names.claim(name, &meta.info.session_id)
                        {
                            // Only a hand-edited store gets here: the first one keeps it.
                            tracing::warn!(session = %meta.info.session_id, %err, "a stored session's name is not unique");
                        }
                        stored.insert(meta.info.session_id.clone(), meta.info);
                    }
                }
                Err(err) => tracing::error!(%err, "cannot list stored sessions"),
            }
        }
        Self {
            services,
            registry: Mutex::new(Registry {
                stored,
                names,
                ..Registry::default()
            }),
            closing: AtomicBool::new(false),
        }
    }

    fn registry(&self) -> MutexGuard<'_, Registry> {
        // Every writer leaves the maps consistent between statements.
        self.registry.locked()
    }

    /// The services, to keep (a listener's closures read the live config).
    pub fn services_handle(&self) -> Arc<Services> {
        Arc::clone(&self.services)
    }

    pub fn services(&self) -> &Services {
        &self.services
    }

    /// Sessions known to the daemon, loaded or not.
    pub fn count(&self) -> usize {
        let registry = self.registry();
        registry.loaded.len() + registry.stored.len()
    }

    pub fn create(&self, params: SessionNewParams) -> Result<SessionInfo, SessionError> {
        let handle = self.create_with(params, Vec::new())?;
        handle
            .shared
            .hub
            .notify_watchers(SessionChangeKind::Updated);
        Ok(handle.shared.info())
    }

    /// A new session whose context holds `history` after its system prompt. The watchers
    /// are not told yet: the caller does, once the session is complete.
    fn create_with(
        &self,
        mut params: SessionNewParams,
        history: Vec<Message>,
    ) -> Result<Arc<SessionHandle>, SessionError> {
        // Its verdict is usually in before the session's first turn asks for it.
        self.services.start_sandbox_probe();
        if self.closing.load(Ordering::SeqCst) {
            return Err(SessionError::ShuttingDown);
        }
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let target = crate::environment::Target::parse(params.environment.as_deref())
            .map_err(SessionError::InvalidParams)?;
        // An executor's workspace is on its machine: the executor checks it (`place`).
        let workspace = if target.is_local() {
            build::validate_workspace(
                &params.cwd,
                home.as_deref(),
                self.services.live().config.sessions.allow_broad_workspace,
            )?
        } else {
            std::path::PathBuf::from(&params.cwd)
        };
        let mut meta = draft_meta();
        for feature in &self.services.features {
            feature.prepare(&mut Draft {
                params: &mut params,
                workspace: &workspace,
                services: &self.services,
                meta: &mut meta,
            })?;
        }
        let provider = self.provider_param(params.provider.as_deref())?;
        for feature in &self.services.features {
            feature
                .check_new(&params)
                .map_err(SessionError::InvalidParams)?;
        }
        let id = uuid::Uuid::new_v4().to_string();
        // Claimed before anything is made, so a taken name makes nothing; given back if
        // the session is not made after all.
        let name = names::requested(params.name.take());
        let mut claim = self.claim_name(name.as_deref(), &id)?;
        let services = &self.services;
        // Nobody chose a model (a feature's default counts as a choice): it follows the
        // configuration's.
        let model_follows_config =
            params.model.as_deref().is_none_or(|m| m.trim().is_empty()) && provider.is_none();
        let model = params
            .model
            .clone()
            .filter(|m| !m.trim().is_empty())
            .unwrap_or_else(|| match &provider {
                Some(p) => services.llm.default_model(Some(p)),
                None => services.live().endpoint.model.clone(),
            });
        let now = now_rfc3339();
        let priced = services.llm.price(provider.as_deref(), &model).is_some();
        let mut info = SessionInfo {
            parent: None,
            goal: None,
            routine: None,
            session_id: id.clone(),
            cwd: workspace.display().to_string(),
            mode: params.mode.unwrap_or_default(),
            model,
            title: params.title.clone().unwrap_or_default(),
            name,
            state: SessionState::Idle,
            created_at: now.clone(),
            updated_at: now,
            usage: Usage {
                // A priced model's session has cost $0 so far, not an unknown amount.
                cost_usd: priced.then_some(amber_proto::CostUsd::ZERO),
                ..Usage::default()
            },
            provider,
            agent: params.agent.clone(),
            // A feature says (the sandbox's, as it will be in force).
            sandbox: None,
            worktree: None,
            max_budget_usd: None,
            max_tokens_total: None,
            environment: None,
        };
        let new = NewSession {
            id: &id,
            params: &params,
            workspace: &workspace,
            services,
        };
        for feature in &services.features {
            feature.shape_info(&new, &mut info)?;
        }
        // Last of the checks, since it is the one that makes something.
        let mut placement = None;
        for feature in &services.features {
            placement = feature.place(&new)?;
            if placement.is_some() {
                break;
            }
        }
        let (workspace, worktree, undo) = match placement {
            Some(placed) => (placed.cwd, placed.worktree, Some(placed.undo)),
            None => (workspace, None, None),
        };
        // Explicit params first (a feature's defaults among them), then the configuration's.
        let system_prompt = params
            .system_prompt
            .clone()
            .or_else(|| services.live().config.agent.system_prompt.clone())
            .unwrap_or_else(default_system_prompt);
        info.cwd = workspace.display().to_string();
        info.worktree = worktree;
        let meta = SessionMeta {
            info,
            system_prompt: system_prompt.clone(),
            model_follows_config,
            ..meta
        };
        let persistence = match &services.store {
            Some(store) => {
                let log = store.create(&meta).map_err(|e| {
                    if let Some(undo) = undo {
                        persist::blocking(undo);
                    }
                    SessionError::Store(e)
                })?;
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
        for message in history {
            context.push(message);
        }
        let hub = EventHub::restored(
            id.clone(),
            services.live().config.server.subscriber_buffer,
            services.live().config.sessions.memory_events,
            0,
            Vec::new(),
            persistence.clone().map(|p| p as Arc<dyn EventStore>),
        )
        .with_limits(crate::elide::WireLimits::from_config(
            &services.live().config.server,
        ));
        let handle = build::spawn(
            &self.services,
            build::Parts {
                meta,
                workspace,
                context,
                hub,
                persistence,
            },
            false,
        );
        self.registry().loaded.insert(id, handle.clone());
        claim.keep();
        Ok(handle)
    }

    /// Reserves `name` (checked against the rules) for the session `id` being made.
    fn claim_name(&self, name: Option<&str>, id: &str) -> Result<NameClaim<'_>, SessionError> {
        if let Some(name) = name {
            names::check(name).map_err(name_error)?;
            self.registry().names.claim(name, id).map_err(name_error)?;
        }
        Ok(NameClaim {
            manager: self,
            name: name.map(str::to_owned),
            id: id.to_owned(),
            kept: false,
        })
    }

    /// `session/rename`: gives the session `id` the name `name` (`None` or empty: no name).
    /// Refused when the name breaks the rules or another session has it; the session's own
    /// name again changes nothing.
    pub fn rename(&self, id: &str, name: Option<String>) -> Result<SessionInfo, SessionError> {
        let name = names::requested(name);
        if let Some(name) = &name {
            names::check(name).map_err(name_error)?;
        }
        loop {
            let handle = self.get(id)?;
            let shared = &handle.shared;
            let info = {
                let mut registry = self.registry();
                // Unloaded since `get`: its info now lives in `stored`; load it again.
                if !registry
                    .loaded
                    .get(id)
                    .is_some_and(|h| Arc::ptr_eq(h, &handle))
                {
                    continue;
                }
                let old = shared.info().name;
                if old == name {
                    return Ok(shared.info());
                }
                if let Some(name) = &name {
                    registry.names.claim(name, id).map_err(name_error)?;
                }
                if let Some(old) = &old {
                    registry.names.release(old, id);
                }
                shared.put_name(name)
            };
            // Outside the registry's lock: the watch tap takes the session's own locks.
            shared.hub.notify_watchers(SessionChangeKind::Updated);
            shared.save_meta();
            return Ok(info);
        }
    }

    /// `trust/list`: the configuration files of the workspace `cwd` (validated as
    /// `session/new`'s) and where their trust stands.
    pub fn trust_list(&self, cwd: &str) -> Result<amber_proto::TrustListResult, SessionError> {
        let workspace = self.workspace_of(cwd)?;
        Ok(amber_proto::TrustListResult {
            cwd: workspace.display().to_string(),
            files: crate::trust::report::list(&workspace, &self.services.trust),
        })
    }

    /// `trust/respond`: a person's decision on one version of one file.
    pub fn trust_respond(
        &self,
        params: &amber_proto::TrustRespondParams,
    ) -> Result<amber_proto::TrustFile, SessionError> {
        let workspace = self.workspace_of(&params.cwd)?;
        crate::trust::report::respond(
            &workspace,
            &self.services.trust,
            &params.path,
            &params.hash,
            params.decision,
        )
        .map_err(|e| SessionError::InvalidParams(format!("path: {e}")))
    }

    /// `cwd` validated as `session/new`'s.
    pub(crate) fn workspace_of(&self, cwd: &str) -> Result<std::path::PathBuf, SessionError> {
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        build::validate_workspace(
            cwd,
            home.as_deref(),
            self.services.live().config.sessions.allow_broad_workspace,
        )
    }

    /// The whole id of the session `id` stands for, when `id` is not itself a session's id:
    /// the session named `id`, else the one session whose id starts with `id` (at least
    /// [`MIN_ID_PREFIX`] characters). `Ok(None)` when it is an id, or matches nothing (the
    /// caller's lookup then says not found); an error naming the candidates when several
    /// ids start with it.
    pub fn resolve_id(&self, id: &str) -> Result<Option<String>, SessionError> {
        let registry = self.registry();
        if registry.loaded.contains_key(id) || registry.stored.contains_key(id) {
            return Ok(None);
        }
        // A name never looks like an id or a prefix of one (`names.rs`): no ambiguity.
        if let Some(holder) = registry.names.holder(id) {
            return Ok(Some(holder.to_owned()));
        }
        if id.chars().count() < MIN_ID_PREFIX {
            return Ok(None);
        }
        let mut matches: Vec<&String> = registry
            .loaded
            .keys()
            .chain(registry.stored.keys())
            .filter(|known| known.starts_with(id))
            .collect();
        matches.sort();
        matches.dedup();
        match matches.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some((*one).clone())),
            several => Err(SessionError::InvalidParams(format!(
                "sessionId: `{id}` is the start of {} sessions' ids ({}): give more of it",
                several.len(),
                several
                    .iter()
                    .take(5)
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// The live session, loading it from the store on first use.
    pub fn get(&self, id: &str) -> Result<Arc<SessionHandle>, SessionError> {
        loop {
            // Loading under the lock: two callers never load one session twice.
            let mut registry = self.registry();
            if let Some(handle) = registry.loaded.get(id) {
                handle.shared.touch();
                return Ok(handle.clone());
            }
            if let Some(unloading) = registry.unloading.get(id).cloned() {
                // Its old actor still holds the log: wait (unlocked) until it lets go.
                drop(registry);
                if !persist::blocking(|| unloading.wait(UNLOAD_WAIT)) {
                    return Err(SessionError::Internal(format!(
                        "session {id} is still being unloaded; try again"
                    )));
                }
                continue;
            }
            let (Some(store), true) = (&self.services.store, registry.stored.contains_key(id))
            else {
                return Err(SessionError::NotFound(id.to_owned()));
            };
            let handle = persist::blocking(|| restore::load(&self.services, store, id))?;
            registry.stored.remove(id);
            registry.loaded.insert(id.to_owned(), handle.clone());
            return Ok(handle);
        }
    }

    /// Newest first, `limit` at a time, after `cursor` (see `listing.rs`).
    pub fn list(
        &self,
        cursor: Option<&str>,
        limit: Option<u32>,
    ) -> Result<(Vec<SessionInfo>, Option<String>), SessionError> {
        listing::page(self.all_infos(), cursor, limit)
    }

    /// `list`, only the background sub-agents of session `parent` (an id, name or prefix).
    pub fn list_children(
        &self,
        parent: &str,
        cursor: Option<&str>,
        limit: Option<u32>,
    ) -> Result<(Vec<SessionInfo>, Option<String>), SessionError> {
        let parent = self
            .resolve_id(parent)?
            .unwrap_or_else(|| parent.to_owned());
        self.info_of(&parent)?;
        listing::page(self.children(Some(&parent)), cursor, limit)
    }

    /// What the sessions `which` picks have cost in all (their `usage.costUsd`), loaded or
    /// only stored.
    pub fn cost_of(&self, which: impl Fn(&SessionInfo) -> bool) -> amber_proto::CostUsd {
        let registry = self.registry();
        let loaded = registry.loaded.values().map(|h| h.shared.info());
        loaded
            .chain(registry.stored.values().cloned())
            .filter(|info| which(info))
            .filter_map(|info| info.usage.cost_usd)
            .fold(
                amber_proto::CostUsd::ZERO,
                amber_proto::CostUsd::saturating_add,
            )
    }

    /// Queues a prompt; returns its turn id once the prompt is durable (its
    /// `prompt_queued` is on disk), so an acknowledged prompt survives a crash.
    pub fn prompt(&self, id: &str, text: String) -> Result<String, SessionError> {
        self.prompt_with(id, text, super::PromptOptions::default())
    }

    /// `prompt` with the turn's options (`session/prompt {outputSchema, maxIterations}`).
    pub(crate) fn prompt_with(
        &self,
        id: &str,
        text: String,
        options: super::PromptOptions,
    ) -> Result<String, SessionError> {
        let handle = self.get(id)?;
        let turn_id = format!("turn_{}", uuid::Uuid::new_v4().simple());
        handle.queue_prompt(&turn_id, text, options)?;
        Ok(turn_id)
    }

    /// `prompt` as turn `turn_id`, which the caller chose (a routine's fire records it in
    /// the session before the turn can start).
    pub(crate) fn prompt_as(
        &self,
        id: &str,
        turn_id: &str,
        text: String,
    ) -> Result<(), SessionError> {
        self.get(id)?
            .queue_prompt(turn_id, text, super::PromptOptions::default())
    }

    /// Unloads sessions that have been idle for `idle` (only with a store: an unloaded
    /// session must be loadable again). Each moves to `stored` in the same critical
    /// section that takes it out of `loaded`; its actor stops afterwards.
    pub async fn unload_idle(&self, idle: Duration) {
        if self.services.store.is_none() {
            return;
        }
        let idle_ones: Vec<(Arc<SessionHandle>, Arc<Unloading>)> = {
            let mut registry = self.registry();
            let ids: Vec<String> = registry
                .loaded
                .iter()
                .filter(|(_, h)| h.shared.unloadable(idle))
                .filter(|(_, h)| {
                    let info = h.shared.info();
                    !self.services.features.iter().any(|f| f.keeps_loaded(&info))
                })
                .map(|(id, _)| id.clone())
                .collect();
            ids.into_iter()
                .filter_map(|id| {
                    let handle = registry.loaded.remove(&id)?;
                    let unloading = Arc::new(Unloading::default());
                    registry.stored.insert(id.clone(), handle.shared.info());
                    registry.unloading.insert(id, unloading.clone());
                    Some((handle, unloading))
                })
                .collect()
        };
        let stops = idle_ones.into_iter().map(|(handle, unloading)| async move {
            let id = handle.shared.id.clone();
            tracing::debug!(session = %id, "unloading an idle session");
            stop_session(&handle).await;
            handle.shared.save_meta();
            handle.shared.close_log();
            let mut registry = self.registry();
            if registry
                .unloading
                .get(&id)
                .is_some_and(|u| Arc::ptr_eq(u, &unloading))
            {
                registry.unloading.remove(&id);
            }
            drop(registry);
            unloading.finish();
        });
        futures::future::join_all(stops).await;
        self.services.memory.soon();
    }

    /// Loads every stored session marked busy, then tells the features (`amber-store`'s `busy.rs`: it had a turn
    /// running or prompts waiting when the daemon stopped), so restore closes the interrupted
    /// turn and runs the queued prompts (or ends them cancelled) without anyone attaching. One
    /// `stat` per stored session, no log read; the idle unloader leaves each alone while
    /// it has work (`running`) and unloads it as usual afterwards.
    pub fn resume_busy(&self) {
        let Some(store) = &self.services.store else {
            return;
        };
        let (ids, kept): (Vec<String>, Vec<String>) = {
            let registry = self.registry();
            let kept = registry
                .stored
                .iter()
                .filter(|(_, info)| self.services.features.iter().any(|f| f.keeps_loaded(info)))
                .map(|(id, _)| id.clone())
                .collect();
            (registry.stored.keys().cloned().collect(), kept)
        };
        let mut busy = store.busy_sessions(ids.iter().map(String::as_str));
        for id in kept {
            if !busy.contains(&id) {
                busy.push(id);
            }
        }
        for id in busy {
            if self.closing.load(Ordering::SeqCst) {
                return;
            }
            tracing::info!(session = %id, "resuming a session that had work when the daemon stopped");
            if let Err(err) = self.get(&id) {
                tracing::error!(session = %id, %err, "cannot resume the session");
            }
        }
        for feature in &self.services.features {
            feature.resumed(&self.services);
        }
    }

    /// Publishes a daemon-wide event (MCP status) to every loaded session, outside turns.
    pub fn publish_all(&self, kind: EventKind) {
        let handles: Vec<Arc<SessionHandle>> = self.registry().loaded.values().cloned().collect();
        for handle in handles {
            handle.shared.hub.publish(None, kind.clone());
        }
    }

    /// Sessions currently in memory.
    pub fn loaded(&self) -> usize {
        self.registry().loaded.len()
    }

    /// Loaded sessions with a turn running, an approval pending or a background process
    /// alive: what exiting when idle (`service::idle`) must not cut short. Sessions only in
    /// the store are idle by construction.
    pub fn busy(&self) -> usize {
        self.registry()
            .loaded
            .values()
            .filter(|h| {
                let s = &h.shared;
                s.state() != SessionState::Idle
                    || !s.approvals.pending().is_empty()
                    || s.tools.processes_running() > 0
            })
            .count()
    }

    /// The executors the loaded sessions' tools run on, each once, with their counts.
    pub fn environments(&self) -> Vec<amber_proto::EnvironmentUse> {
        let mut uses: Vec<amber_proto::EnvironmentUse> = Vec::new();
        for handle in self.registry().loaded.values() {
            let Some(environment) = handle.shared.info().environment else {
                continue;
            };
            let same = |u: &amber_proto::EnvironmentUse| {
                u.environment.spec == environment.spec
                    && u.environment.executor.as_ref().map(|e| &e.id)
                        == environment.executor.as_ref().map(|e| &e.id)
            };
            match uses.iter_mut().find(|u| same(u)) {
                Some(found) => found.sessions += 1,
                None => uses.push(amber_proto::EnvironmentUse {
                    environment,
                    sessions: 1,
                }),
            }
        }
        uses.sort_by(|a, b| a.environment.spec.cmp(&b.environment.spec));
        uses
    }

    /// Re-walks the session's persisted hash chain and records (`session/verify`).
    pub fn verify(&self, id: &str) -> Result<amber_proto::SessionVerifyResult, SessionError> {
        let known = {
            let registry = self.registry();
            registry.loaded.contains_key(id) || registry.stored.contains_key(id)
        };
        let Some(store) = self.services.store.as_ref().filter(|_| known) else {
            return Err(SessionError::NotFound(id.to_owned()));
        };
        let report = store.verify(id).map_err(SessionError::Store)?;
        let messages = report.messages as u64;
        let link = report.first_broken.map(|b| amber_proto::BrokenLink {
            index: b.index as u64,
            stored: format!("{:016x}", b.stored),
            computed: format!("{:016x}", b.computed),
            record: None,
            reason: None,
        });
        // A broken link inside the readable records comes before the damaged record.
        let damaged = report.corrupt.map(|c| amber_proto::BrokenLink {
            index: messages,
            stored: String::new(),
            computed: String::new(),
            record: Some(c.record as u64),
            reason: Some(if c.file == "log" {
                c.reason
            } else {
                format!(
                    "{} (in {}, the damaged log kept aside when the session was restored \
                     up to the record before it)",
                    c.reason, c.file
                )
            }),
        });
        let first_broken = link.or(damaged);
        Ok(amber_proto::SessionVerifyResult {
            ok: first_broken.is_none() && !report.torn_tail,
            messages,
            events: report.events as u64,
            first_broken,
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
                .services
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

    /// `session/fork`: a new session with the same cwd and settings whose conversation is
    /// the history before `turn_id` (the whole history without it). The original is
    /// untouched; the workspace is shared, not copied.
    pub fn fork(&self, id: &str, at: Option<ForkPoint>) -> Result<SessionInfo, SessionError> {
        let source = self.get(id)?;
        let shared = &source.shared;
        let messages = shared.messages();
        let (len, cut) = match at {
            None => (messages.len(), u64::MAX),
            Some(at) => (at.messages, at.before_seq),
        };
        let skip = usize::from(
            messages
                .first()
                .is_some_and(|m| m.role == amber_proto::Role::System),
        );
        let history: Vec<Message> = messages
            .get(skip..len)
            .map(<[Message]>::to_vec)
            .unwrap_or_default();
        let info = shared.info();
        let title = if info.title.is_empty() {
            String::new()
        } else {
            format!("fork: {}", info.title)
        };
        let mut params = SessionNewParams {
            cwd: info.cwd.clone(),
            mode: Some(info.mode),
            model: Some(info.model.clone()),
            title: Some(title),
            system_prompt: Some(shared.system_prompt.clone()),
            provider: info.provider.clone(),
            agent: info.agent.clone(),
            sandbox: None,
            mcp_servers: Vec::new(),
            // The fork shares the original's workspace, its worktree included.
            worktree: None,
            // The fork's usage is its own; its budgets are the features' to say.
            max_budget_usd: None,
            max_tokens_total: None,
            // Names are unique: the fork is unnamed until someone names it.
            name: None,
            // The fork works where the original does.
            environment: info.environment.as_ref().map(|e| e.spec.clone()),
            ..Default::default()
        };
        shared.features.fork(&mut params);
        let fork = self.create_with(params, history)?;
        self.copy_history(id, &fork.shared.id, cut);
        // After its history: the copies are not news, the fork is.
        fork.shared.hub.notify_watchers(SessionChangeKind::Updated);
        Ok(fork.shared.info())
    }

    /// Gives a fork the events of its source's finished turns before `cut` (a seq), so
    /// a client attaching to it sees the conversation it continues.
    fn copy_history(&self, source: &str, fork: &str, cut: u64) {
        let (Some(store), Some(handle)) = (
            &self.services.store,
            self.registry().loaded.get(fork).cloned(),
        ) else {
            return;
        };
        let stored = match store.events_after(source, 0) {
            Ok(stored) => stored,
            Err(err) => {
                tracing::warn!(%source, %fork, %err, "the fork starts without its history's events");
                return;
            }
        };
        let events: Vec<amber_proto::Event> = stored
            .iter()
            .filter(|e| e.seq < cut)
            .filter_map(|e| serde_json::from_str(e.json.get()).ok())
            .collect();
        // Only whole turns: a turn still running (or cut short) would read as interrupted.
        let finished: std::collections::HashSet<&str> = events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::TurnCompleted { .. }))
            .filter_map(|e| e.turn_id.as_deref())
            .collect();
        let copies: Vec<amber_proto::Event> = events
            .iter()
            .filter(|e| e.turn_id.as_deref().is_some_and(|t| finished.contains(t)))
            .cloned()
            .collect();
        for event in copies {
            handle.shared.hub.publish_copy(event);
        }
    }

    /// Deletes the idle sessions last updated more than `age` ago (`[sessions]
    /// retention_days`). A session with a worktree is kept: deleting it would leave its
    /// checkout behind, and whether that goes is its owner's decision (`amber-cli rm`).
    /// Returns the ids deleted.
    pub async fn prune(&self, age: Duration) -> Vec<String> {
        let Some(cutoff) = std::time::SystemTime::now().checked_sub(age) else {
            return Vec::new();
        };
        let stale = |info: &SessionInfo| {
            info.state == SessionState::Idle
                && info.worktree.is_none()
                && humantime::parse_rfc3339_weak(&info.updated_at).is_ok_and(|at| at < cutoff)
        };
        let candidates: Vec<String> = {
            let registry = self.registry();
            registry
                .loaded
                .values()
                // Nobody attached, nothing pending or running, as for unloading.
                .filter(|h| h.shared.unloadable(Duration::ZERO) && stale(&h.shared.info()))
                .map(|h| h.shared.id.clone())
                .chain(
                    registry
                        .stored
                        .values()
                        .filter(|info| stale(info))
                        .map(|info| info.session_id.clone()),
                )
                .collect()
        };
        let mut deleted = Vec::new();
        for id in candidates {
            match self.delete_session(&id).await {
                Ok(()) => deleted.push(id),
                Err(err) => tracing::warn!(session = %id, %err, "retention: not deleted"),
            }
        }
        if !deleted.is_empty() {
            tracing::info!(
                count = deleted.len(),
                "retention: deleted old idle sessions"
            );
        }
        deleted
    }

    /// Removes a session: cancels its turn, stops its actor, ends its subscriptions, and
    /// tells the features. What a feature made for it outside the store (a worktree) stays.
    pub async fn delete(&self, id: &str) -> Result<(), SessionError> {
        self.delete_session(id).await
    }

    /// Changes a session's info (loading it) and saves its metadata.
    pub(crate) fn edit_info(
        &self,
        id: &str,
        edit: &mut dyn FnMut(&mut SessionInfo),
    ) -> Result<SessionInfo, SessionError> {
        let handle = self.get(id)?;
        let info = {
            let mut live = handle.shared.lock_live();
            edit(&mut live.info);
            live.info.clone()
        };
        handle.shared.save_meta();
        handle
            .shared
            .hub
            .notify_watchers(SessionChangeKind::Updated);
        Ok(info)
    }

    /// What the background sub-agents of session `parent` have spent in all, loaded or
    /// only stored.
    pub(crate) fn children_usage(&self, parent: &str) -> Usage {
        let mut total = Usage::default();
        for child in self.children(Some(parent)) {
            total.add(&child.usage);
        }
        total
    }

    /// The infos of the background sub-agents of `parent`, or of every parent, loaded or
    /// only stored; no other session's info is copied.
    pub(crate) fn children(&self, parent: Option<&str>) -> Vec<SessionInfo> {
        let registry = self.registry();
        let wanted = |info: &SessionInfo| {
            info.parent
                .as_ref()
                .is_some_and(|link| parent.is_none_or(|p| link.session_id == p))
        };
        let mut children = Vec::new();
        for handle in registry.loaded.values() {
            let live = handle.shared.lock_live();
            if wanted(&live.info) {
                children.push(live.info.clone());
            }
        }
        children.extend(
            registry
                .stored
                .values()
                .filter(|info| wanted(info))
                .cloned(),
        );
        children
    }

    /// Every session's info, loaded or only stored, in no order.
    pub(crate) fn all_infos(&self) -> Vec<SessionInfo> {
        let registry = self.registry();
        let loaded = registry.loaded.values().map(|h| h.shared.info());
        loaded.chain(registry.stored.values().cloned()).collect()
    }

    /// The info of a session, loaded or only stored.
    pub fn info_of(&self, id: &str) -> Result<SessionInfo, SessionError> {
        let registry = self.registry();
        if let Some(handle) = registry.loaded.get(id) {
            return Ok(handle.shared.info());
        }
        registry
            .stored
            .get(id)
            .cloned()
            .ok_or_else(|| SessionError::NotFound(id.to_owned()))
    }

    async fn delete_session(&self, id: &str) -> Result<(), SessionError> {
        let (handle, was_stored) = {
            let mut registry = self.registry();
            registry.names.release_session(id);
            (registry.loaded.remove(id), registry.stored.remove(id))
        };
        match &handle {
            Some(handle) => stop_session(handle).await,
            None if was_stored.is_some() => {}
            None => return Err(SessionError::NotFound(id.to_owned())),
        }
        // Its commands are gone with it: so is their temp directory.
        self.services.sandbox.tmp.remove(id);
        if let Some(store) = &self.services.store
            && let Err(err) = store.delete(id)
        {
            tracing::error!(session = id, %err, "cannot delete the session from the store");
        }
        for feature in &self.services.features {
            feature.deleted(id, &self.services);
        }
        // Last: its final events (a cancelled turn's end) went out before this.
        match (handle, was_stored) {
            (Some(handle), _) => handle
                .shared
                .hub
                .notify_watchers(SessionChangeKind::Deleted),
            (None, Some(info)) => {
                self.services
                    .watchers
                    .send(SessionChangeKind::Deleted, &info, None);
            }
            (None, None) => {}
        }
        // What the session held (its history, its buffers) is freed by now.
        self.services.memory.soon();
        Ok(())
    }

    /// Cancels every turn and waits (bounded) for the actors to wind down.
    pub async fn shutdown(&self, grace: Duration) {
        self.closing.store(true, Ordering::SeqCst);
        let handles: Vec<Arc<SessionHandle>> =
            self.registry().loaded.drain().map(|(_, h)| h).collect();
        let stops = handles.iter().map(|h| stop_session(h));
        if tokio::time::timeout(grace, futures::future::join_all(stops))
            .await
            .is_err()
        {
            tracing::warn!("some sessions did not stop within {grace:?}");
        }
        // After the sessions' last changes: the watchers send those, then end.
        self.services.watchers.close();
    }
}

async fn stop_session(handle: &SessionHandle) {
    // Closing cancels the running turn (its token is a child) and ends the actor loop
    // and every subscription of the session.
    handle.shared.closed.cancel();
    let task = handle.task.locked().take();
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
    // So does what its features run (their children are gone when this returns).
    handle.shared.features.stop().await;
}

/// The metadata of a session being made, before the kernel knows its info: the features
/// set their parts (`Feature::prepare`), the kernel the rest.
fn draft_meta() -> SessionMeta {
    SessionMeta {
        info: SessionInfo {
            parent: None,
            goal: None,
            routine: None,
            session_id: String::new(),
            cwd: String::new(),
            mode: amber_proto::Mode::default(),
            model: String::new(),
            title: String::new(),
            name: None,
            state: SessionState::Idle,
            created_at: String::new(),
            updated_at: String::new(),
            usage: Usage::default(),
            provider: None,
            agent: None,
            sandbox: None,
            worktree: None,
            max_budget_usd: None,
            max_tokens_total: None,
            environment: None,
        },
        system_prompt: String::new(),
        agent: None,
        sandbox: None,
        mcp_servers: Vec::new(),
        executor: None,
        model_follows_config: false,
    }
}

/// A name reserved for a session being made, given back on drop unless the session was.
struct NameClaim<'a> {
    manager: &'a SessionManager,
    name: Option<String>,
    id: String,
    kept: bool,
}

impl NameClaim<'_> {
    /// The session was made: the name stays with it.
    fn keep(&mut self) {
        self.kept = true;
    }
}

impl Drop for NameClaim<'_> {
    fn drop(&mut self) {
        if !self.kept
            && let Some(name) = &self.name
        {
            self.manager.registry().names.release(name, &self.id);
        }
    }
}

fn name_error(err: names::NameError) -> SessionError {
    SessionError::InvalidParams(format!("name: {err}"))
}

/// Where a fork's history ends: the first `messages` of the source's conversation, and
/// its events before seq `before_seq`.
pub struct ForkPoint {
    pub messages: usize,
    pub before_seq: u64,
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
