//! One task per server, the only writer of its connection: connect, list everything,
//! then follow `list_changed`, ping, and on death report `failed`, wait (exponential
//! backoff with jitter) and reconnect — until the server is removed or the host shuts
//! down. [`Server`] is the state the host, the task and the tool adapters share.

use amber_proto::SandboxInfo;
use amber_proto::sync::Locked;

use amber_exec::sandbox_env::SandboxEnv;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use amber_proto::{McpServerInfo, McpStatus, McpTransport};
use rmcp::ServiceError;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use super::client::{Connection, ListKind, Lists, Peer, chain};
use super::{McpConfig, McpPrompt, McpSink, adapters};

/// How long a failed request waits for the connection's own end reason (exit status).
const DEATH_REASON_WAIT: Duration = Duration::from_millis(500);
/// Timeouts and backoff, from `[mcp]`.
#[derive(Debug, Clone)]
pub(super) struct Settings {
    pub call_timeout: Duration,
    pub connect_timeout: Duration,
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    pub ping_interval: Option<Duration>,
    /// The daemon-wide part of a sandboxed stdio server's sandbox.
    pub sandbox: Arc<SandboxEnv>,
    /// Where HTTP servers' OAuth credentials are kept; `None`: no OAuth.
    pub auth_dir: Option<std::path::PathBuf>,
}

impl Settings {
    pub(super) fn new(
        c: &McpConfig,
        sandbox: Arc<SandboxEnv>,
        auth_dir: Option<std::path::PathBuf>,
    ) -> Self {
        let (backoff_base, backoff_max) = c.reconnect_backoff();
        Self {
            sandbox,
            auth_dir,
            call_timeout: c.call_timeout(),
            connect_timeout: c.connect_timeout(),
            backoff_base,
            backoff_max,
            ping_interval: c.ping_interval(),
        }
    }
}

/// A server as everyone else sees it.
pub(super) struct Server {
    pub name: String,
    pub transport: McpTransport,
    /// A configured stdio server's `sandbox` (servers added by `mcp/add` have none).
    pub sandbox: Option<SandboxInfo>,
    /// `always_load = true`: its tools are never deferred behind `tool_search`.
    pub always_load: bool,
    /// `oauth_client_id`, `oauth_scopes`: how `mcp/login` registers.
    pub oauth: super::config::OAuthSettings,
    /// Wakes the task out of its reconnect backoff (a login completed).
    pub retry: Notify,
    /// The calls running on it: where its elicitation and sampling requests go.
    pub callers: Arc<super::asks::Callers>,
    /// The tool adapters last published (what `tool_search` searches once it started a
    /// lazy server).
    tools: Mutex<Vec<Arc<dyn amber_tools::Tool>>>,
    pub settings: Arc<Settings>,
    /// Cancelled by remove/shutdown; the task then closes the connection and ends.
    pub closed: CancellationToken,
    state: Mutex<State>,
    /// A call saw a transport failure: the task checks the connection with a ping.
    suspect: Notify,
    /// The server's last `WWW-Authenticate` challenge (a 401 or 403): the next login
    /// starts from it.
    challenge: Mutex<Option<String>>,
    /// A login just completed: if the next connection is refused for authorization all the
    /// same, that login failed (the server moved its authorization server, say).
    pub just_signed_in: std::sync::atomic::AtomicBool,
}

struct State {
    info: McpServerInfo,
    peer: Option<Peer>,
    pid: Option<i32>,
    ever_ready: bool,
    last_error: Option<String>,
    prompts: Vec<String>,
}

