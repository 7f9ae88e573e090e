//! Fleet sessions (`session/new {environment: "fleet", repo, ref, setup, labels,
//! priority}`): the session waits in the fleet's queue until a runner takes it, runs there
//! as on any executor (the environment feature's link and tool host), and leaves the runner
//! when idle; its next turn queues it again, and the next runner restores its newest
//! checkpoint over a fresh clone.
//!
//! Its place in the fleet ([`FleetInfo`]) is kept in its info (`environment.fleet`) and so
//! in its metadata: a queued or assigned session is loaded again when amberd starts and
//! takes its place again. Each new runner runs the session's `setup` commands in its
//! sandbox before anything else reaches it (`fleet_setup` events). A session that asked
//! for a branch (`push`) has its runner commit and push the workspace at the end of each
//! completed turn, before `turn_completed` (`fleet_pushed`); it keeps the commit it pushed
//! last, which the next push must find at the branch's tip (never forced).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use amber_executor::wire::{
    SessionSandboxParams, WorkspacePushParams, WorkspacePushResult, method,
};
use amber_proto::sync::Locked;
use amber_proto::{
    EnvironmentState, EventKind, FleetInfo, FleetPush, FleetState, SessionInfo, SessionNewParams,
    SessionState, StopReason,
};
use amber_tools::gate::GateCall;
use futures::future::BoxFuture;

use super::super::SessionShared;
use super::super::feature::{
    Admission, Attach, Feature, SessionFeature, ToolAdvice, Turn, TurnStart,
};
use super::super::services::Services;
use super::environment::link_of;
use crate::environment::link::{Direct, ExecutorLink};
use crate::environment::spec::Target;
use crate::fleet::{Fleet, FleetSession};

/// How long one setup command may run.
const SETUP_TIMEOUT: Duration = Duration::from_secs(1800);
/// The most setup commands a session may give.
const MAX_SETUP: usize = 32;
/// The longest output tail of a setup command an event carries.
const SETUP_OUTPUT_CHARS: usize = 4000;
/// The order of the setup among a session's arrival hooks: before its checkpoint restore.
const ARRIVAL_SETUP: u8 = 0;
/// How often an idle release looks again at a session in use outside a turn.
const BUSY_RECHECK: Duration = Duration::from_millis(200);

/// How long the push at a turn's end may take, all told.
const PUSH_TIMEOUT: Duration = Duration::from_secs(1800);
/// The longest first line of a pushed commit's message.
const SUBJECT_CHARS: usize = 72;

/// The feature.
pub(crate) struct FleetFeature;

/// The branch a session pushes to when `push` names none.
fn default_branch(id: &str) -> String {
    format!("amber/{id}")
}

/// The fleet info `session/new` asks for (checked already), for session `id`.
pub(crate) fn info_of(params: &SessionNewParams, id: &str) -> FleetInfo {
    FleetInfo {
        repo: params.repo.clone().unwrap_or_default().trim().to_owned(),
        git_ref: params.git_ref.clone().unwrap_or_default().trim().to_owned(),
        setup: params.setup.clone(),
        labels: params.labels.clone(),
        priority: params.priority.unwrap_or(0),
        state: FleetState::Queued,
        runner: None,
        pool: None,
        attempts: 0,
        push: params.push.as_ref().map(|push| FleetPush {
            branch: push
                .branch
                .as_deref()
                .map(str::trim)
                .filter(|b| !b.is_empty())
                .map_or_else(|| default_branch(id), str::to_owned),
            commit: None,
        }),
    }
}

fn is_fleet(params: &SessionNewParams) -> bool {
    matches!(
        Target::parse(params.environment.as_deref()),
        Ok(Target::Fleet)
    )
}

