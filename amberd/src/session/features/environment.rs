//! The session's environment (`session/new {environment}`): a session whose tools run on an
//! executor gets its link here — made and opened at creation (so a host that cannot be
//! reached refuses the session at once), made again when the session is loaded from the
//! store (it connects at its first tool call) — and its tool host installed. The link's
//! changes reach the session's info (`SessionInfo.environment`) and its clients
//! (`environment_connected` / `_lost` / `_resumed`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use amber_executor::wire::{SessionOpenParams, ToolEnvSettings};
use amber_proto::sync::Locked;
use amber_proto::{
    EnvironmentInfo, EnvironmentState, EventKind, SandboxInfo, SandboxMode, SessionInfo,
    SessionNewParams,
};
use amber_store::SessionMeta;
use futures::future::BoxFuture;

use super::super::feature::{
    Admission, Attach, Feature, NewSession, Placement, SessionFeature, TurnStart,
};
use super::super::persist;
use super::super::services::Services;
use super::super::{SessionError, SessionShared};
use crate::environment::checkpoints::RemoteCheckpoints;
use crate::environment::host::RemoteToolHost;
use crate::environment::link::ExecutorLink;
use crate::environment::mirror;
use crate::environment::spec::{Launch, Target};

/// The order of a session's checkpoint restore among its arrival hooks (after a fleet
/// session's setup).
pub(crate) const ARRIVAL_RESTORE: u8 = 1;

/// The feature: links made at `session/new`, waiting for their session to attach.
pub(crate) struct EnvironmentFeature {
    made: Mutex<HashMap<String, Arc<ExecutorLink>>>,
    /// The links to executors that dial in, one per name, shared by the sessions on it.
    dialled: Mutex<HashMap<String, std::sync::Weak<ExecutorLink>>>,
}

impl EnvironmentFeature {
    pub(crate) fn new() -> Self {
        Self {
            made: Mutex::new(HashMap::new()),
            dialled: Mutex::new(HashMap::new()),
        }
    }

    /// The link to the executor `launch` reaches: a new one (an executor amberd starts is a
    /// session's own), or the one shared by every session on an executor that dials in.
    fn link(&self, services: &Services, spec: String, launch: Launch) -> Arc<ExecutorLink> {
        let make = |launch: Launch| {
            ExecutorLink::new(
                spec.clone(),
                launch,
                services.tool_env.vars().to_vec(),
                Some(Arc::clone(&services.dial_ins)),
            )
        };
        let Some(name) = launch.dial_in().map(str::to_owned) else {
            return make(launch);
        };
        let mut dialled = self.dialled.locked();
        if let Some(link) = dialled.get(&name).and_then(std::sync::Weak::upgrade) {
            return link;
        }
        let link = make(launch);
        dialled.insert(name, Arc::downgrade(&link));
        link
    }
}

/// Sets the session's info from the event's environment and publishes the event.
fn publish(shared: &SessionShared, kind: EventKind) {
    let environment = match &kind {
        EventKind::EnvironmentConnected { environment, .. }
        | EventKind::EnvironmentLost { environment }
        | EventKind::EnvironmentResumed { environment, .. } => Some(environment.clone()),
        _ => None,
    };
    let mut kind = kind;
    let turn = {
        let mut live = shared.lock_live();
        if let Some(mut environment) = environment {
            // The link knows nothing of the fleet: a fleet session keeps its place.
            let fleet = live.info.environment.as_ref().and_then(|e| e.fleet.clone());
            environment.fleet = fleet;
            if let EventKind::EnvironmentConnected { environment: e, .. }
            | EventKind::EnvironmentLost { environment: e }
            | EventKind::EnvironmentResumed { environment: e, .. } = &mut kind
            {
                e.fleet = environment.fleet.clone();
            }
            live.info.environment = Some(environment);
        }
        live.turn_id.clone()
    };
    shared.hub.publish(turn.as_deref(), kind);
}

/// The environment `params` name, checked; `None` for a local one.
fn remote(params: &SessionNewParams) -> Result<Option<Target>, String> {
    let target = Target::parse(params.environment.as_deref())?;
    Ok((!target.is_local()).then_some(target))
}

