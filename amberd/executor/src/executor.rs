//! The executor's state and its answers: the sessions opened on it (workspace, sandbox,
//! environment policy, background processes), the jobs, and the connection that receives
//! live output. One process serves one client at a time; a client that attaches again takes
//! over the live output and reads the rest from the jobs.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use amber_exec::env_policy::{ToolEnv, ToolEnvConfig};
use amber_exec::probe::SandboxProbe;
use amber_exec::sandbox_env::SandboxEnv;
use amber_policy::{Rule, RuleSet};
use amber_proto::sync::Locked;
use amber_proto::{SandboxInfo, SandboxMode};
use amber_tools::sandbox::{ToolSandbox, Unsandboxed};
use amber_tools::session::DeniedPaths;
use amber_tools::{SessionTools, SkillDirs, Tool, ToolContext, ToolLimits};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

use crate::checkpoints::{self, Checkpointer, Sent};
use crate::jobs::{Job, Jobs};
use crate::wire::{
    self, CheckpointReadParams, CheckpointRestParams, CheckpointRestoreParams,
    CheckpointStageParams, CheckpointTakeParams, InitializeParams, InitializeResult, JobParams,
    JobReadParams, MachineFacts, ProcessSpawnParams, ProcessSpawnResult, ProcessWriteParams,
    RpcError, SessionOpenParams, SessionOpenResult, SessionParams, SessionSandboxParams,
    ToolCallParams, WorkspaceConfigParams, WorkspacePushParams, WorkspacePushResult,
    WorkspaceRulesParams, code, method, notification,
};

/// How long `session/open` waits for the start-up sandbox probe.
const PROBE_WAIT: Duration = Duration::from_secs(3);

/// How a connection reached the executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The pipe of the process that started it: trusted without a token.
    Own,
    /// Its attach socket: must present the token.
    Attached,
}

/// One session's state here.
struct OpenSession {
    workspace: PathBuf,
    /// The sandbox its commands start in, as the client last said.
    sandbox: Mutex<SandboxInfo>,
    writable_roots: Vec<PathBuf>,
    /// Hidden and masked in its sandbox besides this machine's own.
    hidden: Vec<PathBuf>,
    masked: Vec<PathBuf>,
    guarded_pids: Vec<u32>,
    tools: Arc<SessionTools>,
    deny: Arc<DenyRules>,
    order: StartOrder,
    /// The snapshots sent to the client, for the next one's `base`.
    sent: Sent,
}

/// Jobs of one session start in the order their requests arrived: each takes a ticket as
/// its request is read and makes its tool's first step (where `process` numbers its
/// processes) only when the tickets before it have made theirs.
#[derive(Default)]
struct StartOrder {
    issued: std::sync::atomic::AtomicU64,
    serving: tokio::sync::watch::Sender<u64>,
}

/// Lets the next ticket start when dropped.
struct Served<'a>(&'a StartOrder);

impl Drop for Served<'_> {
    fn drop(&mut self) {
        self.0.serving.send_modify(|next| *next += 1);
    }
}

/// How an executor was started (`amber-exec`'s flags).
#[derive(Debug, Clone, Default)]
pub struct ExecutorOptions {
    /// `--cache-dir`: its checkpoint cache (`None`: none).
    pub cache: Option<PathBuf>,
    /// `--sandbox-in-place`: where no namespace can be made, sandbox with Landlock and
    /// seccomp alone.
    pub sandbox_in_place: bool,
    /// Further paths masked in every command's sandbox (a runner's pool token, and the
    /// directory of its sessions' workspaces: masked around the session's own).
    pub masked: Vec<PathBuf>,
    /// A fleet runner's session that asked for its result as a branch: where it is pushed
    /// from (`workspace/push`). Executors without one refuse pushes.
    pub publisher: Option<crate::publish::Publisher>,
}

