//! The socket side: where the daemon lives, whether it answers, whether it is the user's own,
//! and the WebSocket transport over the Unix socket (one JSON-RPC message per text frame).
//!
//! **Nothing is sent before the socket is trusted**: its directory must be the user's and
//! private (0700, `amber_proto::socket_trust`, the rule amberd binds by), checked before
//! connecting, and the peer's uid (SO_PEERCRED) must be the user's, checked right after.
//!
//! The receiving half is wrapped so that a subscription the daemon closes with an error
//! (`params.error` instead of `params.result`) leaves its reason behind: jsonrpsee's
//! client drops that reason, and `EventStream` needs it.

use std::collections::HashMap;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use jsonrpsee::client_transport::ws::{self, Url, WsTransportClientBuilder};
use jsonrpsee::core::client::{ReceivedMessage, TransportReceiverT};
use serde::Deserialize;
use serde_json::Value;
use tokio::net::UnixStream;
use tokio_util::compat::Compat;

use crate::ClientError;
use crate::in_flight::{InFlight, Placement};

/// Largest message the client sends.
pub(crate) const MAX_REQUEST_BYTES: u32 = 64 * 1024 * 1024;
/// Largest message the client accepts (events can carry large tool outputs).
pub(crate) const MAX_RESPONSE_BYTES: u32 = 256 * 1024 * 1024;

pub(crate) type WsSender = ws::Sender<Compat<UnixStream>>;
pub(crate) type WsReceiver = ws::Receiver<Compat<UnixStream>>;

/// The socket path by PROTOCOL.md's rule: explicit, `$AMBER_SOCKET`, then the socket the
/// daemon serving this user's data dir names in its instance lock, then
/// `$XDG_RUNTIME_DIR/amber/amberd.sock`, `/tmp/amber-$UID/amberd.sock`.
///
/// The data dir's daemon comes before the runtime-dir default so that a client started
/// with a reduced environment (no `XDG_RUNTIME_DIR`, as MCP hosts start their servers)
/// reaches the daemon holding the user's sessions instead of starting a second one.
pub fn resolve_socket(explicit: Option<PathBuf>) -> PathBuf {
    let env = |k: &str| std::env::var_os(k);
    let chosen = explicit.is_some() || env("AMBER_SOCKET").is_some_and(|v| !v.is_empty());
    if !chosen && let Some(served) = served_socket(&amber_proto::paths::data_dir(None, env)) {
        return served;
    }
    default_socket(explicit)
}

/// PROTOCOL.md's rule without the data dir's daemon: where a new daemon would listen.
pub(crate) fn default_socket(explicit: Option<PathBuf>) -> PathBuf {
    amber_proto::paths::socket_path(explicit, |k| std::env::var_os(k), current_uid())
}

/// The socket a running daemon of `data_dir` serves, from its instance lock: `None` when no
/// daemon holds the lock (a shared `flock` is granted), the lock names no socket, or the
/// lock file is not a plain file of this user.
pub(crate) fn served_socket(data_dir: &Path) -> Option<PathBuf> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(data_dir.join(amber_proto::paths::INSTANCE_LOCK_FILE))
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.uid() != current_uid() {
        return None;
    }
    match file.try_lock_shared() {
        // Nobody holds it: no daemon serves this data dir.
        Ok(()) => return None,
        Err(std::fs::TryLockError::WouldBlock) => {}
        Err(std::fs::TryLockError::Error(_)) => return None,
    }
    let mut text = String::new();
    file.take(4096).read_to_string(&mut text).ok()?;
    amber_proto::paths::socket_in_instance_lock(&text)
}

pub(crate) fn current_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// True when a connect error means "no daemon there" (no socket file, or a stale one).
pub(crate) fn is_dead(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
    )
}

/// Connects the raw stream of a trusted socket; `Ok(None)` when nothing answers there.
pub(crate) async fn connect_stream(socket: &Path) -> Result<Option<UnixStream>, ClientError> {
    check_socket_dir(socket)?;
    let stream = match UnixStream::connect(socket).await {
        Ok(stream) => stream,
        Err(err) if is_dead(&err) => return Ok(None),
        Err(source) => {
            return Err(ClientError::Connect {
                socket: socket.to_owned(),
                source,
            });
        }
    };
    let peer = stream.peer_cred().map_err(|source| ClientError::Connect {
        socket: socket.to_owned(),
        source,
    })?;
    check_peer(socket, peer.uid(), current_uid())?;
    Ok(Some(stream))
}

