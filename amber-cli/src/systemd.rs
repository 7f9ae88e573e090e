//! `daemon install-systemd`: writes `amberd.socket` and `amberd.service` (the files in the
//! repository's `systemd/`, compiled in) into the systemd user unit directory, with
//! `ExecStart=` pointing at a real amberd. Re-running with the same result changes nothing;
//! a unit edited since is never overwritten without `--force`.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The unit files as shipped; `ExecStart=` of the service is replaced on install.
pub(crate) const SOCKET_UNIT: &str = include_str!("../../systemd/amberd.socket");
pub(crate) const SERVICE_UNIT: &str = include_str!("../../systemd/amberd.service");
pub(crate) const SOCKET_NAME: &str = "amberd.socket";
pub(crate) const SERVICE_NAME: &str = "amberd.service";

/// What `install-systemd` did to one unit file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Created,
    Unchanged,
    Replaced,
}

/// Why nothing (or not everything) was written.
#[derive(Debug)]
pub(crate) enum InstallError {
    /// Units that differ from what would be written; nothing was touched.
    Changed(Vec<PathBuf>),
    Io(PathBuf, std::io::Error),
}

impl std::fmt::Display for InstallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InstallError::Changed(paths) => {
                let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
                let verb = if names.len() == 1 {
                    "differs"
                } else {
                    "differ"
                };
                write!(
                    f,
                    "{} {verb} from what this amber-cli would write (edited by hand, or another \
                     amberd path); nothing written. Re-run with --force to replace",
                    names.join(" and ")
                )
            }
            InstallError::Io(path, err) => write!(f, "{}: {err}", path.display()),
        }
    }
}

impl std::error::Error for InstallError {}