impl Feature for FleetFeature {
    fn check_new(&self, params: &SessionNewParams) -> Result<(), String> {
        if !is_fleet(params) {
            let named = params.repo.is_some()
                || params.git_ref.is_some()
                || !params.setup.is_empty()
                || !params.labels.is_empty()
                || params.priority.is_some()
                || params.push.is_some();
            if named {
                return Err(
                    "`repo`, `ref`, `setup`, `labels`, `priority` and `push` are for `environment: \"fleet\"`"
                        .to_owned(),
                );
            }
            return Ok(());
        }
        let repo = params.repo.as_deref().map(str::trim).unwrap_or("");
        let git_ref = params.git_ref.as_deref().map(str::trim).unwrap_or("");
        if repo.is_empty() || git_ref.is_empty() {
            return Err("a fleet session needs `repo` and `ref`".to_owned());
        }
        amber_executor::provision::check_repo(repo)?;
        amber_executor::provision::check_ref(git_ref)?;
        if params.worktree.is_some() {
            return Err(
                "a fleet session's workspace is a clone on its runner: no worktree".to_owned(),
            );
        }
        if params.setup.len() > MAX_SETUP {
            return Err(format!("at most {MAX_SETUP} setup commands"));
        }
        if params
            .setup
            .iter()
            .any(|c| c.trim().is_empty() || c.contains('\0'))
        {
            return Err("a setup command is empty or holds a NUL".to_owned());
        }
        if let Some(branch) = params
            .push
            .as_ref()
            .and_then(|p| p.branch.as_deref())
            .map(str::trim)
            .filter(|b| !b.is_empty())
        {
            amber_executor::publish::check_branch(branch)?;
        }
        for (key, value) in &params.labels {
            if !crate::fleet::config::is_word(key) || !crate::fleet::config::is_word(value) {
                return Err(format!(
                    "label `{key}={value}`: keys and values are letters, digits, `-`, `_` and `.`"
                ));
            }
        }
        Ok(())
    }

    fn attach(&self, session: &Attach<'_>) -> Option<Arc<dyn SessionFeature>> {
        let fleet = session.meta.info.environment.as_ref()?.fleet.clone()?;
        Some(Arc::new(SessionFleet {
            id: session.id.to_owned(),
            fleet: Arc::clone(&session.services.fleet),
            restored_info: fleet,
            turns: Arc::new(AtomicU64::new(0)),
            moving: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            watcher: std::sync::OnceLock::new(),
            subject: std::sync::Mutex::new(String::new()),
        }))
    }

    fn keeps_loaded(&self, info: &SessionInfo) -> bool {
        info.environment
            .as_ref()
            .and_then(|e| e.fleet.as_ref())
            .is_some_and(|f| matches!(f.state, FleetState::Queued | FleetState::Assigned))
    }

    fn turns_wait(&self, info: &SessionInfo) -> bool {
        info.environment.as_ref().is_some_and(|e| e.fleet.is_some())
    }

    fn deleted(&self, id: &str, services: &Services) {
        services.fleet.forget(id);
    }
}

/// One fleet session's part.
struct SessionFleet {
    id: String,
    fleet: Arc<Fleet>,
    /// Where its metadata said it stood when it was attached.
    restored_info: FleetInfo,
    /// Counts ended turns: an idle release fires only if no turn ended since it was set.
    turns: Arc<AtomicU64>,
    /// Its runner is out of grace: it moves at its next tool boundary.
    moving: Arc<std::sync::atomic::AtomicBool>,
    watcher: std::sync::OnceLock<Arc<Watcher>>,
    /// The running turn's prompt, as a commit's subject.
    subject: std::sync::Mutex<String>,
}

/// What the fleet tells the session, kept in its info and told to its clients.
struct Watcher {
    session: Weak<SessionShared>,
    link: Weak<ExecutorLink>,
    id: String,
    fleet: Weak<Fleet>,
    turns: Arc<AtomicU64>,
    /// Its runner is out of grace: it moves at its next tool boundary.
    moving: Arc<std::sync::atomic::AtomicBool>,
    /// Itself, to queue itself again.
    me: Weak<Watcher>,
    /// The newest change of its place kept (the fleet numbers them in order).
    version: AtomicU64,
}

