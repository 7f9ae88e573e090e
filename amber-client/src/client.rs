//! `Client`: one initialized WebSocket connection to `amberd`, with typed calls.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use amber_proto::methods::{self as m, Method, Subscription};
use amber_proto::{
    ApprovalRespondParams, ApprovalRespondResult, ClientCapabilities, DaemonStatus, Decision,
    Empty, InitializeParams, InitializeResult, Mode, PROTOCOL_VERSION, PeerInfo,
    SessionCancelResult, SessionDeleteParams, SessionGetResult, SessionIdParams, SessionInfo,
    SessionListParams, SessionListResult, SessionNewParams, SessionPromptParams,
    SessionPromptResult, SessionSetModeParams, SessionSubscribeParams, SessionWatchParams,
    ToolListParams, ToolListResult,
};
use jsonrpsee::core::client::{ClientBuilder, ClientT, SubscriptionClientT, SubscriptionKind};
use jsonrpsee::core::traits::ToRpcParams;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use tokio::net::UnixStream;

use crate::events::{EventStream, RawEventStream};
use crate::in_flight::{InFlight, TrackedSender};
use crate::transport::{self, CloseReasons, WatchedReceiver};
use crate::watch::SessionWatchStream;
use crate::{ClientError, autostart};

/// How long one call may take before `ClientError::Timeout`.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// Events buffered per subscription before the client itself gives up on it.
pub const SUBSCRIPTION_BUFFER: usize = 16 * 1024;

/// How to reach the daemon and what to tell it about this client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectOptions {
    /// `--socket`; `None` applies PROTOCOL.md's rule.
    pub socket: Option<PathBuf>,
    /// Start `amberd` in the background when nothing answers.
    pub autostart: bool,
    pub client_name: String,
    pub client_version: String,
    /// This connection answers approval requests.
    pub approvals: bool,
    /// Reach a daemon on another host through a command (`--remote`, `AMBER_REMOTE`)
    /// instead of the local socket; `socket` and `autostart` are then the far end's
    /// business.
    pub remote: Option<crate::Remote>,
}

impl ConnectOptions {
    /// Default socket, autostart on, no approvals.
    pub fn new(client_name: impl Into<String>, client_version: impl Into<String>) -> Self {
        Self {
            socket: None,
            autostart: true,
            client_name: client_name.into(),
            client_version: client_version.into(),
            approvals: false,
            remote: None,
        }
    }
}

/// A connected, initialized client. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    rpc: jsonrpsee::core::client::Client,
    socket: PathBuf,
    /// The remote daemon's host, when connected through `--remote`.
    remote: Option<String>,
    server_info: InitializeResult,
    reasons: CloseReasons,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("socket", &self.inner.socket)
            .field("remote", &self.inner.remote)
            .field("server_info", &self.inner.server_info)
            .finish_non_exhaustive()
    }
}

/// Params already serialized to JSON.
pub(crate) struct RawParams(pub(crate) Box<RawValue>);

impl ToRpcParams for RawParams {
    fn to_rpc_params(self) -> Result<Option<Box<RawValue>>, serde_json::Error> {
        Ok(Some(self.0))
    }
}

/// Room the request's envelope (`jsonrpc`, `id`, `method`) takes besides its params.
const ENVELOPE_BYTES: usize = 1024;

/// Params encoded for a call. Params the transport would refuse to send are refused here:
/// a send that fails ends the whole connection, a call refused here ends only itself.
pub(crate) fn raw_params<P: Serialize>(method: &str, params: &P) -> Result<RawParams, ClientError> {
    let raw = serde_json::value::to_raw_value(params)
        .map_err(|e| ClientError::Protocol(format!("cannot encode params of `{method}`: {e}")))?;
    let limit = transport::MAX_REQUEST_BYTES as usize;
    let bytes = raw.get().len() + method.len() + ENVELOPE_BYTES;
    if bytes > limit {
        return Err(ClientError::TooLarge {
            method: method.to_owned(),
            bytes,
            limit,
        });
    }
    Ok(RawParams(raw))
}

