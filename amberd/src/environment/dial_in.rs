//! Executors that dial in (`amber-exec --connect wss://…`), for hosts amberd cannot reach:
//! amberd's listener for them and the connections waiting to be claimed.
//!
//! The listener is off unless `[executors] listen` says where; it speaks TLS only (the
//! config's certificate and key), then a WebSocket upgrade on `/executors` whose
//! `Authorization: Bearer` token must be the one `[environments.NAME] token_file` holds for
//! the `X-Amber-Executor: NAME` it claims — compared in constant time; anything else gets 401
//! and nothing more. An accepted connection waits in [`DialIns`] under its name until a
//! session on `executor:NAME` claims it; the executor serves only the sessions amberd opens
//! on it. Its text messages are the protocol's lines.
//!
//! A fleet runner dials the same path with its pool's token, `X-Amber-Pool` and
//! `X-Amber-Runner`: without `X-Amber-Session` that is its control connection (served by
//! the fleet); with it, the connection of a session the fleet assigned to that runner,
//! which waits in [`DialIns`] as `fleet:SESSION` — any other session is refused.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use amber_proto::sync::Locked;
use tokio::io::{DuplexStream, ReadHalf, WriteHalf};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_util::sync::CancellationToken;

use super::spec::ExecutorsConfig;
use crate::fleet::Fleet;
use amber_executor::runner_wire::{POOL_HEADER, RUNNER_HEADER, SESSION_HEADER};

/// The path executors dial.
const PATH: &str = "/executors";
/// The header naming the dialling executor.
const NAME_HEADER: &str = "x-amber-executor";
/// How long a connection may take to finish TLS and the upgrade.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A dialled connection as byte streams (one protocol line per WebSocket message).
pub(crate) type Dialled = (
    Box<dyn tokio::io::AsyncRead + Send + Unpin>,
    Box<dyn tokio::io::AsyncWrite + Send + Unpin>,
);

/// A dialled connection's halves on amberd's side of the pipe pair.
type Halves = (ReadHalf<DuplexStream>, WriteHalf<DuplexStream>);

/// Connections of executors that dialled in, by name, until a link claims them.
#[derive(Default)]
pub(crate) struct DialIns {
    waiting: Mutex<HashMap<String, Halves>>,
    arrived: Notify,
    /// Whether the listener runs (`[executors] listen`): without it nobody can dial in.
    listening: std::sync::atomic::AtomicBool,
}

impl DialIns {
    /// Executor `name` dialled in: its newest connection replaces one not yet claimed.
    fn offer(&self, name: &str, conn: Halves) {
        self.waiting.locked().insert(name.to_owned(), conn);
        self.arrived.notify_waiters();
    }

    /// Drops executor `name`'s connection if one waits (dialled by a runner that no longer
    /// holds the session).
    pub(crate) fn discard(&self, name: &str) {
        self.waiting.locked().remove(name);
    }

    /// Claims executor `name`'s connection, waiting at most `wait` for it to dial in.
    pub(crate) async fn take(&self, name: &str, wait: Duration) -> Result<Dialled, String> {
        if !self.listening.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(format!(
                "executor `{name}` dials in, and amberd's executor listener is off ([executors] listen)"
            ));
        }
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let arrived = self.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            if let Some((reader, writer)) = self.waiting.locked().remove(name) {
                return Ok((Box::new(reader), Box::new(writer)));
            }
            tokio::select! {
                () = arrived => {}
                () = tokio::time::sleep_until(deadline) => {
                    return Err(format!(
                        "executor `{name}` has not dialled in (waited {} s)",
                        wait.as_secs()
                    ));
                }
            }
        }
    }
}

/// Why the listener cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("[executors]: {0}")]
    Config(String),
    #[error("[executors] cannot read {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("[executors] cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
}

/// The token an executor named so must present, when the config lets it dial in.
pub(crate) type Tokens = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Who dialled, once let in.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Dialler {
    Executor(String),
    /// A runner's control connection.
    Runner {
        pool: String,
        runner: String,
    },
    /// A runner's connection for a session assigned to it.
    RunnerSession {
        runner: String,
        session: String,
    },
}

/// What the listener checks a dialler against.
#[derive(Clone)]
pub(crate) struct Gate {
    pub executors: Tokens,
    pub fleet: Arc<Fleet>,
}

/// The name a fleet session's connection waits under.
pub(crate) fn fleet_name(session: &str) -> String {
    format!("fleet:{session}")
}

