//! Lexical inside/outside decisions for what a command writes. No file-system access:
//! relative paths resolve against the tracked working directory, `.`/`..` are folded,
//! `~` and `$HOME` count as outside, `/dev/null` and friends are harmless, and a path is
//! inside when it is the workspace or below it (component-wise, so `/ws2` is not in `/ws`).
//! Inside paths are returned too: the engine resolves their symlinks (a link inside the
//! workspace may point outside), which this lexical module cannot see.

use std::path::{Component, Path, PathBuf};

use super::argspec::Arg;
use super::outcome::ReadPath;
use super::words::Word;

/// The working directory as far as the classifier can follow `cd`.
#[derive(Debug, Clone)]
pub(super) enum Cwd {
    Known(PathBuf),
    /// Below the user's home (`cd ~/x`): outside the workspace for writes, home-relative for
    /// reads (so `cd ~ && cat .ssh/id` is a read of `~/.ssh/id`).
    Home(PathBuf),
    /// Somewhere outside the workspace that we cannot name.
    Outside,
    /// Not known at all (`cd "$X"`, `cd -`, `popd`).
    Unknown,
}

/// Where a write lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    Inside,
    /// Inside, but a protected path (`.amber/`, `.git/hooks`, `.git/config`).
    Protected,
    Outside,
    /// `/dev/null`, `/dev/stdout`, `/dev/stderr`, `/dev/tty`: not a file write.
    Harmless,
    /// A variable, a command substitution, a glob that may climb (`.*`), an unknown cwd.
    Unresolved,
}

const HARMLESS: &[&str] = &[
    "/dev/null",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/tty",
    "/dev/fd/1",
    "/dev/fd/2",
];

/// Folds `.` and `..` without touching the file system (`..` at the root stays there).
pub(super) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() && !path.is_absolute() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

fn inside(path: &Path, workspace: &Path) -> bool {
    path.starts_with(workspace)
}

/// Where writing `word` lands, with `cwd` as the working directory, and the lexical
/// absolute path when it is inside.
pub(super) fn write_target(word: &Word, cwd: &Cwd, workspace: &Path) -> (Target, Option<PathBuf>) {
    if word.home {
        return (Target::Outside, None);
    }
    let Some(text) = word.text() else {
        return (Target::Unresolved, None);
    };
    if text.is_empty() {
        return (Target::Unresolved, None);
    }
    // A glob stays in its directory unless a component can match `..` (`.*`, `.?`).
    if word.glob
        && Path::new(text)
            .components()
            .any(|c| c.as_os_str().to_string_lossy().starts_with('.') && has_glob(&c))
    {
        return (Target::Unresolved, None);
    }
    resolve(text, cwd, workspace)
}

fn has_glob(component: &Component<'_>) -> bool {
    component
        .as_os_str()
        .to_string_lossy()
        .contains(['*', '?', '[', '('])
}