/// The executor.
pub struct Executor {
    id: String,
    token: String,
    sandbox: Arc<SandboxEnv>,
    probe: Arc<SandboxProbe>,
    /// The built-in tools that run where the workspace is.
    tools: Vec<Arc<dyn Tool>>,
    sessions: Mutex<HashMap<String, Arc<OpenSession>>>,
    /// Sessions closed here: their work is refused for the executor's life.
    closed: Mutex<HashSet<String>>,
    jobs: Jobs,
    /// The live connection's outbox, if one is attached.
    live: Mutex<Option<(u64, UnboundedSender<wire::Line>)>>,
    /// Whether a client has initialized before (the next one resumes).
    served: std::sync::atomic::AtomicBool,
    /// The stdin of `process/spawn` jobs that asked for one.
    stdins: Mutex<HashMap<String, Arc<tokio::sync::Mutex<tokio::process::ChildStdin>>>>,
    checkpoints: Arc<Checkpointer>,
    publisher: Option<crate::publish::Publisher>,
    /// One push at a time (they share the pristine repository's index).
    pushing: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Executor {
    /// An executor whose sandboxed commands see nothing of `hidden` (its own socket
    /// directory) nor of its checkpoint `cache` (made private if it is missing); the probe
    /// of this machine's sandbox starts now.
    pub fn new(
        id: String,
        token: String,
        mut hidden: Vec<PathBuf>,
        options: ExecutorOptions,
    ) -> Arc<Self> {
        let env = |key: &str| std::env::var_os(key);
        // Its checkpoint cache is its own, as its state is: no command it runs sees it.
        let cache = options
            .cache
            .filter(|dir| match crate::state_dir::ensure(dir) {
                Ok(()) => true,
                Err(err) => {
                    tracing::warn!(dir = %dir.display(), %err, "no checkpoint cache");
                    false
                }
            });
        hidden.extend(cache.clone());
        let mut masked = amber_policy::SecretLocations::installed()
            .locations()
            .to_vec();
        masked.extend(options.masked.iter().cloned());
        let sandbox = Arc::new(SandboxEnv {
            hidden,
            masked,
            in_place: options.sandbox_in_place,
            ..SandboxEnv::from_env(&env)
        });
        let probe = SandboxProbe::new(sandbox.simulate_landlock_abi);
        probe.start(
            sandbox.hidden.clone(),
            sandbox.in_place,
            Arc::clone(&sandbox.unavailable),
        );
        let tools = amber_tools::builtin_tools(SkillDirs::default())
            .into_iter()
            .filter(|t| t.runs_in_workspace())
            .collect();
        Arc::new(Self {
            id,
            token,
            sandbox,
            probe,
            tools,
            sessions: Mutex::new(HashMap::new()),
            closed: Mutex::new(HashSet::new()),
            jobs: Jobs::default(),
            live: Mutex::new(None),
            served: std::sync::atomic::AtomicBool::new(false),
            stdins: Mutex::new(HashMap::new()),
            checkpoints: Arc::new(Checkpointer::new(cache)),
            publisher: options.publisher,
            pushing: tokio::sync::Mutex::new(()),
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Makes `outbox` (connection `conn`) the one live output goes to.
    pub(crate) fn attach(&self, conn: u64, outbox: UnboundedSender<wire::Line>) {
        *self.live.locked() = Some((conn, outbox));
    }

    /// Connection `conn` ended: live output waits in the jobs for the next one.
    pub(crate) fn detach(&self, conn: u64) {
        let mut live = self.live.locked();
        if live.as_ref().is_some_and(|(c, _)| *c == conn) {
            *live = None;
        }
    }

    /// Sends a connection of a session's command through its egress proxy to the client.
    pub(crate) fn notify_network(&self, note: &crate::wire::NetworkConnectionNote) {
        self.notify(notification::NETWORK_CONNECTION, note);
    }

    /// Sends a notification to the live connection, if any.
    fn notify<T: serde::Serialize>(&self, method: &str, params: &T) {
        if let Some((_, outbox)) = self.live.locked().as_ref() {
            let _ = outbox.send(wire::notification_line(method, params));
        }
    }

    /// Whether the client closed `session` here (it will not come back for it).
    pub fn was_closed(&self, session: &str) -> bool {
        self.closed.locked().contains(session)
    }

    /// Whether a session is open here (a client may come back for it).
    pub(crate) fn has_open_sessions(&self) -> bool {
        !self.sessions.locked().is_empty()
    }

    /// Stops everything: every job cancelled, every session's processes killed.
    pub async fn shut_down(&self) {
        self.jobs.cancel_all();
        let sessions: Vec<Arc<OpenSession>> =
            self.sessions.locked().drain().map(|(_, s)| s).collect();
        for session in sessions {
            session.tools.shutdown_and_wait().await;
            self.sandbox.tmp.remove(session.tools.session_id());
        }
    }

    /// Answers `initialize`.
    pub(crate) fn initialize(
        &self,
        params: InitializeParams,
        origin: Origin,
    ) -> Result<InitializeResult, RpcError> {
        if params.protocol_version != wire::PROTOCOL_VERSION {
            return Err(RpcError::new(
                code::INVALID_PARAMS,
                format!(
                    "this executor speaks protocol {}, the client {}",
                    wire::PROTOCOL_VERSION,
                    params.protocol_version
                ),
            ));
        }
        if origin == Origin::Attached && !tokens_match(params.token.as_deref(), &self.token) {
            return Err(RpcError::new(
                code::NOT_INITIALIZED,
                "a wrong or missing attach token",
            ));
        }
        let resumed = self.served.swap(true, std::sync::atomic::Ordering::SeqCst);
        Ok(InitializeResult {
            protocol_version: wire::PROTOCOL_VERSION,
            executor_id: self.id.clone(),
            token: self.token.clone(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            pid: std::process::id(),
            machine: self.machine(),
            resumed,
        })
    }

    fn machine(&self) -> MachineFacts {
        MachineFacts {
            hostname: hostname(),
            os: std::env::consts::OS.to_owned(),
            arch: std::env::consts::ARCH.to_owned(),
            shell: std::env::var("SHELL").ok().filter(|s| !s.is_empty()),
            sandbox_unavailable: self.sandbox.unavailable().map(str::to_owned),
        }
    }

    /// Answers one request after `initialize`.
    pub(crate) async fn handle(
        self: &Arc<Self>,
        method: &str,
        params: Value,
    ) -> Result<Value, RpcError> {
        match method {
            method::PING => Ok(json!({})),
            method::SESSION_OPEN => {
                let result = self.open(parse(params)?).await?;
                to_value(&result)
            }
            method::SESSION_SANDBOX => {
                let params: SessionSandboxParams = parse(params)?;
                let session = self.session(&params.session)?;
                self.change_sandbox(&params.session, &session, params.sandbox);
                Ok(json!({}))
            }
            method::SESSION_CLOSE => {
                let params: SessionParams = parse(params)?;
                self.close(&params.session).await;
                Ok(json!({}))
            }
            method::PROCESS_SPAWN => {
                let params: ProcessSpawnParams = parse(params)?;
                to_value(&self.spawn_process(&params)?)
            }
            method::PROCESS_WRITE => {
                let params: ProcessWriteParams = parse(params)?;
                self.write_stdin(params).await?;
                Ok(json!({}))
            }
            method::JOB_READ => {
                let params: JobReadParams = parse(params)?;
                let job = self.job(&params.job)?;
                to_value(&job.read(params.after_seq))
            }
            method::JOB_CANCEL => {
                let params: JobParams = parse(params)?;
                self.job(&params.job)?.cancel.cancel();
                Ok(json!({}))
            }
            method::JOB_RELEASE => {
                let params: JobParams = parse(params)?;
                if !self.jobs.release(&params.job) {
                    return Err(unknown_job(&params.job));
                }
                Ok(json!({}))
            }
            method::CHECKPOINT_TAKE => {
                let params: CheckpointTakeParams = parse(params)?;
                let session = self.session(&params.session)?;
                let this = Arc::clone(self);
                let taken = blocking(move || {
                    let mut exclude = this.sandbox.hidden.clone();
                    exclude.extend(this.checkpoints.dir().map(Path::to_path_buf));
                    this.checkpoints.take(
                        &session.workspace,
                        &session.sent,
                        params.base,
                        params.max_file_bytes,
                        &exclude,
                    )
                })
                .await?;
                to_value(&taken)
            }
            method::CHECKPOINT_REST => {
                let params: CheckpointRestParams = parse(params)?;
                let session = self.session(&params.session)?;
                to_value(&self.checkpoints.rest(&session.sent, params.take)?)
            }
            method::CHECKPOINT_READ => {
                let params: CheckpointReadParams = parse(params)?;
                let session = self.session(&params.session)?;
                let read = blocking(move || {
                    Ok(checkpoints::read(
                        &session.workspace,
                        &params.blobs,
                        checkpoints::READ_ANSWER_BYTES,
                        checkpoints::READ_ANSWER_BYTES,
                    ))
                })
                .await?;
                to_value(&read)
            }
            method::CHECKPOINT_STAGE => {
                let params: CheckpointStageParams = parse(params)?;
                self.session(&params.session)?;
                let this = Arc::clone(self);
                blocking(move || this.checkpoints.stage(&params.session, &params.blobs)).await?;
                Ok(json!({}))
            }
            method::CHECKPOINT_RESTORE => {
                let params: CheckpointRestoreParams = parse(params)?;
                let session = self.session(&params.session)?;
                let this = Arc::clone(self);
                let restored = blocking(move || {
                    this.checkpoints
                        .restore(&params.session, &session.workspace, &params.plan)
                })
                .await?;
                to_value(&restored)
            }
            method::WORKSPACE_CONFIG => {
                let params: WorkspaceConfigParams = parse(params)?;
                let session = self.session(&params.session)?;
                let read = blocking(move || {
                    Ok(crate::config_files::read(
                        &session.workspace,
                        &params.instruction_files,
                    ))
                })
                .await?;
                to_value(&read)
            }
            method::WORKSPACE_RULES => {
                let params: WorkspaceRulesParams = parse(params)?;
                let session = self.session(&params.session)?;
                let bytes = base64::Engine::decode(
                    &base64::engine::general_purpose::STANDARD,
                    params.data.as_bytes(),
                )
                .map_err(|e| RpcError::new(code::INVALID_PARAMS, format!("data: {e}")))?;
                blocking(move || {
                    crate::config_files::write_rules(&session.workspace, &bytes).map_err(|e| {
                        RpcError::new(
                            code::INVALID_WORKSPACE,
                            format!("cannot write the rules file: {e}"),
                        )
                    })
                })
                .await?;
                Ok(json!({}))
            }
            method::WORKSPACE_PUSH => {
                let params: WorkspacePushParams = parse(params)?;
                to_value(&self.push(params).await?)
            }
            method::INITIALIZE => Err(RpcError::new(
                code::INVALID_REQUEST,
                "this connection is initialized already",
            )),
            other => Err(RpcError::new(
                code::METHOD_NOT_FOUND,
                format!("unknown method `{other}`"),
            )),
        }
    }

    /// Commits the session's workspace and pushes it, from the runner's pristine copy.
    async fn push(&self, params: WorkspacePushParams) -> Result<WorkspacePushResult, RpcError> {
        let session = self.session(&params.session)?;
        let failed = |message: String| RpcError::new(code::PUSH_FAILED, message);
        let publisher = self
            .publisher
            .as_ref()
            .filter(|p| p.workspace == session.workspace)
            .ok_or_else(|| {
                failed(format!(
                    "session {} has no repository to push to here",
                    params.session
                ))
            })?;
        let _one_at_a_time = self.pushing.lock().await;
        let pushed = publisher
            .push(&params.branch, &params.message, params.last.as_deref())
            .await
            .map_err(|e| failed(e.to_string()))?;
        Ok(WorkspacePushResult {
            commit: pushed.commit,
            changed: pushed.changed,
        })
    }

    fn job(&self, id: &str) -> Result<Arc<Job>, RpcError> {
        self.jobs.get(id).ok_or_else(|| unknown_job(id))
    }

    fn session(&self, id: &str) -> Result<Arc<OpenSession>, RpcError> {
        if self.closed.locked().contains(id) {
            return Err(RpcError::new(
                code::SESSION_GONE,
                format!("session {id} was closed on this executor; its work is refused"),
            ));
        }
        self.sessions.locked().get(id).cloned().ok_or_else(|| {
            RpcError::new(
                code::SESSION_GONE,
                format!("session {id} is not open on this executor"),
            )
        })
    }

    async fn open(
        self: &Arc<Self>,
        params: SessionOpenParams,
    ) -> Result<SessionOpenResult, RpcError> {
        if !valid_session_id(&params.session) {
            return Err(RpcError::new(
                code::INVALID_PARAMS,
                "a session id is 1 to 128 letters, digits, `-` or `_`",
            ));
        }
        if self.closed.locked().contains(&params.session) {
            return Err(RpcError::new(
                code::SESSION_GONE,
                format!("session {} was closed on this executor", params.session),
            ));
        }
        let workspace = valid_workspace(&params.workspace)?;
        // The first session's sandbox must know whether this kernel can sandbox.
        if params.sandbox.mode != SandboxMode::Off {
            self.probe.wait(PROBE_WAIT).await;
        }
        let tool_env = tool_env(&params)?;
        let extra = Extra {
            writable_roots: &params.writable_roots,
            hidden: &params.hidden,
            masked: &params.masked,
            guarded_pids: &params.guarded_pids,
        };
        let sandbox = self.tool_sandbox(&params.session, params.sandbox, &workspace, &extra);
        let mut sessions = self.sessions.locked();
        let session = sessions.entry(params.session.clone()).or_insert_with(|| {
            let tools = Arc::new(SessionTools::detached());
            tools.set_session_id(&params.session);
            tools.set_tool_env(Arc::new(tool_env));
            let deny = Arc::new(DenyRules::default());
            tools.set_denied_paths(Arc::clone(&deny) as Arc<dyn DeniedPaths>);
            // The proxy of its allowlist sandbox runs here, next to its commands.
            let notify = crate::egress::notifier(Arc::downgrade(self));
            let egress = crate::egress::ExecutorEgress::new(
                &params.session,
                params.network.as_ref(),
                notify,
            );
            tools.set_egress(Arc::new(egress));
            Arc::new(OpenSession {
                workspace: workspace.clone(),
                sandbox: Mutex::new(params.sandbox),
                writable_roots: params.writable_roots.clone(),
                hidden: params.hidden.clone(),
                masked: params.masked.clone(),
                guarded_pids: params.guarded_pids.clone(),
                tools,
                deny,
                order: StartOrder::default(),
                sent: Sent::default(),
            })
        });
        *session.sandbox.locked() = params.sandbox;
        session.tools.set_sandbox(sandbox);
        Ok(SessionOpenResult {
            workspace: session.workspace.clone(),
        })
    }

    async fn close(&self, id: &str) {
        self.closed.locked().insert(id.to_owned());
        self.jobs.cancel_session(id);
        let session = self.sessions.locked().remove(id);
        if let Some(session) = session {
            session.tools.shutdown_and_wait().await;
            self.sandbox.tmp.remove(id);
        }
        self.checkpoints.forget(id);
        // No session left: no snapshot is being taken, the cache can be swept.
        if !self.has_open_sessions() {
            let checkpoints = Arc::clone(&self.checkpoints);
            let _ = tokio::task::spawn_blocking(move || checkpoints.sweep()).await;
        }
    }

    /// The sandbox of a session's commands in `info` over `workspace`, from this machine's
    /// kernel: fail closed (`Unavailable`) when it cannot sandbox.
    fn tool_sandbox(
        &self,
        session: &str,
        info: SandboxInfo,
        workspace: &Path,
        extra: &Extra<'_>,
    ) -> ToolSandbox {
        if info.mode == SandboxMode::Off {
            return ToolSandbox::Off;
        }
        if let Some(reason) = self.sandbox.unavailable() {
            return ToolSandbox::Unavailable {
                info,
                reason: reason.to_owned(),
            };
        }
        match self.sandbox.tmp.ensure(session) {
            Ok(tmp) => {
                let mut spec = self
                    .sandbox
                    .spec(info, workspace, tmp, extra.writable_roots);
                spec.hidden.extend(extra.hidden.iter().cloned());
                spec.masked.extend(extra.masked.iter().cloned());
                spec.guarded_pids.extend(extra.guarded_pids.iter().copied());
                ToolSandbox::On(Arc::new(spec))
            }
            Err(err) => ToolSandbox::Unavailable {
                info,
                reason: format!("the session's temp directory: {err}"),
            },
        }
    }

    /// Starts a `process/spawn` job.
    fn spawn_process(
        self: &Arc<Self>,
        params: &ProcessSpawnParams,
    ) -> Result<ProcessSpawnResult, RpcError> {
        let session = self.session(&params.session)?;
        let Some(job) = self.jobs.start(&params.job, &params.session) else {
            return Err(RpcError::new(
                code::JOB_EXISTS,
                format!("job {} exists", params.job),
            ));
        };
        let forwarding = Arc::clone(self);
        let finishing = Arc::clone(self);
        let spawned = crate::processes::spawn(
            &session.tools,
            &session.workspace,
            Arc::clone(&job),
            params,
            move |job, text| forwarding.forward(job, text),
            move |job, exit| {
                let (status, output) = crate::processes::outcome(exit);
                let done = job.finish(status, output, None, Some(exit), None);
                finishing.stdins.locked().remove(&done.job);
                finishing.jobs.finished(&done.job);
                finishing.notify(notification::JOB_DONE, &done);
            },
        );
        let (pid, stdin) = match spawned {
            Ok(spawned) => spawned,
            Err(err) => {
                self.jobs.release(&params.job);
                return Err(err);
            }
        };
        if let Some(stdin) = stdin {
            self.stdins
                .locked()
                .insert(params.job.clone(), Arc::new(tokio::sync::Mutex::new(stdin)));
        }
        Ok(ProcessSpawnResult { pid })
    }

    /// Answers `process/write`.
    async fn write_stdin(&self, params: ProcessWriteParams) -> Result<(), RpcError> {
        use tokio::io::AsyncWriteExt;
        let pipe = self.stdins.locked().get(&params.job).cloned();
        let Some(pipe) = pipe else {
            return Err(RpcError::new(
                code::UNKNOWN_JOB,
                format!("job {} has no stdin open", params.job),
            ));
        };
        {
            let mut stdin = pipe.lock().await;
            stdin
                .write_all(params.data.as_bytes())
                .await
                .and(stdin.flush().await)
                .map_err(|e| {
                    RpcError::new(code::INVALID_PARAMS, format!("cannot write stdin: {e}"))
                })?;
        }
        if params.close {
            // Dropping the last handle closes the pipe: the process reads EOF.
            self.stdins.locked().remove(&params.job);
        }
        Ok(())
    }

    /// Puts `sandbox` in force for the session's next commands, if it is not already.
    fn change_sandbox(&self, id: &str, session: &OpenSession, sandbox: SandboxInfo) {
        let mut current = session.sandbox.locked();
        if *current == sandbox {
            return;
        }
        *current = sandbox;
        let extra = Extra {
            writable_roots: &session.writable_roots,
            hidden: &session.hidden,
            masked: &session.masked,
            guarded_pids: &session.guarded_pids,
        };
        let tool_sandbox = self.tool_sandbox(id, sandbox, &session.workspace, &extra);
        session.tools.set_sandbox(tool_sandbox);
    }

    /// Answers `tool/call`: starts the job (its output and outcome arrive as
    /// notifications). Called as the request is read, so that a session's calls start in
    /// the order they were sent.
    pub(crate) fn start_call(self: &Arc<Self>, params: Value) -> Result<Value, RpcError> {
        self.call(parse(params)?)?;
        Ok(json!({}))
    }

    fn call(self: &Arc<Self>, params: ToolCallParams) -> Result<(), RpcError> {
        let session = self.session(&params.session)?;
        let Some(job) = self.jobs.start(&params.job, &params.session) else {
            return Err(RpcError::new(
                code::JOB_EXISTS,
                format!("job {} exists", params.job),
            ));
        };
        session.deny.replace(&params.deny);
        if let Some(sandbox) = params.sandbox {
            self.change_sandbox(&params.session, &session, sandbox);
        }
        let ticket = session
            .order
            .issued
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let executor = Arc::clone(self);
        tokio::spawn(async move {
            executor.run_job(session, job, params, ticket).await;
        });
        Ok(())
    }

    async fn run_job(
        &self,
        session: Arc<OpenSession>,
        job: Arc<Job>,
        params: ToolCallParams,
        ticket: u64,
    ) {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let ctx = ToolContext {
            workspace: session.workspace.clone(),
            call_id: params.call_id.clone(),
            cancel: job.cancel.clone(),
            output: Some(tx),
            limits: ToolLimits {
                max_output_bytes: params.limits.max_output_bytes,
                bash_default_timeout: Duration::from_millis(params.limits.bash_default_timeout_ms),
            },
            session: Arc::clone(&session.tools),
            // The client's gate asked a person (or applied a rule they stored), and the
            // client is the one this executor serves: its leave holds here.
            unsandboxed: if params.unsandboxed {
                Some(Unsandboxed::approved_by_person())
            } else {
                None
            },
        };
        let mut serving = session.order.serving.subscribe();
        let _ = serving.wait_for(|next| *next >= ticket).await;
        let served = Served(&session.order);
        let outcome = match self.tools.iter().find(|t| t.name() == params.tool) {
            None => {
                drop(served);
                amber_tools::ToolOutcome::error(format!(
                    "`{}` does not run on an executor",
                    params.tool
                ))
            }
            Some(tool) => {
                let mut call = tool.call(params.args.clone(), &ctx);
                let first = futures::poll!(call.as_mut());
                drop(served);
                match first {
                    std::task::Poll::Ready(outcome) => outcome,
                    std::task::Poll::Pending => loop {
                        tokio::select! {
                            biased;
                            outcome = &mut call => break outcome,
                            Some(chunk) = rx.recv() => self.forward(&job, chunk.chunk),
                        }
                    },
                }
            }
        };
        while let Ok(chunk) = rx.try_recv() {
            self.forward(&job, chunk.chunk);
        }
        let running = u32::try_from(session.tools.processes.running()).unwrap_or(u32::MAX);
        let done = job.finish(
            outcome.status,
            outcome.output,
            outcome.diff,
            None,
            Some(running),
        );
        self.jobs.finished(&params.job);
        self.notify(notification::JOB_DONE, &done);
    }

    fn forward(&self, job: &Job, text: String) {
        let line = job.push_then(text, |chunk| {
            wire::notification_line(notification::JOB_OUTPUT, chunk)
        });
        if let Some((_, outbox)) = self.live.locked().as_ref() {
            let _ = outbox.send(line);
        }
    }
}

/// What a session's sandbox adds to this machine's.
struct Extra<'a> {
    writable_roots: &'a [PathBuf],
    hidden: &'a [PathBuf],
    masked: &'a [PathBuf],
    guarded_pids: &'a [u32],
}

/// The session's deny rules for tools that reveal files, as the last call sent them.
#[derive(Default)]
struct DenyRules {
    rules: Mutex<Option<RuleSet>>,
}

impl DenyRules {
    fn replace(&self, rules: &[Rule]) {
        // Rules amberd compiled already; one that does not compile here hides nothing more.
        *self.rules.locked() = RuleSet::new(rules).ok();
    }
}

impl DeniedPaths for DenyRules {
    fn denied(&self, tool: &str, relative: &str) -> bool {
        self.rules
            .locked()
            .as_ref()
            .is_some_and(|rules| rules.denies_path(&[tool], relative))
    }
}

/// The default checkpoint cache: `$XDG_CACHE_HOME/amber-exec`, else
/// `$HOME/.cache/amber-exec` (each only when absolute).
pub fn default_cache(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    Checkpointer::default_cache(env)
}

/// Runs `work` on the blocking pool (it reads or writes the workspace).
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, RpcError> + Send + 'static,
) -> Result<T, RpcError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| RpcError::new(code::CHECKPOINT_FAILED, format!("the work failed: {e}")))?
}

fn parse<T: serde::de::DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    serde_json::from_value(params)
        .map_err(|e| RpcError::new(code::INVALID_PARAMS, format!("invalid params: {e}")))
}

