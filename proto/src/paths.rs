//! Where the daemon's socket and data dir live (PROTOCOL.md "Transport"), how a daemon names
//! the socket it serves in its data dir's instance lock, where it writes its log file, and
//! where a process's own cgroup (v2) is (amberd puts tool process trees below it; the
//! benchmark measures that), shared by daemon and clients.
//!
//! Pure: the caller passes the environment lookup and its uid, so the rule is testable.

use std::ffi::OsString;
use std::path::PathBuf;

/// File name of the socket inside its directory.
pub const SOCKET_FILE: &str = "amberd.sock";

/// `--socket PATH`, else `$AMBER_SOCKET`, else `$XDG_RUNTIME_DIR/amber/amberd.sock`,
/// else `/tmp/amber-$UID/amberd.sock`. Empty variables count as unset.
pub fn socket_path(
    explicit: Option<PathBuf>,
    env: impl Fn(&str) -> Option<OsString>,
    uid: u32,
) -> PathBuf {
    let non_empty = |key: &str| env(key).filter(|v| !v.is_empty());
    if let Some(path) = explicit {
        return path;
    }
    if let Some(path) = non_empty("AMBER_SOCKET") {
        return PathBuf::from(path);
    }
    if let Some(dir) = non_empty("XDG_RUNTIME_DIR") {
        return PathBuf::from(dir).join("amber").join(SOCKET_FILE);
    }
    PathBuf::from(format!("/tmp/amber-{uid}")).join(SOCKET_FILE)
}

/// `--data-dir`, else `$AMBER_DATA_DIR`, else `$XDG_DATA_HOME/amber`, else
/// `$HOME/.local/share/amber` (`/tmp/amber` without any of them). Blank variables count as
/// unset.
pub fn data_dir(explicit: Option<PathBuf>, env: impl Fn(&str) -> Option<OsString>) -> PathBuf {
    if let Some(path) = explicit {
        return path;
    }
    let set = |key: &str| {
        env(key)
            .and_then(|v| v.into_string().ok())
            .filter(|v| !v.trim().is_empty())
    };
    if let Some(path) = set("AMBER_DATA_DIR") {
        return path.into();
    }
    set("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| set("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("/tmp"))
        .join("amber")
}

/// The daemon's instance lock in its data dir. amberd holds an exclusive `flock` on it for
/// its whole life (a second daemon on the same data dir refuses to start); its first line
/// is the daemon's pid, its second the socket the daemon serves. A client whose
/// environment lacks the variable the socket path came from (`XDG_RUNTIME_DIR` is often
/// dropped by programs that start MCP servers) still finds the daemon of its data dir.
pub const INSTANCE_LOCK_FILE: &str = "amberd.lock";

/// The instance lock's text: the pid line, then the socket line.
pub fn instance_lock_text(pid: u32, socket: &std::path::Path) -> String {
    format!("{pid}\n{}\n", socket.display())
}

/// The socket an instance lock names: its second line, when that is an absolute path.
pub fn socket_in_instance_lock(text: &str) -> Option<PathBuf> {
    let line = text.lines().nth(1)?.trim_end_matches('\r');
    let path = PathBuf::from(line);
    path.is_absolute().then_some(path)
}

