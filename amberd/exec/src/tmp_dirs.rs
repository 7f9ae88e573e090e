//! The private temp directories of sandboxed commands: `<temp>/amber-tmp-UID/NAME`, one per
//! session (NAME is its id) or sandboxed extension. Each is the `tmp_dir` of a
//! `SandboxSpec`, writable in every sandbox mode and exported as `TMPDIR`.
//!
//! **Invariant: a directory is handed out only if it is a real directory (never a symlink
//! followed), the daemon's uid's and 0700, under a root that is the same, whose ancestors
//! are ours or root's and writable by others only with the sticky bit** — the trust rule of
//! the socket's directory (`amber_proto::socket_trust`). Someone who pre-planted
//! `/tmp/amber-tmp-UID` (a symlink, or a directory of theirs) gets an error, never a
//! directory of theirs that sandboxed commands would write their files into.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use amber_proto::socket_trust::{Distrust, check_ancestor_dir, check_socket_dir};

/// Why a private temp directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TmpDirError {
    #[error("temp directory {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("temp directory {path} is not safe to use: {reason}")]
    Untrusted { path: PathBuf, reason: String },
    #[error("`{0}` cannot name a temp directory")]
    BadName(String),
}

/// The root of the private temp directories and the way to make them.
#[derive(Debug, Clone)]
pub struct TmpDirs {
    root: PathBuf,
    uid: u32,
}

impl TmpDirs {
    /// `<std::env::temp_dir()>/amber-tmp-UID` for this process's uid.
    pub fn for_current_user() -> Self {
        // SAFETY: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        Self::under(&std::env::temp_dir(), uid)
    }

    /// `<parent>/amber-tmp-UID` (tests choose the parent).
    pub fn under(parent: &Path, uid: u32) -> Self {
        Self {
            root: parent.join(format!("amber-tmp-{uid}")),
            uid,
        }
    }

    /// The directory all the others are in.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<root>/NAME`, created (0700) with its root when missing, checked when present.
    pub fn ensure(&self, name: &str) -> Result<PathBuf, TmpDirError> {
        let dir = self.path_of(name)?;
        self.private_dir(&self.root)?;
        check_ancestors(&self.root, self.uid)?;
        self.private_dir(&dir)?;
        Ok(dir)
    }

    /// Removes `<root>/NAME` and what is in it (symlinks inside are removed, not
    /// followed); a missing one is fine. Errors are logged: nothing waits for this.
    pub fn remove(&self, name: &str) {
        let Ok(dir) = self.path_of(name) else {
            return;
        };
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => {
                tracing::warn!(dir = %dir.display(), %err, "cannot remove a temp directory");
            }
        }
    }

    fn path_of(&self, name: &str) -> Result<PathBuf, TmpDirError> {
        let plain = !name.is_empty()
            && name != "."
            && name != ".."
            && !name.contains('/')
            && !name.contains('\0');
        if !plain {
            return Err(TmpDirError::BadName(name.to_owned()));
        }
        Ok(self.root.join(name))
    }

    /// Creates `dir` (0700; `mkdir` never follows a symlink in its place), or checks the
    /// one that is there: a directory, not a symlink, ours; made 0700 if it is not.
    fn private_dir(&self, dir: &Path) -> Result<(), TmpDirError> {
        let io = |source| TmpDirError::Io {
            path: dir.to_owned(),
            source,
        };
        match std::fs::DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(err) => return Err(io(err)),
        }
        let meta = std::fs::symlink_metadata(dir).map_err(io)?;
        if !meta.file_type().is_dir() {
            return Err(TmpDirError::Untrusted {
                path: dir.to_owned(),
                reason: "it is not a directory (a symlink is never followed)".into(),
            });
        }
        let mode = meta.mode() & 0o7777;
        if meta.uid() == self.uid && mode != 0o700 {
            // Ours: `mkdir`'s mode went through the umask, or someone loosened it.
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io)?;
            return Ok(());
        }
        check_socket_dir(meta.uid(), mode, self.uid).map_err(|why| untrusted(dir, why))
    }
}