/// Connects the raw stream, starting the daemon first if allowed and needed.
pub(crate) async fn open_stream(socket: &Path, autostart: bool) -> Result<UnixStream, ClientError> {
    if let Some(stream) = transport::connect_stream(socket).await? {
        return Ok(stream);
    }
    if !autostart {
        return Err(ClientError::DaemonNotRunning {
            socket: socket.to_owned(),
        });
    }
    autostart::ensure_running(socket).await?;
    transport::connect_stream(socket)
        .await?
        .ok_or_else(|| ClientError::Autostart {
            socket: socket.to_owned(),
            log: autostart::log_path(socket),
            reason: "amberd started but stopped answering".into(),
        })
}

impl Client {
    /// Finds the socket, autostarts if allowed, upgrades to WebSocket and sends `initialize`.
    /// With [`ConnectOptions::remote`], runs the remote command and speaks over its
    /// stdin/stdout instead (`remote.rs`).
    pub async fn connect(opts: ConnectOptions) -> Result<Client, ClientError> {
        let socket = transport::resolve_socket(opts.socket.clone());
        let reasons = CloseReasons::default();
        let in_flight = InFlight::default();
        let builder = || {
            ClientBuilder::default()
                .request_timeout(REQUEST_TIMEOUT)
                .max_buffer_capacity_per_subscription(SUBSCRIPTION_BUFFER)
        };
        let (rpc, remote) = match &opts.remote {
            Some(remote) => {
                let (sender, receiver, stderr) = crate::remote::spawn(remote)?;
                let rpc = builder().build_with_tokio(
                    TrackedSender {
                        inner: sender,
                        in_flight: in_flight.clone(),
                    },
                    WatchedReceiver {
                        inner: receiver,
                        reasons: reasons.clone(),
                        in_flight: in_flight.clone(),
                    },
                );
                (rpc, Some((remote.clone(), stderr)))
            }
            None => {
                let stream = open_stream(&socket, opts.autostart).await?;
                let (sender, receiver) = transport::handshake(stream).await?;
                let rpc = builder().build_with_tokio(
                    TrackedSender {
                        inner: sender,
                        in_flight: in_flight.clone(),
                    },
                    WatchedReceiver {
                        inner: receiver,
                        reasons: reasons.clone(),
                        in_flight: in_flight.clone(),
                    },
                );
                (rpc, None)
            }
        };
        let params = InitializeParams {
            protocol_version: PROTOCOL_VERSION,
            client_info: PeerInfo {
                name: opts.client_name,
                version: opts.client_version,
            },
            capabilities: ClientCapabilities {
                approvals: opts.approvals,
            },
        };
        let server_info = match (call_on::<m::Initialize>(&rpc, &params).await, &remote) {
            (Ok(info), _) => info,
            // The command failed before the daemon could answer: say what it printed.
            (Err(e), Some((remote, stderr))) => {
                let said = stderr.text();
                let reason = match said.is_empty() {
                    true => e.to_string(),
                    false => format!("it ended before the daemon answered: {said}"),
                };
                return Err(ClientError::Remote {
                    command: remote.display(),
                    reason,
                });
            }
            (Err(e), None) => return Err(e),
        };
        if server_info.protocol_version != PROTOCOL_VERSION {
            return Err(ClientError::VersionMismatch {
                server: server_info.protocol_version,
                client: PROTOCOL_VERSION,
            });
        }
        Ok(Client {
            inner: Arc::new(Inner {
                rpc,
                socket,
                remote: remote.map(|(r, _)| r.host),
                server_info,
                reasons,
            }),
        })
    }

    /// The socket this client is connected to.
    pub fn socket(&self) -> &Path {
        &self.inner.socket
    }

    /// The host of the remote daemon this client reaches through `--remote`, if it does.
    pub fn remote(&self) -> Option<&str> {
        self.inner.remote.as_deref()
    }

    /// What the daemon answered to `initialize`.
    pub fn server_info(&self) -> &InitializeResult {
        &self.inner.server_info
    }

    /// False once the connection is gone.
    pub fn is_connected(&self) -> bool {
        self.inner.rpc.is_connected()
    }

    /// Completes when the connection closes, with the reason.
    pub async fn closed(&self) -> ClientError {
        let err = self.inner.rpc.on_disconnect().await;
        ClientError::Transport(format!("closed ({err})"))
    }