/// The directory of the calling process's own cgroup in the cgroup2 file system, from the
/// text of `/proc/self/mountinfo` and `/proc/self/cgroup`; `None` without a cgroup2 mount
/// that holds it.
pub fn own_cgroup2_dir(mountinfo: &str, own_cgroup: &str) -> Option<PathBuf> {
    // mountinfo: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS… - FSTYPE SOURCE SUPER
    let (root, point) = mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        if right.split_whitespace().next() != Some("cgroup2") {
            return None;
        }
        let mut fields = left.split_whitespace();
        let root = fields.nth(3)?;
        let point = fields.next()?;
        Some((root.to_owned(), PathBuf::from(unescape_mount_field(point))))
    })?;
    let path = own_cgroup
        .lines()
        .find_map(|line| line.strip_prefix("0::"))?
        .trim();
    let inside = std::path::Path::new(path).strip_prefix(&root).ok()?;
    Some(point.join(inside))
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape_mount_field(field: &str) -> String {
    field
        .replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// amberd's log file (when stderr is not the journal): `$XDG_STATE_HOME/amber/amberd.log`
/// (an absolute one), else `~/.local/state/amber/amberd.log`; `None` without either variable.
/// `amber-cli daemon logs` reads the same file.
pub fn log_file_path(env: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let set = |key: &str| env(key).filter(|v| !v.is_empty()).map(PathBuf::from);
    let state = set("XDG_STATE_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| set("HOME").map(|h| h.join(".local/state")))?;
    Some(state.join("amber").join("amberd.log"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |key| {
            pairs
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn the_own_cgroup_is_found_in_the_cgroup2_mount_and_escapes_are_read_back() {
        let info = "35 22 0:30 / /sys/fs/cgroup/un\\040ified rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            own_cgroup2_dir(info, "0::/a.slice/b\n"),
            Some(PathBuf::from("/sys/fs/cgroup/un ified/a.slice/b"))
        );
        assert_eq!(unescape_mount_field("/a\\040b\\134c"), "/a b\\c");
    }

    #[test]
    fn explicit_path_wins() {
        let env = env_of(&[
            ("AMBER_SOCKET", "/a.sock"),
            ("XDG_RUNTIME_DIR", "/run/user/1"),
        ]);
        assert_eq!(
            socket_path(Some("/x.sock".into()), env, 1),
            PathBuf::from("/x.sock")
        );
    }

    #[test]
    fn amber_socket_then_runtime_dir_then_tmp() {
        let both = env_of(&[
            ("AMBER_SOCKET", "/a.sock"),
            ("XDG_RUNTIME_DIR", "/run/user/1"),
        ]);
        assert_eq!(socket_path(None, both, 1), PathBuf::from("/a.sock"));
        let runtime = env_of(&[("XDG_RUNTIME_DIR", "/run/user/1")]);
        assert_eq!(
            socket_path(None, runtime, 1),
            PathBuf::from("/run/user/1/amber/amberd.sock")
        );
        let empty = env_of(&[("AMBER_SOCKET", ""), ("XDG_RUNTIME_DIR", "")]);
        assert_eq!(
            socket_path(None, empty, 1000),
            PathBuf::from("/tmp/amber-1000/amberd.sock")
        );
    }

    #[test]
    fn data_dir_follows_the_protocol_rule() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[("AMBER_DATA_DIR", "/d"), ("XDG_DATA_HOME", "/x")], "/d"),
            (
                &[("AMBER_DATA_DIR", " "), ("XDG_DATA_HOME", "/x")],
                "/x/amber",
            ),
            (&[("HOME", "/h")], "/h/.local/share/amber"),
            (&[], "/tmp/amber"),
        ];
        for (pairs, want) in cases {
            let env = |key: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, v)| OsString::from(v))
            };
            assert_eq!(data_dir(None, env), PathBuf::from(want), "{pairs:?}");
        }
        assert_eq!(
            data_dir(Some("/e".into()), env_of(&[("AMBER_DATA_DIR", "/d")])),
            PathBuf::from("/e")
        );
    }

    #[test]
    fn the_instance_lock_names_the_served_socket_and_nothing_else_counts() {
        let text = instance_lock_text(42, std::path::Path::new("/run/user/7/amber/amberd.sock"));
        assert_eq!(
            socket_in_instance_lock(&text),
            Some(PathBuf::from("/run/user/7/amber/amberd.sock"))
        );
        // The pid-only form of older daemons, a relative path, an empty line: no socket.
        for text in ["42\n", "42\nrel/amberd.sock\n", "42\n\n", ""] {
            assert_eq!(socket_in_instance_lock(text), None, "{text:?}");
        }
    }

    #[test]
    fn log_file_follows_xdg_state_home() {
        assert_eq!(
            log_file_path(env_of(&[("XDG_STATE_HOME", "/s"), ("HOME", "/h")])),
            Some(PathBuf::from("/s/amber/amberd.log"))
        );
        assert_eq!(
            log_file_path(env_of(&[("XDG_STATE_HOME", "rel"), ("HOME", "/h")])),
            Some(PathBuf::from("/h/.local/state/amber/amberd.log"))
        );
        assert_eq!(
            log_file_path(env_of(&[("HOME", "/h")])),
            Some(PathBuf::from("/h/.local/state/amber/amberd.log"))
        );
        assert_eq!(log_file_path(env_of(&[])), None);
    }
}