/// The directory the socket lives in (`.` for a bare file name).
pub(crate) fn socket_dir(socket: &Path) -> PathBuf {
    match socket.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    }
}

/// Refuses a socket whose directory is not the user's private one: whoever else can write
/// there could have put their own socket in it. A missing directory means no daemon.
pub(crate) fn check_socket_dir(socket: &Path) -> Result<(), ClientError> {
    let dir = socket_dir(socket);
    let meta = match std::fs::metadata(&dir) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(ClientError::Connect {
                socket: socket.to_owned(),
                source,
            });
        }
    };
    amber_proto::socket_trust::check_socket_dir(meta.uid(), meta.mode(), current_uid()).map_err(
        |why| ClientError::UntrustedSocket {
            socket: socket.to_owned(),
            reason: format!("its directory {} is not trusted: {why}", dir.display()),
        },
    )
}

/// Refuses a peer that is not the user: someone else listening where amberd should be.
pub(crate) fn check_peer(socket: &Path, peer: u32, own: u32) -> Result<(), ClientError> {
    if peer == own {
        return Ok(());
    }
    Err(ClientError::UntrustedSocket {
        socket: socket.to_owned(),
        reason: format!("it is served by uid {peer}, not by this user (uid {own})"),
    })
}

/// Performs the WebSocket upgrade (`GET /`) on a connected stream.
pub(crate) async fn handshake(stream: UnixStream) -> Result<(WsSender, WsReceiver), ClientError> {
    let url = Url::parse("ws://localhost/")
        .map_err(|e| ClientError::Protocol(format!("bad websocket url: {e}")))?;
    WsTransportClientBuilder::default()
        .max_request_size(MAX_REQUEST_BYTES)
        .max_response_size(MAX_RESPONSE_BYTES)
        .build_with_stream(url, stream)
        .await
        .map_err(|e| ClientError::Transport(format!("websocket handshake failed: {e}")))
}

/// Close reasons of subscriptions the daemon ended with an error, by subscription id.
#[derive(Debug, Clone, Default)]
pub(crate) struct CloseReasons(Arc<Mutex<HashMap<String, String>>>);

impl CloseReasons {
    pub(crate) fn take(&self, sub_id: &str) -> Option<String> {
        self.0.lock().ok().and_then(|mut map| map.remove(sub_id))
    }

    fn record(&self, sub_id: String, reason: String) {
        if let Ok(mut map) = self.0.lock() {
            map.insert(sub_id, reason);
        }
    }

    /// Looks at one incoming frame; records the reason if it closes a subscription with an error.
    pub(crate) fn inspect(&self, frame: &str) {
        // Cheap filter first: almost every frame is a plain event or response.
        if !frame.contains("\"error\"") || !frame.contains("\"subscription\"") {
            return;
        }
        if let Some((id, reason)) = subscription_error(frame) {
            self.record(id, reason);
        }
    }
}

#[derive(Deserialize)]
struct SubErrorFrame {
    method: String,
    params: SubErrorParams,
}

#[derive(Deserialize)]
struct SubErrorParams {
    subscription: Value,
    error: Value,
    #[serde(default)]
    result: Option<serde::de::IgnoredAny>,
}

/// `{"method": .., "params": {"subscription": ID, "error": E}}` → (ID, human reason of E).
pub(crate) fn subscription_error(frame: &str) -> Option<(String, String)> {
    let parsed: SubErrorFrame = serde_json::from_str(frame).ok()?;
    if parsed.method.is_empty() || parsed.params.result.is_some() {
        return None;
    }
    Some((
        sub_id_key(&parsed.params.subscription),
        error_text(&parsed.params.error),
    ))
}

