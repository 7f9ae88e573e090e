//! The one way the file tools (`write`, `edit`, later patches) change a file: write a temp
//! file next to it and rename it over the target.
//!
//! Invariants: **a file tool never writes through the target's inode**, so a hardlink in
//! the workspace to a file outside it is replaced in the workspace, never written through;
//! **a crash (of the daemon or the machine) leaves the old content or the new, never part
//! of either**; **the mode survives** (an executable stays executable).
//!
//! How: the temp file is `.NAME.amber-tmp-XXXXXXXX` in the target's directory (same
//! filesystem, so the rename is atomic; hidden and unmistakable, so a crash's leftover is
//! never taken for user content), created with `O_EXCL` (never an existing file or a
//! planted symlink), given the target's permission bits (`0o777` of them: set-id bits are
//! not carried, as an in-place write would clear them too) or, for a new file, `0o666`
//! minus the umask; written, fsync'd, then renamed over the target. Refused: a target the
//! user may not write (its own permission is checked, as an in-place write would: the
//! rename alone needs only the directory's) and one that is not a regular file (replacing a
//! FIFO or a device by a file is not writing to it). The temp file is removed on every
//! error. The directory is not fsync'd: the rename is atomic without it, and its only gain
//! (the new name surviving a power cut that comes within the journal's commit interval) is
//! not worth a second disk flush on every edit; such a cut leaves the old file.
//!
//! The file's owner and group become the daemon user's: a file the user could only write
//! through group permission changes owner (as with most editors' safe writes).

use std::ffi::OsString;
use std::fs::{self, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Marks a temp file of this module (after the target's name).
pub const TEMP_MARKER: &str = ".amber-tmp-";
/// Longest piece of the target's name kept in the temp name (NAME_MAX is 255).
const NAME_KEPT: usize = 200;
/// Attempts at a fresh temp name before giving up.
const ATTEMPTS: usize = 8;

/// Replaces `path` (a confined, symlink-resolved path) with `contents`, atomically, off the
/// async runtime.
pub async fn replace_file(path: PathBuf, contents: Vec<u8>) -> io::Result<()> {
    tokio::task::spawn_blocking(move || replace_file_sync(&path, &contents))
        .await
        .map_err(io::Error::other)?
}

/// [`replace_file`], blocking.
pub fn replace_file_sync(path: &Path, contents: &[u8]) -> io::Result<()> {
    replace_with(path, contents, |temp| fs::rename(temp, path))
}

/// Writes `contents` to a fresh temp file beside `path` with `path`'s mode, then lets
/// `install` put it in place; the temp file is removed if anything fails.
fn replace_with(
    path: &Path,
    contents: &[u8],
    install: impl FnOnce(&Path) -> io::Result<()>,
) -> io::Result<()> {
    let (dir, name) = match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => (dir, name),
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a file path",
            ));
        }
    };
    let mode = match fs::metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                "is a directory",
            ));
        }
        Ok(meta) if !meta.is_file() => {
            // A FIFO, socket or device: replacing it by a file is not what writing means.
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "is not a regular file",
            ));
        }
        Ok(meta) => {
            ensure_writable(path)?;
            Some(meta.permissions().mode() & 0o777)
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => None,
        Err(err) => return Err(err),
    };
    let (temp_path, mut file) = create_temp(dir, name.as_bytes())?;
    let written = (|| {
        if let Some(mode) = mode {
            // fchmod: not subject to the umask, unlike the mode given at creation.
            file.set_permissions(Permissions::from_mode(mode))?;
        }
        file.write_all(contents)?;
        file.sync_all()?;
        drop(file);
        install(&temp_path)
    })();
    if written.is_err()
        && let Err(err) = fs::remove_file(&temp_path)
        && err.kind() != io::ErrorKind::NotFound
    {
        tracing::warn!(temp = %temp_path.display(), "cannot remove a temp file: {err}");
    }
    written
}

/// A file the user may not write stays unwritten: the rename only needs the directory's
/// permission, so the file's own is checked as an in-place write would (opening it for
/// writing changes nothing). A running executable (`ETXTBSY`) may be replaced.
fn ensure_writable(path: &Path) -> io::Result<()> {
    match OpenOptions::new().write(true).open(path) {
        Ok(_) => Ok(()),
        Err(err) if err.raw_os_error() == Some(libc::ETXTBSY) => Ok(()),
        Err(err) => Err(err),
    }
}

