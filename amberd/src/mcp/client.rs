//! The rmcp side of one connection: spawn the stdio child (own process group, stderr to
//! the log) or open the streamable HTTP transport, run `initialize` (rmcp negotiates the
//! protocol version), list tools/resources/prompts page by page, forward `list_changed`
//! notifications, and close so that nothing is left running.

use amber_proto::sync::Locked;
use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use amber_proto::{McpTransport, SandboxInfo};
use rmcp::model::{
    ClientCapabilities, ClientConfig, ClientRequest, Implementation, PingRequest, ProtocolVersion,
};
use rmcp::service::{NotificationContext, QuitReason, RunningServiceCancellationToken};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceError};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::ChildStderr;
use tokio::sync::mpsc;
use tokio::task::{JoinError, JoinHandle};
use tokio_util::sync::CancellationToken;

use super::McpPrompt;
use super::McpPromptArgument;
pub(super) use super::error_text::describe as chain;
use super::oauth;
use amber_exec::child::{ChildInput, ChildSpec, Unsandboxed};
use amber_exec::containment::SpawnSandbox;
use amber_exec::sandbox_env::SandboxEnv;

pub(super) type Peer = rmcp::Peer<RoleClient>;

/// Which list a `notifications/*/list_changed` invalidated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ListKind {
    Tools,
    Resources,
    Prompts,
}

/// What the server currently offers, as last listed.
#[derive(Debug, Default, Clone)]
pub(super) struct Lists {
    pub tools: Vec<rmcp::model::Tool>,
    pub resources: usize,
    pub templates: usize,
    pub prompts: Vec<McpPrompt>,
}

/// Lines of a child's stderr kept to explain why it failed.
const STDERR_TAIL: usize = 6;

/// How long a stdio server gets to exit after its stdin closes, and after SIGTERM.
const EXIT_GRACE: Duration = Duration::from_millis(1500);

/// One live connection. Dropping it without [`Connection::close`] still stops the
/// service (rmcp's drop guard) and kills the child (kill_on_drop); `close` also sweeps the
/// child's process group.
pub(super) struct Connection {
    pub peer: Peer,
    pub protocol_version: String,
    has_tools: bool,
    has_resources: bool,
    has_prompts: bool,
    cancel: Option<RunningServiceCancellationToken>,
    quit: Option<JoinHandle<Result<QuitReason, JoinError>>>,
    /// The stdio child's pid, which is also its process group id.
    pgid: Option<i32>,
    stderr: Tail,
}

impl Connection {
    /// Spawns or reaches the server and runs the handshake, within `timeout`; gives up
    /// early when `stop` fires. Errors are one line for `McpServerInfo.error`. The
    /// receiver gets the server's `list_changed` notifications.
    pub(super) async fn open(
        endpoint: Endpoint<'_>,
        extension_env: &SandboxEnv,
        timeout: Duration,
        stop: &CancellationToken,
    ) -> Result<(Connection, mpsc::UnboundedReceiver<ListKind>), String> {
        let again = endpoint.clone();
        match Self::open_as(endpoint, extension_env, timeout, stop, lifecycle()).await {
            Err(Opened::AnsweredDiscoverAsAnything) => {
                // A server of the initialize era that answers every method it does not
                // know with an empty success, `server/discover` included: it is one of
                // that era all the same.
                Self::open_as(again, extension_env, timeout, stop, initialize_era())
                    .await
                    .map_err(Opened::into_text)
            }
            other => other.map_err(Opened::into_text),
        }
    }

