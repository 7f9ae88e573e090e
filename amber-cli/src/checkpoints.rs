//! Checkpoint subcommands: `checkpoints`, `diff`, `rewind`, `fork`. A TURN
//! argument is a turn number (the `turn` field of `checkpoint/list`, as `checkpoints`
//! prints it; any turn of the history, looked up with `all`) or a turn id passed through
//! as is; the table, the rewind report and the resolution are pure functions, tested below.

use std::io::Write;

use amber_client::{Client, ClientError};
use amber_proto::methods as m;
use amber_proto::{
    ChangeStatus, CheckpointDiffParams, CheckpointDiffResult, CheckpointInfo, CheckpointListParams,
    CheckpointListResult, SessionForkParams, SessionInfo, SessionRewindParams, SessionRewindResult,
};
use anyhow::Context;

use crate::args::ConnectArgs;
use crate::output::{self, connect_options, note};
use crate::render::one_line;
use crate::turn::exit;

/// Characters of a prompt the table shows.
const PROMPT_CHARS: usize = 60;

async fn connect(conn: &ConnectArgs) -> Result<Client, ClientError> {
    Client::connect(connect_options(conn, false)).await
}

/// The session's checkpoints; with `all`, every turn of its history.
async fn list(client: &Client, id: &str, all: bool) -> Result<Vec<CheckpointInfo>, ClientError> {
    let params = CheckpointListParams {
        session_id: id.to_owned(),
        all,
    };
    Ok(client
        .request::<m::CheckpointList>(&params)
        .await?
        .checkpoints)
}

/// A TURN as typed: digits only are a turn number (turn ids are `turn_<uuid>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TurnArg {
    Number(u64),
    Id(String),
}

impl TurnArg {
    pub(crate) fn parse(text: &str) -> TurnArg {
        let text = text.trim();
        match text.parse::<u64>() {
            Ok(n) if text.bytes().all(|b| b.is_ascii_digit()) => TurnArg::Number(n),
            _ => TurnArg::Id(text.to_owned()),
        }
    }
}

/// The turn id `turn` names in `session`: an id as is, a number through the rows of every
/// turn (`checkpoint/list {all}`, fetched only then).
pub(crate) fn resolve(
    turn: &TurnArg,
    session: &str,
    rows: &[CheckpointInfo],
) -> anyhow::Result<String> {
    match turn {
        TurnArg::Id(id) => Ok(id.clone()),
        TurnArg::Number(n) => rows
            .iter()
            .find(|r| u64::from(r.turn) == *n)
            .map(|r| r.turn_id.clone())
            .ok_or_else(|| anyhow::anyhow!(no_such_turn(*n, session, rows))),
    }
}

fn no_such_turn(n: u64, session: &str, rows: &[CheckpointInfo]) -> String {
    let known = match (rows.first(), rows.last()) {
        (Some(first), Some(last)) if first.turn == last.turn => {
            format!("it has turn {}", first.turn)
        }
        (Some(first), Some(last)) => format!("its turns are {} to {}", first.turn, last.turn),
        _ => "it has none yet".to_owned(),
    };
    format!("session {session} has no turn {n} ({known})")
}

/// `(added, modified, deleted)` of one row.
fn counts(row: &CheckpointInfo) -> (usize, usize, usize) {
    let n = |s: ChangeStatus| row.changed.iter().filter(|c| c.status == s).count();
    (
        n(ChangeStatus::Added),
        n(ChangeStatus::Modified),
        n(ChangeStatus::Deleted),
    )
}

/// An RFC 3339 time without its fraction of a second (`2026-01-02T03:04:05Z`).
fn short_time(time: &str) -> String {
    match (time.find('.'), time.get(..19)) {
        (Some(dot), Some(_)) if dot == 19 => {
            let zone = time[dot + 1..].trim_start_matches(|c: char| c.is_ascii_digit());
            format!("{}{zone}", &time[..19])
        }
        _ => time.to_owned(),
    }
}

/// The `checkpoints` table, oldest first as the daemon lists them.
pub(crate) fn table(rows: &[CheckpointInfo]) -> String {
    let header = [
        "TURN", "TIME", "ADDED", "MODIFIED", "DELETED", "SKIPPED", "PROMPT",
    ]
    .map(str::to_owned);
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|r| {
            let (added, modified, deleted) = counts(r);
            let mut prompt = one_line(&r.prompt, PROMPT_CHARS);
            if let Some(why) = &r.incomplete {
                prompt.push_str(&format!("  [incomplete: {}]", one_line(why, PROMPT_CHARS)));
            }
            [
                r.turn.to_string(),
                short_time(&r.time),
                added.to_string(),
                modified.to_string(),
                deleted.to_string(),
                r.skipped.len().to_string(),
                prompt,
            ]
        })
        .collect();
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let fmt_row = |row: &[String; 7]| {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if i + 1 < row.len() {
                line.push_str(&" ".repeat(widths[i] - cell.chars().count() + 2));
            }
        }
        line.trim_end().to_owned() + "\n"
    };
    let mut out = fmt_row(&header);
    for row in &cells {
        out.push_str(&fmt_row(row));
    }
    out
}

