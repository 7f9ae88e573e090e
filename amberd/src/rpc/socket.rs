//! The daemon's Unix socket: directory (`socket/dir.rs`) and file permissions, stale-socket
//! cleanup, refusing to start over a live daemon, the socket systemd passes (socket
//! activation), and the peer-uid check.

mod dir;

use std::io::{ErrorKind, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use amber_proto::socket_trust::Distrust;

/// Why the socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error(
        "another amberd is already serving {0} (stop it with `amber-cli daemon stop`, or pick another --socket)"
    )]
    AlreadyRunning(PathBuf),
    #[error("{path} exists and is not a socket; refusing to replace it")]
    NotASocket { path: PathBuf },
    #[error("cannot prepare socket directory {path}: {source}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot bind {path}: {source}")]
    Bind {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "refusing to serve in {path}: the directory belongs to uid {owner}, not to this daemon's \
         uid {own}, so its owner could replace the socket; choose another --socket (or \
         $AMBER_SOCKET / $XDG_RUNTIME_DIR)"
    )]
    ForeignDir { path: PathBuf, owner: u32, own: u32 },
    #[error(
        "refusing to serve in {path}: {why}; clients connect only through a socket directory \
         that is their user's and private to them (0700): `chmod 700` it, or choose another \
         --socket (or $AMBER_SOCKET / $XDG_RUNTIME_DIR)"
    )]
    UntrustedDir { path: PathBuf, why: Distrust },
    #[error(
        "refusing to serve under {path}: {why} (the socket's directory with it); choose \
         another --socket (or $AMBER_SOCKET / $XDG_RUNTIME_DIR)"
    )]
    UntrustedAncestor { path: PathBuf, why: Distrust },
    #[error("cannot use the socket passed by systemd (LISTEN_FDS): {0}")]
    Activation(std::io::Error),
}

/// Creates the parent directory (0700), clears a stale socket, binds (0600).
pub fn bind(path: &Path) -> Result<UnixListener, SocketError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        dir::ensure_private_dir(dir)?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.file_type().is_socket() => {
            return Err(SocketError::NotASocket {
                path: path.to_owned(),
            });
        }
        Ok(_) => match UnixStream::connect(path) {
            Ok(_) => return Err(SocketError::AlreadyRunning(path.to_owned())),
            Err(err) => {
                tracing::info!(path = %path.display(), %err, "removing stale socket");
                let _ = std::fs::remove_file(path);
            }
        },
        Err(_) => {}
    }
    let listener = UnixListener::bind(path).map_err(|source| {
        if source.kind() == ErrorKind::AddrInUse {
            SocketError::AlreadyRunning(path.to_owned())
        } else {
            SocketError::Bind {
                path: path.to_owned(),
                source,
            }
        }
    })?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(|source| {
        SocketError::Bind {
            path: path.to_owned(),
            source,
        }
    })?;
    Ok(listener)
}

/// What systemd handed us: the listening socket, and how many more descriptors it passed
/// (ignored; reported by main once logging is up).
#[derive(Debug)]
pub struct Activated {
    pub listener: UnixListener,
    pub ignored_fds: usize,
}

/// The listening socket systemd handed us (`LISTEN_PID` = our pid, `LISTEN_FDS` >= 1), if
/// any, already non-blocking for tokio. `LISTEN_PID`, `LISTEN_FDS` and `LISTEN_FDNAMES` are
/// removed so children do not inherit them; the descriptors are close-on-exec.
///
/// # Safety
/// Edits the environment: call it while the process is single-threaded (main does, before
/// the tokio runtime starts).
pub unsafe fn from_systemd() -> Result<Option<Activated>, SocketError> {
    // SAFETY: the caller guarantees no other thread touches the environment.
    let fds = unsafe { sd_notify::listen_fds_and_unset_env() };
    // SAFETY: as above; the crate leaves the names (we do not use them).
    unsafe { std::env::remove_var("LISTEN_FDNAMES") };
    let mut fds = fds.map_err(SocketError::Activation)?;
    let Some(fd) = fds.next() else {
        return Ok(None);
    };
    // Logging is not set up yet (it depends on whether we were activated): main reports it.
    let ignored_fds = fds.len();
    check_listening_unix_stream(fd)?;
    // SAFETY: systemd passed this descriptor to this process for us to own (LISTEN_PID is
    // ours), nothing else in the process refers to it, and it was checked to be a listening
    // Unix stream socket.
    let listener = unsafe { <UnixListener as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    listener
        .set_nonblocking(true)
        .map_err(SocketError::Activation)?;
    Ok(Some(Activated {
        listener,
        ignored_fds,
    }))
}

/// Refuses anything but a listening `AF_UNIX` `SOCK_STREAM` socket (a unit with
/// `ListenDatagram=` or a TCP port would otherwise fail on the first accept, or worse).
fn check_listening_unix_stream(fd: std::os::fd::RawFd) -> Result<(), SocketError> {
    let opt = |name: libc::c_int| -> std::io::Result<libc::c_int> {
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: value and len point to live locals of the sizes getsockopt is told.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                name,
                (&raw mut value).cast(),
                &raw mut len,
            )
        };
        if rc == 0 {
            Ok(value)
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    let wrong = |what: String| SocketError::Activation(std::io::Error::other(what));
    let domain = opt(libc::SO_DOMAIN).map_err(SocketError::Activation)?;
    let kind = opt(libc::SO_TYPE).map_err(SocketError::Activation)?;
    let listening = opt(libc::SO_ACCEPTCONN).map_err(SocketError::Activation)?;
    if domain != libc::AF_UNIX || kind != libc::SOCK_STREAM {
        return Err(wrong(format!(
            "fd {fd} is not a Unix stream socket (use ListenStream= with a path)"
        )));
    }
    if listening == 0 {
        return Err(wrong(format!("fd {fd} is not listening")));
    }
    Ok(())
}

/// Removes the socket file if it is still the one we bound.
pub fn remove_if_ours(path: &Path, inode: u64) {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.ino() == inode) {
        let _ = std::fs::remove_file(path);
    }
}

