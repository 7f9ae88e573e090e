//! Assembling a live session from its parts — new or restored from the store — and
//! starting its actor.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};

use amber_policy::{Grants, WorkspaceRules};
use amber_store::SessionMeta;
use amber_store::context::Context;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::approvals::Approvals;
use super::feature::{Attach, Features};
use super::hub::EventHub;
use super::persist::Persistence;
use super::services::Services;
use super::subagents::SessionSubagents;
use super::{Live, SessionError, SessionHandle, SessionShared, actor};
use crate::agent::prompt::PromptHead;
use crate::instructions::Instructions;
use amber_tools::SessionTools;

/// Everything a session starts from.
pub(super) struct Parts {
    /// The session as the store keeps it (for a new session: as it will keep it).
    pub meta: SessionMeta,
    pub workspace: PathBuf,
    /// The context, journaled to the store when there is one.
    pub context: Context,
    pub hub: EventHub,
    pub persistence: Option<Arc<Persistence>>,
}

/// Builds the shared state, attaches the features, installs the sub-agent runner and
/// starts the actor. `restored`: the session came back from the store.
pub(super) fn spawn(services: &Arc<Services>, parts: Parts, restored: bool) -> Arc<SessionHandle> {
    let Parts {
        meta,
        workspace,
        context,
        hub,
        persistence,
    } = parts;
    let info = meta.info.clone();
    let system_prompt = meta.system_prompt.clone();
    let id = info.session_id.clone();
    // A workspace elsewhere: its configuration is read from the mirror of it.
    let config_root = if info.environment.is_some() {
        let mirror = crate::environment::mirror::dir_of(&services.data_dir, &id);
        if let Err(err) = std::fs::create_dir_all(&mirror) {
            tracing::warn!(session = %id, %err, "cannot make the configuration mirror");
        }
        mirror
    } else {
        workspace.clone()
    };
    let rules = WorkspaceRules::new(&config_root);
    let messages = Arc::new(context.messages().to_vec());
    let shared = Arc::new_cyclic(|weak: &Weak<SessionShared>| SessionShared {
        tools: Arc::new(SessionTools::new({
            let weak = weak.clone();
            move |kind| {
                if let Some(shared) = weak.upgrade() {
                    let turn = shared.lock_live().turn_id.clone();
                    shared.hub.publish(turn.as_deref(), kind);
                }
            }
        })),
        switching: Mutex::new(()),
        trust: super::trust::SessionTrust::default(),
        features: Features::attach(
            &services.features,
            &Attach {
                session: weak.clone(),
                id: &id,
                workspace: &workspace,
                services,
                meta: &meta,
            },
        ),
        id,
        skills_dir: amber_tools::skills::workspace_skills_dir(&services.data_dir, &config_root),
        head: PromptHead::new(
            &config_root,
            &services.data_dir,
            Instructions::new(
                &config_root,
                &services.live().config.agent.instruction_files,
                services.live().config.agent.instructions_max_bytes,
            ),
        ),
        workspace,
        config_root,
        system_prompt,
        hub,
        persistence,
        closed: CancellationToken::new(),
        // Approver watches approve for every session, this one included.
        approvals: Approvals::new(services.watchers.approvers()),
        grants: Mutex::new(Grants::default()),
        rules: Mutex::new(rules),
        live: Mutex::new(Live {
            info,
            touched: std::time::Instant::now(),
            turn_id: None,
            messages,
            cancel: None,
            subagent_usage: amber_proto::Usage::default(),
            queued: 0,
            model_follows_config: meta.model_follows_config,
            marked: false,
            inbox: super::inbox::Inbox::default(),
        }),
        waker: std::sync::OnceLock::new(),
    });
    shared.tools.set_session_id(&shared.id);
    if let Some(environment) = &meta.info.environment {
        shared.tools.set_config_root(&shared.config_root);
        shared.trust.key_mirror(
            &shared.config_root,
            remote_trust_key(environment, &shared.workspace),
        );
    }
    // Before the actor runs: a restore's closing events are news to the watchers.
    shared.hub.watch_with(super::watch::WatchTap::new(
        services.watchers.clone(),
        Arc::downgrade(&shared),
    ));
    // Before the actor can run a command: every one starts in the session's sandbox.
    shared.install_mode(None);
    shared.tools.set_tool_env(services.tool_env.clone());
    shared.tools.set_subagents(Arc::new(SessionSubagents {
        shared: Arc::downgrade(&shared),
        services: services.clone(),
    }));
    shared
        .tools
        .set_denied_paths(Arc::new(super::gate::SessionDeniedPaths {
            shared: Arc::downgrade(&shared),
            services: services.clone(),
        }));
    shared.features.started(&shared, restored);
    let (tx, rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(actor::run(shared.clone(), services.clone(), rx, context));
    let handle = Arc::new(SessionHandle {
        shared,
        commands: tx,
        task: Mutex::new(Some(task)),
        prompt_order: Mutex::new(()),
    });
    handle.shared.set_waker(Arc::downgrade(&handle));
    handle
}

/// `session/new`'s `cwd`: absolute, existing, a directory; symlinks resolved; not too broad
/// (`workspace_root`) unless `allow_broad`. `home` is the daemon's `$HOME`.
pub(super) fn validate_workspace(
    cwd: &str,
    home: Option<&std::path::Path>,
    allow_broad: bool,
) -> Result<PathBuf, SessionError> {
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
    super::workspace_root::refuse_broad(&canonical, home, allow_broad)
        .map_err(|reason| invalid(&reason))?;
    Ok(canonical)
}

/// What a remote session's configuration is trusted under: its repository for a fleet
/// session (every clone of it, on any runner), else its executor and workspace path.
fn remote_trust_key(
    environment: &amber_proto::EnvironmentInfo,
    workspace: &std::path::Path,
) -> std::path::PathBuf {
    let identity = match &environment.fleet {
        Some(fleet) => format!("fleet\n{}", fleet.repo),
        None => format!("{}\n{}", environment.spec, workspace.display()),
    };
    std::path::Path::new("/amber-remote").join(&blake3::hash(identity.as_bytes()).to_hex()[..32])
}