/// `rewind`'s report: one line per path, then a summary line. With `force` the daemon still
/// lists the conflicts, but it put them back like the rest.
pub(crate) fn rewind_text(turn: &str, result: &SessionRewindResult, force: bool) -> String {
    let mut out = String::new();
    for path in &result.restored {
        out.push_str(&format!("restored  {path}\n"));
    }
    for path in &result.conflicts {
        let mark = if result.restored.contains(path) {
            "forced  "
        } else {
            "conflict"
        };
        out.push_str(&format!("{mark}  {path}\n"));
    }
    out.push_str(&format!(
        "rewound to before turn {turn}: {} file(s) restored, {} turn(s) removed from the conversation",
        result.restored.len(),
        result.removed_turns
    ));
    let left = left_alone(result);
    match result.conflicts.len() - left {
        0 => {}
        n => out.push_str(&format!(
            "; {n} path(s) changed outside amber since were put back too (--force)"
        )),
    }
    match (left, force) {
        (0, _) => {}
        (n, true) => out.push_str(&format!(
            "; {n} path(s) left alone (inside .git or .amber, or under a symlink or a file: \
             never restored)"
        )),
        (n, false) => out.push_str(&format!(
            "; {n} conflict(s) left alone (changed outside amber since; not overwritten without --force)"
        )),
    }
    out.push('\n');
    out
}

/// `rewind`'s exit code: 1 when conflicts were left alone, so a script notices the
/// workspace is not all back. With `force` they were put back, though still listed (and in
/// `restored`) — all but the paths a rewind never writes (`.git`, `.amber`, under a link).
pub(crate) fn rewind_exit(result: &SessionRewindResult) -> u8 {
    if left_alone(result) == 0 {
        exit::OK
    } else {
        exit::ERROR
    }
}

/// How many conflicts were not put back.
fn left_alone(result: &SessionRewindResult) -> usize {
    result
        .conflicts
        .iter()
        .filter(|c| !result.restored.contains(c))
        .count()
}

/// Whether a string ends with amberd's elision marker (`…[amber: N bytes elided to K]`):
/// the daemon cut it to its `[server] max_field_bytes`.
fn elided(text: &str) -> bool {
    let tail = text.trim_end();
    tail.ends_with(']')
        && tail
            .rfind("[amber: ")
            .is_some_and(|at| tail[at..].contains(" bytes elided to "))
}

/// `checkpoints ID [--json]`.
pub(crate) async fn checkpoints(conn: &ConnectArgs, id: &str, json: bool) -> anyhow::Result<u8> {
    let client = connect(conn).await?;
    let params = CheckpointListParams {
        session_id: id.to_owned(),
        all: false,
    };
    let raw = client.request_json::<m::CheckpointList>(&params).await?;
    if json {
        output::line(&serde_json::to_string_pretty(&raw)?)?;
        return Ok(exit::OK);
    }
    let got: CheckpointListResult =
        serde_json::from_value(raw).context("unexpected checkpoint/list answer")?;
    if got.checkpoints.is_empty() {
        note(&format!(
            "session {id} has no checkpoints yet (a turn gets one when it first changes files)"
        ));
        return Ok(exit::OK);
    }
    output::line(table(&got.checkpoints).trim_end())?;
    Ok(exit::OK)
}

