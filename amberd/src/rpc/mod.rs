//! The socket server: accept, check the peer's uid, take a connection slot, and serve the
//! connection (`conn`: HTTP POST and WebSocket on the same socket, answered by jsonrpsee
//! behind amber's own layers), shut down gracefully.

mod admission;
mod agents;
mod budget;
mod conn;
mod conn_io;
mod envelope;
pub(crate) mod gate;
mod http_intake;
mod mcp;
pub(crate) mod methods;
pub(crate) mod params;
mod plugins;
mod routines;
pub mod socket;
pub(crate) mod subscribe;
mod table;
mod unread;
mod watch;
mod ws_frames;
mod ws_guard;

use std::sync::Arc;
use std::time::Duration;

use amber_proto::errors;
use jsonrpsee::server::middleware::rpc::RpcServiceBuilder;
use jsonrpsee::server::{HttpBody, Methods, Server, ServerHandle, stop_channel};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::task::JoinSet;
use tower::Service;

use crate::config::ServerConfig;
use crate::daemon::Daemon;
use gate::InitGate;

/// Errors that stop the server from starting.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot register RPC methods: {0}")]
    Register(#[from] jsonrpsee::core::RegisterMethodError),
}

/// Serves until `daemon.shutdown` fires, then winds down: sessions first (their turns are
/// cancelled and end with `turn_completed`), then the connections.
pub async fn serve(listener: UnixListener, daemon: Arc<Daemon>) -> Result<(), ServeError> {
    let cfg = &daemon.sessions.services().live().config.server;
    let methods: Methods = methods::module(daemon.clone())?.into();
    let builder = Server::builder()
        .set_config(jsonrpsee_config(cfg))
        .set_rpc_middleware(RpcServiceBuilder::new().layer_fn(InitGate::new))
        .to_service_builder();
    let (stop_handle, server_handle) = stop_channel();
    let slots = admission::Slots::new(
        cfg.max_connections as usize,
        cfg.reserved_http_connections as usize,
    );
    let shared = Arc::new(connection_limits(cfg, &slots));
    let admission = Admission::new(slots);
    let mut connections = JoinSet::new();

    while let Some(stream) = accept(&listener, &daemon).await {
        // Reap finished connection tasks so the set does not grow without bound.
        while connections.try_join_next().is_some() {}
        let slot = match admission.admit(&stream) {
            Ok(slot) => slot,
            Err(Refusal::Told(response)) => {
                connections.spawn(refuse(stream, response));
                continue;
            }
            Err(Refusal::Dropped) => continue,
        };
        let tower_service = builder.clone().build(methods.clone(), stop_handle.clone());
        // A concrete error type sidesteps a higher-ranked `From<BoxError>` inference
        // failure when the connection future is spawned.
        let rpc = tower::service_fn(move |request: http::Request<HttpBody>| {
            let call = tower_service.clone().call(request);
            async move { call.await.map_err(|err| ConnectionError(err.to_string())) }
        });
        // The slot and the count live until both the HTTP task and any WebSocket it was
        // upgraded to (served on a task of jsonrpsee's own, holding its WsConn) are gone.
        let state = slot.state().clone();
        let lease: Arc<dyn Send + Sync> = Arc::new((slot, daemon.connection_guard()));
        let stopped = stop_handle.clone().shutdown();
        connections.spawn(conn::serve(
            stream,
            lease,
            state,
            shared.clone(),
            rpc,
            stopped,
        ));
    }

    wind_down(&daemon, server_handle, connections).await;
    Ok(())
}

/// jsonrpsee's own limits, from `[server]`.
fn jsonrpsee_config(cfg: &ServerConfig) -> jsonrpsee::server::ServerConfig {
    jsonrpsee::server::ServerConfig::builder()
        .max_request_body_size(cfg.max_message_bytes)
        .max_response_body_size(cfg.max_message_bytes)
        .max_connections(cfg.max_connections)
        .max_subscriptions_per_connection(cfg.max_subscriptions_per_connection)
        .set_message_buffer_capacity(1024)
        .build()
}

/// amber's limits in front of jsonrpsee, from `[server]`, and what every connection shares
/// to enforce them (the WebSocket slots, the byte budget).
fn connection_limits(cfg: &ServerConfig, slots: &Arc<admission::Slots>) -> conn::Shared {
    conn::Shared {
        slots: slots.clone(),
        unread: unread::UnreadBudget::new(cfg.max_unread_bytes),
        unread_per_connection: cfg.max_unread_bytes_per_connection,
        concurrent_calls: cfg.max_concurrent_calls_per_connection as usize,
        budget: budget::ByteBudget::new(cfg.max_bytes_in_flight),
        ws_limits: ws_guard::WsLimits {
            max_message: cfg.max_message_bytes as usize,
            max_unanswered: (cfg.max_unanswered_calls as usize).max(1),
            initialize_timeout: Duration::from_millis(cfg.initialize_timeout_ms),
            frame_timeout: Duration::from_millis(cfg.frame_timeout_ms),
        },
        body_limits: http_intake::BodyLimits {
            max_bytes: cfg.max_message_bytes,
            timeout: Duration::from_millis(cfg.frame_timeout_ms),
        },
    }
}

