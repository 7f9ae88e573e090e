//! Writing a planned patch: every file in order (`atomic_write` per file), and, when one
//! step fails, the steps already done undone in reverse, so the patch lands whole or not at
//! all. A deleted file, and a file a move overwrites, is first renamed aside
//! (`.NAME.amber-del-XXXXXXXX` beside it) and removed only once every step has succeeded, so
//! undoing restores the very file (inode, mode, content); directories created for new files
//! are removed again on undo. An added file that overwrites one is planned as an `Update`.

use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::atomic_write::replace_file_sync;

/// Marks a deleted file kept aside until the patch is done (after the file's name).
const DELETED_MARKER: &str = ".amber-del-";

/// One file change, with everything needed to make it and to undo it.
#[derive(Debug)]
pub(super) enum Step {
    Add {
        path: PathBuf,
        content: Vec<u8>,
    },
    Update {
        path: PathBuf,
        old: Vec<u8>,
        new: Vec<u8>,
    },
    /// `to` may be an existing regular file: it is replaced.
    Move {
        from: PathBuf,
        to: PathBuf,
        old: Vec<u8>,
        new: Vec<u8>,
    },
    Delete {
        path: PathBuf,
    },
}

/// What undoes one done action.
enum Undo {
    Remove(PathBuf),
    Restore { path: PathBuf, content: Vec<u8> },
    Rename { from: PathBuf, to: PathBuf },
    RemoveDir(PathBuf),
}

/// A step that failed, and whether undoing the earlier ones failed too.
#[derive(Debug, thiserror::Error)]
#[error("{failed}")]
pub(super) struct CommitError {
    pub(super) failed: String,
    /// Undo actions that failed (empty: every earlier change was undone).
    pub(super) undo_failures: Vec<String>,
}

/// Makes `steps`, in order, all or none.
pub(super) fn commit(steps: Vec<Step>, shown: &dyn Fn(&Path) -> String) -> Result<(), CommitError> {
    let mut undo: Vec<Undo> = Vec::new();
    let mut deleted_aside: Vec<PathBuf> = Vec::new();
    for step in steps {
        if let Err((path, err)) = make(step, &mut undo, &mut deleted_aside) {
            return Err(CommitError {
                failed: format!("cannot write `{}`: {err}", shown(&path)),
                undo_failures: roll_back(undo, shown),
            });
        }
    }
    for aside in deleted_aside {
        if let Err(err) = fs::remove_file(&aside) {
            tracing::warn!(path = %aside.display(), "cannot remove a deleted file kept aside: {err}");
        }
    }
    Ok(())
}

fn make(
    step: Step,
    undo: &mut Vec<Undo>,
    aside: &mut Vec<PathBuf>,
) -> Result<(), (PathBuf, io::Error)> {
    match step {
        Step::Add { path, content } => {
            create_parents(&path, undo).map_err(|e| (path.clone(), e))?;
            replace_file_sync(&path, &content).map_err(|e| (path.clone(), e))?;
            undo.push(Undo::Remove(path));
        }
        Step::Update { path, old, new } => {
            replace_file_sync(&path, &new).map_err(|e| (path.clone(), e))?;
            undo.push(Undo::Restore { path, content: old });
        }
        Step::Move { from, to, old, new } => {
            create_parents(&to, undo).map_err(|e| (to.clone(), e))?;
            // New content first, then the rename: the moved file keeps its mode.
            replace_file_sync(&from, &new).map_err(|e| (from.clone(), e))?;
            undo.push(Undo::Restore {
                path: from.clone(),
                content: old,
            });
            // Checked here, not only when planned: renaming over a file is not undoable.
            if let Some(kept) = set_aside(&to).map_err(|e| (to.clone(), e))? {
                undo.push(Undo::Rename {
                    from: kept.clone(),
                    to: to.clone(),
                });
                aside.push(kept);
            }
            fs::rename(&from, &to).map_err(|e| (to.clone(), e))?;
            undo.push(Undo::Rename { from: to, to: from });
        }
        Step::Delete { path } => {
            let kept = aside_name(&path).map_err(|e| (path.clone(), e))?;
            fs::rename(&path, &kept).map_err(|e| (path.clone(), e))?;
            undo.push(Undo::Rename {
                from: kept.clone(),
                to: path,
            });
            aside.push(kept);
        }
    }
    Ok(())
}