/// `diff ID [TURN] [--json] [-- PATH]`: TURN defaults to the last checkpoint.
pub(crate) async fn diff(
    conn: &ConnectArgs,
    id: &str,
    turn: Option<&str>,
    path: Option<&str>,
    json: bool,
) -> anyhow::Result<u8> {
    let client = connect(conn).await?;
    let turn_id = match turn.map(TurnArg::parse) {
        Some(TurnArg::Id(turn_id)) => turn_id,
        Some(number) => resolve(&number, id, &list(&client, id, true).await?)?,
        None => match list(&client, id, false).await?.pop() {
            Some(last) => last.turn_id,
            None => anyhow::bail!(
                "session {id} has no checkpoints yet (a turn gets one when it first changes files)"
            ),
        },
    };
    let params = CheckpointDiffParams {
        session_id: id.to_owned(),
        turn_id,
        path: path.map(str::to_owned),
    };
    let raw = client.request_json::<m::CheckpointDiff>(&params).await?;
    if json {
        output::line(&serde_json::to_string_pretty(&raw)?)?;
        return Ok(exit::OK);
    }
    let got: CheckpointDiffResult =
        serde_json::from_value(raw).context("unexpected checkpoint/diff answer")?;
    if got.diff.is_empty() {
        note(&match path {
            Some(p) => format!("the turn did not change {p}"),
            None => "the turn changed no files".to_owned(),
        });
        return Ok(exit::OK);
    }
    let mut out = std::io::stdout().lock();
    out.write_all(got.diff.as_bytes())?;
    if !got.diff.ends_with('\n') {
        out.write_all(b"\n")?;
    }
    out.flush()?;
    if elided(&got.diff) {
        note("amberd cut this diff to its [server] max_field_bytes; `-- PATH` shows one file");
    }
    Ok(exit::OK)
}

/// What `rewind` restores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RewindWhat {
    pub files: bool,
    pub conversation: bool,
    pub force: bool,
}

/// `rewind ID TURN [--files-only | --conversation-only] [--force] [--json]`.
pub(crate) async fn rewind(
    conn: &ConnectArgs,
    id: &str,
    turn: &str,
    what: RewindWhat,
    json: bool,
) -> anyhow::Result<u8> {
    let client = connect(conn).await?;
    let arg = TurnArg::parse(turn);
    let turn_id = match &arg {
        TurnArg::Id(turn_id) => turn_id.clone(),
        TurnArg::Number(_) => resolve(&arg, id, &list(&client, id, true).await?)?,
    };
    let params = SessionRewindParams {
        session_id: id.to_owned(),
        turn_id,
        files: what.files,
        conversation: what.conversation,
        force: what.force,
    };
    let raw = client.request_json::<m::SessionRewind>(&params).await?;
    let got: SessionRewindResult =
        serde_json::from_value(raw.clone()).context("unexpected session/rewind answer")?;
    if json {
        output::line(&serde_json::to_string_pretty(&raw)?)?;
    } else {
        output::line(rewind_text(turn, &got, what.force).trim_end())?;
    }
    Ok(rewind_exit(&got))
}