/// Creates a fresh `.NAME.amber-tmp-XXXXXXXX` in `dir` (mode 0o666 minus the umask).
fn create_temp(dir: &Path, name: &[u8]) -> io::Result<(PathBuf, fs::File)> {
    let kept = &name[..name.len().min(NAME_KEPT)];
    let mut last = None;
    for _ in 0..ATTEMPTS {
        let mut temp = Vec::with_capacity(kept.len() + 24);
        temp.push(b'.');
        temp.extend_from_slice(kept);
        temp.extend_from_slice(TEMP_MARKER.as_bytes());
        temp.extend_from_slice(&uuid::Uuid::new_v4().simple().to_string().as_bytes()[..8]);
        let temp_path = dir.join(OsString::from_vec(temp));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o666)
            .open(&temp_path)
        {
            Ok(file) => return Ok((temp_path, file)),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => last = Some(err),
            Err(err) => return Err(err),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no temp name")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn replaces_the_entry_not_the_inode() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("target");
        fs::write(&target, "sentinel").unwrap();
        let link = dir.path().join("link");
        fs::hard_link(&target, &link).unwrap();
        replace_file_sync(&link, b"new").unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "sentinel");
        assert_eq!(fs::read_to_string(&link).unwrap(), "new");
        assert_eq!(fs::metadata(&link).unwrap().nlink(), 1);
        assert_eq!(entries(dir.path()), ["link"], "no temp file is left");
    }

    #[test]
    fn keeps_the_mode_and_creates_new_files_by_umask() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("run.sh");
        fs::write(&script, "#!/bin/sh\n").unwrap();
        fs::set_permissions(&script, Permissions::from_mode(0o751)).unwrap();
        replace_file_sync(&script, b"#!/bin/sh\necho hi\n").unwrap();
        let mode = fs::metadata(&script).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o751);
        let fresh = dir.path().join("fresh.txt");
        replace_file_sync(&fresh, b"x").unwrap();
        // SAFETY: umask only reads and sets this process's mask; set back at once.
        let umask = unsafe {
            let old = libc::umask(0o022);
            libc::umask(old);
            old
        };
        let mode = fs::metadata(&fresh).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666 & !umask);
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, "old").unwrap();
        let mut seen = None;
        let failed = replace_with(&file, b"new", |temp| {
            assert_eq!(fs::read_to_string(temp).unwrap(), "new");
            seen = Some(temp.to_owned());
            Err(io::Error::other("disk full"))
        });
        assert_eq!(failed.unwrap_err().to_string(), "disk full");
        assert!(seen.is_some_and(|temp| !temp.exists()));
        assert_eq!(fs::read_to_string(&file).unwrap(), "old");
        assert_eq!(entries(dir.path()), ["f"]);
        let missing = dir.path().join("no/such/dir/f");
        assert!(replace_file_sync(&missing, b"x").is_err());
        assert_eq!(entries(dir.path()), ["f"]);
    }

    #[test]
    fn directories_and_special_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = replace_file_sync(dir.path(), b"x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::IsADirectory);
        let fifo = dir.path().join("fifo");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo reads a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let err = replace_file_sync(&fifo, b"x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(entries(dir.path()), ["fifo"]);
    }

    #[test]
    fn a_file_the_user_may_not_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ro");
        fs::write(&file, "old").unwrap();
        fs::set_permissions(&file, Permissions::from_mode(0o444)).unwrap();
        let result = replace_file_sync(&file, b"new");
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            // Root may write any file, in place or not: the write goes through.
            assert!(result.is_ok(), "{result:?}");
            assert_eq!(fs::read_to_string(&file).unwrap(), "new");
        } else {
            assert_eq!(result.unwrap_err().kind(), io::ErrorKind::PermissionDenied);
            assert_eq!(fs::read_to_string(&file).unwrap(), "old");
        }
        assert_eq!(entries(dir.path()), ["ro"]);
    }

    #[test]
    fn temp_names_are_hidden_marked_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let long = "n".repeat(250);
        let (path, _file) = create_temp(dir.path(), long.as_bytes()).unwrap();
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with(&format!(".{}", &long[..NAME_KEPT])),
            "{name}"
        );
        assert!(name.len() <= 255, "{name}");
        let (_, tail) = name.split_once(TEMP_MARKER).unwrap();
        assert_eq!(tail.len(), 8, "{name}");
        let (other, _file) = create_temp(dir.path(), long.as_bytes()).unwrap();
        assert_ne!(path, other, "every temp name is fresh");
    }
}
