//! `daemon install-systemd`: writes `amberd.socket` and `amberd.service` (the files in the
//! repository's `systemd/`, compiled in) into the systemd user unit directory, with
//! `ExecStart=` pointing at a real amberd, and the routines' `amber-routines.service`
//! (`amber-cli routine tick`) and `amber-routines.timer`. Re-running with the same result
//! changes nothing; a unit edited since is never overwritten without `--force`, except the
//! timer, whose `OnCalendar=` lines are generated from the daemon's routines (and rewritten
//! by `routine add` and `routine rm`).

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The unit files as shipped; `ExecStart=` of the service is replaced on install.
pub(crate) const SOCKET_UNIT: &str = include_str!("../../systemd/amberd.socket");
pub(crate) const SERVICE_UNIT: &str = include_str!("../../systemd/amberd.service");
pub(crate) const SOCKET_NAME: &str = "amberd.socket";
pub(crate) const SERVICE_NAME: &str = "amberd.service";
pub(crate) const ROUTINES_SERVICE_UNIT: &str = include_str!("../../systemd/amber-routines.service");
pub(crate) const ROUTINES_TIMER_UNIT: &str = include_str!("../../systemd/amber-routines.timer");
pub(crate) const ROUTINES_SERVICE_NAME: &str = "amber-routines.service";
pub(crate) const ROUTINES_TIMER_NAME: &str = "amber-routines.timer";

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