    async fn open_as(
        endpoint: Endpoint<'_>,
        extension_env: &SandboxEnv,
        timeout: Duration,
        stop: &CancellationToken,
        lifecycle: rmcp::ClientLifecycleMode,
    ) -> Result<(Connection, mpsc::UnboundedReceiver<ListKind>), Opened> {
        let Endpoint {
            server,
            transport,
            sandbox,
            credentials,
            callers,
            challenge,
        } = endpoint;
        let (tx, changes) = mpsc::unbounded_channel();
        let handler = Handler {
            server: server.to_owned(),
            changes: tx,
            callers,
        };
        let stderr = Tail::default();
        let mut pgid = None;
        let handshake = match transport {
            McpTransport::Stdio { command, args, env } => {
                // In the daemon's working directory, which is its workspace.
                let spec = match sandbox {
                    Some(info) => Some(
                        std::env::current_dir()
                            .map_err(|e| format!("no working directory: {e}"))
                            .and_then(|cwd| extension_env.extension_spec("mcp", server, info, &cwd))
                            .map_err(|e| format!("cannot start `{command}` sandboxed: {e}"))?,
                    ),
                    None => None,
                };
                let contained = match &spec {
                    Some(spec) => SpawnSandbox::Sandboxed(spec),
                    None => SpawnSandbox::Unsandboxed(Unsandboxed::configured_by_user()),
                };
                // Provider keys stay with amberd: the tool environment policy, then the
                // server's own `env`. Its own process group: a terminal's Ctrl-C does not
                // reach it, and close() can kill everything it started.
                let mut cmd = ChildSpec::new(command, contained)
                    .args(args)
                    .envs(extension_env.extension_vars(env))
                    .stdin(ChildInput::Piped)
                    .tokio_command()
                    .map_err(|e| format!("cannot start `{command}`: {e}"))?;
                cmd.stdout(Stdio::piped());
                let (child, child_stderr) = TokioChildProcess::builder(cmd)
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| format!("cannot start `{command}`: {e}"))?;
                pgid = child.id().and_then(|id| i32::try_from(id).ok());
                if let Some(pipe) = child_stderr {
                    log_stderr(server.to_owned(), pipe, stderr.clone());
                }
                let handshake =
                    rmcp::serve_client_with_lifecycle(handler, child, lifecycle.clone());
                tokio::select! {
                    r = tokio::time::timeout(timeout, handshake) => r,
                    () = stop.cancelled() => {
                        sweep(pgid, libc::SIGKILL);
                        return Err(Opened::Failed("cancelled".into()));
                    }
                }
            }
            McpTransport::Http { url, headers } => {
                let (client, config) = http_transport(url, headers, timeout)?;
                let authorized = match credentials {
                    Some(path) => oauth::authorized_client(url, path, client.clone()).await?,
                    None => None,
                };
                let handshake = async {
                    match authorized {
                        // The stored token on every request, refreshed when it expires.
                        Some(auth) => {
                            let transport =
                                StreamableHttpClientTransport::with_client(auth, config);
                            rmcp::serve_client_with_lifecycle(handler, transport, lifecycle.clone())
                                .await
                        }
                        None => {
                            let transport =
                                StreamableHttpClientTransport::with_client(client, config);
                            rmcp::serve_client_with_lifecycle(handler, transport, lifecycle.clone())
                                .await
                        }
                    }
                };
                tokio::select! {
                    r = tokio::time::timeout(timeout, handshake) => r,
                    () = stop.cancelled() => return Err(Opened::Failed("cancelled".into())),
                }
            }
        };
        let running = match handshake {
            Ok(Ok(running)) => running,
            Ok(Err(rmcp::service::ClientInitializeError::ExpectedInitResult(Some(_))))
                if matches!(lifecycle, rmcp::ClientLifecycleMode::Auto { .. }) =>
            {
                sweep(pgid, libc::SIGKILL);
                return Err(Opened::AnsweredDiscoverAsAnything);
            }
            Ok(Err(err)) => {
                sweep(pgid, libc::SIGKILL);
                if let Some(asked) = super::error_text::auth_challenge(&err) {
                    *challenge.locked() = Some(asked);
                }
                let text = chain(&err);
                if credentials.is_some() && needs_login(&text) {
                    return Err(Opened::Failed(format!(
                        "needs authorization ({text}): run `amber-cli mcp login {server}`"
                    )));
                }
                return Err(Opened::Failed(with_stderr(
                    format!("initialize failed: {text}"),
                    &stderr,
                )));
            }
            Err(_) => {
                sweep(pgid, libc::SIGKILL);
                return Err(Opened::Failed(with_stderr(
                    format!("no answer to initialize within {} ms", timeout.as_millis()),
                    &stderr,
                )));
            }
        };
        let peer = running.peer().clone();
        let info = peer.peer_info();
        let caps = info.as_ref().map(|i| &i.capabilities);
        let conn = Connection {
            protocol_version: info
                .as_ref()
                .map(|i| i.protocol_version.to_string())
                .unwrap_or_default(),
            has_tools: caps.is_some_and(|c| c.tools.is_some()),
            has_resources: caps.is_some_and(|c| c.resources.is_some()),
            has_prompts: caps.is_some_and(|c| c.prompts.is_some()),
            cancel: Some(running.cancellation_token()),
            quit: Some(tokio::spawn(running.waiting())),
            peer,
            pgid,
            stderr,
        };
        Ok((conn, changes))
    }

    pub(super) fn has_resources(&self) -> bool {
        self.has_resources
    }

    /// The stdio child's pid (tests kill it to exercise reconnecting).
    pub(super) fn pid(&self) -> Option<i32> {
        self.pgid
    }

    /// Re-lists one kind, following `nextCursor` to the last page. A kind the server
    /// did not announce in its capabilities stays empty.
    pub(super) async fn list(&self, kind: ListKind, lists: &mut Lists) -> Result<(), ServiceError> {
        match kind {
            ListKind::Tools if self.has_tools => {
                lists.tools = self.peer.list_all_tools().await?;
            }
            ListKind::Resources if self.has_resources => {
                lists.resources = self.peer.list_all_resources().await?.len();
                // Templates are optional; a server without them may answer method-not-found.
                lists.templates = match self.peer.list_all_resource_templates().await {
                    Ok(templates) => templates.len(),
                    Err(ServiceError::McpError(_)) => 0,
                    Err(err) => return Err(err),
                };
            }
            ListKind::Prompts if self.has_prompts => {
                lists.prompts = self
                    .peer
                    .list_all_prompts()
                    .await?
                    .into_iter()
                    .map(prompt_from)
                    .collect();
            }
            _ => {}
        }
        Ok(())
    }

    /// `ping`; only a transport failure or no answer counts as dead (a server that
    /// answers with an error is alive).
    pub(super) async fn ping(&self, timeout: Duration) -> Result<(), String> {
        let ping = self
            .peer
            .send_request(ClientRequest::PingRequest(PingRequest {
                method: Default::default(),
                extensions: Default::default(),
            }));
        match tokio::time::timeout(timeout, ping).await {
            Ok(Ok(_)) | Ok(Err(ServiceError::McpError(_))) => Ok(()),
            Ok(Err(err)) => Err(format!("ping failed: {}", chain(&err))),
            Err(_) => Err(format!(
                "no answer to ping within {} ms",
                timeout.as_millis()
            )),
        }
    }

    /// Resolves when the connection ended by itself (child exited, transport closed),
    /// with the reason for the status line. Pending forever once it has resolved.
    pub(super) async fn ended(&mut self) -> String {
        let Some(quit) = self.quit.as_mut() else {
            return std::future::pending().await;
        };
        let reason = quit.await;
        self.quit = None;
        let what = match (&reason, self.pgid.is_some()) {
            (Ok(Ok(QuitReason::Closed)), true) => "the server process exited".to_owned(),
            (Ok(Ok(QuitReason::Closed)), false) => "the server closed the connection".to_owned(),
            (Ok(Ok(other)), _) => format!("the connection ended ({other:?})"),
            (Ok(Err(e)) | Err(e), _) => format!("the connection task failed: {e}"),
        };
        with_stderr(what, &self.stderr)
    }

    /// Closes the session and makes sure the child is gone: stdin closed first (the MCP
    /// stdio shutdown), SIGTERM to the group after a grace period, then SIGKILL; finally
    /// the whole process group is swept so no grandchild survives.
    pub(super) async fn close(mut self) {
        if let Some(cancel) = self.cancel.take() {
            cancel.cancel();
        }
        if let Some(mut quit) = self.quit.take()
            && tokio::time::timeout(EXIT_GRACE, &mut quit).await.is_err()
        {
            sweep(self.pgid, libc::SIGTERM);
            if tokio::time::timeout(EXIT_GRACE, &mut quit).await.is_err() {
                sweep(self.pgid, libc::SIGKILL);
                if tokio::time::timeout(EXIT_GRACE, &mut quit).await.is_err() {
                    tracing::warn!("MCP connection did not finish closing; abandoning it");
                    quit.abort();
                }
            }
        }
        sweep(self.pgid, libc::SIGKILL);
    }
}

