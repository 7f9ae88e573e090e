//! `routine add|list|rm|run|tick`: the daemon's scheduled routines (`routine/*`). After
//! `add` and `rm`, `amber-routines.timer` (when installed in the user unit directory) is
//! rewritten from `routine/list`, so systemd wakes amberd at the new schedules; `tick` is
//! what that timer runs.

use std::path::PathBuf;

use amber_client::{Client, ClientError};
use amber_proto::methods as m;
use amber_proto::{
    CostUsd, Empty, MissedPolicy, NameParams, RoutineAddParams, RoutineDef, RoutineFired,
    RoutineInfo,
};

use crate::args::ConnectArgs;
use crate::output::{self, connect_options};
use crate::systemd;
use crate::turn::exit;

/// `routine add`'s flags.
#[derive(Debug, Clone)]
pub(crate) struct Add {
    pub cron: String,
    pub cwd: Option<PathBuf>,
    pub session: Option<String>,
    pub worktree: bool,
    pub max_usd: Option<f64>,
    pub missed: Option<MissedPolicy>,
    pub name: Option<String>,
    pub prompt: Vec<String>,
    pub json: bool,
}

async fn connect(conn: &ConnectArgs) -> Result<Client, ClientError> {
    Client::connect(connect_options(conn, false)).await
}

/// `routine add`: the routine as the daemon keeps it, and its next fire.
pub(crate) async fn add(conn: &ConnectArgs, args: Add) -> anyhow::Result<u8> {
    let prompt = args.prompt.join(" ");
    if prompt.trim().is_empty() {
        return Err(crate::UsageError("routine add: the prompt is empty".into()).into());
    }
    let cwd = match args.cwd {
        Some(dir) => std::path::absolute(dir)?,
        None if conn.remote.as_deref().is_some_and(|r| !r.trim().is_empty()) => {
            return Err(crate::UsageError(
                "routine add: --cwd DIR is needed with --remote (a directory of the remote host)"
                    .into(),
            )
            .into());
        }
        None => std::env::current_dir()?,
    };
    let max_budget_usd = args
        .max_usd
        .map(|usd| {
            CostUsd::from_usd(usd).ok_or_else(|| {
                crate::UsageError(format!("--max-usd: `{usd}` is not a number of dollars ≥ 0"))
            })
        })
        .transpose()?;
    let params = RoutineAddParams {
        name: args.name,
        routine: RoutineDef {
            cron: args.cron,
            cwd: cwd.display().to_string(),
            prompt,
            session: args.session,
            worktree: args.worktree,
            environment: None,
            repo: None,
            git_ref: None,
            max_budget_usd,
            missed: args.missed.unwrap_or_default(),
        },
    };
    let client = connect(conn).await?;
    let info = client.request::<m::RoutineAdd>(&params).await?;
    if args.json {
        output::line(&serde_json::to_string(&info)?)?;
    } else {
        output::line(&format!(
            "added routine {}: next fire {}",
            info.name,
            info.next_fire.as_deref().unwrap_or("never")
        ))?;
    }
    refresh_timer(conn, &client).await;
    Ok(exit::OK)
}

/// `routine list [--json]`.
pub(crate) async fn list(conn: &ConnectArgs, json: bool) -> anyhow::Result<u8> {
    let client = connect(conn).await?;
    if json {
        let raw = client.request_json::<m::RoutineList>(&Empty {}).await?;
        output::line(&serde_json::to_string_pretty(&raw)?)?;
        return Ok(exit::OK);
    }
    let listed = client.request::<m::RoutineList>(&Empty {}).await?;
    if listed.routines.is_empty() {
        output::line(
            "no routines (`amber-cli routine add --cron EXPR PROMPT`, or [[routines]] in config.toml)",
        )?;
    } else {
        output::line(&table(&listed.routines))?;
    }
    Ok(exit::OK)
}