    /// Calls `M`: its params and result are the types `amber_proto` declares for it
    /// (`client.request::<methods::SessionNew>(&params)` answers a `SessionInfo`).
    pub async fn request<M: Method>(&self, params: &M::Params) -> Result<M::Result, ClientError> {
        call_on::<M>(&self.inner.rpc, params).await
    }

    /// Calls `M` and keeps its result as the daemon sent it, for output that must pass on
    /// fields this client does not know (`--json`).
    pub async fn request_json<M: Method>(
        &self,
        params: &M::Params,
    ) -> Result<serde_json::Value, ClientError> {
        self.call(M::NAME, params).await
    }

    /// An untyped call: any method by name, any params, any result. For methods this
    /// crate has no type for (a newer daemon's) and for tests of the wire itself; typed
    /// code uses [`Client::request`].
    pub async fn call<P: Serialize, R: DeserializeOwned>(
        &self,
        method: &str,
        params: P,
    ) -> Result<R, ClientError> {
        call_raw(&self.inner.rpc, method, &params).await
    }

    pub async fn daemon_status(&self) -> Result<DaemonStatus, ClientError> {
        self.request::<m::DaemonStatus>(&Empty {}).await
    }

    pub async fn daemon_shutdown(&self) -> Result<Empty, ClientError> {
        self.request::<m::DaemonShutdown>(&Empty {}).await
    }

    pub async fn session_new(&self, params: &SessionNewParams) -> Result<SessionInfo, ClientError> {
        self.request::<m::SessionNew>(params).await
    }

    pub async fn session_list(
        &self,
        params: &SessionListParams,
    ) -> Result<SessionListResult, ClientError> {
        self.request::<m::SessionList>(params).await
    }

    /// Every session, following `nextCursor` until the end.
    pub async fn session_list_all(&self) -> Result<Vec<SessionInfo>, ClientError> {
        let mut all = Vec::new();
        let mut params = SessionListParams::default();
        loop {
            let page = self.session_list(&params).await?;
            let empty = page.sessions.is_empty();
            all.extend(page.sessions);
            match page.next_cursor {
                Some(cursor) if !empty && params.cursor.as_ref() != Some(&cursor) => {
                    params.cursor = Some(cursor);
                }
                _ => return Ok(all),
            }
        }
    }

    pub async fn session_get(&self, session_id: &str) -> Result<SessionGetResult, ClientError> {
        self.session_get_page(session_id, None, None).await
    }

    pub async fn session_delete(&self, session_id: &str) -> Result<Empty, ClientError> {
        let params = SessionDeleteParams {
            session_id: session_id.to_owned(),
            ..SessionDeleteParams::default()
        };
        self.request::<m::SessionDelete>(&params).await
    }

    pub async fn session_prompt(
        &self,
        session_id: &str,
        text: &str,
    ) -> Result<SessionPromptResult, ClientError> {
        let params = SessionPromptParams {
            session_id: session_id.to_owned(),
            text: text.to_owned(),
            output_schema: None,
            max_iterations: None,
        };
        self.request::<m::SessionPrompt>(&params).await
    }

    /// `session/prompt` with every parameter: an output schema, an iteration cap.
    pub async fn session_prompt_with(
        &self,
        params: &SessionPromptParams,
    ) -> Result<SessionPromptResult, ClientError> {
        self.request::<m::SessionPrompt>(params).await
    }

    pub async fn session_cancel(
        &self,
        session_id: &str,
    ) -> Result<SessionCancelResult, ClientError> {
        self.request::<m::SessionCancel>(&session_id_params(session_id))
            .await
    }

    pub async fn session_set_mode(
        &self,
        session_id: &str,
        mode: Mode,
    ) -> Result<SessionInfo, ClientError> {
        let params = SessionSetModeParams {
            session_id: session_id.to_owned(),
            mode,
        };
        self.request::<m::SessionSetMode>(&params).await
    }

    pub async fn tool_list(&self, session_id: Option<&str>) -> Result<ToolListResult, ClientError> {
        let params = ToolListParams {
            session_id: session_id.map(str::to_owned),
        };
        self.request::<m::ToolList>(&params).await
    }

    pub async fn approval_respond(
        &self,
        session_id: &str,
        request_id: &str,
        decision: Decision,
    ) -> Result<ApprovalRespondResult, ClientError> {
        self.approval_respond_with(session_id, request_id, decision, None)
            .await
    }