/// Undoes `done` in reverse; returns what could not be undone.
fn roll_back(done: Vec<Undo>, shown: &dyn Fn(&Path) -> String) -> Vec<String> {
    let mut failures = Vec::new();
    for action in done.into_iter().rev() {
        let (path, result) = match action {
            Undo::Remove(path) => {
                let result = fs::remove_file(&path);
                (path, result)
            }
            Undo::Restore { path, content } => {
                let result = replace_file_sync(&path, &content);
                (path, result)
            }
            Undo::Rename { from, to } => {
                let result = fs::rename(&from, &to);
                (to, result)
            }
            Undo::RemoveDir(path) => {
                let result = fs::remove_dir(&path);
                (path, result)
            }
        };
        if let Err(err) = result {
            tracing::warn!(path = %path.display(), "cannot undo a patch step: {err}");
            failures.push(format!("`{}`: {err}", shown(&path)));
        }
    }
    failures
}

/// Creates the missing parent directories of `path`, recording each for undo.
fn create_parents(path: &Path, undo: &mut Vec<Undo>) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut dir = path.parent();
    while let Some(d) = dir {
        if d.exists() {
            break;
        }
        missing.push(d.to_owned());
        dir = d.parent();
    }
    for d in missing.into_iter().rev() {
        fs::create_dir(&d)?;
        undo.push(Undo::RemoveDir(d));
    }
    Ok(())
}

/// Renames the file at `path` (about to be replaced) aside and returns where it went;
/// `None` when nothing is there. Only a regular file the user may write is replaced, as
/// `replace_file_sync` would replace it: the rename alone needs only the directory's
/// permission.
fn set_aside(path: &Path) -> io::Result<Option<PathBuf>> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            "is a directory",
        )),
        Ok(meta) if !meta.is_file() => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "is not a regular file",
        )),
        Ok(_) => {
            ensure_writable(path)?;
            let kept = aside_name(path)?;
            fs::rename(path, &kept)?;
            Ok(Some(kept))
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}

/// Opening for writing changes nothing; never follows a link nor waits on a FIFO swapped
/// in since the check. A running executable (`ETXTBSY`) may be replaced.
fn ensure_writable(path: &Path) -> io::Result<()> {
    match OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(err) if err.raw_os_error() == Some(libc::ETXTBSY) => Ok(()),
        Err(err) => Err(err),
    }
}

