//! OAuth for remote MCP servers (MCP's authorization spec: protected-resource metadata,
//! authorization-server discovery, dynamic client registration, PKCE, token refresh), on
//! rmcp's `auth` module; this file adds where tokens live and how a person signs in.
//!
//! **Tokens never leave amberd and never reach a session's journal**: they are kept in
//! `<data dir>/mcp-auth/SERVER.json` (0600, in a 0700 directory, written by atomic
//! replace), read by the HTTP transport of that server on each connect, refreshed by rmcp
//! when they expire. A login ([`start_login`]) runs in amberd: it registers amber (or uses
//! the configured client id), hands back the authorization URL for the person's browser,
//! and listens on a loopback port for the one redirect that completes it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationManager, AuthorizationRequest, CredentialStore, OAuthState,
    StoredCredentials,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The credentials directory's name in the data dir.
pub(crate) const AUTH_DIR: &str = "mcp-auth";
/// How long a login waits for the browser's redirect.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(600);
/// The most of a redirect request read.
const MAX_REDIRECT_BYTES: usize = 16 * 1024;

/// Where `server`'s credentials are kept.
pub(crate) fn credentials_path(auth_dir: &Path, server: &str) -> PathBuf {
    auth_dir.join(format!("{server}.json"))
}

/// rmcp's credential store, on one private file.
pub(crate) struct FileCredentialStore {
    path: PathBuf,
}

impl FileCredentialStore {
    pub(crate) fn new(path: PathBuf) -> Self {
        Self { path }
    }
}

fn store_error(what: &str, path: &Path, err: impl std::fmt::Display) -> AuthError {
    AuthError::CredentialStoreError(format!("{what} {}: {err}", path.display()))
}

#[async_trait::async_trait]
impl CredentialStore for FileCredentialStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| store_error("cannot read", &self.path, e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(store_error("cannot read", &self.path, e)),
        }
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let bytes = serde_json::to_vec(&credentials)
            .map_err(|e| store_error("cannot encode", &self.path, e))?;
        if let Some(dir) = self.path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| store_error("cannot create", dir, e))?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| store_error("cannot protect", dir, e))?;
        }
        // The temporary file is created 0600 (the process umask aside) and renamed over.
        amber_tools::atomic_write::replace_file_sync(&self.path, &bytes)
            .map_err(|e| store_error("cannot write", &self.path, e))?;
        std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| store_error("cannot protect", &self.path, e))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        forget(&self.path)
            .map(|_| ())
            .map_err(|e| store_error("cannot remove", &self.path, e))
    }
}

/// Removes stored credentials (and the challenge they were got with); whether there were any.
pub(crate) fn forget(path: &Path) -> std::io::Result<bool> {
    let _ = std::fs::remove_file(challenge_path(path));
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Beside the credentials: the `WWW-Authenticate` challenge the login started from, so that
/// later connections (a restarted amberd) find the authorization metadata the same way —
/// a server may name it only there (`resource_metadata`) — and refresh at the right place.
fn challenge_path(credentials: &Path) -> PathBuf {
    credentials.with_extension("challenge")
}

/// Keeps the challenge a login started from (0600, beside the credentials).
fn keep_challenge(credentials: &Path, challenge: &str) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let path = challenge_path(credentials);
    amber_tools::atomic_write::replace_file_sync(&path, challenge.as_bytes())?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
}

/// An HTTP client that sends `server`'s stored token (refreshing it when it expires), when
/// the server has stored credentials; `Ok(None)` when it has none.
pub(crate) async fn authorized_client(
    url: &str,
    credentials: &Path,
    http: reqwest::Client,
) -> Result<Option<AuthClient<reqwest::Client>>, String> {
    if !credentials.exists() {
        return Ok(None);
    }
    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|e| format!("OAuth: {e}"))?;
    manager.set_credential_store(FileCredentialStore::new(credentials.to_owned()));
    // Found as the login found it; without it, discovery from the URL alone.
    if let Ok(challenge) = std::fs::read_to_string(challenge_path(credentials))
        && let Ok(resolved) = manager
            .resolve_metadata_from_challenge(Some(challenge.as_str()))
            .await
    {
        manager.set_metadata(resolved.metadata);
    }
    match manager.initialize_from_store().await {
        Ok(true) => Ok(Some(AuthClient::new(http, manager))),
        Ok(false) => Ok(None),
        Err(e) => Err(format!("OAuth: {e}")),
    }
}