/// Releases the session from its runner after `idle`, when it is still idle then and no
/// turn ended meanwhile (`ended` is the count of ended turns when this was set).
fn release_when_idle(
    session: Weak<SessionShared>,
    link: Arc<ExecutorLink>,
    fleet: Arc<Fleet>,
    id: String,
    turns: Arc<AtomicU64>,
    ended: u64,
) {
    let idle = Duration::from_secs(fleet.config().idle_release_secs);
    tokio::spawn(async move {
        tokio::time::sleep(idle).await;
        // In use outside a turn (a rewind): looked at again once it is not.
        while link.busy() {
            tokio::time::sleep(BUSY_RECHECK.max(idle)).await;
        }
        let Some(shared) = session.upgrade() else {
            return;
        };
        let (idle_now, assigned) = {
            let live = shared.lock_live();
            let assigned = live
                .info
                .environment
                .as_ref()
                .and_then(|e| e.fleet.as_ref())
                .is_some_and(|f| f.state == FleetState::Assigned);
            (
                live.info.state == SessionState::Idle && live.queued == 0,
                assigned,
            )
        };
        if !idle_now || !assigned || turns.load(Ordering::SeqCst) != ended {
            return;
        }
        // Closed on the runner (its slot frees at once), then parked here.
        link.leave(&id, EnvironmentState::Queued).await;
        fleet.release(&id, "idle");
    });
}

impl Watcher {
    /// A call needs the session's workspace: a parked (or failed) session is queued again.
    fn wanted(&self) {
        let (Some(shared), Some(fleet)) = (self.session.upgrade(), self.fleet.upgrade()) else {
            return;
        };
        let info = shared
            .lock_live()
            .info
            .environment
            .as_ref()
            .and_then(|e| e.fleet.clone());
        let Some(info) =
            info.filter(|i| matches!(i.state, FleetState::Parked | FleetState::Failed))
        else {
            return;
        };
        let Some(this) = self.me.upgrade() else {
            return;
        };
        fleet.enqueue(
            &self.id,
            info,
            this,
            Some("its workspace is needed".to_owned()),
        );
    }

    /// A runner holds it: its workspace is made now (setup, newest checkpoint) or attached
    /// again, whether a turn waits or not; an idle session leaves the runner again after
    /// the idle time.
    fn on_runner(&self) {
        let (Some(link), Some(fleet)) = (self.link.upgrade(), self.fleet.upgrade()) else {
            return;
        };
        let session = self.session.clone();
        let (id, turns) = (self.id.clone(), Arc::clone(&self.turns));
        tokio::spawn(async move {
            let ended = turns.load(Ordering::SeqCst);
            if let Err(err) = link.connect().await {
                tracing::warn!(session = %id, "the runner's workspace is not ready: {err}");
                return;
            }
            release_when_idle(session, link, fleet, id, turns, ended);
        });
    }
}

impl FleetSession for Watcher {
    fn changed(&self, fleet: &FleetInfo, reason: Option<&str>, version: u64) {
        let Some(shared) = self.session.upgrade() else {
            return;
        };
        // Told late (another thread told a later change first): already overtaken.
        if self.version.fetch_max(version, Ordering::SeqCst) > version {
            return;
        }
        let (environment, turn) = {
            let mut live = shared.lock_live();
            let Some(environment) = live.info.environment.as_mut() else {
                return;
            };
            // The session's own record of its pushes outlives the fleet's copy of its info.
            let pushed = environment.fleet.as_ref().and_then(|f| f.push.clone());
            let mut fleet = fleet.clone();
            if pushed.is_some() {
                fleet.push = pushed;
            }
            environment.fleet = Some(fleet.clone());
            if matches!(
                fleet.state,
                FleetState::Queued | FleetState::Parked | FleetState::Failed
            ) {
                environment.state = EnvironmentState::Queued;
                environment.executor = None;
            }
            environment.reason = reason.map(str::to_owned);
            (environment.clone(), live.turn_id.clone())
        };
        shared.hub.publish(
            turn.as_deref(),
            EventKind::FleetChanged {
                environment,
                reason: reason.map(str::to_owned),
            },
        );
        shared.save_meta();
        if fleet.state != FleetState::Assigned {
            return;
        }
        self.on_runner();
    }