impl Server {
    pub(super) fn new(
        name: &str,
        transport: McpTransport,
        sandbox: Option<SandboxInfo>,
        always_load: bool,
        oauth: super::config::OAuthSettings,
        settings: Arc<Settings>,
    ) -> Arc<Server> {
        Arc::new(Server {
            name: name.to_owned(),
            transport,
            sandbox,
            always_load,
            oauth,
            retry: Notify::new(),
            callers: Arc::default(),
            tools: Mutex::new(Vec::new()),
            settings,
            closed: CancellationToken::new(),
            state: Mutex::new(State {
                info: McpServerInfo {
                    name: name.to_owned(),
                    status: McpStatus::Connecting,
                    protocol_version: None,
                    tools: 0,
                    resources: 0,
                    prompts: 0,
                    error: None,
                    signing_in: false,
                },
                peer: None,
                pid: None,
                ever_ready: false,
                last_error: None,
                prompts: Vec::new(),
            }),
            suspect: Notify::new(),
            challenge: Mutex::new(None),
            just_signed_in: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Keeps the server's challenge, if `err` carries one.
    pub(super) fn note_challenge(&self, err: &(dyn std::error::Error + 'static)) {
        if let Some(challenge) = super::error_text::auth_challenge(err) {
            *self.challenge.locked() = Some(challenge);
        }
    }

    /// The server's last challenge, for a login.
    pub(super) fn challenge(&self) -> Option<String> {
        self.challenge.locked().clone()
    }

    /// A login that did not complete: `failed` saying why (a server still connected stays
    /// `ready`, with the reason).
    pub(super) fn login_failed(&self, why: &str) -> McpServerInfo {
        self.update(|s| {
            s.info.signing_in = false;
            if s.info.status != McpStatus::Ready {
                s.info.status = McpStatus::Failed;
            }
            s.info.error = Some(format!("OAuth login failed: {why}"));
        })
    }

    /// A login started (`signing_in`), or one that completed: its tokens are stored, so a
    /// connected server goes on with them (each request reads the store) and one that is not
    /// connects again with them.
    pub(super) fn login_started(&self) -> McpServerInfo {
        self.update(|s| s.info.signing_in = true)
    }

    pub(super) fn login_completed(&self) -> McpServerInfo {
        self.just_signed_in
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let info = self.update(|s| {
            s.info.signing_in = false;
            if s.info.status != McpStatus::Ready {
                s.info.status = McpStatus::Connecting;
            }
            s.info.error = None;
        });
        self.retry.notify_one();
        info
    }

    /// Back to `connecting`, as a lazy server that is being started.
    pub(super) fn mark_connecting(&self) {
        self.update(|s| {
            s.info.status = McpStatus::Connecting;
            s.info.error = None;
        });
    }

    /// The tool adapters the server last published.
    pub(super) fn tools(&self) -> Vec<Arc<dyn amber_tools::Tool>> {
        self.tools.locked().clone()
    }

    /// Where this server's OAuth credentials are (or would be) kept: HTTP servers only.
    pub(super) fn credentials(&self) -> Option<std::path::PathBuf> {
        match (&self.transport, &self.settings.auth_dir) {
            (McpTransport::Http { .. }, Some(dir)) => {
                Some(super::oauth::credentials_path(dir, &self.name))
            }
            _ => None,
        }
    }

    pub(super) fn info(&self) -> McpServerInfo {
        self.lock().info.clone()
    }

    /// The live peer, or the reason there is none, phrased for the model.
    pub(super) fn peer(&self) -> Result<Peer, String> {
        let state = self.lock();
        match (&state.peer, state.info.status) {
            (Some(peer), McpStatus::Ready) => Ok(peer.clone()),
            (_, McpStatus::Closed) => Err(format!("MCP server `{}` was removed", self.name)),
            _ if !state.ever_ready => match &state.last_error {
                Some(err) => Err(format!(
                    "MCP server `{}` is not connected yet (last error: {err})",
                    self.name
                )),
                None => Err(format!("MCP server `{}` is still connecting", self.name)),
            },
            _ => match &state.last_error {
                Some(err) => Err(format!(
                    "MCP server `{}` is reconnecting (last error: {err})",
                    self.name
                )),
                None => Err(format!("MCP server `{}` is reconnecting", self.name)),
            },
        }
    }

    /// Whether the last listing had this prompt.
    pub(super) fn has_prompt(&self, name: &str) -> bool {
        self.lock().prompts.iter().any(|p| p == name)
    }

    /// Adapters report failed requests here; transport failures make the task check the
    /// connection (HTTP transports stay "open" while every request fails).
    pub(super) fn report(&self, err: &ServiceError) {
        self.note_challenge(err);
        if matches!(
            err,
            ServiceError::TransportSend(_) | ServiceError::TransportClosed
        ) {
            self.suspect.notify_one();
        }
    }

    /// The stdio child's pid while connected.
    #[cfg(test)]
    pub(super) fn pid(&self) -> Option<i32> {
        self.lock().pid
    }

    /// Marks the server closed (after its task ended) and returns the final info.
    pub(super) fn mark_closed(&self) -> McpServerInfo {
        self.update(|s| {
            s.info.status = McpStatus::Closed;
            s.info.error = None;
            forget_session(&mut s.info);
            s.peer = None;
            s.pid = None;
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.locked()
    }

    fn update(&self, f: impl FnOnce(&mut State)) -> McpServerInfo {
        let mut state = self.lock();
        f(&mut state);
        state.info.clone()
    }
}

/// How a connection's watch ended.
enum End {
    Closed,
    Dead(String),
}

/// The server's task. Returns once `server.closed` fires and the connection is closed.
pub(super) async fn run(server: Arc<Server>, sink: Arc<dyn McpSink>) {
    let settings = server.settings.clone();
    // From the task, not from `add`: so `connecting` always reaches the sink first.
    sink.status(&server.info());
    let mut failures: u32 = 0;
    loop {
        if failures > 0 {
            tokio::select! {
                () = tokio::time::sleep(backoff(&settings, failures)) => {}
                () = server.retry.notified() => {}
                () = server.closed.cancelled() => return,
            }
            // Only the first retry after a failure is reported (`failed` → `connecting`);
            // later attempts stay `failed` unless the error changes, so a server that is
            // down for hours does not write two durable events per attempt into every
            // session.
            if failures == 1 {
                sink.status(&server.update(|s| {
                    s.info.status = McpStatus::Connecting;
                    s.info.error = None;
                    forget_session(&mut s.info);
                }));
            }
        }
        let fresh_login = server
            .just_signed_in
            .swap(false, std::sync::atomic::Ordering::SeqCst);
        // Said where `mcp login` looks, so it ends at once and says to sign in again.
        let after_login = |problem: String| {
            if fresh_login && super::client::needs_login(&problem) {
                format!(
                    "OAuth login failed: signed in, but the server asks for authorization \
                     again ({problem}): run `amber-cli mcp login {}`",
                    server.name
                )
            } else {
                problem
            }
        };
        let credentials = server.credentials();
        let endpoint = super::client::Endpoint {
            server: &server.name,
            transport: &server.transport,
            sandbox: server.sandbox,
            credentials: credentials.as_deref(),
            callers: server.callers.clone(),
            challenge: &server.challenge,
        };
        let opened = Connection::open(
            endpoint,
            &settings.sandbox,
            settings.connect_timeout,
            &server.closed,
        )
        .await;
        if server.closed.is_cancelled() {
            if let Ok((conn, _)) = opened {
                conn.close().await;
            }
            return;
        }
        let (mut conn, mut changes) = match opened {
            Ok(opened) => opened,
            Err(err) => {
                fail(&server, sink.as_ref(), after_login(err));
                failures = failures.saturating_add(1);
                continue;
            }
        };
        let mut lists = Lists::default();
        let listed = tokio::select! {
            r = tokio::time::timeout(settings.connect_timeout, list_all(&conn, &mut lists)) => r,
            () = server.closed.cancelled() => {
                conn.close().await;
                return;
            }
        };
        let problem = match listed {
            Ok(Ok(())) => None,
            Ok(Err(err)) => {
                server.note_challenge(&err);
                Some(format!("listing failed: {}", chain(&err)))
            }
            Err(_) => Some(format!(
                "listing did not finish within {} ms",
                settings.connect_timeout.as_millis()
            )),
        };
        if let Some(problem) = problem {
            conn.close().await;
            fail(&server, sink.as_ref(), after_login(problem));
            failures = failures.saturating_add(1);
            continue;
        }
        // Its tools are offered before it says ready: a client that sees `ready` finds them.
        publish(&server, sink.as_ref(), &lists, conn.has_resources());
        let info = server.update(|s| {
            s.info.status = McpStatus::Ready;
            s.info.error = None;
            s.info.protocol_version = Some(conn.protocol_version.clone());
            set_counts(s, &lists);
            s.peer = Some(conn.peer.clone());
            s.pid = conn.pid();
            s.ever_ready = true;
            s.last_error = None;
        });
        tracing::info!(server = %server.name, protocol = %conn.protocol_version, "MCP server ready");
        sink.status(&info);

        let end = watch(&server, sink.as_ref(), &mut conn, &mut changes, &mut lists).await;
        conn.close().await;
        match end {
            End::Closed => return,
            End::Dead(reason) => {
                tracing::warn!(server = %server.name, %reason, "MCP connection lost");
                fail(&server, sink.as_ref(), reason);
                failures = 1;
            }
        }
    }
}

/// Follows a ready connection until it dies or the server is closed.
async fn watch(
    server: &Arc<Server>,
    sink: &dyn McpSink,
    conn: &mut Connection,
    changes: &mut mpsc::UnboundedReceiver<ListKind>,
    lists: &mut Lists,
) -> End {
    let settings = &server.settings;
    let mut ping = settings.ping_interval.map(|every| {
        let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        interval
    });
    loop {
        tokio::select! {
            () = server.closed.cancelled() => return End::Closed,
            reason = conn.ended() => return End::Dead(reason),
            Some(first) = changes.recv() => {
                // A burst of notifications costs one listing per kind.
                let mut kinds = vec![first];
                while let Ok(kind) = changes.try_recv() {
                    if !kinds.contains(&kind) {
                        kinds.push(kind);
                    }
                }
                for kind in kinds {
                    match tokio::time::timeout(settings.call_timeout, conn.list(kind, lists)).await {
                        Ok(Ok(())) => {}
                        Ok(Err(err @ (ServiceError::TransportClosed | ServiceError::TransportSend(_)))) => {
                            // The transport closing usually means the process died: its
                            // exit says more than "transport closed", if it comes soon.
                            let ended = tokio::time::timeout(DEATH_REASON_WAIT, conn.ended()).await;
                            return End::Dead(ended.unwrap_or_else(|_| {
                                format!("re-listing failed: {}", chain(&err))
                            }));
                        }
                        Ok(Err(err)) => tracing::warn!(server = %server.name, ?kind, "re-listing failed: {}", chain(&err)),
                        Err(_) => tracing::warn!(server = %server.name, ?kind, "re-listing timed out"),
                    }
                }
                let before = server.info();
                let after = server.update(|s| set_counts(s, lists));
                publish(server, sink, lists, conn.has_resources());
                if after != before {
                    sink.status(&after);
                }
            }
            () = server.suspect.notified() => {
                if let Err(reason) = conn.ping(settings.connect_timeout).await {
                    return End::Dead(reason);
                }
            }
            _ = tick(&mut ping) => {
                if let Err(reason) = conn.ping(settings.connect_timeout).await {
                    return End::Dead(reason);
                }
            }
        }
    }
}

async fn tick(interval: &mut Option<tokio::time::Interval>) {
    match interval {
        Some(interval) => {
            interval.tick().await;
        }
        None => std::future::pending().await,
    }
}

async fn list_all(conn: &Connection, lists: &mut Lists) -> Result<(), ServiceError> {
    for kind in [ListKind::Tools, ListKind::Resources, ListKind::Prompts] {
        conn.list(kind, lists).await?;
    }
    Ok(())
}

/// What only a live session knows (negotiated version, counts): a closed or reconnecting
/// server reports none of it rather than the last session's.
fn forget_session(info: &mut McpServerInfo) {
    info.protocol_version = None;
    info.tools = 0;
    info.resources = 0;
    info.prompts = 0;
}

fn set_counts(state: &mut State, lists: &Lists) {
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    state.info.tools = count(lists.tools.len());
    // Templates count as resources: they are what `read_resource` can reach.
    state.info.resources = count(lists.resources + lists.templates);
    state.info.prompts = count(lists.prompts.len());
    state.prompts = lists.prompts.iter().map(|p| p.name.clone()).collect();
}

/// Reports a failure, unless it repeats the one already reported. The server's tools
/// stay registered; calls answer "reconnecting".
fn fail(server: &Server, sink: &dyn McpSink, error: String) {
    let before = server.info();
    let info = server.update(|s| {
        s.info.status = McpStatus::Failed;
        s.info.error = Some(error.clone());
        s.peer = None;
        s.pid = None;
        s.last_error = Some(error.clone());
    });
    if info != before {
        tracing::warn!(server = %server.name, %error, "MCP server failed");
        sink.status(&info);
    } else {
        tracing::debug!(server = %server.name, %error, "MCP server still failing");
    }
}

fn publish(server: &Arc<Server>, sink: &dyn McpSink, lists: &Lists, resources: bool) {
    let tools = adapters::tools(server, &lists.tools, resources);
    server.tools.locked().clone_from(&tools);
    let prompts: Vec<McpPrompt> = lists
        .prompts
        .iter()
        .cloned()
        .map(|mut p| {
            p.server = server.name.clone();
            p
        })
        .collect();
    sink.contributions(&server.name, tools, prompts);
}

/// Exponential backoff from `base`, capped at `max`, with jitter in the upper half so
/// servers that died together do not all come back at the same instant.
fn backoff(settings: &Settings, failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(20);
    let raw = settings
        .backoff_base
        .saturating_mul(1u32 << exponent)
        .min(settings.backoff_max);
    let half = raw / 2;
    half + half.mul_f64(fastrand::f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let s = Settings {
            call_timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_millis(1000),
            ping_interval: None,
            sandbox: SandboxEnv::for_tests(),
            auth_dir: None,
        };
        for (failures, max) in [(1, 100), (2, 200), (3, 400), (5, 1000), (40, 1000)] {
            let d = backoff(&s, failures);
            assert!(d >= Duration::from_millis(max / 2), "{failures}: {d:?}");
            assert!(d <= Duration::from_millis(max), "{failures}: {d:?}");
        }
    }
}
