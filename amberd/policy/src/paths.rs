//! Workspace confinement of paths from tool calls.
//!
//! A path is first resolved lexically (no filesystem access): relative paths
//! join the root, `.` and `..` are folded, and the result must sit inside the
//! root by whole components (`/ws2` is not inside `/ws`). Then the symlinks of
//! the existing part of the path are resolved one component at a time
//! (dangling links included), and the result must still be inside the
//! canonical root. The returned path is that resolved absolute path.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Symlink hops allowed while resolving one path (Linux uses 40 too).
const MAX_SYMLINK_HOPS: usize = 40;

/// Why a path was refused.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("empty path: a path inside the workspace is required")]
    Empty,
    #[error("invalid path `{path}`: {reason}")]
    Invalid { path: String, reason: &'static str },
    #[error("workspace root `{}` is not an absolute path", root.display())]
    RootNotAbsolute { root: PathBuf },
    #[error("workspace root `{}` is unavailable: {source}", root.display())]
    RootUnavailable {
        root: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("`{path}` is outside the workspace `{}`", root.display())]
    OutsideWorkspace { path: String, root: PathBuf },
    #[error(
        "`{path}` resolves through a symlink to `{}`, outside the workspace `{}`",
        target.display(),
        root.display()
    )]
    SymlinkEscape {
        path: String,
        target: PathBuf,
        root: PathBuf,
    },
    #[error("`{path}`: too many levels of symbolic links")]
    SymlinkLoop { path: String },
}

/// Confine `input` (relative to `root`, or absolute) to the workspace `root`.
///
/// Returns the absolute path with every symlink of its existing prefix
/// resolved; only that path may be used for file I/O.
pub fn confine(root: &Path, input: &str) -> Result<PathBuf, PathError> {
    if input.trim().is_empty() {
        return Err(PathError::Empty);
    }
    if input.contains('\0') {
        return Err(PathError::Invalid {
            path: input.to_owned(),
            reason: "contains a NUL byte",
        });
    }
    if !root.is_absolute() {
        return Err(PathError::RootNotAbsolute {
            root: root.to_path_buf(),
        });
    }
    let lexical_root = normalize(root);
    let requested = Path::new(input);
    let lexical = if requested.is_absolute() {
        normalize(requested)
    } else {
        normalize(&lexical_root.join(requested))
    };
    let canonical_root =
        std::fs::canonicalize(&lexical_root).map_err(|source| PathError::RootUnavailable {
            root: lexical_root.clone(),
            source,
        })?;
    // Component-wise prefix match: the slash-terminated comparison.
    if !lexical.starts_with(&lexical_root) && !lexical.starts_with(&canonical_root) {
        return Err(PathError::OutsideWorkspace {
            path: input.to_owned(),
            root: lexical_root,
        });
    }
    let resolved = resolve_symlinks(&lexical).ok_or_else(|| PathError::SymlinkLoop {
        path: input.to_owned(),
    })?;
    if !resolved.starts_with(&canonical_root) {
        return Err(PathError::SymlinkEscape {
            path: input.to_owned(),
            target: resolved,
            root: canonical_root,
        });
    }
    Ok(resolved)
}

/// Lexical normalisation of an absolute path: drops `.`, folds `..` (never
/// above `/`). No filesystem access.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(prefix) => out.push(prefix.as_os_str()),
            Component::RootDir => out.push(Component::RootDir.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
        }
    }
    out
}

/// One pending step of the resolver.
enum Part {
    Root,
    Parent,
    Name(OsString),
}

fn parts_of(path: &Path) -> impl DoubleEndedIterator<Item = Part> + '_ {
    path.components().filter_map(|component| match component {
        Component::Prefix(_) | Component::RootDir => Some(Part::Root),
        Component::CurDir => None,
        Component::ParentDir => Some(Part::Parent),
        Component::Normal(name) => Some(Part::Name(name.to_os_string())),
    })
}