/// A fresh hidden name beside `path` for keeping it until the patch is done.
fn aside_name(path: &Path) -> io::Result<PathBuf> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a file path",
        ));
    };
    let mut aside = OsString::from(".");
    aside.push(name);
    aside.push(DELETED_MARKER);
    aside.push(&uuid::Uuid::new_v4().simple().to_string()[..8]);
    Ok(dir.join(aside))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn shown(path: &Path) -> String {
        path.file_name().unwrap().to_string_lossy().into_owned()
    }

    #[test]
    fn every_kind_of_step_lands_and_deleted_files_leave_nothing_aside() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(d.join("u"), "old").unwrap();
        fs::write(d.join("m"), "m-old").unwrap();
        fs::write(d.join("gone"), "x").unwrap();
        fs::write(d.join("over"), "over-old").unwrap();
        fs::write(d.join("taken"), "replaced").unwrap();
        let steps = vec![
            Step::Add {
                path: d.join("new/deep/a"),
                content: b"a".to_vec(),
            },
            Step::Update {
                path: d.join("u"),
                old: b"old".to_vec(),
                new: b"new".to_vec(),
            },
            Step::Move {
                from: d.join("m"),
                to: d.join("moved/m2"),
                old: b"m-old".to_vec(),
                new: b"m-new".to_vec(),
            },
            Step::Delete {
                path: d.join("gone"),
            },
            Step::Move {
                from: d.join("over"),
                to: d.join("taken"),
                old: b"over-old".to_vec(),
                new: b"over-new".to_vec(),
            },
        ];
        commit(steps, &shown).unwrap();
        assert_eq!(fs::read_to_string(d.join("new/deep/a")).unwrap(), "a");
        assert_eq!(fs::read_to_string(d.join("u")).unwrap(), "new");
        assert_eq!(fs::read_to_string(d.join("moved/m2")).unwrap(), "m-new");
        assert_eq!(fs::read_to_string(d.join("taken")).unwrap(), "over-new");
        assert_eq!(names(d), ["moved", "new", "taken", "u"]);
    }

    #[test]
    fn a_failing_step_undoes_every_earlier_one() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(d.join("u"), "old").unwrap();
        fs::set_permissions(d.join("u"), fs::Permissions::from_mode(0o751)).unwrap();
        fs::write(d.join("gone"), "keep me").unwrap();
        fs::write(d.join("m"), "m-old").unwrap();
        fs::write(d.join("over"), "over-old").unwrap();
        fs::write(d.join("taken"), "keep me too").unwrap();
        let taken_inode = fs::metadata(d.join("taken")).unwrap().ino();
        fs::create_dir(d.join("blocker")).unwrap();
        let steps = vec![
            Step::Update {
                path: d.join("u"),
                old: b"old".to_vec(),
                new: b"new".to_vec(),
            },
            Step::Delete {
                path: d.join("gone"),
            },
            Step::Add {
                path: d.join("fresh/a"),
                content: b"a".to_vec(),
            },
            Step::Move {
                from: d.join("m"),
                to: d.join("m2"),
                old: b"m-old".to_vec(),
                new: b"m-new".to_vec(),
            },
            Step::Move {
                from: d.join("over"),
                to: d.join("taken"),
                old: b"over-old".to_vec(),
                new: b"over-new".to_vec(),
            },
            // Replacing a directory by a file fails.
            Step::Add {
                path: d.join("blocker"),
                content: b"x".to_vec(),
            },
        ];
        let err = commit(steps, &shown).unwrap_err();
        assert!(err.failed.contains("cannot write `blocker`"), "{err}");
        assert!(err.undo_failures.is_empty(), "{:?}", err.undo_failures);
        assert_eq!(fs::read_to_string(d.join("u")).unwrap(), "old");
        let mode = fs::metadata(d.join("u")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o751, "a restored file keeps its mode");
        assert_eq!(fs::read_to_string(d.join("gone")).unwrap(), "keep me");
        assert_eq!(fs::read_to_string(d.join("m")).unwrap(), "m-old");
        assert_eq!(fs::read_to_string(d.join("over")).unwrap(), "over-old");
        assert_eq!(fs::read_to_string(d.join("taken")).unwrap(), "keep me too");
        assert_eq!(
            fs::metadata(d.join("taken")).unwrap().ino(),
            taken_inode,
            "a file a move overwrote is the very file again"
        );
        assert_eq!(
            names(d),
            ["blocker", "gone", "m", "over", "taken", "u"],
            "no new file, dir or temp left"
        );
    }

    #[test]
    fn a_move_onto_a_directory_fails_and_is_undone() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(d.join("m"), "m-old").unwrap();
        fs::create_dir(d.join("dir")).unwrap();
        fs::write(d.join("dir/inside"), "x").unwrap();
        let steps = vec![Step::Move {
            from: d.join("m"),
            to: d.join("dir"),
            old: b"m-old".to_vec(),
            new: b"m-new".to_vec(),
        }];
        let err = commit(steps, &shown).unwrap_err();
        assert!(
            err.failed.contains("cannot write `dir`: is a directory"),
            "{err}"
        );
        assert!(err.undo_failures.is_empty(), "{:?}", err.undo_failures);
        assert_eq!(fs::read_to_string(d.join("m")).unwrap(), "m-old");
        assert_eq!(names(&d.join("dir")), ["inside"]);
        assert_eq!(names(d), ["dir", "m"]);
    }
}