    /// [`Client::approval_respond`], with what the person said (for a `deny`).
    pub async fn approval_respond_with(
        &self,
        session_id: &str,
        request_id: &str,
        decision: Decision,
        feedback: Option<String>,
    ) -> Result<ApprovalRespondResult, ClientError> {
        let params = ApprovalRespondParams {
            session_id: session_id.to_owned(),
            request_id: request_id.to_owned(),
            decision,
            feedback,
            content: None,
        };
        self.request::<m::ApprovalRespond>(&params).await
    }

    /// Subscribes to a session's events, typed. Events of types this client does not know are skipped.
    pub async fn subscribe(
        &self,
        session_id: &str,
        after_seq: Option<u64>,
    ) -> Result<EventStream, ClientError> {
        Ok(EventStream::new(
            self.subscribe_raw(session_id, after_seq).await?,
        ))
    }

    /// Subscribes to a session's events, keeping each event's JSON exactly as received.
    pub async fn subscribe_raw(
        &self,
        session_id: &str,
        after_seq: Option<u64>,
    ) -> Result<RawEventStream, ClientError> {
        let params = SessionSubscribeParams {
            session_id: session_id.to_owned(),
            after_seq,
        };
        let (sub, sub_id) = self
            .open_subscription::<m::SessionSubscribe>(&params)
            .await?;
        Ok(RawEventStream::new(
            sub,
            sub_id,
            self.clone(),
            self.inner.reasons.clone(),
        ))
    }

    /// Watches every session of the daemon (`session/watch`): one [`amber_proto::SessionChange`]
    /// per change — created, state, title, mode, a turn queued, started or ended, an approval
    /// asked or answered, usage, a rewind, deleted — until [`SessionWatchStream::unsubscribe`].
    ///
    /// The watch only reports changes: call [`Client::session_list`] after this returns, then
    /// apply the changes in arrival order over the list (a session's changes arrive in the
    /// order they happened, each with its whole info after the change).
    ///
    /// `approvals`: on a connection made with [`ConnectOptions::approvals`], it is an
    /// approver of every session while the watch lasts (their approval requests wait for
    /// its `approval/respond` instead of being denied for want of an approver); elsewhere
    /// the flag counts for nothing.
    pub async fn watch_sessions(&self, approvals: bool) -> Result<SessionWatchStream, ClientError> {
        let params = SessionWatchParams { approvals };
        let (sub, sub_id) = self.open_subscription::<m::SessionWatch>(&params).await?;
        Ok(SessionWatchStream::new(
            sub,
            sub_id,
            self.clone(),
            self.inner.reasons.clone(),
        ))
    }

    /// Opens subscription `S`; its id as [`CloseReasons`] keys it.
    async fn open_subscription<S: Subscription>(
        &self,
        params: &S::Params,
    ) -> Result<
        (
            jsonrpsee::core::client::Subscription<Box<RawValue>>,
            Option<String>,
        ),
        ClientError,
    > {
        let sub = self
            .inner
            .rpc
            .subscribe::<Box<RawValue>, _>(
                S::NAME,
                raw_params(S::NAME, params)?,
                <<S as Subscription>::Unsubscribe as Method>::NAME,
            )
            .await
            .map_err(|e| ClientError::from_rpc(S::NAME, e))?;
        let sub_id = match sub.kind() {
            SubscriptionKind::Subscription(id) => serde_json::to_value(id)
                .ok()
                .map(|v| transport::sub_id_key(&v)),
            _ => None,
        };
        Ok((sub, sub_id))
    }
}

/// Calls `M` on a connection.
async fn call_on<M: Method>(
    rpc: &jsonrpsee::core::client::Client,
    params: &M::Params,
) -> Result<M::Result, ClientError> {
    call_raw(rpc, M::NAME, params).await
}

async fn call_raw<P: Serialize, R: DeserializeOwned>(
    rpc: &jsonrpsee::core::client::Client,
    method: &str,
    params: &P,
) -> Result<R, ClientError> {
    rpc.request(method, raw_params(method, params)?)
        .await
        .map_err(|e| ClientError::from_rpc(method, e))
}

fn session_id_params(session_id: &str) -> SessionIdParams {
    SessionIdParams {
        session_id: session_id.to_owned(),
    }
}