/// Binds `[executors] listen` (when set) and serves dialling executors until `shutdown`.
/// `Ok(None)`: off.
pub(crate) async fn listen(
    config: &ExecutorsConfig,
    gate: Gate,
    dial_ins: Arc<DialIns>,
    shutdown: CancellationToken,
) -> Result<Option<std::net::SocketAddr>, ListenError> {
    let Some(addr) = &config.listen else {
        return Ok(None);
    };
    config.check().map_err(ListenError::Config)?;
    let (Some(cert), Some(key)) = (&config.tls_cert, &config.tls_key) else {
        return Err(ListenError::Config("tls_cert and tls_key".to_owned()));
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(server_tls(cert, key)?);
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ListenError::Bind {
            addr: addr.clone(),
            source,
        })?;
    let local = listener.local_addr().map_err(|source| ListenError::Bind {
        addr: addr.clone(),
        source,
    })?;
    tracing::info!(%local, "listening for executors that dial in");
    dial_ins
        .listening
        .store(true, std::sync::atomic::Ordering::SeqCst);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = shutdown.cancelled() => return,
            };
            let Ok((tcp, peer)) = accepted else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let acceptor = acceptor.clone();
            let gate = gate.clone();
            let dial_ins = Arc::clone(&dial_ins);
            tokio::spawn(async move {
                let fleet = Arc::clone(&gate.fleet);
                let accepted =
                    tokio::time::timeout(HANDSHAKE_TIMEOUT, accept(acceptor, tcp, gate)).await;
                match accepted {
                    Ok(Ok((Dialler::Executor(name), ws))) => {
                        tracing::info!(%peer, executor = %name, "an executor dialled in");
                        bridge(&dial_ins, &name, ws);
                    }
                    Ok(Ok((Dialler::Runner { pool, runner }, ws))) => {
                        tracing::info!(%peer, %runner, %pool, "a runner dialled in");
                        let (reader, writer) = amber_executor::ws_lines::bridge(ws);
                        crate::fleet::control::serve(fleet, pool, runner, reader, writer).await;
                    }
                    Ok(Ok((Dialler::RunnerSession { runner, session }, ws))) => {
                        tracing::debug!(%peer, %runner, %session, "a runner dialled for a session");
                        bridge(&dial_ins, &fleet_name(&session), ws);
                    }
                    Ok(Err(err)) => tracing::warn!(%peer, "refused a dialling executor: {err}"),
                    Err(_) => tracing::warn!(%peer, "a dialling executor took too long"),
                }
            });
        }
    });
    Ok(Some(local))
}

type Stream =
    tokio_tungstenite::WebSocketStream<tokio_rustls::server::TlsStream<tokio::net::TcpStream>>;

/// TLS, then the upgrade with its name and token checked.
// The callback's type (its large error: an HTTP response) is tungstenite's.
#[allow(clippy::result_large_err)]
async fn accept(
    acceptor: tokio_rustls::TlsAcceptor,
    tcp: tokio::net::TcpStream,
    gate: Gate,
) -> Result<(Dialler, Stream), String> {
    let _ = tcp.set_nodelay(true);
    let tls = acceptor
        .accept(tcp)
        .await
        .map_err(|e| format!("TLS: {e}"))?;
    let mut name = None;
    let check = |request: &Request, response: Response| -> Result<Response, ErrorResponse> {
        match authorized(request, &gate) {
            Ok(who) => {
                name = Some(who);
                Ok(response)
            }
            Err(why) => {
                let mut refusal = ErrorResponse::new(Some(why));
                *refusal.status_mut() = StatusCode::UNAUTHORIZED;
                Err(refusal)
            }
        }
    };
    let ws = tokio_tungstenite::accept_hdr_async(tls, check)
        .await
        .map_err(|e| format!("upgrade: {e}"))?;
    let name = name.ok_or("no name")?;
    Ok((name, ws))
}

/// Who dials, if the request's path, names and token hold: an executor by its name and
/// token, a runner by its pool's token, a runner's session only when the fleet assigned
/// that session to that runner of that pool.
fn authorized(request: &Request, gate: &Gate) -> Result<Dialler, String> {
    if request.uri().path() != PATH {
        return Err(format!("executors dial {PATH}"));
    }
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let given = header("authorization")
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or("no bearer token")?
        .trim();
    let Some(pool) = header(POOL_HEADER) else {
        let name = header(NAME_HEADER).ok_or("no executor name")?;
        let expected = (gate.executors)(name).ok_or("unknown executor or wrong token")?;
        if !same(given.as_bytes(), expected.as_bytes()) {
            return Err("unknown executor or wrong token".to_owned());
        }
        return Ok(Dialler::Executor(name.to_owned()));
    };
    let runner = header(RUNNER_HEADER).ok_or("no runner id")?;
    if !crate::fleet::config::is_word(runner) {
        return Err("a runner's id is letters, digits, `-`, `_` and `.`".to_owned());
    }
    let expected = gate
        .fleet
        .config()
        .token_of(pool)
        .ok_or("unknown pool or wrong token")?;
    if !same(given.as_bytes(), expected.as_bytes()) {
        return Err("unknown pool or wrong token".to_owned());
    }
    let Some(session) = header(SESSION_HEADER) else {
        return Ok(Dialler::Runner {
            pool: pool.to_owned(),
            runner: runner.to_owned(),
        });
    };
    match gate.fleet.holder_of(session) {
        Some((holder, holder_pool)) if holder == runner && holder_pool == pool => {
            Ok(Dialler::RunnerSession {
                runner: runner.to_owned(),
                session: session.to_owned(),
            })
        }
        _ => Err("that session is not assigned to this runner".to_owned()),
    }
}