/// A subscription id as a map key: strings as they are, numbers in decimal.
pub(crate) fn sub_id_key(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A readable reason from whatever the daemon put in `error`.
fn error_text(error: &Value) -> String {
    match error {
        Value::String(s) => s.clone(),
        Value::Object(map) => {
            let message = map
                .get("message")
                .or_else(|| map.get("reason"))
                .and_then(Value::as_str);
            let code = map.get("code").filter(|c| !c.is_null());
            match (message, code) {
                (Some(m), Some(c)) => format!("{m} (code {})", sub_id_key(c)),
                (Some(m), None) => m.to_owned(),
                _ => error.to_string(),
            }
        }
        other => other.to_string(),
    }
}

/// The receiving half (of any transport), recording subscription close reasons on the
/// way through, and placing each answer (`in_flight.rs`): one nothing waits for is dropped
/// here instead of ending the connection.
pub(crate) struct WatchedReceiver<R> {
    pub(crate) inner: R,
    pub(crate) reasons: CloseReasons,
    pub(crate) in_flight: InFlight,
}

impl<R: TransportReceiverT + Send> TransportReceiverT for WatchedReceiver<R> {
    type Error = R::Error;

    async fn receive(&mut self) -> Result<ReceivedMessage, Self::Error> {
        loop {
            let msg = self.inner.receive().await?;
            let ReceivedMessage::Text(text) = msg else {
                return Ok(msg);
            };
            self.reasons.inspect(&text);
            match self.in_flight.place(&text) {
                Placement::Deliver => return Ok(ReceivedMessage::Text(text)),
                Placement::Rewrite(answer) => return Ok(ReceivedMessage::Text(answer)),
                Placement::Drop => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn subscription_errors_are_recognised() {
        let frame = r#"{"jsonrpc":"2.0","method":"session/event","params":{"subscription":"abc","error":"subscriber lagged: resubscribe with afterSeq"}}"#;
        assert_eq!(
            subscription_error(frame),
            Some((
                "abc".into(),
                "subscriber lagged: resubscribe with afterSeq".into()
            ))
        );
        let object = r#"{"jsonrpc":"2.0","method":"session/event","params":{"subscription":7,"error":{"code":-32003,"message":"lagged"}}}"#;
        assert_eq!(
            subscription_error(object),
            Some(("7".into(), "lagged (code -32003)".into()))
        );
    }

    #[test]
    fn events_mentioning_errors_are_not_closes() {
        let event = r#"{"jsonrpc":"2.0","method":"session/event","params":{"subscription":"abc","result":{"type":"error","code":"x","message":"\"error\""}}}"#;
        assert_eq!(subscription_error(event), None);
        let response =
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"subscription"}}"#;
        assert_eq!(subscription_error(response), None);
        let reasons = CloseReasons::default();
        reasons.inspect(event);
        reasons.inspect(response);
        assert_eq!(reasons.take("abc"), None);
    }

    #[test]
    fn only_the_users_own_peer_is_trusted() {
        let socket = Path::new("/run/user/1000/amber/amberd.sock");
        assert!(check_peer(socket, 1000, 1000).is_ok());
        for (peer, own) in [(65534, 1000), (0, 1000), (1000, 0)] {
            let text = check_peer(socket, peer, own).unwrap_err().to_string();
            assert!(
                text.contains("/run/user/1000/amber/amberd.sock")
                    && text.contains(&format!("uid {peer}"))
                    && text.contains("nothing was sent"),
                "{text}"
            );
        }
    }

    #[test]
    fn a_socket_in_a_directory_others_can_reach_is_refused_by_path() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        std::fs::create_dir(&dir).unwrap();
        let socket = dir.join("amberd.sock");
        for mode in [0o700, 0o500] {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
            check_socket_dir(&socket).unwrap();
        }
        for mode in [0o755, 0o777, 0o1777, 0o710] {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
            let text = check_socket_dir(&socket).unwrap_err().to_string();
            assert!(
                text.contains(&socket.display().to_string()) && text.contains("not trusted"),
                "{mode:o}: {text}"
            );
        }
        // No directory, no daemon: that is "not running", not a refusal.
        check_socket_dir(&tmp.path().join("absent/amberd.sock")).unwrap();
        assert_eq!(socket_dir(Path::new("x.sock")), PathBuf::from("."));
    }

    #[test]
    fn dead_sockets_are_told_apart() {
        assert!(is_dead(&io::Error::from(io::ErrorKind::NotFound)));
        assert!(is_dead(&io::Error::from(io::ErrorKind::ConnectionRefused)));
        assert!(!is_dead(&io::Error::from(io::ErrorKind::PermissionDenied)));
    }
}
