//! Which directories may be a session's workspace root.
//!
//! Invariant: **`session/new` refuses a workspace root that makes confinement meaningless**
//! — the filesystem root, the daemon user's home directory itself or any directory holding
//! it (`/home`), and the top-level system directories ([`SYSTEM_DIRS`], also in their
//! symlink-resolved form: `/bin` may be `/usr/bin`) — unless `[sessions]
//! allow_broad_workspace = true`. The check runs on the canonical path, so a symlink to `/`
//! is `/`. Directories below these (a project under `$HOME`, `/usr/src/x`) are fine.

use std::path::{Path, PathBuf};

/// Top-level directories that are never a project.
pub(crate) const SYSTEM_DIRS: &[&str] = &[
    "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/media",
    "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var",
];

/// Why `canonical` is too broad a workspace root, if it is (`home`: the daemon's `$HOME`).
pub(crate) fn broad_reason(canonical: &Path, home: Option<&Path>) -> Option<String> {
    if canonical.parent().is_none() {
        return Some("the filesystem root would put every file in the workspace".to_owned());
    }
    if let Some(home) = home.filter(|h| h.is_absolute()) {
        let home = home.canonicalize().unwrap_or_else(|_| home.to_owned());
        if canonical == home {
            return Some(
                "the home directory itself would put every file of the user (keys, shell \
                 and tool configuration) in the workspace; use a project directory in it"
                    .to_owned(),
            );
        }
        if home.starts_with(canonical) {
            return Some(format!(
                "it holds the home directory {}, and with it every file of the user",
                home.display()
            ));
        }
    }
    let system = SYSTEM_DIRS.iter().map(PathBuf::from).flat_map(|dir| {
        let resolved = dir.canonicalize().ok();
        std::iter::once(dir).chain(resolved)
    });
    for dir in system {
        if canonical == dir {
            return Some(format!("{} is a system directory", dir.display()));
        }
    }
    None
}

/// [`broad_reason`] as the refusal `session/new` reports, naming the key that allows it.
pub(crate) fn refuse_broad(
    canonical: &Path,
    home: Option<&Path>,
    allowed: bool,
) -> Result<(), String> {
    match broad_reason(canonical, home) {
        Some(reason) if !allowed => Err(format!(
            "too broad a workspace: {reason} (set `[sessions] allow_broad_workspace = true` \
             in config.toml to allow it)"
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broad_roots_are_refused_and_projects_are_not() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let home = base.join("users/me");
        let project = home.join("src/app");
        std::fs::create_dir_all(&project).unwrap();
        let link_to_root = base.join("root-link");
        std::os::unix::fs::symlink("/", &link_to_root).unwrap();
        let resolved_link = link_to_root.canonicalize().unwrap();
        // (path, refused because …)
        let cases: &[(&Path, Option<&str>)] = &[
            (Path::new("/"), Some("filesystem root")),
            (&resolved_link, Some("filesystem root")),
            (&home, Some("home directory itself")),
            (&base.join("users"), Some("holds the home directory")),
            (&base, Some("holds the home directory")),
            (Path::new("/etc"), Some("system directory")),
            (Path::new("/usr"), Some("system directory")),
            (&project, None),
            (&home.join("src"), None),
        ];
        for (path, refused) in cases {
            let reason = broad_reason(path, Some(&home));
            match refused {
                Some(why) => assert!(
                    reason.as_deref().is_some_and(|r| r.contains(why)),
                    "{}: {reason:?}",
                    path.display()
                ),
                None => assert_eq!(reason, None, "{}", path.display()),
            }
        }
    }

    #[test]
    fn merged_usr_forms_of_system_dirs_are_refused_too() {
        for dir in SYSTEM_DIRS {
            if let Ok(resolved) = Path::new(dir).canonicalize() {
                assert!(
                    broad_reason(&resolved, None).is_some(),
                    "{}",
                    resolved.display()
                );
            }
        }
    }

    #[test]
    fn the_refusal_names_the_key_and_the_key_allows_it() {
        let err = refuse_broad(Path::new("/"), None, false).unwrap_err();
        assert!(err.contains("allow_broad_workspace"), "{err}");
        assert!(refuse_broad(Path::new("/"), None, true).is_ok());
        assert!(refuse_broad(Path::new("/etc"), None, true).is_ok());
    }

    #[test]
    fn without_a_home_only_root_and_system_dirs_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(
            broad_reason(&tmp.path().canonicalize().unwrap(), None),
            None
        );
        assert!(broad_reason(Path::new("/var"), Some(Path::new("relative"))).is_some());
    }
}
