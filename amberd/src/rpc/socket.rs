//! The daemon's Unix socket: directory and file permissions, stale-socket cleanup,
//! refusing to start over a live daemon, and the peer-uid check.

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

/// The listening socket systemd handed us (`LISTEN_PID` = our pid, `LISTEN_FDS` >= 1), if any.
/// The variables are removed so children do not inherit them.
pub fn from_systemd() -> Option<UnixListener> {
    let pid_matches = std::env::var("LISTEN_PID")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .is_some_and(|pid| pid == std::process::id());
    let fds = std::env::var("LISTEN_FDS")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(0);
    if !pid_matches || fds == 0 {
        return None;
    }
    // SAFETY: main calls this first, while the process is still single-threaded.
    unsafe {
        std::env::remove_var("LISTEN_PID");
        std::env::remove_var("LISTEN_FDS");
        std::env::remove_var("LISTEN_FDNAMES");
    }
    // SD_LISTEN_FDS_START: the first passed descriptor is always 3.
    const FIRST_FD: std::os::fd::RawFd = 3;
    // SAFETY: systemd passed fd 3 to this process for us to own; nothing else uses it.
    let listener = unsafe { <UnixListener as std::os::fd::FromRawFd>::from_raw_fd(FIRST_FD) };
    Some(listener)
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
    fn refuses_to_replace_a_regular_file() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("file.sock");
        std::fs::write(&path, "x").unwrap();
        assert!(matches!(bind(&path), Err(SocketError::NotASocket { .. })));
    }
}