/// The next connection, or `None` once the daemon shuts down.
async fn accept(listener: &UnixListener, daemon: &Daemon) -> Option<UnixStream> {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = daemon.shutdown.cancelled() => return None,
        };
        match accepted {
            Ok((stream, _)) => return Some(stream),
            Err(err) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(%err, "accept failed");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// Who is served: the daemon's own user (PROTOCOL.md), with a connection slot
/// (`admission`: when all are held, the oldest that proved nothing yet gives its slot up).
struct Admission {
    slots: Arc<admission::Slots>,
    own_uid: u32,
}

/// Why a connection is not served.
enum Refusal {
    /// The peer is told why (an HTTP response), then the connection closes.
    Told(Vec<u8>),
    /// The connection closes without a word: its peer cannot be identified.
    Dropped,
}

impl Admission {
    fn new(slots: Arc<admission::Slots>) -> Self {
        Self {
            slots,
            own_uid: socket::current_uid(),
        }
    }

    /// The connection slot `stream` holds while it is served.
    fn admit(&self, stream: &UnixStream) -> Result<admission::Slot, Refusal> {
        let uid = match stream.peer_cred() {
            Ok(cred) => cred.uid(),
            Err(err) => {
                tracing::warn!(%err, "cannot read peer credentials; refusing");
                return Err(Refusal::Dropped);
            }
        };
        if let Err(refused) = socket::check_peer_uid(uid, self.own_uid) {
            tracing::warn!(
                peer_uid = uid,
                own_uid = self.own_uid,
                "refusing a connection from another user"
            );
            return Err(Refusal::Told(refused.response()));
        }
        self.slots.take().ok_or_else(|| {
            let message = "too many connections, each busy or initialized; retry later";
            Refusal::Told(socket::refusal(
                "503 Service Unavailable",
                errors::OVERLOADED,
                message,
            ))
        })
    }
}

/// Sessions first (their turns are cancelled and end with `turn_completed`), then plugins
/// and MCP servers, then the subscriptions' last events, then the connections.
async fn wind_down(daemon: &Daemon, server: ServerHandle, connections: JoinSet<()>) {
    tracing::info!("shutting down: cancelling turns");
    daemon.sessions.shutdown(Duration::from_secs(5)).await;
    daemon.stop_extensions().await;
    flush_subscriptions(daemon).await;
    let _ = server.stop();
    close_connections(daemon, connections).await;
}

/// Waits (at most 2 s) until each subscription has forwarded what its session published
/// last (`turn_completed`, then the close), before the connections are stopped.
async fn flush_subscriptions(daemon: &Daemon) {
    let flushed = async {
        while daemon.subscriptions() > 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    if tokio::time::timeout(Duration::from_secs(2), flushed)
        .await
        .is_err()
    {
        tracing::warn!("some subscriptions did not flush in time");
    }
}

/// Waits (at most 3 s) for every connection to close.
async fn close_connections(daemon: &Daemon, mut connections: JoinSet<()>) {
    let drain = async {
        while connections.join_next().await.is_some() {}
        // Upgraded WebSockets run on jsonrpsee's own tasks, which flush what is queued
        // (responses, the last events) before they end; their leases count them.
        while daemon.connections() > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    if tokio::time::timeout(Duration::from_secs(3), drain)
        .await
        .is_err()
    {
        tracing::warn!("some connections did not close in time");
    }
}

/// PROTOCOL.md: `curl --unix-socket $SOCK http://localhost/ -d '{...}'` works, and curl's
/// `-d` says `application/x-www-form-urlencoded`. A POST body is always JSON-RPC here.
pub(crate) fn assume_json_body<B>(request: &mut http::Request<B>) {
    let is_json = request
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    if request.method() == http::Method::POST && !is_json {
        request.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
    }
}

/// An error of one HTTP exchange on a connection.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ConnectionError(String);

/// Writes a refusal, then closes once the peer has had a moment to read it.
pub(crate) async fn refuse(mut stream: UnixStream, response: Vec<u8>) {
    let _ = stream.write_all(&response).await;
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 1024];
    let _ = tokio::time::timeout(Duration::from_millis(200), async {
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
    })
    .await;
}