/// Files reading which reveals nothing (`cat /dev/null`, `< /dev/stdin`).
const HARMLESS_READS: &[&str] = &[
    "/dev/null",
    "/dev/stdin",
    "/dev/fd/0",
    "/dev/zero",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// What reading an argument names: `None` for stdin and harmless devices.
pub(super) fn read_target(arg: &Arg<'_>, cwd: &Cwd) -> Option<ReadPath> {
    let (text, home, glob) = match arg {
        Arg::Word(word) => {
            if word.home {
                return Some(home_relative(&word.raw).map_or(ReadPath::Unknown, ReadPath::Home));
            }
            if word.raw == super::argspec::PROCESS_SUBSTITUTION {
                return None;
            }
            let Some(text) = word.text() else {
                return Some(ReadPath::Unknown);
            };
            (text, false, word.glob)
        }
        Arg::Inline(text) => (text.as_str(), text.starts_with('~'), false),
    };
    if home {
        return Some(home_relative(text).map_or(ReadPath::Unknown, ReadPath::Home));
    }
    if text == "-" {
        return None;
    }
    if text.is_empty() {
        return Some(ReadPath::Unknown);
    }
    let mut path = PathBuf::new();
    for component in Path::new(text).components() {
        let name = component.as_os_str().to_string_lossy();
        if glob && has_glob(&component) {
            // `.*` can match `..`; otherwise the glob stays in the directory before it.
            if name.starts_with('.') {
                return Some(ReadPath::Unknown);
            }
            break;
        }
        path.push(component.as_os_str());
    }
    let full = if path.is_absolute() {
        normalize(&path)
    } else {
        match cwd {
            Cwd::Known(dir) => normalize(&dir.join(&path)),
            Cwd::Home(dir) => {
                return Some(home_join(dir, &path).map_or(ReadPath::Unknown, ReadPath::Home));
            }
            Cwd::Outside | Cwd::Unknown => return Some(ReadPath::Unknown),
        }
    };
    if HARMLESS_READS.iter().any(|h| full == Path::new(h)) {
        return None;
    }
    Some(ReadPath::Absolute(full))
}

/// What reading the working directory names.
pub(super) fn read_cwd(cwd: &Cwd) -> Option<ReadPath> {
    Some(match cwd {
        Cwd::Known(dir) => ReadPath::Absolute(dir.clone()),
        Cwd::Home(dir) => ReadPath::Home(dir.clone()),
        Cwd::Outside | Cwd::Unknown => ReadPath::Unknown,
    })
}

/// `~/x`, `$HOME/x`, `${HOME}/x`, `"$HOME/x"` → `x` (`~` alone → empty); `None` for
/// `~user/x` and anything whose rest expands.
fn home_relative(raw: &str) -> Option<PathBuf> {
    const PREFIXES: &[&str] = &["~", "${HOME}", "$HOME", "\"${HOME}", "\"$HOME"];
    let (prefix, rest) = PREFIXES
        .iter()
        .find_map(|p| raw.strip_prefix(p).map(|rest| (*p, rest)))?;
    let rest = if prefix.starts_with('"') {
        format!("\"{rest}")
    } else {
        rest.to_owned()
    };
    let text = match super::words::word(&rest, 0) {
        Ok(word) if !word.glob => word.literal?,
        Ok(word) => {
            // `~/.ssh/*`: the directory before the glob.
            let literal = word.literal?;
            let fixed: PathBuf = Path::new(&literal)
                .components()
                .take_while(|c| !has_glob(c))
                .collect();
            fixed.to_string_lossy().into_owned()
        }
        Err(_) => return None,
    };
    if text.is_empty() {
        return Some(PathBuf::new());
    }
    let relative = text.strip_prefix('/')?;
    let normalized = normalize(Path::new(relative));
    // `~/../x` leaves the home directory: not home-relative any more.
    if normalized.starts_with("..") {
        return None;
    }
    Some(normalized)
}

/// `dir/path` below home, `None` when it climbs out of it.
fn home_join(dir: &Path, path: &Path) -> Option<PathBuf> {
    let joined = normalize(&dir.join(path));
    (!joined.starts_with("..")).then_some(joined)
}

/// Where a literal path (relative to `cwd`) lands, and its lexical absolute path if inside.
pub(super) fn resolve(text: &str, cwd: &Cwd, workspace: &Path) -> (Target, Option<PathBuf>) {
    let path = Path::new(text);
    let full = if path.is_absolute() {
        normalize(path)
    } else {
        match cwd {
            Cwd::Known(dir) => normalize(&dir.join(path)),
            Cwd::Home(_) | Cwd::Outside => return (Target::Outside, None),
            Cwd::Unknown => return (Target::Unresolved, None),
        }
    };
    if HARMLESS.iter().any(|h| full == Path::new(h)) {
        (Target::Harmless, None)
    } else if inside(&full, workspace) {
        (inside_target(&full, workspace), Some(full))
    } else {
        (Target::Outside, None)
    }
}

fn inside_target(full: &Path, workspace: &Path) -> Target {
    if crate::protected::is_protected_in(full, workspace) {
        Target::Protected
    } else {
        Target::Inside
    }
}

/// Where the working directory itself lands (tools that write into it).
pub(super) fn cwd_target(cwd: &Cwd, workspace: &Path) -> (Target, Option<PathBuf>) {
    match cwd {
        Cwd::Known(dir) if inside(dir, workspace) => {
            (inside_target(dir, workspace), Some(dir.clone()))
        }
        Cwd::Known(_) | Cwd::Home(_) | Cwd::Outside => (Target::Outside, None),
        Cwd::Unknown => (Target::Unresolved, None),
    }
}

/// Whether `cd word` ignores CDPATH: an absolute path or one starting with `.`/`..`.
pub(super) fn anchored(word: &Word) -> bool {
    word.text().is_some_and(|t| {
        t.starts_with('/') || t == "." || t == ".." || t.starts_with("./") || t.starts_with("../")
    })
}

/// The working directory after `cd word`.
pub(super) fn change_dir(cwd: &Cwd, word: &Word) -> Cwd {
    if word.home {
        return home_relative(&word.raw).map_or(Cwd::Outside, Cwd::Home);
    }
    let Some(text) = word.text() else {
        return Cwd::Unknown;
    };
    if word.glob || text.is_empty() || text == "-" {
        return Cwd::Unknown;
    }
    let path = Path::new(text);
    if path.is_absolute() {
        return Cwd::Known(normalize(path));
    }
    match cwd {
        Cwd::Known(dir) => Cwd::Known(normalize(&dir.join(path))),
        Cwd::Home(dir) => home_join(dir, path).map_or(Cwd::Unknown, Cwd::Home),
        // Relative to somewhere outside: only `..` could come back in, and we cannot tell.
        Cwd::Outside => {
            if path.components().any(|c| c == Component::ParentDir) {
                Cwd::Unknown
            } else {
                Cwd::Outside
            }
        }
        Cwd::Unknown => Cwd::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(text: &str, cwd: &str) -> Target {
        let word = super::super::words::word(text, 0).unwrap_or_default();
        write_target(&word, &Cwd::Known(PathBuf::from(cwd)), Path::new("/ws")).0
    }

    #[test]
    fn resolution() {
        assert_eq!(target("a", "/ws"), Target::Inside);
        assert_eq!(target("./a/../b", "/ws"), Target::Inside);
        assert_eq!(target("../a", "/ws"), Target::Outside);
        assert_eq!(target("../ws/a", "/ws/sub"), Target::Inside);
        assert_eq!(target("/ws2/a", "/ws"), Target::Outside);
        assert_eq!(target("/ws", "/"), Target::Inside);
        assert_eq!(target("/dev/null", "/ws"), Target::Harmless);
        assert_eq!(target("/dev/../etc/x", "/ws"), Target::Outside);
        assert_eq!(target("~/x", "/ws"), Target::Outside);
        assert_eq!(target("$HOME/x", "/ws"), Target::Outside);
        assert_eq!(target("$X/a", "/ws"), Target::Unresolved);
        assert_eq!(target("*.o", "/ws"), Target::Inside);
        assert_eq!(target(".*", "/ws"), Target::Unresolved);
        assert_eq!(target("a", "/tmp"), Target::Outside);
        assert_eq!(target("'/ws/a b'", "/"), Target::Inside);
        assert_eq!(target(".amber/rules.toml", "/ws"), Target::Protected);
        assert_eq!(target("hooks/pre-commit", "/ws/.git"), Target::Protected);
        assert_eq!(target("../config", "/ws/.git/hooks"), Target::Protected);
        assert_eq!(target(".git/HEAD", "/ws"), Target::Inside);
    }

    #[test]
    fn normalize_is_lexical() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("/../..")), PathBuf::from("/"));
        assert_eq!(normalize(Path::new("a/../../b")), PathBuf::from("../b"));
    }
}