/// `$XDG_CONFIG_HOME/systemd/user`, else `~/.config/systemd/user`.
pub(crate) fn default_unit_dir(env: &impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let set = |key: &str| env(key).filter(|v| !v.is_empty()).map(PathBuf::from);
    let config = set("XDG_CONFIG_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| set("HOME").map(|h| h.join(".config")))?;
    Some(config.join("systemd").join("user"))
}

/// The service unit with `ExecStart=` running `amberd`.
pub(crate) fn service_unit(amberd: &Path) -> String {
    let mut out = String::with_capacity(SERVICE_UNIT.len() + 64);
    for line in SERVICE_UNIT.lines() {
        if line.starts_with("ExecStart=") {
            out.push_str("ExecStart=");
            out.push_str(&exec_path(amberd));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// A path as one ExecStart word: `%` doubled (it starts a specifier), quoted with `\`
/// escapes when it holds whitespace, quotes or backslashes.
fn exec_path(path: &Path) -> String {
    let raw = path.to_string_lossy().replace('%', "%%");
    if raw
        .chars()
        .any(|c| c.is_whitespace() || c == '"' || c == '\'' || c == '\\')
    {
        let escaped = raw.replace('\\', "\\\\").replace('"', "\\\"");
        format!("\"{escaped}\"")
    } else {
        raw
    }
}

/// Writes both units into `dir` (created if missing). Checks both first: if either exists
/// with other content and `force` is false, nothing is written.
pub(crate) fn install(
    dir: &Path,
    amberd: &Path,
    force: bool,
) -> Result<Vec<(PathBuf, Outcome)>, InstallError> {
    let units = [
        (dir.join(SOCKET_NAME), SOCKET_UNIT.to_owned()),
        (dir.join(SERVICE_NAME), service_unit(amberd)),
    ];
    let mut plan = Vec::new();
    let mut changed = Vec::new();
    for (path, content) in &units {
        let outcome = match std::fs::read_to_string(path) {
            Ok(existing) if existing == *content => Outcome::Unchanged,
            Ok(_) => {
                changed.push(path.clone());
                Outcome::Replaced
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Outcome::Created,
            Err(err) => return Err(InstallError::Io(path.clone(), err)),
        };
        plan.push(outcome);
    }
    if !changed.is_empty() && !force {
        return Err(InstallError::Changed(changed));
    }
    std::fs::create_dir_all(dir).map_err(|e| InstallError::Io(dir.to_owned(), e))?;
    let mut done = Vec::new();
    for ((path, content), outcome) in units.into_iter().zip(plan) {
        if outcome != Outcome::Unchanged {
            write_atomically(&path, &content).map_err(|e| InstallError::Io(path.clone(), e))?;
        }
        done.push((path, outcome));
    }
    Ok(done)
}

/// Temp file + rename: systemd (or a concurrent `daemon-reload`) never reads half a unit.
fn write_atomically(path: &Path, content: &str) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(content.as_bytes())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, path)
}

/// `--amberd`, made absolute, else `amberd` next to this executable. It must exist: a unit
/// pointing at nothing fails only later, at the first connection.
pub(crate) fn resolve_amberd(explicit: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let path = match explicit {
        Some(path) => path,
        None => std::env::current_exe()?
            .parent()
            .map(|dir| dir.join("amberd"))
            .ok_or_else(|| anyhow::anyhow!("cannot locate amber-cli's directory"))?,
    };
    if !path.is_file() {
        anyhow::bail!(
            "no amberd at {} (pass --amberd PATH to point the unit at one)",
            path.display()
        );
    }
    Ok(std::path::absolute(&path)?)
}

/// The lines `install-systemd` prints.
pub(crate) fn report(done: &[(PathBuf, Outcome)], default_dir: bool) -> String {
    let mut out = String::new();
    for (path, outcome) in done {
        let verb = match outcome {
            Outcome::Created => "wrote",
            Outcome::Replaced => "replaced",
            Outcome::Unchanged => "unchanged",
        };
        out.push_str(&format!("{verb:9} {}\n", path.display()));
    }
    if default_dir {
        out.push_str(
            "now run: systemctl --user daemon-reload && systemctl --user enable --now amberd.socket",
        );
    } else {
        out.push_str(
            "units written outside the user unit directory: link or copy them there, then \
             systemctl --user daemon-reload && systemctl --user enable --now amberd.socket",
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_units_say_what_the_issue_asks() {
        for line in [
            "ListenStream=%t/amber/amberd.sock",
            "SocketMode=0600",
            "DirectoryMode=0700",
        ] {
            assert!(SOCKET_UNIT.lines().any(|l| l == line), "{line}");
        }
        for line in ["Type=notify", "NotifyAccess=main", "Restart=on-failure"] {
            assert!(SERVICE_UNIT.lines().any(|l| l == line), "{line}");
        }
        assert_eq!(
            SERVICE_UNIT
                .lines()
                .filter(|l| l.starts_with("ExecStart="))
                .count(),
            1
        );
    }

    #[test]
    fn exec_start_points_at_amberd_escaped() {
        let unit = service_unit(Path::new("/opt/amber/bin/amberd"));
        assert!(
            unit.contains("\nExecStart=/opt/amber/bin/amberd\n"),
            "{unit}"
        );
        assert!(!unit.contains("%h/.cargo/bin/amberd"));
        assert_eq!(
            exec_path(Path::new("/a b/100%/amberd")),
            "\"/a b/100%%/amberd\""
        );
    }

    #[test]
    fn install_is_idempotent_and_refuses_to_clobber() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("systemd/user");
        let amberd = Path::new("/usr/local/bin/amberd");

        let first = install(&dir, amberd, false).unwrap();
        assert!(first.iter().all(|(_, o)| *o == Outcome::Created));
        let service = std::fs::read_to_string(dir.join(SERVICE_NAME)).unwrap();
        assert!(service.contains("ExecStart=/usr/local/bin/amberd\n"));
        assert_eq!(
            std::fs::read_to_string(dir.join(SOCKET_NAME)).unwrap(),
            SOCKET_UNIT
        );

        let again = install(&dir, amberd, false).unwrap();
        assert!(again.iter().all(|(_, o)| *o == Outcome::Unchanged));

        // A hand edit (or another amberd path) is kept unless forced, and then nothing at
        // all is written, not even the unchanged unit.
        std::fs::write(dir.join(SOCKET_NAME), "# mine\n").unwrap();
        let err = install(&dir, Path::new("/other/amberd"), false).unwrap_err();
        match &err {
            InstallError::Changed(paths) => assert_eq!(paths.len(), 2, "{err}"),
            other => panic!("{other}"),
        }
        assert!(err.to_string().contains("--force"));
        assert_eq!(
            std::fs::read_to_string(dir.join(SOCKET_NAME)).unwrap(),
            "# mine\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join(SERVICE_NAME)).unwrap(),
            service
        );

        let forced = install(&dir, Path::new("/other/amberd"), true).unwrap();
        assert!(forced.iter().all(|(_, o)| *o == Outcome::Replaced));
        assert_eq!(
            std::fs::read_to_string(dir.join(SOCKET_NAME)).unwrap(),
            SOCKET_UNIT
        );
        assert!(!dir.join("amberd.service.tmp").exists());
    }

    #[test]
    fn unit_dir_follows_xdg_config_home() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == k)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        assert_eq!(
            default_unit_dir(&env(&[("XDG_CONFIG_HOME", "/c"), ("HOME", "/h")])),
            Some(PathBuf::from("/c/systemd/user"))
        );
        assert_eq!(
            default_unit_dir(&env(&[("HOME", "/h")])),
            Some(PathBuf::from("/h/.config/systemd/user"))
        );
        assert_eq!(default_unit_dir(&env(&[])), None);
    }
}
