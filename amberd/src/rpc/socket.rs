//! The daemon's Unix socket: directory and file permissions, stale-socket cleanup,
//! refusing to start over a live daemon, the socket systemd passes (socket activation), and
//! the peer-uid check.

use std::io::{ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

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
    #[error("cannot use the socket passed by systemd (LISTEN_FDS): {0}")]
    Activation(std::io::Error),
}

/// Creates the parent directory (0700), clears a stale socket, binds (0600).
pub fn bind(path: &Path) -> Result<UnixListener, SocketError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        ensure_private_dir(dir)?;
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

fn ensure_private_dir(dir: &Path) -> Result<(), SocketError> {
    let fail = |source| SocketError::Dir {
        path: dir.to_owned(),
        source,
    };
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(fail)?;
        // `mode` is filtered by the umask; make sure.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(fail)?;
        return Ok(());
    }
    let meta = std::fs::metadata(dir).map_err(fail)?;
    if meta.uid() == current_uid() && is_amber_dir(dir) && meta.mode() & 0o077 != 0 {
        // Our own directory with loose permissions: tighten it.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(fail)?;
    }
    Ok(())
}

/// Directories amber names itself (`.../amber`, `/tmp/amber-UID`) may be chmod-ed; a
/// user-chosen parent such as `/tmp` never is.
fn is_amber_dir(dir: &Path) -> bool {
    dir.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n == "amber" || n.starts_with("amber-"))
}

/// The listening socket systemd handed us (`LISTEN_PID` = our pid, `LISTEN_FDS` >= 1), if
/// any, already non-blocking for tokio. `LISTEN_PID`, `LISTEN_FDS` and `LISTEN_FDNAMES` are
/// removed so children do not inherit them; the descriptors are close-on-exec.
///
/// # Safety
/// Edits the environment: call it while the process is single-threaded (main does, before
/// the tokio runtime starts).
pub unsafe fn from_systemd() -> Result<Option<UnixListener>, SocketError> {
    // SAFETY: the caller guarantees no other thread touches the environment.
    let fds = unsafe { sd_notify::listen_fds_and_unset_env() };
    // SAFETY: as above; the crate leaves the names (we do not use them).
    unsafe { std::env::remove_var("LISTEN_FDNAMES") };
    let mut fds = fds.map_err(SocketError::Activation)?;
    let Some(fd) = fds.next() else {
        return Ok(None);
    };
    if fds.len() > 0 {
        tracing::warn!(
            extra = fds.len(),
            "systemd passed more than one socket; serving only the first"
        );
    }
    check_listening_unix_stream(fd)?;
    // SAFETY: systemd passed this descriptor to this process for us to own (LISTEN_PID is
    // ours), nothing else in the process refers to it, and it was checked to be a listening
    // Unix stream socket.
    let listener = unsafe { <UnixListener as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    listener
        .set_nonblocking(true)
        .map_err(SocketError::Activation)?;
    Ok(Some(listener))
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
    #![allow(clippy::unwrap_used)]
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
    fn refuses_to_replace_a_regular_file() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("file.sock");
        std::fs::write(&path, "x").unwrap();
        assert!(matches!(bind(&path), Err(SocketError::NotASocket { .. })));
    }
}