/// How the config says to reach `target`; a fleet session's, by its id.
fn launch(services: &Services, target: &Target, id: &str) -> Result<Launch, SessionError> {
    if *target == Target::Fleet {
        // Attached again within the window after which its runner is gone.
        let heartbeat = services.fleet.config().heartbeat_secs.max(1);
        return Ok(Launch::fleet(
            id,
            std::time::Duration::from_secs(heartbeat * 4),
        ));
    }
    Launch::of(target, &services.live().config.environments).map_err(SessionError::InvalidParams)
}

/// After amberd rewrote a remote session's rules file in its mirror (an `allow_always`
/// answer): the workspace's own file gets the same bytes, so the next mirroring keeps the
/// rule.
async fn write_rules_through(link: &Arc<ExecutorLink>, shared: &SessionShared) {
    let path = shared.config_root.join(amber_executor::config_files::RULES);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(err) => {
            tracing::warn!(session = %shared.id, %err, "cannot read the mirrored rules file");
            return;
        }
    };
    let params = amber_executor::wire::WorkspaceRulesParams {
        session: shared.id.clone(),
        data: base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bytes),
    };
    if let Err(err) = link
        .call(amber_executor::wire::method::WORKSPACE_RULES, &params)
        .await
    {
        tracing::warn!(session = %shared.id, "the rule is kept for this session only: the workspace's rules file was not written: {}", err.message);
    }
}

/// The link of a session whose tools run on an executor.
pub(crate) fn link_of(shared: &SessionShared) -> Option<Arc<ExecutorLink>> {
    shared
        .feature::<SessionEnvironment>()
        .map(|environment| Arc::clone(&environment.link))
}

impl Feature for EnvironmentFeature {
    fn deleted(&self, id: &str, services: &Services) {
        let mirror = mirror::dir_of(&services.data_dir, id);
        if let Err(err) = std::fs::remove_dir_all(&mirror)
            && err.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(session = %id, %err, "cannot remove the configuration mirror");
        }
    }

    fn check_new(&self, params: &SessionNewParams) -> Result<(), String> {
        if remote(params)?.is_some() && params.worktree.is_some() {
            return Err(
                "a worktree is made on amberd's machine: it cannot be combined with an \
                 executor's environment"
                    .to_owned(),
            );
        }
        Ok(())
    }

    fn shape_info(&self, new: &NewSession<'_>, info: &mut SessionInfo) -> Result<(), SessionError> {
        let Some(target) = remote(new.params).map_err(SessionError::InvalidParams)? else {
            return Ok(());
        };
        launch(new.services, &target, new.id)?;
        let fleet = (target == Target::Fleet).then(|| super::fleet::info_of(new.params, new.id));
        info.environment = Some(EnvironmentInfo {
            spec: new
                .params
                .environment
                .clone()
                .unwrap_or_default()
                .trim()
                .to_owned(),
            state: if fleet.is_some() {
                EnvironmentState::Queued
            } else {
                EnvironmentState::Connecting
            },
            executor: None,
            reason: None,
            fleet,
        });
        Ok(())
    }

    fn describe_stored(&self, meta: &mut SessionMeta, _services: &Services) {
        if let Some(environment) = &mut meta.info.environment {
            // A stored session has no link; it connects at its next tool call (a fleet
            // session's runner takes it then).
            environment.state = if environment.fleet.is_some() {
                EnvironmentState::Queued
            } else {
                EnvironmentState::Connecting
            };
            environment.executor = None;
            environment.reason = None;
        }
    }

    /// Starts the executor and opens the session there: its workspace is the one the
    /// executor resolved.
    fn place(&self, new: &NewSession<'_>) -> Result<Option<Placement>, SessionError> {
        let Some(target) = remote(new.params).map_err(SessionError::InvalidParams)? else {
            return Ok(None);
        };
        let launch = launch(new.services, &target, new.id)?;
        if target == Target::Fleet {
            // No runner has it yet: it opens there once one takes it.
            let cwd = new.services.fleet.workspace_of(new.id);
            let link = self.link(new.services, "fleet".to_owned(), launch);
            link.remember(open_params(
                new.id,
                cwd.clone(),
                new.services,
                new.params.sandbox.as_ref(),
            ));
            self.made
                .locked()
                .insert(new.id.to_owned(), Arc::clone(&link));
            let session = new.id.to_owned();
            return Ok(Some(Placement {
                cwd,
                worktree: None,
                undo: Box::new(move || {
                    if let Ok(rt) = tokio::runtime::Handle::try_current() {
                        rt.spawn(async move { link.close(&session).await });
                    }
                }),
            }));
        }
        let workspace = Some(new.params.cwd.trim())
            .filter(|cwd| !cwd.is_empty())
            .map(str::to_owned)
            .or_else(|| launch.default_path.clone())
            .ok_or_else(|| SessionError::InvalidWorkspace {
                path: String::new(),
                reason: "give `cwd`, or a path in the environment".to_owned(),
            })?;
        let spec = new
            .params
            .environment
            .clone()
            .unwrap_or_default()
            .trim()
            .to_owned();
        let link = self.link(new.services, spec.clone(), launch);
        let params = open_params(
            new.id,
            PathBuf::from(&workspace),
            new.services,
            new.params.sandbox.as_ref(),
        );
        let opened = persist::blocking(|| {
            tokio::runtime::Handle::try_current()
                .map_err(|e| e.to_string())
                .and_then(|rt| rt.block_on(link.open(params)))
        })
        .map_err(|reason| SessionError::InvalidWorkspace {
            path: format!("{workspace} in {spec}"),
            reason,
        })?;
        self.made
            .locked()
            .insert(new.id.to_owned(), Arc::clone(&link));
        let session = new.id.to_owned();
        Ok(Some(Placement {
            cwd: opened.workspace,
            worktree: None,
            undo: Box::new(move || {
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move { link.close(&session).await });
                }
            }),
        }))
    }

    fn attach(&self, session: &Attach<'_>) -> Option<Arc<dyn SessionFeature>> {
        let environment = session.meta.info.environment.as_ref()?;
        let link = match self.made.locked().remove(session.id) {
            Some(link) => link,
            None => {
                let target = Target::parse(Some(&environment.spec)).ok()?;
                let launch = launch(session.services, &target, session.id).ok()?;
                let link = self.link(session.services, environment.spec.clone(), launch);
                // Opened at its first connection, on the executor it ran on if that still runs.
                let params = open_params(
                    session.id,
                    session.workspace.to_owned(),
                    session.services,
                    session.meta.sandbox.as_ref(),
                );
                link.remember(params);
                if let Some(executor) = &session.meta.executor {
                    link.resume_from(executor.id.clone(), executor.token.clone());
                }
                link
            }
        };
        Some(Arc::new(SessionEnvironment {
            link,
            id: session.id.to_owned(),
            services: Arc::clone(session.services),
            fleet: environment.fleet.is_some(),
        }))
    }
}

