//! `amber-exec --connect wss://HOST:PORT --name NAME --token-file FILE`: an executor that
//! dials out to amberd, for hosts amberd cannot reach. TLS (rustls) with the server's
//! certificate checked against `--ca` or the system's roots, a bearer token and the
//! executor's name in the WebSocket upgrade; then amberd speaks the executor protocol over
//! the connection (one JSON-RPC line per text message), exactly as over stdio. A dropped
//! connection is dialled again with a backoff, and amberd attaches again on the new one
//! (`initialize` answers `resumed: true`); nothing the jobs produced meanwhile is lost.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use crate::executor::{Executor, Origin};

/// The header that names the dialling executor.
pub const NAME_HEADER: &str = "x-amber-executor";
/// The path amberd serves dialling executors on.
pub const PATH: &str = "/executors";
/// The longest wait between two dials.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// Why a dial failed.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    #[error("`{0}` is not a wss:// URL with a host")]
    Url(String),
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("no certificate in {0}")]
    NoCertificate(String),
    #[error("TLS: {0}")]
    Tls(String),
    #[error("cannot connect to {0}: {1}")]
    Connect(String, std::io::Error),
    #[error("the WebSocket upgrade failed: {0}")]
    Upgrade(String),
}

/// Where and as whom to dial.
#[derive(Debug, Clone)]
pub struct Dial {
    pub url: String,
    /// Who dials, as upgrade headers: an executor's name ([`NAME_HEADER`]), or a runner's
    /// pool, id and session (`runner_wire`).
    pub headers: Vec<(&'static str, String)>,
    pub token: String,
    pub tls: Arc<rustls::ClientConfig>,
}

impl Dial {
    /// The client TLS config: `ca` (PEM) as the only roots when given, else the system's.
    pub fn tls(ca: Option<&Path>) -> Result<Arc<rustls::ClientConfig>, DialError> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        match ca {
            Some(path) => {
                let shown = path.display().to_string();
                let pem = std::fs::read(path).map_err(|source| DialError::Read {
                    path: shown.clone(),
                    source,
                })?;
                let mut found = 0;
                for cert in CertificateDer::pem_slice_iter(&pem).flatten() {
                    roots.add(cert).map_err(|e| DialError::Tls(e.to_string()))?;
                    found += 1;
                }
                if found == 0 {
                    return Err(DialError::NoCertificate(shown));
                }
            }
            None => {
                for cert in rustls_native_certs::load_native_certs().certs {
                    let _ = roots.add(cert);
                }
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| DialError::Tls(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Arc::new(config))
    }

    /// The host and port of the URL.
    fn endpoint(&self) -> Result<(String, u16), DialError> {
        let url = url::Url::parse(&self.url).map_err(|_| DialError::Url(self.url.clone()))?;
        if url.scheme() != "wss" {
            return Err(DialError::Url(self.url.clone()));
        }
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| DialError::Url(self.url.clone()))?;
        Ok((
            host.trim_matches(['[', ']']).to_owned(),
            url.port().unwrap_or(443),
        ))
    }
}

/// Dials amberd and serves it; dials again whenever the connection ends. Runs until the
/// process is stopped; a refusal that cannot change (a bad URL) ends it with the error.
pub async fn run(executor: Arc<Executor>, dial: Dial) -> Result<(), DialError> {
    let mut backoff = Duration::from_millis(200);
    loop {
        match connect_once(&dial).await {
            Ok(ws) => {
                tracing::info!(url = %dial.url, "connected to amberd");
                backoff = Duration::from_millis(200);
                serve(Arc::clone(&executor), ws).await;
                tracing::info!("the connection to amberd ended; dialling again");
            }
            Err(err @ DialError::Url(_)) => return Err(err),
            Err(err) => tracing::warn!("cannot reach amberd: {err}"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

pub type Stream = tokio_tungstenite::WebSocketStream<tokio_rustls::client::TlsStream<TcpStream>>;

/// One dial: TCP, TLS, then the upgrade with the token and the dialler's headers.
pub async fn connect_once(dial: &Dial) -> Result<Stream, DialError> {
    let (host, port) = dial.endpoint()?;
    let tcp = TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| DialError::Connect(format!("{host}:{port}"), e))?;
    let _ = tcp.set_nodelay(true);
    let server_name = rustls::pki_types::ServerName::try_from(host.clone())
        .map_err(|e| DialError::Tls(e.to_string()))?;
    let tls = tokio_rustls::TlsConnector::from(Arc::clone(&dial.tls))
        .connect(server_name, tcp)
        .await
        .map_err(|e| DialError::Tls(e.to_string()))?;
    let mut request = dial
        .url
        .as_str()
        .into_client_request()
        .map_err(|e| DialError::Upgrade(e.to_string()))?;
    let headers = request.headers_mut();
    let bearer = HeaderValue::from_str(&format!("Bearer {}", dial.token))
        .map_err(|_| DialError::Upgrade("the token is not a header value".to_owned()))?;
    headers.insert("authorization", bearer);
    for (name, value) in &dial.headers {
        let value = HeaderValue::from_str(value)
            .map_err(|_| DialError::Upgrade(format!("`{value}` is not a header value")))?;
        headers.insert(*name, value);
    }
    let (ws, _) = tokio_tungstenite::client_async(request, tls)
        .await
        .map_err(|e| DialError::Upgrade(e.to_string()))?;
    Ok(ws)
}

/// Serves one dialled connection: its text messages are the protocol's lines.
pub async fn serve(executor: Arc<Executor>, ws: Stream) {
    let (reader, writer) = crate::ws_lines::bridge(ws);
    crate::connection::serve(executor, reader, writer, Origin::Own).await;
}
