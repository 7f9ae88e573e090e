//! Where an executor keeps its attach sockets and logs: `$XDG_RUNTIME_DIR/amber-exec`, else
//! `/tmp/amber-exec-$UID`. Private to the user (0700, theirs), checked by the same rule as
//! amberd's socket directory: whoever could put a socket there could take a client's
//! connection.

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The default state directory for `uid`.
pub fn default_dir(env: impl Fn(&str) -> Option<std::ffi::OsString>, uid: u32) -> PathBuf {
    env("XDG_RUNTIME_DIR")
        .filter(|v| !v.is_empty())
        .map(|dir| PathBuf::from(dir).join("amber-exec"))
        .unwrap_or_else(|| PathBuf::from(format!("/tmp/amber-exec-{uid}")))
}

/// Makes `dir` (0700) if needed and checks that only this user can change it.
pub fn ensure(dir: &Path) -> io::Result<()> {
    match std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(dir)
    {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(err),
    }
    let uid = current_uid();
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    if meta.uid() == uid && meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let meta = std::fs::symlink_metadata(dir)?;
    amber_proto::socket_trust::check_socket_dir(meta.uid(), meta.mode(), uid)
        .map_err(|why| io::Error::other(format!("{}: {why}", dir.display())))?;
    Ok(())
}

/// The attach socket of executor `id`.
pub fn socket_of(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.sock"))
}

/// The log of executor `id`.
pub fn log_of(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.log"))
}

pub fn current_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// An executor id names files here: a uuid's letters only.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_dir_is_made_private_and_ids_cannot_leave_it() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("amber-exec");
        ensure(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        ensure(&dir).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        assert!(valid_id("0f3e-9a"));
        for bad in ["", "../x", "a/b", "x.sock"] {
            assert!(!valid_id(bad), "{bad}");
        }
        assert_eq!(
            default_dir(
                |k| (k == "XDG_RUNTIME_DIR").then(|| "/run/user/7".into()),
                7
            ),
            PathBuf::from("/run/user/7/amber-exec")
        );
        assert_eq!(default_dir(|_| None, 7), PathBuf::from("/tmp/amber-exec-7"));
    }
}
