//! The socket's directory before the daemon binds in it: created private (0700) when missing,
//! amber's own directory tightened to 0700, and refused by the rule clients apply too
//! (`amber_proto::socket_trust`): **the daemon binds only in a directory that is its user's
//! and private (0700), under ancestors nobody else can write without the sticky bit** — else
//! someone could swap the socket, or its clients would refuse to connect.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::Path;

use amber_proto::socket_trust::{Distrust, check_ancestor_dir, check_socket_dir};

use super::{SocketError, current_uid};

/// Creates `dir` (0700) if missing; otherwise checks it (tightening amber's own); then checks
/// every directory above it.
pub(super) fn ensure_private_dir(dir: &Path) -> Result<(), SocketError> {
    let fail = |source| SocketError::Dir {
        path: dir.to_owned(),
        source,
    };
    let own = current_uid();
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(fail)?;
        // `mode` is filtered by the umask; make sure.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(fail)?;
    } else {
        let meta = std::fs::metadata(dir).map_err(fail)?;
        let mode = meta.mode() & 0o7777;
        if let Some(tightened) = dir_mode_check(dir, meta.uid(), mode, own)? {
            tracing::warn!(
                dir = %dir.display(),
                from = format!("{mode:o}"),
                to = format!("{tightened:o}"),
                "tightening the socket directory's permissions"
            );
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(tightened))
                .map_err(fail)?;
        }
    }
    check_ancestors(dir, own)
}

/// Whether an existing socket directory is safe to bind in, and the mode to give it if it
/// must be tightened first. amber's own directory (`…/amber`, `/tmp/amber-UID`) must be ours
/// — another user could have created it to swap the socket — and is made 0700 when anyone
/// else has access. A directory the user chose is never chmod-ed: it must already be ours and
/// 0700, as the clients require.
pub(super) fn dir_mode_check(
    dir: &Path,
    owner: u32,
    mode: u32,
    own: u32,
) -> Result<Option<u32>, SocketError> {
    if is_amber_dir(dir) && owner == own && mode & 0o077 != 0 {
        return Ok(Some(0o700));
    }
    check_socket_dir(owner, mode, own)
        .map(|()| None)
        .map_err(|why| match why {
            Distrust::ForeignOwner { owner } => SocketError::ForeignDir {
                path: dir.to_owned(),
                owner,
                own,
            },
            why => SocketError::UntrustedDir {
                path: dir.to_owned(),
                why,
            },
        })
}

/// Every directory above `dir` (symlinks resolved): ours or root's, and not writable by
/// others unless sticky — else they could rename `dir` away and put their own in its place.
fn check_ancestors(dir: &Path, own: u32) -> Result<(), SocketError> {
    let real = std::fs::canonicalize(dir).map_err(|source| SocketError::Dir {
        path: dir.to_owned(),
        source,
    })?;
    for ancestor in real.ancestors().skip(1) {
        let meta = std::fs::metadata(ancestor).map_err(|source| SocketError::Dir {
            path: ancestor.to_owned(),
            source,
        })?;
        check_ancestor_dir(meta.uid(), meta.mode(), own).map_err(|why| {
            SocketError::UntrustedAncestor {
                path: ancestor.to_owned(),
                why,
            }
        })?;
    }
    Ok(())
}

/// Directories amber names itself (`.../amber`, `/tmp/amber-UID`) may be chmod-ed; a
/// user-chosen parent never is.
fn is_amber_dir(dir: &Path) -> bool {
    dir.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n == "amber" || n.starts_with("amber-"))
}

#[cfg(test)]
mod tests {
    use super::super::bind;
    use super::*;

    #[test]
    fn a_socket_directory_of_another_user_is_refused() {
        let dir = Path::new("/tmp/amber-1000");
        let err = dir_mode_check(dir, 1001, 0o700, 1000).unwrap_err();
        assert!(matches!(
            err,
            SocketError::ForeignDir {
                owner: 1001,
                own: 1000,
                ..
            }
        ));
        let text = err.to_string();
        assert!(
            text.contains("/tmp/amber-1000") && text.contains("1001"),
            "{text}"
        );
        // amber's own directory must be ours even when root made it.
        assert!(dir_mode_check(dir, 0, 0o700, 1000).is_err());
        // A chosen directory of another user is refused too, root's `/tmp` included: it is
        // nobody's private directory.
        assert!(dir_mode_check(Path::new("/home/v/run"), 1001, 0o755, 1000).is_err());
        assert!(dir_mode_check(Path::new("/tmp"), 0, 0o1777, 1000).is_err());
    }

    #[test]
    fn amber_s_own_directory_is_tightened_a_chosen_one_must_already_be_private() {
        let dir = Path::new("/tmp/amber-1000");
        assert_eq!(dir_mode_check(dir, 1000, 0o755, 1000).unwrap(), Some(0o700));
        assert_eq!(dir_mode_check(dir, 1000, 0o777, 1000).unwrap(), Some(0o700));
        assert_eq!(dir_mode_check(dir, 1000, 0o700, 1000).unwrap(), None);
        let chosen = Path::new("/home/u/run");
        assert_eq!(dir_mode_check(chosen, 1000, 0o700, 1000).unwrap(), None);
        for (mode, says) in [
            (0o777, "no sticky bit"),
            (0o775, "no sticky bit"),
            (0o755, "0700"),
        ] {
            let err = dir_mode_check(chosen, 1000, mode, 1000).unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, SocketError::UntrustedDir { .. }), "{mode:o}");
            assert!(
                text.contains("/home/u/run") && text.contains(says),
                "{text}"
            );
        }
    }

    #[test]
    fn binding_checks_the_directory_and_every_ancestor() {
        let tmp = tempfile::tempdir().unwrap();
        let set = |p: &Path, mode| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o7777;

        // amber's own, open: tightened. A chosen one, open: refused and left as it was.
        let amber = tmp.path().join("amber");
        let chosen = tmp.path().join("chosen");
        for dir in [&amber, &chosen] {
            std::fs::create_dir(dir).unwrap();
            set(dir, 0o777);
        }
        bind(&amber.join("amberd.sock")).unwrap();
        let err = bind(&chosen.join("amberd.sock")).unwrap_err();
        assert!(matches!(err, SocketError::UntrustedDir { .. }), "{err}");
        assert!(err.to_string().contains(&chosen.display().to_string()));
        assert_eq!((mode(&amber), mode(&chosen)), (0o700, 0o777));
        assert!(!chosen.join("amberd.sock").exists(), "nothing was bound");

        // A private directory under one that others may write without the sticky bit.
        let open = tmp.path().join("open");
        std::fs::create_dir_all(open.join("inner")).unwrap();
        set(&open.join("inner"), 0o700);
        set(&open, 0o777);
        let err = bind(&open.join("inner/amberd.sock")).unwrap_err();
        assert!(
            matches!(err, SocketError::UntrustedAncestor { .. }),
            "{err}"
        );
        assert!(
            err.to_string().contains(&open.display().to_string()),
            "{err}"
        );
        // With the sticky bit (like /tmp) the directory cannot be swapped: accepted.
        set(&open, 0o1777);
        bind(&open.join("inner/amberd.sock")).unwrap();
    }
}