/// `amber-routines.service` with `ExecStart=` running `amber-cli routine tick`.
pub(crate) fn routines_service_unit(amber_cli: &Path) -> String {
    let mut out = String::with_capacity(ROUTINES_SERVICE_UNIT.len() + 64);
    for line in ROUTINES_SERVICE_UNIT.lines() {
        if line.starts_with("ExecStart=") {
            out.push_str("ExecStart=");
            out.push_str(&exec_path(amber_cli));
            out.push_str(" --no-autostart routine tick");
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// `amber-routines.timer` for `calendars`, the `OnCalendar=` values of every routine
/// (`routine/list`); `None` when they are not known: then every minute.
pub(crate) fn routines_timer_unit(calendars: Option<&[String]>) -> String {
    let block = match calendars {
        None => None,
        Some([]) => Some(
            "# No routines yet: `amber-cli routine add` writes their OnCalendar= lines here\n\
             # (systemd starts no timer without one).\n"
                .to_owned(),
        ),
        Some(values) => Some(
            std::iter::once(
                "# The routines' schedules, in local time (`amber-cli routine list`).\n".to_owned(),
            )
            .chain(values.iter().map(|v| format!("OnCalendar={v}\n")))
            .collect(),
        ),
    };
    let mut out = String::with_capacity(ROUTINES_TIMER_UNIT.len() + 256);
    let mut written = false;
    for line in ROUTINES_TIMER_UNIT.lines() {
        let scheduled = line.starts_with("OnCalendar=") || line.starts_with("# Every minute:");
        match (&block, scheduled) {
            (Some(block), true) => {
                if !written {
                    out.push_str(block);
                    written = true;
                }
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// The timer's calendar values for these routines: each one's `onCalendar`, deduplicated;
/// `None` when one has none (a daemon that cannot express its schedule).
pub(crate) fn calendars_of(routines: &[amber_proto::RoutineInfo]) -> Option<Vec<String>> {
    let mut values = std::collections::BTreeSet::new();
    for routine in routines {
        if routine.on_calendar.is_empty() {
            return None;
        }
        values.extend(routine.on_calendar.iter().cloned());
    }
    Some(values.into_iter().collect())
}

/// Rewrites the timer in `dir` for `calendars`; `None` when the routines' units are not
/// installed there (nothing to keep up to date).
pub(crate) fn refresh_timer(
    dir: &Path,
    calendars: Option<&[String]>,
) -> Result<Option<(PathBuf, Outcome)>, InstallError> {
    let path = dir.join(ROUTINES_TIMER_NAME);
    if !path.is_file() && !dir.join(ROUTINES_SERVICE_NAME).is_file() {
        return Ok(None);
    }
    let content = routines_timer_unit(calendars);
    let outcome = match std::fs::read_to_string(&path) {
        Ok(existing) if existing == content => return Ok(Some((path, Outcome::Unchanged))),
        Ok(_) => Outcome::Replaced,
        Err(_) => Outcome::Created,
    };
    write_atomically(&path, &content).map_err(|e| InstallError::Io(path.clone(), e))?;
    Ok(Some((path, outcome)))
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

/// The programs the units run, and the routines' schedules (`None`: not known).
pub(crate) struct Units<'a> {
    pub amberd: &'a Path,
    pub amber_cli: &'a Path,
    pub calendars: Option<&'a [String]>,
}

/// Writes the units into `dir` (created if missing). Checks them first: if one exists
/// with other content and `force` is false, nothing is written (the timer, generated,
/// does not count).
pub(crate) fn install(
    dir: &Path,
    programs: &Units<'_>,
    force: bool,
) -> Result<Vec<(PathBuf, Outcome)>, InstallError> {
    let units = [
        (dir.join(SOCKET_NAME), SOCKET_UNIT.to_owned(), false),
        (dir.join(SERVICE_NAME), service_unit(programs.amberd), false),
        (
            dir.join(ROUTINES_SERVICE_NAME),
            routines_service_unit(programs.amber_cli),
            false,
        ),
        (
            dir.join(ROUTINES_TIMER_NAME),
            routines_timer_unit(programs.calendars),
            true,
        ),
    ];
    let mut plan = Vec::new();
    let mut changed = Vec::new();
    for (path, content, generated) in &units {
        let outcome = match std::fs::read_to_string(path) {
            Ok(existing) if existing == *content => Outcome::Unchanged,
            Ok(_) => {
                if !generated {
                    changed.push(path.clone());
                }
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
    for ((path, content, _), outcome) in units.into_iter().zip(plan) {
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
    out.push_str(
        "\nfor routines while amberd exits idle: systemctl --user enable --now amber-routines.timer",
    );
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
        for line in [
            "Type=oneshot",
            "Requires=amberd.socket",
            "After=amberd.socket",
        ] {
            assert!(ROUTINES_SERVICE_UNIT.lines().any(|l| l == line), "{line}");
        }
        assert_eq!(
            ROUTINES_SERVICE_UNIT
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

    fn units<'a>(amberd: &'a str, amber_cli: &'a str) -> Units<'a> {
        Units {
            amberd: Path::new(amberd),
            amber_cli: Path::new(amber_cli),
            calendars: None,
        }
    }

    #[test]
    fn install_is_idempotent_and_refuses_to_clobber() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("systemd/user");
        let programs = units("/usr/local/bin/amberd", "/usr/local/bin/amber-cli");

        let first = install(&dir, &programs, false).unwrap();
        assert_eq!(first.len(), 4);
        assert!(first.iter().all(|(_, o)| *o == Outcome::Created));
        let service = std::fs::read_to_string(dir.join(SERVICE_NAME)).unwrap();
        assert!(service.contains("ExecStart=/usr/local/bin/amberd\n"));
        assert_eq!(
            std::fs::read_to_string(dir.join(SOCKET_NAME)).unwrap(),
            SOCKET_UNIT
        );
        let tick = std::fs::read_to_string(dir.join(ROUTINES_SERVICE_NAME)).unwrap();
        assert!(
            tick.contains("\nExecStart=/usr/local/bin/amber-cli --no-autostart routine tick\n"),
            "{tick}"
        );

        let again = install(&dir, &programs, false).unwrap();
        assert!(again.iter().all(|(_, o)| *o == Outcome::Unchanged));

        // A hand edit (or another amberd path) is kept unless forced, and then nothing at
        // all is written, not even the unchanged unit.
        std::fs::write(dir.join(SOCKET_NAME), "# mine\n").unwrap();
        let other = units("/other/amberd", "/other/amber-cli");
        let err = install(&dir, &other, false).unwrap_err();
        match &err {
            InstallError::Changed(paths) => assert_eq!(paths.len(), 3, "{err}"),
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

        let forced = install(&dir, &other, true).unwrap();
        let outcomes: Vec<Outcome> = forced.iter().map(|(_, o)| *o).collect();
        assert_eq!(
            outcomes,
            [
                Outcome::Replaced,
                Outcome::Replaced,
                Outcome::Replaced,
                Outcome::Unchanged
            ]
        );
        assert_eq!(
            std::fs::read_to_string(dir.join(SOCKET_NAME)).unwrap(),
            SOCKET_UNIT
        );
        assert!(!dir.join("amberd.service.tmp").exists());

        // The timer is generated: new schedules replace it without --force.
        let calendars = vec!["Mon..Fri *-*-* 07:00:00".to_owned()];
        let scheduled = Units {
            calendars: Some(&calendars),
            ..other
        };
        let rewritten = install(&dir, &scheduled, false).unwrap();
        assert_eq!(rewritten[3].1, Outcome::Replaced);
        let timer = std::fs::read_to_string(dir.join(ROUTINES_TIMER_NAME)).unwrap();
        assert!(
            timer.contains("\nOnCalendar=Mon..Fri *-*-* 07:00:00\n"),
            "{timer}"
        );
    }

    #[test]
    fn the_timer_wakes_amberd_at_each_routines_schedule() {
        let shipped = routines_timer_unit(None);
        assert_eq!(shipped, ROUTINES_TIMER_UNIT);
        // Every minute, when the routines are not known.
        assert!(shipped.contains("\nOnCalendar=*-*-* *:*:00\n"));
        for line in [
            "Persistent=false",
            "AccuracySec=1s",
            "WantedBy=timers.target",
        ] {
            assert!(shipped.lines().any(|l| l == line), "{line}");
        }
        let two = vec![
            "Mon..Fri *-*-* 07:00:00".to_owned(),
            "*-*-13 12:00:00".to_owned(),
        ];
        let timer = routines_timer_unit(Some(&two));
        let lines: Vec<&str> = timer
            .lines()
            .filter(|l| l.starts_with("OnCalendar="))
            .collect();
        assert_eq!(
            lines,
            [
                "OnCalendar=Mon..Fri *-*-* 07:00:00",
                "OnCalendar=*-*-13 12:00:00"
            ]
        );
        assert!(!timer.contains("Every minute"), "{timer}");
        assert!(timer.contains("Persistent=false"));
        let none = routines_timer_unit(Some(&[]));
        assert!(
            !none.lines().any(|l| l.starts_with("OnCalendar=")),
            "{none}"
        );
        assert!(none.contains("No routines yet"), "{none}");
    }

    #[test]
    fn the_timer_follows_the_routines_listed() {
        let row = |calendar: &[&str]| amber_proto::RoutineInfo {
            name: "r".into(),
            source: amber_proto::RoutineSource::Stored,
            routine: amber_proto::RoutineDef {
                cron: "x".into(),
                cwd: "/w".into(),
                prompt: "p".into(),
                session: None,
                worktree: false,
                environment: None,
                repo: None,
                git_ref: None,
                max_budget_usd: None,
                missed: amber_proto::MissedPolicy::Latest,
            },
            next_fire: None,
            last_fire: None,
            last_session_id: None,
            last_stop_reason: None,
            last_error: None,
            on_calendar: calendar.iter().map(|c| (*c).to_owned()).collect(),
        };
        assert_eq!(
            calendars_of(&[row(&["b"]), row(&["a", "b"])]),
            Some(vec!["a".to_owned(), "b".to_owned()])
        );
        // One the daemon could not express: every minute.
        assert_eq!(calendars_of(&[row(&["a"]), row(&[])]), None);
        assert_eq!(calendars_of(&[]), Some(Vec::new()));

        let tmp = tempfile::tempdir().unwrap();
        // Not installed: nothing is written.
        assert!(refresh_timer(tmp.path(), Some(&[])).unwrap().is_none());
        assert!(!tmp.path().join(ROUTINES_TIMER_NAME).exists());
        std::fs::write(tmp.path().join(ROUTINES_SERVICE_NAME), "x").unwrap();
        let values = vec!["a".to_owned()];
        let (path, outcome) = refresh_timer(tmp.path(), Some(&values)).unwrap().unwrap();
        assert_eq!(outcome, Outcome::Created);
        assert!(
            std::fs::read_to_string(path)
                .unwrap()
                .contains("OnCalendar=a\n")
        );
        let (_, outcome) = refresh_timer(tmp.path(), Some(&values)).unwrap().unwrap();
        assert_eq!(outcome, Outcome::Unchanged);
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