/// How a login is asked for: the server's URL and what to register with.
pub(crate) struct LoginRequest {
    pub url: String,
    pub credentials: PathBuf,
    /// A client id registered with the authorization server beforehand; else amber
    /// registers itself (dynamic client registration).
    pub client_id: Option<String>,
    /// The secret of that client (a confidential client), if it has one.
    pub client_secret: Option<String>,
    pub scopes: Vec<String>,
    /// The server's last `WWW-Authenticate` challenge: its `resource_metadata` says where
    /// its authorization metadata is, its `scope` what it wants.
    pub challenge: Option<String>,
}

/// Starts a login: the authorization URL for the person, and the task that waits for the
/// redirect, exchanges the code and stores the tokens (its result says how it ended).
pub(crate) async fn start_login(
    request: LoginRequest,
) -> Result<(String, tokio::task::JoinHandle<Result<(), String>>), String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot listen for the redirect: {e}"))?;
    let port = listener
        .local_addr()
        .map_err(|e| format!("cannot listen for the redirect: {e}"))?
        .port();
    let redirect = format!("http://127.0.0.1:{port}/callback");
    let mut manager = AuthorizationManager::new(request.url.as_str())
        .await
        .map_err(|e| format!("OAuth: {e}"))?;
    manager.set_credential_store(FileCredentialStore::new(request.credentials.clone()));
    let mut state = OAuthState::Unauthorized(manager);
    let mut ask = AuthorizationRequest::new(&redirect).with_client_name("amber");
    if let Some(id) = &request.client_id {
        ask = ask.with_preregistered_client(id);
        if let Some(secret) = &request.client_secret {
            ask = ask.with_client_secret(secret);
        }
    }
    if let Some(challenge) = &request.challenge {
        ask = ask.with_challenge(challenge);
    }
    let scopes = scopes_to_ask(&request).await?;
    if !scopes.is_empty() {
        ask = ask.with_scopes(scopes);
    }
    state
        .start_authorization(ask)
        .await
        .map_err(|e| format!("OAuth: {e}"))?;
    let url = state
        .get_authorization_url()
        .await
        .map_err(|e| format!("OAuth: {e}"))?;
    let credentials = request.credentials.clone();
    let challenge = request.challenge.clone();
    let task = tokio::spawn(async move {
        let wait = async {
            let callback = accept_redirect(&listener, port).await?;
            state
                .handle_callback_url(&callback)
                .await
                .map_err(|e| format!("OAuth: {e}"))?;
            if let Some(challenge) = &challenge
                && let Err(e) = keep_challenge(&credentials, challenge)
            {
                tracing::warn!("MCP OAuth: cannot keep the server's challenge: {e}");
            }
            Ok(())
        };
        tokio::time::timeout(LOGIN_TIMEOUT, wait)
            .await
            .map_err(|_| "no redirect came back within 10 minutes".to_owned())?
    });
    Ok((url, task))
}