/// The table `routine list` prints: one row per routine.
fn table(routines: &[RoutineInfo]) -> String {
    let rows: Vec<[String; 6]> = routines
        .iter()
        .map(|r| {
            let last = match (&r.last_fire, &r.last_session_id) {
                (None, None) => "-".to_owned(),
                (fire, session) => {
                    let session: String = session
                        .as_deref()
                        .map(|s| s.chars().take(8).collect())
                        .unwrap_or_else(|| "-".to_owned());
                    let result = match (&r.last_error, r.last_stop_reason) {
                        (Some(err), _) => format!("failed: {err}"),
                        (None, Some(stop)) => stop.as_str().to_owned(),
                        (None, None) if session != "-" => "running".to_owned(),
                        (None, None) => "skipped".to_owned(),
                    };
                    format!("{} {session} {result}", fire.as_deref().unwrap_or("-"))
                }
            };
            [
                r.name.clone(),
                match r.source {
                    amber_proto::RoutineSource::Config => "config".to_owned(),
                    amber_proto::RoutineSource::Stored => "added".to_owned(),
                },
                r.routine.cron.clone(),
                r.next_fire.clone().unwrap_or_else(|| "never".to_owned()),
                last,
                r.routine
                    .prompt
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
            ]
        })
        .collect();
    let header = ["NAME", "FROM", "CRON", "NEXT", "LAST", "PROMPT"].map(str::to_owned);
    let mut widths = [0usize; 6];
    for row in std::iter::once(&header).chain(&rows) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    std::iter::once(&header)
        .chain(&rows)
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .zip(widths)
                .enumerate()
                .map(|(i, (cell, w))| {
                    if i == 5 {
                        cell.clone()
                    } else {
                        format!("{cell:w$}")
                    }
                })
                .collect();
            cells.join("  ").trim_end().to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `routine rm NAME`.
pub(crate) async fn remove(conn: &ConnectArgs, name: &str) -> anyhow::Result<u8> {
    let client = connect(conn).await?;
    client
        .request::<m::RoutineRemove>(&NameParams {
            name: name.to_owned(),
        })
        .await?;
    output::line(&format!("removed routine {name}"))?;
    refresh_timer(conn, &client).await;
    Ok(exit::OK)
}

/// `routine run NAME`: fires it now.
pub(crate) async fn run(conn: &ConnectArgs, name: &str, json: bool) -> anyhow::Result<u8> {
    let fired = connect(conn)
        .await?
        .request::<m::RoutineRun>(&NameParams {
            name: name.to_owned(),
        })
        .await?;
    report(&[fired], json)
}

/// `routine tick`: fires what is due (amber-routines.service runs it); silent when nothing is.
pub(crate) async fn tick(conn: &ConnectArgs, json: bool) -> anyhow::Result<u8> {
    let ticked = connect(conn)
        .await?
        .request::<m::RoutineTick>(&Empty {})
        .await?;
    report(&ticked.fired, json)
}

/// One line per run (a JSON line with `--json`); exit 1 when one could not start.
fn report(fired: &[RoutineFired], json: bool) -> anyhow::Result<u8> {
    for run in fired {
        if json {
            output::line(&serde_json::to_string(run)?)?;
            continue;
        }
        output::line(&match (&run.session_id, &run.error) {
            (Some(id), _) => format!(
                "routine {} fired for {}: session {id}",
                run.name, run.fire_time
            ),
            (None, err) => format!(
                "routine {} fired for {}: no run: {}",
                run.name,
                run.fire_time,
                err.as_deref().unwrap_or("unknown error")
            ),
        })?;
    }
    Ok(if fired.iter().any(|r| r.error.is_some()) {
        exit::ERROR
    } else {
        exit::OK
    })
}

/// The `OnCalendar=` values of the daemon's routines; `None` when no daemon answers (it is
/// not started for this) or one routine has none.
pub(crate) async fn calendars(conn: &ConnectArgs) -> Option<Vec<String>> {
    let mut opts = connect_options(conn, false);
    opts.autostart = false;
    let client = Client::connect(opts).await.ok()?;
    let listed = client.request::<m::RoutineList>(&Empty {}).await.ok()?;
    systemd::calendars_of(&listed.routines)
}

/// Rewrites amber-routines.timer of the user unit directory, if installed there, from the
/// daemon's routines. Best effort: a failure is a note, the routine change stands.
async fn refresh_timer(conn: &ConnectArgs, client: &Client) {
    if conn.remote.as_deref().is_some_and(|r| !r.trim().is_empty()) {
        return; // the timer on this machine wakes this machine's amberd
    }
    let env = |key: &str| std::env::var_os(key);
    let Some(dir) = systemd::default_unit_dir(&env) else {
        return;
    };
    let calendars = match client.request::<m::RoutineList>(&Empty {}).await {
        Ok(listed) => systemd::calendars_of(&listed.routines),
        Err(_) => None,
    };
    match systemd::refresh_timer(&dir, calendars.as_deref()) {
        Ok(Some((path, systemd::Outcome::Created | systemd::Outcome::Replaced))) => {
            output::note(&format!(
                "rewrote {}; now run: systemctl --user daemon-reload && systemctl --user \
                 restart amber-routines.timer",
                path.display()
            ));
        }
        Ok(_) => {}
        Err(err) => output::note(&format!("amber-routines.timer not rewritten: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_shows_the_next_and_the_last_run() {
        let row = |name: &str, last: Option<(&str, &str)>, stop| RoutineInfo {
            name: name.into(),
            source: amber_proto::RoutineSource::Config,
            routine: RoutineDef {
                cron: "0 7 * * 1-5".into(),
                cwd: "/w".into(),
                prompt: "Triage new issues\nand more".into(),
                session: None,
                worktree: false,
                environment: None,
                repo: None,
                git_ref: None,
                max_budget_usd: None,
                missed: MissedPolicy::Latest,
            },
            next_fire: Some("2025-01-07T07:00:00+01:00".into()),
            last_fire: last.map(|(fire, _)| fire.to_owned()),
            last_session_id: last.map(|(_, id)| id.to_owned()),
            last_stop_reason: stop,
            last_error: None,
            on_calendar: Vec::new(),
        };
        let text = table(&[
            row(
                "triage",
                Some(("2025-01-06T07:00:00+01:00", "3f2a9c1d-aaaa")),
                Some(amber_proto::StopReason::EndTurn),
            ),
            row("b", None, None),
        ]);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("NAME    FROM    CRON"), "{text}");
        assert!(
            lines[1].contains("2025-01-06T07:00:00+01:00 3f2a9c1d end_turn  Triage new issues"),
            "{text}"
        );
        assert!(lines[1].contains("2025-01-07T07:00:00+01:00"), "{text}");
        assert!(lines[2].contains("  -  "), "{text}");
        assert!(!text.contains("and more"), "{text}");
    }
}