    fn runner_lost(&self, reason: &str) {
        if let Some(link) = self.link.upgrade() {
            link.abandon(reason);
        }
    }

    fn park(&self) {
        let Some(shared) = self.session.upgrade() else {
            return;
        };
        let idle = {
            let live = shared.lock_live();
            live.info.state == SessionState::Idle && live.queued == 0
        };
        if !idle {
            // A turn runs: it moves before its next tool call (`before_tool`).
            self.moving.store(true, Ordering::SeqCst);
            return;
        }
        // Idle: it leaves now, and its next turn queues it again.
        let (Some(link), Some(fleet)) = (self.link.upgrade(), self.fleet.upgrade()) else {
            return;
        };
        let id = self.id.clone();
        tokio::spawn(async move {
            link.leave(&id, EnvironmentState::Queued).await;
            fleet.release(&id, "its runner is shutting down");
        });
    }
}

impl SessionFleet {
    fn watcher(&self) -> Option<Arc<Watcher>> {
        self.watcher.get().cloned()
    }

    /// Queues it again (after a release or a failure): the link, which keeps what opens
    /// the session, opens it on the next runner.
    fn queue_again(&self, shared: &SessionShared, reason: &str) {
        let (Some(watcher), Some(info)) = (self.watcher(), self.current(shared)) else {
            return;
        };
        self.fleet
            .enqueue(&self.id, info, watcher, Some(reason.to_owned()));
    }

    fn current(&self, shared: &SessionShared) -> Option<FleetInfo> {
        shared.lock_live().info.environment.as_ref()?.fleet.clone()
    }

    /// Waits until a runner holds it and its executor answered (setup and restore done).
    async fn wait_for_runner(
        &self,
        shared: &SessionShared,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<(), String> {
        let Some(link) = link_of(shared) else {
            return Ok(());
        };
        loop {
            let Some(info) = self.current(shared) else {
                return Ok(());
            };
            match info.state {
                FleetState::Failed => {
                    let reason = shared
                        .lock_live()
                        .info
                        .environment
                        .as_ref()
                        .and_then(|e| e.reason.clone())
                        .unwrap_or_else(|| "its workspace could not be made".to_owned());
                    return Err(reason);
                }
                FleetState::Assigned => {
                    let connected = tokio::select! {
                        connected = link.connect() => connected,
                        () = cancel.cancelled() => return Ok(()),
                    };
                    match connected {
                        Ok(())
                            if self
                                .current(shared)
                                .is_some_and(|i| i.state == FleetState::Assigned) =>
                        {
                            return Ok(());
                        }
                        Ok(()) => continue,
                        Err(err) => {
                            if self
                                .current(shared)
                                .is_some_and(|i| i.state == FleetState::Failed)
                            {
                                continue;
                            }
                            tracing::debug!(session = %self.id, "the runner's connection failed: {err}");
                        }
                    }
                }
                FleetState::Queued | FleetState::Parked => {}
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(50)) => {}
                () = cancel.cancelled() => return Ok(()),
            }
        }
    }
}

impl SessionFeature for SessionFleet {
    fn started(&self, shared: &Arc<SessionShared>, restored: bool) {
        let Some(link) = link_of(shared) else {
            return;
        };
        let watcher = Arc::new_cyclic(|me| Watcher {
            session: Arc::downgrade(shared),
            link: Arc::downgrade(&link),
            id: self.id.clone(),
            fleet: Arc::downgrade(&self.fleet),
            turns: Arc::clone(&self.turns),
            moving: Arc::clone(&self.moving),
            me: me.clone(),
            version: AtomicU64::new(0),
        });
        let _ = self.watcher.set(Arc::clone(&watcher));
        // Each new runner: the setup commands, in the session's sandbox, first.
        let session = Arc::downgrade(shared);
        let id = self.id.clone();
        let fleet = Arc::clone(&self.fleet);
        link.on_arrival(
            &self.id,
            ARRIVAL_SETUP,
            Arc::new(move |direct| {
                let session = session.clone();
                let id = id.clone();
                let fleet = Arc::clone(&fleet);
                Box::pin(async move {
                    if let Some(shared) = session.upgrade()
                        && let Err(reason) = run_setup(&shared, &id, &direct).await
                    {
                        fleet.fail(&id, &reason);
                    }
                    None
                })
            }),
        );
        // A call that needs the workspace while no runner holds the session (a rewind of
        // a parked session) queues it again.
        let wanted = Arc::downgrade(&watcher);
        link.when_wanted(Arc::new(move || {
            if let Some(watcher) = wanted.upgrade() {
                watcher.wanted();
            }
        }));
        let info = self.restored_info.clone();
        if restored {
            let assigned = info.state == FleetState::Assigned;
            self.fleet.watch(
                &self.id,
                info,
                Arc::clone(&watcher) as Arc<dyn FleetSession>,
            );
            if assigned {
                // Back on its runner after amberd restarted: attached again, and released if
                // it stays idle.
                watcher.on_runner();
            }
        } else {
            self.fleet.enqueue(&self.id, info, watcher, None);
        }
    }