/// The scopes a login asks for: the configured ones; after a 403 `insufficient_scope`,
/// those the server already granted, the configured ones and the ones it asks for now (a
/// step-up keeps what the token had). Asking again for scopes already granted would not
/// help: that is an error.
async fn scopes_to_ask(request: &LoginRequest) -> Result<Vec<String>, String> {
    let mut scopes = request.scopes.clone();
    let Some(challenge) = &request.challenge else {
        return Ok(scopes);
    };
    let Ok(base) = reqwest::Url::parse(&request.url) else {
        return Ok(scopes);
    };
    let asked = rmcp::transport::auth::WWWAuthenticateParams::parse(challenge, &base);
    if !asked.is_insufficient_scope() {
        return Ok(scopes);
    }
    let wanted: Vec<String> = asked
        .scope
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let granted = FileCredentialStore::new(request.credentials.clone())
        .load()
        .await
        .ok()
        .flatten()
        .map(|stored| stored.granted_scopes)
        .unwrap_or_default();
    if !wanted.is_empty() && wanted.iter().all(|w| granted.contains(w)) {
        return Err(format!(
            "the server asks for scope `{}`, which it already granted: signing in again \
             will not help",
            wanted.join(" ")
        ));
    }
    for scope in granted.into_iter().chain(wanted) {
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    Ok(scopes)
}

/// Accepts connections on the redirect listener until one asks for `/callback`; answers
/// it with a page saying the login is done, and returns the full redirect URL.
async fn accept_redirect(listener: &tokio::net::TcpListener, port: u16) -> Result<String, String> {
    loop {
        let (mut stream, _) = listener
            .accept()
            .await
            .map_err(|e| format!("the redirect listener failed: {e}"))?;
        let mut head = Vec::new();
        let mut buf = [0u8; 2048];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REDIRECT_BYTES {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        let text = String::from_utf8_lossy(&head);
        let target = text
            .lines()
            .next()
            .and_then(|line| line.strip_prefix("GET "))
            .and_then(|rest| rest.split(' ').next())
            .unwrap_or("");
        if !target.starts_with("/callback") {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
            continue;
        }
        let body = "amber: signed in. You can close this tab.";
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(response.as_bytes()).await;
        return Ok(format!("http://127.0.0.1:{port}{target}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[tokio::test]
    async fn credentials_are_kept_in_a_private_file_and_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let path = credentials_path(&dir.path().join(AUTH_DIR), "remote");
        let store = FileCredentialStore::new(path.clone());
        assert!(store.load().await.unwrap().is_none());
        store
            .save(StoredCredentials::new(
                "client-1".into(),
                None,
                vec!["read".into()],
                Some(7),
            ))
            .await
            .unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        let loaded = store.load().await.unwrap().unwrap();
        assert_eq!(loaded.client_id, "client-1");
        assert_eq!(loaded.granted_scopes, ["read"]);
        store.clear().await.unwrap();
        assert!(!path.exists());
        store.clear().await.unwrap();
    }

    #[test]
    fn the_challenge_a_login_started_from_is_kept_privately_and_forgotten_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = credentials_path(dir.path(), "remote");
        std::fs::write(&path, "{}").unwrap();
        keep_challenge(&path, r#"Bearer resource_metadata="http://h/x.json""#).unwrap();
        let kept = challenge_path(&path);
        let mode = std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(forget(&path).unwrap());
        assert!(!kept.exists() && !path.exists());
    }

    #[tokio::test]
    async fn a_step_up_asks_for_what_was_granted_and_what_the_server_wants_now() {
        let dir = tempfile::tempdir().unwrap();
        let path = credentials_path(&dir.path().join(AUTH_DIR), "remote");
        FileCredentialStore::new(path.clone())
            .save(StoredCredentials::new(
                "client-1".into(),
                None,
                vec!["read".into()],
                Some(7),
            ))
            .await
            .unwrap();
        let request = |challenge: Option<&str>| LoginRequest {
            url: "http://127.0.0.1:9/mcp".into(),
            credentials: path.clone(),
            client_id: None,
            client_secret: None,
            scopes: vec!["profile".into()],
            challenge: challenge.map(str::to_owned),
        };
        let cases = [
            (None, Ok(vec!["profile"])),
            // A 401's scope is the server's first word: rmcp reads it from the challenge.
            (Some(r#"Bearer scope="write""#), Ok(vec!["profile"])),
            (
                Some(r#"Bearer error="insufficient_scope", scope="write""#),
                Ok(vec!["profile", "read", "write"]),
            ),
            (
                Some(r#"Bearer error="insufficient_scope", scope="read""#),
                Err("already granted"),
            ),
        ];
        for (challenge, want) in cases {
            let got = scopes_to_ask(&request(challenge)).await;
            match (got, want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{challenge:?}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{challenge:?}: {got}"),
                (got, want) => panic!("{challenge:?}: {got:?}, wanted {want:?}"),
            }
        }
    }

    #[tokio::test]
    async fn the_redirect_listener_answers_other_paths_404_and_returns_the_callback() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let waiting = tokio::spawn(async move { accept_redirect(&listener, port).await });
        let get = |path: &'static str| async move {
            let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .unwrap();
            s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
                .await
                .unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).await.unwrap();
            out
        };
        assert!(get("/favicon.ico").await.starts_with("HTTP/1.1 404"));
        assert!(
            get("/callback?code=c1&state=s1")
                .await
                .contains("signed in")
        );
        assert_eq!(
            waiting.await.unwrap().unwrap(),
            format!("http://127.0.0.1:{port}/callback?code=c1&state=s1")
        );
    }
}