/// Every directory above `dir` (symlinks resolved): ours or root's, and writable by others
/// only when sticky, so nobody can rename `dir` away and put their own in its place.
fn check_ancestors(dir: &Path, uid: u32) -> Result<(), TmpDirError> {
    let real = std::fs::canonicalize(dir).map_err(|source| TmpDirError::Io {
        path: dir.to_owned(),
        source,
    })?;
    for ancestor in real.ancestors().skip(1) {
        let meta = std::fs::metadata(ancestor).map_err(|source| TmpDirError::Io {
            path: ancestor.to_owned(),
            source,
        })?;
        check_ancestor_dir(meta.uid(), meta.mode(), uid).map_err(|why| untrusted(ancestor, why))?;
    }
    Ok(())
}

fn untrusted(path: &Path, why: Distrust) -> TmpDirError {
    let reason = match why {
        Distrust::ForeignOwner { owner } => format!("it belongs to uid {owner}"),
        Distrust::WritableByOthers { mode } => {
            format!("its mode is {mode:04o}: others can write in it and it has no sticky bit")
        }
        Distrust::NotPrivate { mode } => format!("its mode is {mode:04o}, not 0700"),
    };
    TmpDirError::Untrusted {
        path: path.to_owned(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own_uid() -> u32 {
        // SAFETY: getuid has no preconditions and cannot fail.
        unsafe { libc::getuid() }
    }

    /// A parent that passes the ancestor rule: a private directory of ours under the
    /// system temp dir (sticky) — unlike a tempdir in a group-writable build directory.
    fn parent() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    #[test]
    fn a_session_dir_is_created_private_under_a_private_root() {
        let parent = parent();
        let dirs = TmpDirs::under(parent.path(), own_uid());
        let dir = dirs.ensure("s1").unwrap();
        assert_eq!(
            dir,
            parent
                .path()
                .join(format!("amber-tmp-{}", own_uid()))
                .join("s1")
        );
        for d in [dirs.root(), dir.as_path()] {
            let meta = std::fs::symlink_metadata(d).unwrap();
            assert!(meta.is_dir());
            assert_eq!(meta.mode() & 0o7777, 0o700, "{}", d.display());
            assert_eq!(meta.uid(), own_uid());
        }
        // Again: the same directory, its content kept.
        std::fs::write(dir.join("f"), "x").unwrap();
        assert_eq!(dirs.ensure("s1").unwrap(), dir);
        assert!(dir.join("f").exists());
        dirs.remove("s1");
        assert!(!dir.exists());
        dirs.remove("s1");
    }

    #[test]
    fn a_pre_planted_symlink_root_is_refused_not_followed() {
        let parent = parent();
        let elsewhere = parent.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let dirs = TmpDirs::under(parent.path(), own_uid());
        std::os::unix::fs::symlink(&elsewhere, dirs.root()).unwrap();
        let err = dirs.ensure("s1").unwrap_err();
        assert!(err.to_string().contains("symlink"), "{err}");
        assert!(!elsewhere.join("s1").exists());
    }

    #[test]
    fn a_root_of_another_user_is_refused_and_a_loose_own_one_tightened() {
        let parent = parent();
        let foreign = TmpDirs::under(parent.path(), own_uid() + 1);
        // The directory is ours, so for "uid + 1" it is someone else's.
        std::fs::create_dir(foreign.root()).unwrap();
        let err = foreign.ensure("s1").unwrap_err();
        assert!(err.to_string().contains("belongs to uid"), "{err}");

        let dirs = TmpDirs::under(parent.path(), own_uid());
        std::fs::create_dir(dirs.root()).unwrap();
        std::fs::set_permissions(dirs.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
        dirs.ensure("s1").unwrap();
        let mode = std::fs::metadata(dirs.root()).unwrap().mode() & 0o7777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn names_that_leave_the_root_are_refused() {
        let parent = parent();
        let dirs = TmpDirs::under(parent.path(), own_uid());
        for name in ["", ".", "..", "../x", "a/b"] {
            assert!(
                matches!(dirs.ensure(name), Err(TmpDirError::BadName(_))),
                "{name}"
            );
        }
    }
}