/// Sends `signal` to the child's process group, if there is one.
fn sweep(pgid: Option<i32>, signal: libc::c_int) {
    if let Some(pgid) = pgid.filter(|p| *p > 1) {
        // SAFETY: killpg only sends a signal; ESRCH (group already gone) is expected.
        unsafe {
            libc::killpg(pgid, signal);
        }
    }
}

/// The server said who it wants instead (401, or a token it no longer takes).
pub(super) fn needs_login(error: &str) -> bool {
    let lower = error.to_ascii_lowercase();
    [
        "auth required",
        "authorization required",
        "401",
        "unauthorized",
        "invalid_token",
        "insufficient scope",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}

/// The HTTP client and transport settings of a streamable HTTP server.
fn http_transport(
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
    connect_timeout: Duration,
) -> Result<(reqwest::Client, StreamableHttpClientTransportConfig), String> {
    // Err only means a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        // Pooled idle connections stall ~40 ms on delayed ACKs (rmcp's own default client
        // disables them too); redirects are not followed so headers never go elsewhere.
        .pool_max_idle_per_host(0)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("amberd/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("HTTP client: {}", chain(&e)))?;
    let mut custom = std::collections::HashMap::new();
    for (name, value) in headers {
        let name = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("invalid header name `{name}`"))?;
        let value = http::HeaderValue::from_str(value)
            .map_err(|_| format!("invalid value for header `{name}`"))?;
        custom.insert(name, value);
    }
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
    Ok((client, config))
}

/// The server a connection is opened to: its name, how to reach it, its sandbox (stdio),
/// where its OAuth credentials are (HTTP), and where its requests to the person go.
#[derive(Clone)]
pub(super) struct Endpoint<'a> {
    pub server: &'a str,
    pub transport: &'a McpTransport,
    pub sandbox: Option<SandboxInfo>,
    pub credentials: Option<&'a std::path::Path>,
    pub callers: Arc<super::asks::Callers>,
    /// Where the server's `WWW-Authenticate` challenge is kept for the next login.
    pub challenge: &'a std::sync::Mutex<Option<String>>,
}