/// `fork ID [TURN] [--json]`: prints the new session's id.
pub(crate) async fn fork(
    conn: &ConnectArgs,
    id: &str,
    turn: Option<&str>,
    json: bool,
) -> anyhow::Result<u8> {
    let client = connect(conn).await?;
    let turn_id = match turn.map(TurnArg::parse) {
        None => None,
        Some(TurnArg::Id(turn_id)) => Some(turn_id),
        Some(number) => Some(resolve(&number, id, &list(&client, id, true).await?)?),
    };
    let params = SessionForkParams {
        session_id: id.to_owned(),
        turn_id,
    };
    let raw = client.request_json::<m::SessionFork>(&params).await?;
    if json {
        output::line(&serde_json::to_string_pretty(&raw)?)?;
        return Ok(exit::OK);
    }
    let info: SessionInfo =
        serde_json::from_value(raw).context("unexpected session/fork answer")?;
    output::line(&info.session_id)?;
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(turn: u32, id: &str, changed: &[(&str, &str)], skipped: &[&str]) -> CheckpointInfo {
        serde_json::from_value(json!({
            "turnId": id, "seq": turn * 10, "time": "2026-01-02T03:04:05.123456Z",
            "prompt": format!("prompt {turn}\nsecond line"),
            "changed": changed.iter().map(|(p, s)| json!({"path": p, "status": s})).collect::<Vec<_>>(),
            "skipped": skipped, "turn": turn
        }))
        .unwrap()
    }

    #[test]
    fn turn_args_are_numbers_only_when_all_digits() {
        assert_eq!(TurnArg::parse("3"), TurnArg::Number(3));
        assert_eq!(TurnArg::parse(" 12 "), TurnArg::Number(12));
        assert_eq!(TurnArg::parse("turn_ab12"), TurnArg::Id("turn_ab12".into()));
        assert_eq!(TurnArg::parse("+3"), TurnArg::Id("+3".into()));
        assert_eq!(TurnArg::parse("-1"), TurnArg::Id("-1".into()));
        assert_eq!(TurnArg::parse("3a"), TurnArg::Id("3a".into()));
    }

    #[test]
    fn resolve_numbers_through_the_turn_field_and_ids_as_is() {
        let rows = [row(2, "turn_b", &[], &[]), row(4, "turn_d", &[], &[])];
        assert_eq!(resolve(&TurnArg::Number(4), "s1", &rows).unwrap(), "turn_d");
        // Not the 2nd row: the turn number the daemon gave it.
        let err = resolve(&TurnArg::Number(3), "s1", &rows).unwrap_err();
        assert_eq!(
            err.to_string(),
            "session s1 has no turn 3 (its turns are 2 to 4)"
        );
        let err = resolve(&TurnArg::Number(3), "s1", &rows[..1]).unwrap_err();
        assert_eq!(err.to_string(), "session s1 has no turn 3 (it has turn 2)");
        assert_eq!(
            resolve(&TurnArg::Id("turn_zz".into()), "s1", &[]).unwrap(),
            "turn_zz"
        );
        let err = resolve(&TurnArg::Number(1), "s1", &[]).unwrap_err();
        assert!(err.to_string().contains("(it has none yet)"), "{err}");
    }

    #[test]
    fn table_counts_changes_and_flags_incomplete_rows() {
        let mut second = row(
            3,
            "turn_c",
            &[("a.rs", "modified"), ("big.bin", "added")],
            &["target/x"],
        );
        second.incomplete = Some("big.bin could not be read".into());
        let rows = [
            row(
                1,
                "turn_a",
                &[
                    ("n.md", "added"),
                    ("o.md", "added"),
                    ("src/lib.rs", "deleted"),
                ],
                &[],
            ),
            second,
        ];
        assert_eq!(
            table(&rows),
            "TURN  TIME                  ADDED  MODIFIED  DELETED  SKIPPED  PROMPT\n\
             1     2026-01-02T03:04:05Z  2      0         1        0        prompt 1 ⏎ second line\n\
             3     2026-01-02T03:04:05Z  1      1         0        1        prompt 3 ⏎ second line  [incomplete: big.bin could not be read]\n"
        );
    }

    #[test]
    fn short_time_drops_only_the_fraction() {
        assert_eq!(
            short_time("2026-01-02T03:04:05.5+02:00"),
            "2026-01-02T03:04:05+02:00"
        );
        assert_eq!(short_time("2026-01-02T03:04:05Z"), "2026-01-02T03:04:05Z");
        assert_eq!(short_time("yesterday"), "yesterday");
    }

    #[test]
    fn rewind_text_lists_paths_and_conflicts() {
        let result = SessionRewindResult {
            restored: vec!["a.rs".into(), "gone.md".into()],
            conflicts: vec!["b.rs".into()],
            removed_turns: 2,
        };
        assert_eq!(rewind_exit(&result), exit::ERROR);
        assert_eq!(
            rewind_text("3", &result, false),
            "restored  a.rs\nrestored  gone.md\nconflict  b.rs\n\
             rewound to before turn 3: 2 file(s) restored, 2 turn(s) removed from the conversation; \
             1 conflict(s) left alone (changed outside amber since; not overwritten without --force)\n"
        );
        let clean = SessionRewindResult {
            removed_turns: 1,
            ..SessionRewindResult::default()
        };
        // Forced: still listed by the daemon, but put back (restored), so not a failure.
        let forced = SessionRewindResult {
            restored: vec!["a.rs".into(), "b.rs".into()],
            ..result.clone()
        };
        assert_eq!(rewind_exit(&forced), exit::OK);
        assert_eq!(
            rewind_text("3", &forced, true),
            "restored  a.rs\nrestored  b.rs\nforced    b.rs\n\
             rewound to before turn 3: 2 file(s) restored, 2 turn(s) removed from the conversation; \
             1 path(s) changed outside amber since were put back too (--force)\n"
        );
        // Forced, but a path a rewind never writes stays a failure.
        let refused = SessionRewindResult {
            conflicts: vec![".amber/rules.toml".into(), "b.rs".into()],
            ..forced
        };
        assert_eq!(rewind_exit(&refused), exit::ERROR);
        assert!(
            rewind_text("3", &refused, true).contains(
                "conflict  .amber/rules.toml\nforced    b.rs\n"
            ) && rewind_text("3", &refused, true).ends_with(
                "put back too (--force); 1 path(s) left alone (inside .git or .amber, or under a \
                 symlink or a file: never restored)\n"
            ),
            "{}",
            rewind_text("3", &refused, true)
        );
        assert_eq!(rewind_exit(&clean), exit::OK);
        assert_eq!(
            rewind_text("turn_x", &clean, false),
            "rewound to before turn turn_x: 0 file(s) restored, 1 turn(s) removed from the conversation\n"
        );
    }

    #[test]
    fn elision_marker_is_recognised_at_the_end_only() {
        assert!(elided("+a\n+b…[amber: 900000 bytes elided to 65536]\n"));
        assert!(!elided("+[amber: 3 bytes elided to 2] in a test\n"));
        assert!(!elided("+plain\n"));
    }
}