/// Resolve the symlinks of the existing prefix of an absolute path, one
/// component at a time (like the kernel does), including dangling links whose
/// targets do not exist yet. The part below the first missing component is
/// appended as is. `None` on a symlink loop.
fn resolve_symlinks(path: &Path) -> Option<PathBuf> {
    let mut pending: VecDeque<Part> = parts_of(path).collect();
    let mut resolved = PathBuf::from(Component::RootDir.as_os_str());
    let mut probing = true;
    let mut hops = 0;
    while let Some(part) = pending.pop_front() {
        let name = match part {
            Part::Root => {
                resolved = PathBuf::from(Component::RootDir.as_os_str());
                continue;
            }
            Part::Parent => {
                resolved.pop();
                continue;
            }
            Part::Name(name) => name,
        };
        let next = resolved.join(&name);
        if probing {
            match std::fs::symlink_metadata(&next) {
                Ok(meta) if meta.file_type().is_symlink() => match std::fs::read_link(&next) {
                    Ok(target) => {
                        hops += 1;
                        if hops > MAX_SYMLINK_HOPS {
                            return None;
                        }
                        for part in parts_of(&target).rev() {
                            pending.push_front(part);
                        }
                        // A relative target continues from the link's directory.
                        continue;
                    }
                    Err(_) => probing = false,
                },
                Ok(_) => {}
                Err(_) => probing = false,
            }
        }
        resolved = next;
    }
    Some(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A temp dir holding `ws/` (the root) and a sibling `ws2/`.
    fn fixture() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(base.join("ws/src")).unwrap();
        std::fs::create_dir_all(base.join("ws2")).unwrap();
        std::fs::write(base.join("ws/src/lib.rs"), "x").unwrap();
        std::fs::write(base.join("ws2/secret"), "s").unwrap();
        (dir, base.join("ws"))
    }

    #[test]
    fn empty_is_rejected() {
        let (_dir, root) = fixture();
        assert!(matches!(confine(&root, ""), Err(PathError::Empty)));
        assert!(matches!(confine(&root, "  "), Err(PathError::Empty)));
    }

    #[test]
    fn nul_byte_is_rejected() {
        let (_dir, root) = fixture();
        assert!(matches!(
            confine(&root, "a\0b"),
            Err(PathError::Invalid { .. })
        ));
    }

    #[test]
    fn relative_root_is_rejected() {
        assert!(matches!(
            confine(Path::new("ws"), "a"),
            Err(PathError::RootNotAbsolute { .. })
        ));
    }

    #[test]
    fn relative_paths_join_the_root() {
        let (_dir, root) = fixture();
        assert_eq!(
            confine(&root, "src/lib.rs").unwrap(),
            root.join("src/lib.rs")
        );
        assert_eq!(
            confine(&root, "./src/./lib.rs").unwrap(),
            root.join("src/lib.rs")
        );
        assert_eq!(confine(&root, "src/../x").unwrap(), root.join("x"));
        assert_eq!(confine(&root, ".").unwrap(), root);
    }

    #[test]
    fn missing_paths_inside_are_fine() {
        let (_dir, root) = fixture();
        assert_eq!(
            confine(&root, "new/deep/f.txt").unwrap(),
            root.join("new/deep/f.txt")
        );
    }

    #[test]
    fn absolute_inside_is_fine() {
        let (_dir, root) = fixture();
        let input = root.join("src/lib.rs");
        assert_eq!(confine(&root, input.to_str().unwrap()).unwrap(), input);
    }

    #[test]
    fn dot_dot_escapes_are_rejected() {
        let (_dir, root) = fixture();
        for input in [
            "..",
            "../ws2/secret",
            "a/../../etc",
            "src/../../../etc/passwd",
        ] {
            let err = confine(&root, input).unwrap_err();
            assert!(
                matches!(err, PathError::OutsideWorkspace { .. }),
                "{input}: {err}"
            );
            assert!(err.to_string().contains(input), "{err}");
        }
    }

    #[test]
    fn absolute_outside_is_rejected() {
        let (_dir, root) = fixture();
        for input in ["/etc/passwd", "/", "/tmp"] {
            assert!(matches!(
                confine(&root, input),
                Err(PathError::OutsideWorkspace { .. })
            ));
        }
    }

    #[test]
    fn sibling_with_common_prefix_is_outside() {
        let (_dir, root) = fixture();
        let sibling = format!("{}2/secret", root.display());
        assert!(matches!(
            confine(&root, &sibling),
            Err(PathError::OutsideWorkspace { .. })
        ));
        let sneaky = format!("{}/../ws2/x", root.display());
        assert!(matches!(
            confine(&root, &sneaky),
            Err(PathError::OutsideWorkspace { .. })
        ));
    }

    #[test]
    fn symlink_to_etc_is_rejected() {
        let (_dir, root) = fixture();
        symlink("/etc", root.join("etc")).unwrap();
        for input in ["etc", "etc/passwd", "etc/new-file"] {
            let err = confine(&root, input).unwrap_err();
            assert!(
                matches!(err, PathError::SymlinkEscape { .. }),
                "{input}: {err}"
            );
        }
    }

    #[test]
    fn symlink_to_sibling_dir_is_rejected() {
        let (_dir, root) = fixture();
        symlink("../ws2", root.join("sib")).unwrap();
        assert!(matches!(
            confine(&root, "sib/secret"),
            Err(PathError::SymlinkEscape { .. })
        ));
    }

    #[test]
    fn dangling_symlink_outside_is_rejected() {
        let (_dir, root) = fixture();
        symlink("../ws2/not-yet", root.join("trap")).unwrap();
        assert!(matches!(
            confine(&root, "trap"),
            Err(PathError::SymlinkEscape { .. })
        ));
    }

    #[test]
    fn symlink_inside_pointing_inside_is_fine() {
        let (_dir, root) = fixture();
        symlink("src", root.join("alias")).unwrap();
        assert_eq!(
            confine(&root, "alias/lib.rs").unwrap(),
            root.join("src/lib.rs")
        );
        symlink(root.join("src/lib.rs"), root.join("lib-link")).unwrap();
        assert_eq!(confine(&root, "lib-link").unwrap(), root.join("src/lib.rs"));
    }

    #[test]
    fn symlink_loops_are_rejected() {
        let (_dir, root) = fixture();
        symlink("b", root.join("a")).unwrap();
        symlink("a", root.join("b")).unwrap();
        assert!(matches!(
            confine(&root, "a/x"),
            Err(PathError::SymlinkLoop { .. })
        ));
    }

    #[test]
    fn root_given_through_a_symlink_still_works() {
        let (dir, root) = fixture();
        let alias = dir.path().join("alias-root");
        symlink(&root, &alias).unwrap();
        assert_eq!(
            confine(&alias, "src/lib.rs").unwrap(),
            root.join("src/lib.rs")
        );
        let absolute = root.join("src/lib.rs");
        assert!(confine(&alias, absolute.to_str().unwrap()).is_ok());
    }
}