/// `sandbox`: the session's own request (its network allowlist entries join the config's).
fn open_params(
    id: &str,
    workspace: PathBuf,
    services: &Services,
    sandbox: Option<&amber_proto::SandboxRequest>,
) -> SessionOpenParams {
    let config = &services.live().config;
    let (allow, deny) = super::network::entries(&config.sandbox, sandbox);
    SessionOpenParams {
        session: id.to_owned(),
        workspace,
        // Until the first call says the mode's: the most careful one.
        sandbox: SandboxInfo::new(
            SandboxMode::ReadOnly,
            amber_proto::NetworkMode::from_bool(false),
        ),
        // `[sandbox] writable_roots` are paths of amberd's machine.
        writable_roots: Vec::new(),
        // Hidden and masked there too, should the executor share amberd's machine.
        hidden: services.sandbox.hidden.clone(),
        masked: services.sandbox.masked.clone(),
        guarded_pids: vec![std::process::id()],
        // The executor's egress proxy decides by these (it can ask nobody).
        network: Some(amber_executor::wire::NetworkEntries { allow, deny }),
        tool_env: ToolEnvSettings {
            config: serde_json::to_value(&config.tools.env).ok(),
            secret_names: super::super::services::provider_key_vars(config)
                .into_iter()
                .collect(),
        },
    }
}

/// One session's link and tool host.
pub(crate) struct SessionEnvironment {
    link: Arc<ExecutorLink>,
    id: String,
    services: Arc<Services>,
    /// A fleet session: each new runner's workspace is a fresh clone, which the newest
    /// checkpoint is restored over.
    fleet: bool,
}

