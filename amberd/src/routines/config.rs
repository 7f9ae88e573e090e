//! `[[routines]]` of config.toml, and the checks every routine passes wherever it comes
//! from (the config file at load, `routine/add` at once): a valid name, a cron expression
//! that fires, a prompt, an absolute workspace for a local session, a valid session name.

use amber_proto::{CostUsd, MissedPolicy, RoutineDef};
use serde::Deserialize;

use super::cron::Cron;

/// The longest routine name.
pub(crate) const MAX_NAME_CHARS: usize = 64;

/// `[[routines]]`: a prompt the daemon runs on a cron schedule.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutineConfig {
    pub name: String,
    /// Five cron fields in the daemon's local time, or `@daily` and the like.
    pub cron: String,
    /// The workspace root of its sessions (absolute).
    #[serde(default)]
    pub cwd: String,
    pub prompt: String,
    /// `new` (the default): a new session per fire; else a session name, the same
    /// session each time.
    #[serde(default)]
    pub session: Option<String>,
    /// Each new session works in a git worktree of its own.
    #[serde(default)]
    pub worktree: bool,
    /// `session/new {environment}` of its sessions (`fleet` with `repo` and `ref`).
    #[serde(default)]
    pub environment: Option<String>,
    #[serde(default)]
    pub repo: Option<String>,
    #[serde(default, rename = "ref")]
    pub git_ref: Option<String>,
    /// Each run's own budget in US dollars.
    #[serde(default)]
    pub max_budget_usd: Option<CostUsd>,
    /// What to do with the fire times missed while the daemon was down.
    #[serde(default)]
    pub missed: MissedPolicy,
}

impl RoutineConfig {
    /// The routine as the wire and the scheduler see it.
    pub(crate) fn def(&self) -> RoutineDef {
        RoutineDef {
            cron: self.cron.clone(),
            cwd: self.cwd.clone(),
            prompt: self.prompt.clone(),
            session: session_name(self.session.as_deref()),
            worktree: self.worktree,
            environment: self.environment.clone(),
            repo: self.repo.clone(),
            git_ref: self.git_ref.clone(),
            max_budget_usd: self.max_budget_usd,
            missed: self.missed,
        }
    }
}

/// `session`: `None` for a new session per fire (absent, empty or `new`), else the name.
pub(crate) fn session_name(session: Option<&str>) -> Option<String> {
    session
        .map(str::trim)
        .filter(|s| !s.is_empty() && *s != "new")
        .map(str::to_owned)
}

/// Every `[[routines]]` entry checked, names unique; the message names the routine.
pub(crate) fn check_all(routines: &[RoutineConfig]) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for routine in routines {
        check(&routine.name, &routine.def())
            .map_err(|why| format!("[[routines]] `{}`: {why}", routine.name))?;
        if !seen.insert(routine.name.as_str()) {
            return Err(format!(
                "[[routines]] `{}`: the name is used twice",
                routine.name
            ));
        }
    }
    Ok(())
}

/// A routine's checks; its parsed schedule.
pub(crate) fn check(name: &str, routine: &RoutineDef) -> Result<Cron, String> {
    check_name(name)?;
    let cron = Cron::parse(&routine.cron).map_err(|e| format!("cron: {e}"))?;
    if routine.prompt.trim().is_empty() {
        return Err("prompt: must not be empty".to_owned());
    }
    let local = routine
        .environment
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == "local");
    if local && !std::path::Path::new(&routine.cwd).is_absolute() {
        return Err(format!(
            "cwd: `{}` is not an absolute path (write the whole path of the workspace)",
            routine.cwd
        ));
    }
    if let Some(session) = &routine.session {
        crate::session::names::check(session).map_err(|e| format!("session: {e}"))?;
        if routine.worktree {
            return Err(
                "worktree: a named session keeps the place it was made in; use worktree \
                 with session = \"new\""
                    .to_owned(),
            );
        }
    }
    Ok(cron)
}

/// 1 to 64 letters, digits, `.`, `_` or `-`, starting with a letter or digit: it is a
/// command-line argument and a key of the state file.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return Err(format!(
            "name: `{name}` must have 1 to {MAX_NAME_CHARS} characters"
        ));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) || !name.chars().all(ok_char) {
        return Err(format!(
            "name: `{}` may hold only letters, digits, `.`, `_` and `-`, and starts with a \
             letter or digit",
            name.escape_debug()
        ));
    }
    Ok(())
}

/// A name for a routine added without one: the prompt's first words, lower case.
pub(crate) fn name_from_prompt(prompt: &str) -> String {
    let words: Vec<String> = prompt
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(4)
        .map(str::to_ascii_lowercase)
        .collect();
    let mut name = words.join("-");
    name.truncate(40);
    let name = name.trim_end_matches('-').to_owned();
    if name.is_empty() {
        "routine".to_owned()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routine(cron: &str) -> RoutineDef {
        RoutineDef {
            cron: cron.into(),
            cwd: "/home/u/app".into(),
            prompt: "triage".into(),
            session: None,
            worktree: false,
            environment: None,
            repo: None,
            git_ref: None,
            max_budget_usd: None,
            missed: MissedPolicy::Latest,
        }
    }

    #[test]
    fn a_routine_is_checked_field_by_field() {
        assert!(check("triage", &routine("0 7 * * 1-5")).is_ok());
        for (name, def, says) in [
            ("", routine("@daily"), "1 to 64"),
            ("-x", routine("@daily"), "only letters"),
            ("a b", routine("@daily"), "only letters"),
            ("ok", routine("0 7 * *"), "cron: "),
            (
                "ok",
                RoutineDef {
                    prompt: " ".into(),
                    ..routine("@daily")
                },
                "prompt",
            ),
            (
                "ok",
                RoutineDef {
                    cwd: "app".into(),
                    ..routine("@daily")
                },
                "absolute",
            ),
            (
                "ok",
                RoutineDef {
                    session: Some("cafe".into()),
                    ..routine("@daily")
                },
                "session: ",
            ),
            (
                "ok",
                RoutineDef {
                    session: Some("nightly".into()),
                    worktree: true,
                    ..routine("@daily")
                },
                "worktree",
            ),
        ] {
            let err = check(name, &def).unwrap_err();
            assert!(err.contains(says), "{name}: {err}");
        }
        // A fleet session's workspace is the runner's clone.
        let fleet = RoutineDef {
            cwd: String::new(),
            environment: Some("fleet".into()),
            ..routine("@daily")
        };
        assert!(check("f", &fleet).is_ok());
    }

    #[test]
    fn session_new_means_a_new_session() {
        assert_eq!(session_name(None), None);
        assert_eq!(session_name(Some("new")), None);
        assert_eq!(session_name(Some("")), None);
        assert_eq!(session_name(Some("nightly")).as_deref(), Some("nightly"));
    }

    #[test]
    fn a_name_is_made_from_the_prompt() {
        assert_eq!(
            name_from_prompt("Triage new issues and write a summary"),
            "triage-new-issues-and"
        );
        assert_eq!(name_from_prompt("!!!"), "routine");
        assert!(check_name(&name_from_prompt(&"x".repeat(200))).is_ok());
    }
}