    fn before_turn<'a>(&'a self, start: &'a TurnStart<'a>) -> BoxFuture<'a, Admission> {
        Box::pin(async move {
            *self.subject.locked() = subject_of(start.prompt);
            let shared = start.turn.shared;
            let state = self.current(shared).map(|i| i.state);
            if matches!(state, Some(FleetState::Parked | FleetState::Failed)) {
                self.queue_again(shared, "a new turn");
            }
            match self.wait_for_runner(shared, start.turn.cancel).await {
                Ok(()) => Admission::Proceed,
                Err(reason) => Admission::Blocked {
                    code: "fleet_failed",
                    reason: format!("the fleet session's workspace could not be made: {reason}"),
                },
            }
        })
    }

    /// At a tool boundary of a turn whose runner is out of grace: the workspace as it is
    /// now becomes the session's newest snapshot, the session is queued again, and this
    /// call waits for the next runner, where that snapshot is restored over a fresh clone.
    fn before_tool<'a>(
        &'a self,
        turn: &'a Turn<'a>,
        _call: &'a GateCall<'a>,
    ) -> BoxFuture<'a, ToolAdvice> {
        Box::pin(async move {
            if self.moving.swap(false, Ordering::SeqCst) {
                if let Some(checkpoints) =
                    turn.shared.feature::<super::checkpoints::Checkpointing>()
                {
                    checkpoints.0.keep_now().await;
                }
                tracing::info!(session = %self.id, "moving to another runner: its runner is shutting down");
                self.fleet.move_elsewhere(
                    &self.id,
                    "its runner is shutting down (parked at a tool boundary)",
                );
            }
            ToolAdvice::default()
        })
    }

    /// A turn that completed pushes the workspace to the session's branch, if it asked.
    fn turn_ending<'a>(
        &'a self,
        turn: &'a Turn<'a>,
        outcome: &'a crate::agent::TurnOutcome,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if matches!(outcome.stop, StopReason::Cancelled | StopReason::Error) {
                return;
            }
            self.push(turn).await;
        })
    }

    fn turn_ended(&self, turn: &Turn<'_>, _stop: StopReason) {
        let ended = self.turns.fetch_add(1, Ordering::SeqCst) + 1;
        let (Some(link), Some(watcher)) = (link_of(turn.shared), self.watcher()) else {
            return;
        };
        release_when_idle(
            watcher.session.clone(),
            link,
            Arc::clone(&self.fleet),
            self.id.clone(),
            Arc::clone(&self.turns),
            ended,
        );
    }

    fn stop(&self) -> BoxFuture<'_, ()> {
        self.fleet.forget(&self.id);
        Box::pin(std::future::ready(()))
    }
}