/// Receives the server's notifications (list changes go to the supervisor) and requests
/// (elicitation and sampling go to the session of the running call: `asks.rs`).
struct Handler {
    server: String,
    changes: mpsc::UnboundedSender<ListKind>,
    callers: Arc<super::asks::Callers>,
}

impl Handler {
    fn changed(&self, kind: ListKind) {
        tracing::debug!(server = %self.server, ?kind, "list_changed");
        // The supervisor is gone only while the connection closes.
        let _ = self.changes.send(kind);
    }
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.changed(ListKind::Tools);
    }

    async fn on_resource_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.changed(ListKind::Resources);
    }

    async fn on_prompt_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.changed(ListKind::Prompts);
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        super::asks::elicit(&self.callers, &self.server, request).await
    }

    #[allow(deprecated)] // sampling: see asks.rs
    async fn create_message(
        &self,
        request: rmcp::model::CreateMessageRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        super::asks::sample(&self.callers, &self.server, request).await
    }

    fn get_info(&self) -> ClientConfig {
        // Elicitation (forms) and sampling, routed to the person of the running call's
        // session; no roots; the Tasks extension.
        // LATEST_WITH_INITIALIZE for a server of the initialize era (`lifecycle` offers
        // the stateless revision first); the server answers with the one it speaks.
        ClientConfig::new(
            client_capabilities(),
            Implementation::new("amberd", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

/// What amberd offers servers: elicitation (forms) and sampling, and the Tasks extension.
pub(super) fn client_capabilities() -> ClientCapabilities {
    serde_json::from_value::<ClientCapabilities>(serde_json::json!({
        "elicitation": {"form": {}},
        "sampling": {},
        // Long calls may become tasks: `tasks.rs` follows them.
        "extensions": {rmcp::model::TASKS_EXTENSION_ID: {}},
    }))
    .unwrap_or_default()
}

/// Why a connection did not open.
enum Opened {
    /// Auto's `server/discover` got a success of another kind (an initialize-era server
    /// answering what it does not know with `{}`): try that era's handshake.
    AnsweredDiscoverAsAnything,
    /// One line for `McpServerInfo.error`.
    Failed(String),
}

impl Opened {
    fn into_text(self) -> String {
        match self {
            Opened::AnsweredDiscoverAsAnything => {
                "initialize failed: the server answered `server/discover` with something else"
                    .to_owned()
            }
            Opened::Failed(text) => text,
        }
    }
}

impl From<String> for Opened {
    fn from(text: String) -> Self {
        Opened::Failed(text)
    }
}

/// The initialize handshake only, at its newest version.
fn initialize_era() -> rmcp::ClientLifecycleMode {
    rmcp::ClientLifecycleMode::Initialize
}

/// Either era of MCP, whichever the server speaks: the stateless revision (`server/discover`,
/// then every request carries its own `_meta` with the version and the client's
/// capabilities), else the `initialize` handshake at its newest version.
fn lifecycle() -> rmcp::ClientLifecycleMode {
    rmcp::ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
    }
}

fn prompt_from(p: rmcp::model::Prompt) -> McpPrompt {
    McpPrompt {
        server: String::new(),
        name: p.name,
        description: p.description.or(p.title),
        arguments: p
            .arguments
            .unwrap_or_default()
            .into_iter()
            .map(|a| McpPromptArgument {
                name: a.name,
                description: a.description.or(a.title),
                required: a.required.unwrap_or(false),
            })
            .collect(),
    }
}

/// The last lines a child wrote to stderr.
#[derive(Clone, Default)]
struct Tail(Arc<Mutex<VecDeque<String>>>);

impl Tail {
    fn push(&self, line: String) {
        let mut lines = self.0.locked();
        if lines.len() == STDERR_TAIL {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    fn joined(&self) -> String {
        let lines = self.0.locked();
        lines.iter().cloned().collect::<Vec<_>>().join(" | ")
    }
}

fn with_stderr(message: String, tail: &Tail) -> String {
    let tail = tail.joined();
    if tail.is_empty() {
        message
    } else {
        format!("{message} (stderr: {tail})")
    }
}

/// Copies the child's stderr to the daemon log line by line (bytes, not UTF-8 lines, so
/// odd output never stops the reader and the child never blocks on a full pipe).
fn log_stderr(server: String, pipe: ChildStderr, tail: Tail) {
    tokio::spawn(async move {
        let mut reader = BufReader::new(pipe);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf);
                    let line = line.trim_end();
                    if line.is_empty() {
                        continue;
                    }
                    tracing::info!(target: "amberd::mcp::stderr", server = %server, "{line}");
                    tail.push(line.chars().take(300).collect());
                }
            }
        }
    });
}
