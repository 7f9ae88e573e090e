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

/// Binds `[executors] listen` (when set) and serves dialling executors until `shutdown`.
/// `Ok(None)`: off.
pub(crate) async fn listen(
    config: &ExecutorsConfig,
    tokens: Tokens,
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
            let tokens = Arc::clone(&tokens);
            let dial_ins = Arc::clone(&dial_ins);
            tokio::spawn(async move {
                let accepted =
                    tokio::time::timeout(HANDSHAKE_TIMEOUT, accept(acceptor, tcp, tokens)).await;
                match accepted {
                    Ok(Ok((name, ws))) => {
                        tracing::info!(%peer, executor = %name, "an executor dialled in");
                        bridge(&dial_ins, &name, ws);
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
    tokens: Tokens,
) -> Result<(String, Stream), String> {
    let _ = tcp.set_nodelay(true);
    let tls = acceptor
        .accept(tcp)
        .await
        .map_err(|e| format!("TLS: {e}"))?;
    let mut name = None;
    let check = |request: &Request, response: Response| -> Result<Response, ErrorResponse> {
        match authorized(request, &tokens) {
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

/// The executor's name, if the request's path, name and token hold.
fn authorized(request: &Request, tokens: &Tokens) -> Result<String, String> {
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
    let name = header(NAME_HEADER).ok_or("no executor name")?;
    let given = header("authorization")
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or("no bearer token")?;
    let expected = tokens(name).ok_or("unknown executor or wrong token")?;
    if !same(given.trim().as_bytes(), expected.as_bytes()) {
        return Err("unknown executor or wrong token".to_owned());
    }
    Ok(name.to_owned())
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

    #[test]
    fn only_a_known_name_with_its_own_token_on_the_path_is_let_in() {
        let tokens: Tokens = Arc::new(|name: &str| match name {
            "gpu1" => Some("s3cret".to_owned()),
            "gpu2" => Some("other".to_owned()),
            _ => None,
        });
        assert_eq!(
            authorized(&request(PATH, Some("gpu1"), Some("s3cret")), &tokens),
            Ok("gpu1".to_owned())
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
                authorized(&request(path, name, token), &tokens).is_err(),
                "{path} {name:?} {token:?}"
            );
        }
    }
}