/// Equal, in time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Turns the WebSocket into byte streams and offers them under `name`.
fn bridge(dial_ins: &DialIns, name: &str, ws: Stream) {
    dial_ins.offer(name, amber_executor::ws_lines::bridge(ws));
}

/// The server's TLS config from PEM files.
fn server_tls(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, ListenError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let read = |path: &Path| {
        std::fs::read(path).map_err(|e| ListenError::Read {
            path: path.display().to_string(),
            reason: e.to_string(),
        })
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&read(cert)?)
        .collect::<Result<_, _>>()
        .map_err(|e| ListenError::Read {
            path: cert.display().to_string(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(ListenError::Read {
            path: cert.display().to_string(),
            reason: "no certificate in it".to_owned(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(&read(key)?).map_err(|e| ListenError::Read {
        path: key.display().to_string(),
        reason: e.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
        .map_err(|e| ListenError::Config(format!("TLS: {e}")))?;
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Quiet;
    impl crate::fleet::FleetSession for Quiet {
        fn changed(&self, _: &amber_proto::FleetInfo, _: Option<&str>, _: u64) {}
        fn runner_lost(&self, _: &str) {}
        fn park(&self) {}
    }

    fn runner_request(pool: &str, runner: &str, session: Option<&str>, token: &str) -> Request {
        let mut builder = Request::builder()
            .uri(PATH)
            .header(POOL_HEADER, pool)
            .header(RUNNER_HEADER, runner)
            .header("authorization", format!("Bearer {token}"));
        if let Some(session) = session {
            builder = builder.header(SESSION_HEADER, session);
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn a_runner_gets_in_with_its_pools_token_and_only_for_the_sessions_it_was_given() {
        let dir = tempfile::tempdir().unwrap();
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, "pool-token\n").unwrap();
        let fleet = crate::fleet::Fleet::new(crate::fleet::FleetConfig {
            pools: [(
                "default".to_owned(),
                crate::fleet::config::PoolConfig {
                    token_file: Some(token_file),
                    max_sessions: None,
                },
            )]
            .into(),
            ..crate::fleet::FleetConfig::default()
        });
        let info = amber_proto::FleetInfo {
            repo: "file:///r.git".to_owned(),
            git_ref: "main".to_owned(),
            setup: Vec::new(),
            labels: Default::default(),
            priority: 0,
            state: amber_proto::FleetState::Queued,
            runner: None,
            pool: None,
            attempts: 0,
            push: None,
        };
        fleet.enqueue("s1", info, Arc::new(Quiet), None);
        fleet.watch_for_tests_assign("r1", "default", "s1");
        let gate = Gate {
            executors: Arc::new(|_: &str| None),
            fleet,
        };
        let allowed = |pool, runner, session, token| {
            authorized(&runner_request(pool, runner, session, token), &gate)
        };
        assert_eq!(
            allowed("default", "r1", None, "pool-token"),
            Ok(Dialler::Runner {
                pool: "default".to_owned(),
                runner: "r1".to_owned()
            })
        );
        assert_eq!(
            allowed("default", "r1", Some("s1"), "pool-token"),
            Ok(Dialler::RunnerSession {
                runner: "r1".to_owned(),
                session: "s1".to_owned()
            })
        );
        for (pool, runner, session, token) in [
            ("default", "r1", None, "wrong"),
            ("other", "r1", None, "pool-token"),
            ("default", "r2", Some("s1"), "pool-token"),
            ("default", "r1", Some("s2"), "pool-token"),
            ("default", "r1", Some("s1"), "wrong"),
            ("default", "bad id", None, "pool-token"),
        ] {
            assert!(
                allowed(pool, runner, session, token).is_err(),
                "{pool} {runner} {session:?} {token}"
            );
        }
    }

    fn request(path: &str, name: Option<&str>, token: Option<&str>) -> Request {
        let mut builder = Request::builder().uri(path);
        if let Some(name) = name {
            builder = builder.header(NAME_HEADER, name);
        }
        if let Some(token) = token {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        builder.body(()).unwrap()
    }

    fn gate() -> Gate {
        Gate {
            executors: Arc::new(|name: &str| match name {
                "gpu1" => Some("s3cret".to_owned()),
                "gpu2" => Some("other".to_owned()),
                _ => None,
            }),
            fleet: crate::fleet::Fleet::new(crate::fleet::FleetConfig::default()),
        }
    }

    #[test]
    fn only_a_known_name_with_its_own_token_on_the_path_is_let_in() {
        let gate = gate();
        assert_eq!(
            authorized(&request(PATH, Some("gpu1"), Some("s3cret")), &gate),
            Ok(Dialler::Executor("gpu1".to_owned()))
        );
        for (path, name, token) in [
            ("/", Some("gpu1"), Some("s3cret")),
            (PATH, Some("gpu2"), Some("s3cret")),
            (PATH, Some("gpu1"), Some("s3cre")),
            (PATH, Some("nope"), Some("s3cret")),
            (PATH, None, Some("s3cret")),
            (PATH, Some("gpu1"), None),
        ] {
            assert!(
                authorized(&request(path, name, token), &gate).is_err(),
                "{path} {name:?} {token:?}"
            );
        }
    }
}
