//! amber's MCP server over Streamable HTTP (`amber-cli mcp-server --http ADDR`): an opt-in
//! listener on a loopback address or a Unix socket, answering both eras of MCP (the
//! stateless 2026-07-28 revision and the `initialize` era, with its sessions) through rmcp's
//! Streamable HTTP service at `/mcp`.
//!
//! **Only the user gets in**: a TCP listener binds loopback addresses alone and every request
//! must carry the listener's token (`Authorization: Bearer TOKEN`, or `?token=TOKEN` for
//! clients that cannot set headers), compared in constant time; a request without it is
//! answered 401 before MCP sees it. A Unix socket is made 0600 in a directory that must be
//! the user's and private. `Host` must name a loopback host (rmcp's DNS-rebinding check).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::AmberServer;

/// Where the listener is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A loopback address (`127.0.0.1:0` picks a free port).
    Tcp(SocketAddr),
    /// `unix:PATH`.
    Unix(PathBuf),
}

/// Why the listener could not start.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error(
        "`{0}` is not an address: give HOST:PORT on loopback (127.0.0.1:8765, [::1]:8765) or unix:PATH"
    )]
    BadAddress(String),
    #[error("{0} is not a loopback address: amber's MCP server listens on this machine only")]
    NotLoopback(SocketAddr),
    #[error("the token must not be empty")]
    EmptyToken,
    #[error("cannot listen on {what}: {source}")]
    Listen {
        what: String,
        source: std::io::Error,
    },
    #[error(
        "the socket's directory {dir} is not private to this user ({why}): use a directory of your own with mode 0700"
    )]
    UntrustedDir { dir: PathBuf, why: String },
}

impl Listen {
    /// `HOST:PORT` (loopback) or `unix:PATH`.
    pub fn parse(text: &str) -> Result<Listen, HttpError> {
        if let Some(path) = text.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(HttpError::BadAddress(text.to_owned()));
            }
            return Ok(Listen::Unix(PathBuf::from(path)));
        }
        let addr: SocketAddr = text
            .parse()
            .map_err(|_| HttpError::BadAddress(text.to_owned()))?;
        if !addr.ip().is_loopback() {
            return Err(HttpError::NotLoopback(addr));
        }
        Ok(Listen::Tcp(addr))
    }
}

/// The token every request must carry.
#[derive(Clone)]
struct Token(Arc<str>);

impl Token {
    /// Whether `presented` is the token, in time independent of where they differ.
    fn matches(&self, presented: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), presented.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// A fresh token: 32 bytes of the kernel's randomness, hex.
pub fn new_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Serves until a signal or the listener fails. `announce` is told the URL clients use
/// (the token in its query, for a TCP listener) once the listener is bound.
pub(crate) async fn serve(
    server: AmberServer,
    listen: Listen,
    token: String,
    announce: impl FnOnce(&str),
) -> Result<(), HttpError> {
    if token.is_empty() {
        return Err(HttpError::EmptyToken);
    }
    let config = StreamableHttpServerConfig::default();
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let token = Token(token.into());
    let app = Router::new()
        .route_service("/mcp", service)
        .layer(middleware::from_fn_with_state(token.clone(), authorize));
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    match listen {
        Listen::Tcp(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|source| HttpError::Listen {
                    what: addr.to_string(),
                    source,
                })?;
            let bound = listener.local_addr().map_err(|source| HttpError::Listen {
                what: addr.to_string(),
                source,
            })?;
            announce(&format!("http://{bound}/mcp?token={}", token.0));
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
                .map_err(|source| HttpError::Listen {
                    what: bound.to_string(),
                    source,
                })
        }
        Listen::Unix(path) => {
            let listener = bind_unix(&path)?;
            announce(&format!("unix:{}", path.display()));
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await;
            let _ = std::fs::remove_file(&path);
            served.map_err(|source| HttpError::Listen {
                what: path.display().to_string(),
                source,
            })
        }
    }
}

/// A Unix socket, 0600, in a directory that is the user's and private.
fn bind_unix(path: &Path) -> Result<tokio::net::UnixListener, HttpError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    };
    let listen_error = |source| HttpError::Listen {
        what: path.display().to_string(),
        source,
    };
    let meta = std::fs::metadata(&dir).map_err(listen_error)?;
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    amber_proto::socket_trust::check_socket_dir(meta.uid(), meta.mode(), uid).map_err(|why| {
        HttpError::UntrustedDir {
            dir,
            why: why.to_string(),
        }
    })?;
    // A socket file left by an earlier run is replaced; anything else is not touched.
    if let Ok(old) = std::fs::symlink_metadata(path)
        && old.file_type().is_socket_file()
    {
        let _ = std::fs::remove_file(path);
    }
    let listener = tokio::net::UnixListener::bind(path).map_err(listen_error)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(listen_error)?;
    Ok(listener)
}

/// Lets a request through only with the token, as a bearer header or in the query.
async fn authorize(State(token): State<Token>, request: Request, next: Next) -> Response {
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| token.matches(t.trim()));
    let in_query = request.uri().query().is_some_and(|q| {
        q.split('&')
            .filter_map(|pair| pair.strip_prefix("token="))
            .any(|t| token.matches(t))
    });
    if bearer || in_query {
        return next.run(request).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        Body::from("amber's MCP server needs its token: Authorization: Bearer TOKEN"),
    )
        .into_response()
}

trait SocketFile {
    fn is_socket_file(&self) -> bool;
}

impl SocketFile for std::fs::FileType {
    fn is_socket_file(&self) -> bool {
        use std::os::unix::fs::FileTypeExt;
        self.is_socket()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_loopback_or_a_unix_socket() {
        assert_eq!(
            Listen::parse("127.0.0.1:0").unwrap(),
            Listen::Tcp("127.0.0.1:0".parse().unwrap())
        );
        assert_eq!(
            Listen::parse("[::1]:8765").unwrap(),
            Listen::Tcp("[::1]:8765".parse().unwrap())
        );
        assert_eq!(
            Listen::parse("unix:/run/x/mcp.sock").unwrap(),
            Listen::Unix("/run/x/mcp.sock".into())
        );
        for bad in ["0.0.0.0:8765", "192.168.1.2:80", "[::]:1"] {
            assert!(
                matches!(Listen::parse(bad), Err(HttpError::NotLoopback(_))),
                "{bad}"
            );
        }
        for bad in ["localhost:80", "8765", "unix:", ""] {
            assert!(
                matches!(Listen::parse(bad), Err(HttpError::BadAddress(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_token_matches_only_itself() {
        let token = Token("abc123".into());
        assert!(token.matches("abc123"));
        for other in ["", "abc12", "abc1234", "abc124", "ABC123"] {
            assert!(!token.matches(other), "{other}");
        }
        let fresh = new_token().unwrap();
        assert_eq!(fresh.len(), 64);
        assert_ne!(fresh, new_token().unwrap());
    }
}