impl SessionFeature for SessionEnvironment {
    fn started(&self, shared: &Arc<SessionShared>, restored: bool) {
        let session = Arc::downgrade(shared);
        self.link.bind(
            &self.id,
            Box::new(move |kind| {
                let Some(shared) = session.upgrade() else {
                    return;
                };
                // A new executor's id and token are kept at once: a daemon killed now attaches
                // to it when it starts again.
                let keep = matches!(
                    kind,
                    EventKind::EnvironmentConnected { .. } | EventKind::EnvironmentResumed { .. }
                );
                publish(&shared, kind);
                if keep {
                    shared.save_meta();
                }
            }),
        );
        let services = Arc::clone(&self.services);
        let deny = move || {
            services
                .live()
                .config
                .rules
                .iter()
                .filter(|r| r.decision == amber_policy::RuleDecision::Deny)
                .cloned()
                .collect()
        };
        // Its checkpoints are taken on the executor, over the same link.
        if let (Some(checkpoints), Ok(runtime)) = (
            shared.feature::<super::checkpoints::Checkpointing>(),
            tokio::runtime::Handle::try_current(),
        ) {
            checkpoints.0.set_remote(Arc::new(RemoteCheckpoints::new(
                Arc::clone(&self.link),
                self.id.clone(),
                runtime.clone(),
            )));
            // A new executor after a gone one: an empty workspace (a fleet session's fresh
            // clone) gets the newest checkpoint before any call reaches it.
            let checkpoints = Arc::clone(&checkpoints.0);
            let session = self.id.clone();
            let over = if self.fleet {
                crate::checkpoints::ContinueOver::Clone
            } else {
                crate::checkpoints::ContinueOver::Empty
            };
            self.link.on_arrival(
                &self.id,
                ARRIVAL_RESTORE,
                Arc::new(move |direct| {
                    let checkpoints = Arc::clone(&checkpoints);
                    let remote: Arc<dyn crate::checkpoints::RemoteWorkspace> = Arc::new(
                        RemoteCheckpoints::direct(direct, session.clone(), runtime.clone()),
                    );
                    Box::pin(async move {
                        tokio::task::spawn_blocking(move || checkpoints.continue_in(&remote, over))
                            .await
                            .ok()
                            .flatten()
                    })
                }),
            );
        }
        let host = RemoteToolHost::new(Arc::clone(&self.link), shared.id.clone(), Box::new(deny));
        shared.tools.set_host(Arc::new(if self.fleet {
            host.moving_on_loss()
        } else {
            host
        }));
        // A new session's link answered already (session/new's answer says so); one loaded
        // again attaches now, in the background.
        {
            let mut live = shared.lock_live();
            let fleet = live.info.environment.as_ref().and_then(|e| e.fleet.clone());
            let mut environment = self.link.info();
            if fleet.is_some() {
                environment.state = EnvironmentState::Queued;
            }
            environment.fleet = fleet;
            live.info.environment = Some(environment);
        }
        if restored {
            let link = Arc::clone(&self.link);
            tokio::spawn(async move {
                if let Err(err) = link.connect().await {
                    tracing::warn!("cannot reach the session's executor yet: {err}");
                }
            });
        } else {
            shared.save_meta();
        }
    }

    fn save(&self, meta: &mut SessionMeta) {
        meta.executor = self
            .link
            .attach_info()
            .map(|(id, token)| amber_store::ExecutorAttach { id, token });
    }

    /// The prompt's environment block describes the executor's machine, not amberd's: set
    /// before the turn's first refresh of the head, once per session load. The workspace's
    /// configuration files are mirrored again; when they changed, the trust questions of
    /// the turn's start are put again, about what is there now.
    fn before_turn<'a>(&'a self, start: &'a TurnStart<'a>) -> BoxFuture<'a, Admission> {
        Box::pin(async move {
            let turn = &start.turn;
            let shared = turn.shared;
            if !shared.head.has_environment() {
                let block =
                    crate::environment::facts::block(&self.link, &self.id, &shared.workspace).await;
                shared.head.set_environment(block);
            }
            let names = turn.services.live().config.agent.instruction_files.clone();
            match mirror::sync(&self.link, &self.id, &shared.config_root, &names).await {
                Ok(true) => {
                    shared
                        .trust
                        .trust_for_turn(shared, turn.services, turn.turn_id, turn.cancel)
                        .await;
                }
                Ok(false) => {}
                Err(err) => {
                    tracing::warn!(session = %self.id, "the workspace's configuration was not read: {err}");
                }
            }
            Admission::Proceed
        })
    }

    fn rules_rewritten<'a>(&'a self, shared: &'a SessionShared) -> BoxFuture<'a, ()> {
        Box::pin(write_rules_through(&self.link, shared))
    }

    fn stop(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.link.close(&self.id))
    }
}