impl SessionFleet {
    /// Asks the runner to commit the workspace and push it to the session's branch; says
    /// how it went in a `fleet_pushed` event and keeps the commit.
    async fn push(&self, turn: &Turn<'_>) {
        let shared = turn.shared;
        let Some(info) = self.current(shared) else {
            return;
        };
        let Some(push) = info.push.clone() else {
            return;
        };
        let Some(link) = link_of(shared) else {
            return;
        };
        let outcome = if info.state == FleetState::Assigned {
            let params = WorkspacePushParams {
                session: self.id.clone(),
                branch: push.branch.clone(),
                message: format!(
                    "{}\n\nPushed by amber from session {}, turn {}.",
                    self.subject.locked(),
                    self.id,
                    turn.turn_id
                ),
                last: push.commit.clone(),
            };
            match tokio::time::timeout(PUSH_TIMEOUT, link.call(method::WORKSPACE_PUSH, &params))
                .await
            {
                Ok(Ok(value)) => serde_json::from_value::<WorkspacePushResult>(value)
                    .map_err(|e| format!("the runner answered oddly: {e}")),
                Ok(Err(err)) => Err(err.message),
                Err(_) => Err(format!(
                    "the push took longer than {} s",
                    PUSH_TIMEOUT.as_secs()
                )),
            }
        } else {
            Err("no runner holds the session now: the next turn that completes pushes".to_owned())
        };
        let (commit, changed, error) = match outcome {
            Ok(pushed) => (pushed.commit, pushed.changed, None),
            Err(error) => {
                tracing::warn!(session = %self.id, branch = %push.branch, "push failed: {error}");
                (push.commit.clone(), false, Some(error))
            }
        };
        if changed {
            let mut live = shared.lock_live();
            if let Some(push) = live
                .info
                .environment
                .as_mut()
                .and_then(|e| e.fleet.as_mut())
                .and_then(|f| f.push.as_mut())
            {
                push.commit.clone_from(&commit);
            }
        }
        shared.hub.publish(
            Some(turn.turn_id),
            EventKind::FleetPushed {
                branch: push.branch,
                commit,
                changed,
                error,
            },
        );
        if changed {
            shared.save_meta();
        }
    }
}

/// A commit's subject from a turn's prompt: its first line, at most [`SUBJECT_CHARS`].
fn subject_of(prompt: &str) -> String {
    let line = prompt
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut subject: String = line.chars().take(SUBJECT_CHARS).collect();
    if line.chars().count() > SUBJECT_CHARS {
        subject.pop();
        subject.push('…');
    }
    if subject.is_empty() {
        "amber session".to_owned()
    } else {
        subject
    }
}

/// Runs the session's setup commands on a new runner, in its sandbox; the first that fails
/// fails the session.
async fn run_setup(shared: &SessionShared, id: &str, direct: &Direct) -> Result<(), String> {
    let (setup, sandbox) = {
        let live = shared.lock_live();
        let setup = live
            .info
            .environment
            .as_ref()
            .and_then(|e| e.fleet.as_ref())
            .map(|f| f.setup.clone())
            .unwrap_or_default();
        (setup, live.info.sandbox)
    };
    if setup.is_empty() {
        return Ok(());
    }
    if let Some(sandbox) = sandbox {
        let params = SessionSandboxParams {
            session: id.to_owned(),
            sandbox,
        };
        direct
            .call(method::SESSION_SANDBOX, &params)
            .await
            .map_err(|e| format!("setting the setup's sandbox: {}", e.message))?;
    }
    for command in setup {
        let ran = direct.capture(id, &command, SETUP_TIMEOUT).await;
        let (exit_code, output) = match &ran {
            Ok(captured) => (captured.exit_code, captured.output.clone()),
            Err(reason) => (None, reason.clone()),
        };
        let start = output
            .char_indices()
            .rev()
            .nth(SETUP_OUTPUT_CHARS)
            .map_or(0, |(at, _)| at);
        let turn = shared.lock_live().turn_id.clone();
        shared.hub.publish(
            turn.as_deref(),
            EventKind::FleetSetup {
                command: command.clone(),
                exit_code,
                output: output[start..].to_owned(),
            },
        );
        if exit_code != Some(0) {
            return Err(match exit_code {
                Some(code) => format!("setup `{command}` exited with {code}"),
                None => format!("setup `{command}` did not finish: {output}"),
            });
        }
    }
    Ok(())
}