pub fn inode_of(path: &Path) -> u64 {
    std::fs::symlink_metadata(path)
        .map(|m| m.ino())
        .unwrap_or(0)
}

pub fn current_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// A peer the daemon will not serve, and what it is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerRefusal {
    /// HTTP status line text.
    pub status: &'static str,
    /// JSON-RPC error code.
    pub code: i32,
    pub message: String,
}

impl PeerRefusal {
    /// The HTTP answer the peer gets before the connection closes.
    pub fn response(&self) -> Vec<u8> {
        refusal(self.status, self.code, &self.message)
    }
}

/// PROTOCOL.md: a peer whose uid (SO_PEERCRED) differs from the daemon's is refused —
/// with HTTP 403 and a JSON-RPC -32600 naming both uids, before any JSON-RPC is read.
pub fn check_peer_uid(peer: u32, own: u32) -> Result<(), PeerRefusal> {
    if peer == own {
        return Ok(());
    }
    Err(PeerRefusal {
        status: "403 Forbidden",
        code: amber_proto::errors::INVALID_REQUEST,
        message: format!("connection refused: peer uid {peer} is not the daemon's uid {own}"),
    })
}

/// The HTTP answer a refused peer gets before the connection closes.
pub fn refusal(status: &str, code: i32, message: &str) -> Vec<u8> {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": code, "message": message },
    })
    .to_string();
    let mut out = Vec::new();
    let _ = write!(
        out,
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_with_private_permissions_and_clears_stale_sockets() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("amber").join("amberd.sock");
        let listener = bind(&path).unwrap();
        let dir_mode = std::fs::metadata(path.parent().unwrap()).unwrap().mode() & 0o777;
        let sock_mode = std::fs::symlink_metadata(&path).unwrap().mode() & 0o777;
        assert_eq!((dir_mode, sock_mode), (0o700, 0o600));

        // A live listener is detected.
        assert!(matches!(bind(&path), Err(SocketError::AlreadyRunning(_))));
        // Once it is gone the file is stale and gets replaced.
        drop(listener);
        bind(&path).unwrap();
    }

    #[test]
    fn only_a_listening_unix_stream_socket_is_accepted_from_systemd() {
        use std::os::fd::AsRawFd;
        let tmp = tempfile::tempdir().unwrap();
        let listener = UnixListener::bind(tmp.path().join("s.sock")).unwrap();
        check_listening_unix_stream(listener.as_raw_fd()).unwrap();

        let datagram = std::os::unix::net::UnixDatagram::bind(tmp.path().join("d.sock")).unwrap();
        let err = check_listening_unix_stream(datagram.as_raw_fd()).unwrap_err();
        assert!(
            err.to_string().contains("not a Unix stream socket"),
            "{err}"
        );

        let (a, _b) = UnixStream::pair().unwrap();
        let err = check_listening_unix_stream(a.as_raw_fd()).unwrap_err();
        assert!(err.to_string().contains("not listening"), "{err}");

        let file = std::fs::File::open(tmp.path()).unwrap();
        assert!(check_listening_unix_stream(file.as_raw_fd()).is_err());
    }

    #[test]
    fn a_peer_of_another_uid_is_refused_with_403_and_invalid_request() {
        assert_eq!(check_peer_uid(1000, 1000), Ok(()));
        assert_eq!(check_peer_uid(0, 0), Ok(()));
        let refused = check_peer_uid(65534, 1000).unwrap_err();
        assert_eq!(refused.code, -32600);
        assert_eq!(refused.status, "403 Forbidden");
        assert!(refused.message.contains("65534") && refused.message.contains("1000"));
        // Root is another user too: no uid is trusted but our own.
        assert!(check_peer_uid(0, 1000).is_err());

        let raw = refused.response();
        let text = String::from_utf8(raw).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{head}");
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(json["error"]["code"], -32600);
        assert_eq!(json["error"]["message"], refused.message.as_str());
        assert!(json["id"].is_null());
    }

    #[test]
    fn refuses_to_replace_a_regular_file() {
        let tmp = tempfile::tempdir().unwrap();
        // tempfile leaves the umask's 0755; a socket directory must be private.
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let path = tmp.path().join("file.sock");
        std::fs::write(&path, "x").unwrap();
        let err = bind(&path).unwrap_err();
        assert!(matches!(err, SocketError::NotASocket { .. }), "{err}");
    }
}