fn to_value<T: serde::Serialize>(value: &T) -> Result<Value, RpcError> {
    serde_json::to_value(value)
        .map_err(|e| RpcError::new(code::INVALID_PARAMS, format!("unencodable result: {e}")))
}

fn unknown_job(id: &str) -> RpcError {
    RpcError::new(code::UNKNOWN_JOB, format!("no job {id} is kept here"))
}

/// Session ids name temp directories here: nothing that could leave them.
fn valid_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// An absolute, existing directory, symlinks resolved.
fn valid_workspace(path: &Path) -> Result<PathBuf, RpcError> {
    let invalid = |why: String| {
        RpcError::new(
            code::INVALID_WORKSPACE,
            format!("workspace {}: {why}", path.display()),
        )
    };
    if !path.is_absolute() {
        return Err(invalid("not an absolute path".to_owned()));
    }
    let canonical = path
        .canonicalize()
        .map_err(|e| invalid(format!("cannot resolve: {e}")))?;
    if !canonical.is_dir() {
        return Err(invalid("not a directory".to_owned()));
    }
    Ok(canonical)
}

/// The environment policy applied to this process's own environment.
fn tool_env(params: &SessionOpenParams) -> Result<ToolEnv, RpcError> {
    let config: ToolEnvConfig = match &params.tool_env.config {
        Some(value) => serde_json::from_value(value.clone()).map_err(|e| {
            RpcError::new(code::INVALID_PARAMS, format!("invalid toolEnv.config: {e}"))
        })?,
        None => ToolEnvConfig::default(),
    };
    let secrets: BTreeSet<String> = amber_exec::env_policy::provider_key_vars(
        params.tool_env.secret_names.iter().map(String::as_str),
    );
    ToolEnv::new(&config, &secrets, std::env::vars_os())
        .map_err(|e| RpcError::new(code::INVALID_PARAMS, e.to_string()))
}

/// Compares the tokens in time that does not depend on where they differ.
fn tokens_match(given: Option<&str>, expected: &str) -> bool {
    let Some(given) = given else {
        return false;
    };
    given.len() == expected.len()
        && given
            .bytes()
            .zip(expected.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// This machine's name.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_cannot_name_a_path() {
        for bad in ["", "../x", "a/b", "a b", ".", &"x".repeat(129)] {
            assert!(!valid_session_id(bad), "{bad:?}");
        }
        for good in ["019a-7f3e", "s_1", "ABC"] {
            assert!(valid_session_id(good), "{good:?}");
        }
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(tokens_match(Some("abc"), "abc"));
        assert!(!tokens_match(Some("abd"), "abc"));
        assert!(!tokens_match(Some("ab"), "abc"));
        assert!(!tokens_match(None, "abc"));
    }

    #[test]
    fn a_workspace_is_an_absolute_existing_directory() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "").unwrap();
        assert!(valid_workspace(Path::new("relative")).is_err());
        assert!(valid_workspace(&file).is_err());
        assert!(valid_workspace(&dir.path().join("missing")).is_err());
        assert_eq!(
            valid_workspace(dir.path()).unwrap(),
            dir.path().canonicalize().unwrap()
        );
    }
}
