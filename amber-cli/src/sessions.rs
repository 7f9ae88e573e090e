//! Session subcommands: `sessions` (and its `rename`, `prune`, `verify`), `show`, `rm`,
//! `cancel`, `attach`.

use amber_client::{Client, ClientError};
use amber_proto::methods as m;
use amber_proto::{Message, Role, SessionGetResult, SessionInfo, SessionListParams};
use anyhow::Context;
use futures::StreamExt;
use serde_json::Value;
use tokio::signal::unix::{SignalKind, signal};

use crate::args::ConnectArgs;
use crate::output::{self, connect_options, note};
use crate::render::{HumanRenderer, one_line};
use crate::turn::exit;
use crate::worktree_rm::WorktreeChoice;

async fn connect(conn: &ConnectArgs) -> Result<Client, ClientError> {
    Client::connect(connect_options(conn, false)).await
}

/// `sessions [--json] [--fleet | --tree]`: every session, newest first as the daemon lists
/// them (with `--tree`, background sub-agents beneath the session that started them).
pub(crate) async fn list(
    conn: &ConnectArgs,
    json: bool,
    fleet: bool,
    tree: bool,
) -> anyhow::Result<u8> {
    let client = connect(conn).await?;
    let mut rows: Vec<Value> = Vec::new();
    let mut params = SessionListParams::default();
    loop {
        let page = client.request_json::<m::SessionList>(&params).await?;
        let sessions = page
            .get("sessions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let empty = sessions.is_empty();
        rows.extend(sessions);
        match page.get("nextCursor").and_then(Value::as_str) {
            Some(next) if !empty && params.cursor.as_deref() != Some(next) => {
                params.cursor = Some(next.to_owned());
            }
            _ => break,
        }
    }
    if fleet {
        rows.retain(|row| !row["environment"]["fleet"].is_null());
    }
    if json && !tree {
        output::line(&serde_json::to_string_pretty(&rows)?)?;
        return Ok(exit::OK);
    }
    let infos: Vec<SessionInfo> = rows
        .iter()
        .cloned()
        .map(serde_json::from_value)
        .collect::<Result<_, _>>()
        .context("unexpected session/list answer")?;
    if tree {
        let roots = crate::sessions_tree::build(&infos);
        let shown = if json {
            serde_json::to_string_pretty(&crate::sessions_tree::json(&rows, &infos, &roots))?
        } else {
            crate::sessions_tree::table(&infos, &roots)
        };
        output::line(shown.trim_end())?;
        return Ok(exit::OK);
    }
    let shown = if fleet {
        fleet_table(&infos)
    } else {
        table(&infos)
    };
    output::line(shown.trim_end())?;
    Ok(exit::OK)
}

/// `sessions --fleet`: where each fleet session stands and which runner holds it.
fn fleet_table(sessions: &[SessionInfo]) -> String {
    let ids: Vec<&str> = sessions.iter().map(|s| s.session_id.as_str()).collect();
    let mut short = short_ids(&ids).into_iter();
    let header = [
        "ID", "STATE", "FLEET", "RUNNER", "POOL", "TRIES", "REPO", "TITLE",
    ];
    let rows: Vec<Vec<String>> = sessions
        .iter()
        .filter_map(|s| {
            let fleet = s.environment.as_ref()?.fleet.as_ref()?;
            Some(vec![
                short.next().unwrap_or_else(|| s.session_id.clone()),
                enum_name(&s.state),
                enum_name(&fleet.state),
                fleet.runner.clone().unwrap_or_else(|| "-".to_owned()),
                fleet.pool.clone().unwrap_or_else(|| "-".to_owned()),
                fleet.attempts.to_string(),
                format!("{}@{}", fleet.repo, fleet.git_ref),
                one_line(&s.title, 40),
            ])
        })
        .collect();
    aligned(&header.map(str::to_owned), &rows)
}

/// `sessions prune --older-than AGE [--dry-run] [--json]`: deletes the idle sessions last
/// updated before now − AGE that have no worktree (the daemon's `[sessions] retention_days`
/// applies the same rule on its own, and also spares a session a client is attached to).
pub(crate) async fn prune(
    conn: &ConnectArgs,
    older_than: std::time::Duration,
    dry_run: bool,
    json: bool,
) -> anyhow::Result<u8> {
    let client = Client::connect(connect_options(conn, false)).await?;
    let cutoff = std::time::SystemTime::now()
        .checked_sub(older_than)
        .unwrap_or(std::time::UNIX_EPOCH);
    let stale: Vec<SessionInfo> = client
        .session_list_all()
        .await?
        .into_iter()
        .filter(|s| {
            s.state == amber_proto::SessionState::Idle
                && s.worktree.is_none()
                && humantime::parse_rfc3339_weak(&s.updated_at).is_ok_and(|at| at < cutoff)
        })
        .collect();
    let mut gone = Vec::new();
    for session in stale {
        if dry_run {
            gone.push(session);
            continue;
        }
        match client.session_delete(&session.session_id).await {
            Ok(_) => gone.push(session),
            // Deleted meanwhile by someone else: it is gone all the same.
            Err(e) if e.code() == Some(amber_proto::errors::SESSION_NOT_FOUND) => {}
            Err(e) => return Err(e.into()),
        }
    }
    if json {
        output::line(&serde_json::to_string_pretty(&gone)?)?;
    } else if gone.is_empty() {
        note("no session to prune");
    } else {
        output::line(table(&gone).trim_end())?;
        let verb = if dry_run { "would delete" } else { "deleted" };
        note(&format!("{verb} {} session(s)", gone.len()));
    }
    Ok(exit::OK)
}

/// `sessions rename SESSION NAME [--json]` (`None` or an empty NAME clears the name):
/// prints the session's short id and its name, or its info as JSON.
pub(crate) async fn rename(
    conn: &ConnectArgs,
    session: &str,
    name: Option<String>,
    json: bool,
) -> anyhow::Result<u8> {
    let params = amber_proto::SessionRenameParams {
        session_id: session.to_owned(),
        name,
    };
    let info = connect(conn)
        .await?
        .request::<m::SessionRename>(&params)
        .await?;
    if json {
        output::line(&serde_json::to_string(&info)?)?;
    } else {
        output::line(&renamed_line(&info))?;
    }
    Ok(exit::OK)
}

/// What `sessions rename` prints: `3f2a9c1d  fix-auth`, or `3f2a9c1d  (no name)`.
fn renamed_line(info: &SessionInfo) -> String {
    let short: String = info.session_id.chars().take(SHORT_ID).collect();
    format!("{short}  {}", info.name.as_deref().unwrap_or("(no name)"))
}

/// Each id as its shortest prefix of at least [`SHORT_ID`] characters that no other of `ids`
/// starts with: what the table shows, and what every command accepts for the id.
pub(crate) fn short_ids(ids: &[&str]) -> Vec<String> {
    ids.iter()
        .map(|id| {
            let chars: Vec<char> = id.chars().collect();
            (SHORT_ID..chars.len())
                .map(|n| chars[..n].iter().collect::<String>())
                .find(|prefix| {
                    ids.iter()
                        .filter(|other| other.starts_with(prefix.as_str()))
                        .count()
                        == 1
                })
                .unwrap_or_else(|| (*id).to_owned())
        })
        .collect()
}

/// The shortest id prefix the table shows.
const SHORT_ID: usize = 8;

/// The `sessions` table. A NAME column (`-` for an unnamed session) follows ID when any
/// session has a name; an ENV column (where its tools run, `local` for amberd's own) follows
/// CWD when any session runs elsewhere; a BRANCH column (the session's worktree branch, `-`
/// for none) comes before TITLE when any session has a worktree. Ids are shown by their shortest unique
/// prefix (eight characters or more).
pub(crate) fn table(sessions: &[SessionInfo]) -> String {
    let ids: Vec<&str> = sessions.iter().map(|s| s.session_id.as_str()).collect();
    let mut short = short_ids(&ids).into_iter();
    let names = sessions.iter().any(|s| s.name.is_some());
    let branches = sessions.iter().any(|s| s.worktree.is_some());
    let elsewhere = sessions.iter().any(|s| s.environment.is_some());
    let mut header = vec!["ID"];
    if names {
        header.push("NAME");
    }
    header.extend(["STATE", "MODE", "UPDATED", "CWD"]);
    if elsewhere {
        header.push("ENV");
    }
    if branches {
        header.push("BRANCH");
    }
    header.push("TITLE");
    let rows: Vec<Vec<String>> = sessions
        .iter()
        .map(|s| {
            let mut row = vec![short.next().unwrap_or_else(|| s.session_id.clone())];
            if names {
                row.push(s.name.clone().unwrap_or_else(|| "-".to_owned()));
            }
            row.extend([
                enum_name(&s.state),
                s.mode.as_str().to_owned(),
                s.updated_at.clone(),
                s.cwd.clone(),
            ]);
            if elsewhere {
                row.push(
                    s.environment
                        .as_ref()
                        .map_or_else(|| "local".to_owned(), |e| e.spec.clone()),
                );
            }
            if branches {
                row.push(
                    s.worktree
                        .as_ref()
                        .map_or_else(|| "-".to_owned(), |w| w.branch.clone()),
                );
            }
            row.push(one_line(&s.title, 60));
            row
        })
        .collect();
    let header: Vec<String> = header.into_iter().map(str::to_owned).collect();
    aligned(&header, &rows)
}

/// A header and rows in columns two spaces apart.
pub(crate) fn aligned(header: &[String], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let fmt_row = |cells: &[String]| {
        let mut line = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                line.push_str(cell);
            } else {
                let pad = widths[i] - cell.chars().count();
                line.push_str(cell);
                line.push_str(&" ".repeat(pad + 2));
            }
        }
        line.trim_end().to_owned() + "\n"
    };
    let mut out = fmt_row(header);
    for row in rows {
        out.push_str(&fmt_row(row));
    }
    out
}

/// A serde enum's wire name.
fn enum_name<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// `show ID [--json]`.
pub(crate) async fn show(conn: &ConnectArgs, id: &str, json: bool) -> anyhow::Result<u8> {
    let client = connect(conn).await?;
    // Page by page: one answer holds at most `max_message_bytes`.
    let got = client.session_get_all(id).await?;
    let network = network_connections(&client, id).await?;
    if json {
        let mut shown = serde_json::to_value(&got)?;
        if let Some(fields) = shown.as_object_mut() {
            fields.insert("network".into(), serde_json::to_value(&network)?);
        }
        output::line(&serde_json::to_string_pretty(&shown)?)?;
        return Ok(exit::OK);
    }
    let mut text = show_text(&got);
    text.push_str(&network_text(&network));
    output::line(text.trim_end())?;
    Ok(exit::OK)
}

/// The session's `network_connection` events, its audit trail of the egress proxy: its
/// durable events replayed from the start, up to `synced`.
async fn network_connections(
    client: &amber_client::Client,
    id: &str,
) -> anyhow::Result<Vec<amber_proto::NetworkConnection>> {
    let mut events = client.subscribe(id, Some(0)).await?;
    let mut found = Vec::new();
    // Picks one kind out of the replay; every other kind is passed over alike.
    while let Some(event) = events.next().await {
        let kind = event?.kind;
        if let amber_proto::EventKind::NetworkConnection(connection) = kind {
            found.push(connection);
        } else if matches!(kind, amber_proto::EventKind::Synced { .. }) {
            break;
        }
    }
    let _ = events.unsubscribe().await;
    Ok(found)
}

/// Connections `show` lists one by one; the rest are counted.
const NETWORK_LINES: usize = 50;

/// `show`'s network section: how many connections were allowed and refused, then the last
/// [`NETWORK_LINES`] of them.
pub(crate) fn network_text(connections: &[amber_proto::NetworkConnection]) -> String {
    if connections.is_empty() {
        return String::new();
    }
    let allowed = connections
        .iter()
        .filter(|c| c.verdict == amber_proto::ConnectionVerdict::Allowed)
        .count();
    let mut out = format!(
        "\nnetwork   {} connections through the egress proxy: {allowed} allowed, {} refused or failed\n",
        connections.len(),
        connections.len() - allowed
    );
    let skipped = connections.len().saturating_sub(NETWORK_LINES);
    if skipped > 0 {
        out.push_str(&format!("  … {skipped} earlier\n"));
    }
    for connection in &connections[skipped..] {
        out.push_str(&format!(
            "  [{}] {}\n",
            connection.call_id,
            amber_proto::describe_connection(connection)
        ));
    }
    out
}

/// Lines of output per tool result in `show`.
const TOOL_LINES: usize = 12;

/// `show`'s human text: info, then the conversation, pending approvals and todos.
pub(crate) fn show_text(got: &SessionGetResult) -> String {
    let s = &got.session;
    let u = &s.usage;
    let mut out = format!(
        "session   {}\ntitle     {}\nstate     {}\nmode      {}\nmodel     {}\ncwd       {}\ncreated   {}\nupdated   {}\nusage     {} prompt + {} completion = {} tokens ({} cached)\nlast seq  {}\n",
        s.session_id,
        s.title,
        enum_name(&s.state),
        s.mode.as_str(),
        s.model,
        s.cwd,
        s.created_at,
        s.updated_at,
        u.prompt_tokens,
        u.completion_tokens,
        u.total_tokens,
        u.cached_tokens,
        got.last_seq,
    );
    if let Some(name) = &s.name {
        out.push_str(&format!("name      {name}\n"));
    }
    if let Some(tree) = &s.worktree {
        out.push_str(&format!(
            "worktree  {} (branch {})\n",
            tree.path, tree.branch
        ));
    }
    for msg in &got.messages {
        out.push('\n');
        out.push_str(&message_text(msg));
    }
    if !got.pending_approvals.is_empty() {
        out.push_str("\npending approvals\n");
        for a in &got.pending_approvals {
            out.push_str(&format!(
                "  {}  {} {} ({})\n",
                a.request_id,
                a.tool,
                crate::render::summarize(&a.tool, &a.arguments),
                a.reason
            ));
        }
    }
    if !got.todos.is_empty() {
        out.push_str("\ntodos\n");
        for t in &got.todos {
            let mark = match t.status {
                amber_proto::TodoStatus::Done => "[x]",
                amber_proto::TodoStatus::InProgress => "[~]",
                amber_proto::TodoStatus::Pending => "[ ]",
            };
            out.push_str(&format!("  {mark} {}\n", t.text));
        }
    }
    out
}

fn message_text(msg: &Message) -> String {
    let mut out = match msg.role {
        Role::System => "── system\n".to_owned(),
        Role::User => "── user\n".to_owned(),
        Role::Assistant => "── assistant\n".to_owned(),
        Role::Tool => format!(
            "── tool result {}\n",
            msg.tool_call_id.as_deref().unwrap_or_default()
        ),
    };
    let body = match msg.role {
        Role::Tool | Role::System => clip_lines(&msg.content, TOOL_LINES),
        _ => msg.content.trim_end().to_owned(),
    };
    if !body.is_empty() {
        out.push_str(&body);
        out.push('\n');
    }
    for call in &msg.tool_calls {
        let args: Value = serde_json::from_str(&call.arguments)
            .unwrap_or_else(|_| Value::String(call.arguments.clone()));
        out.push_str(&format!(
            "▸ {} {}  [{}]\n",
            call.name,
            crate::render::summarize(&call.name, &args),
            call.id
        ));
    }
    out
}

fn clip_lines(text: &str, max: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    if lines.len() <= max {
        return lines.join("\n");
    }
    format!(
        "{}\n… ({} more lines)",
        lines[..max].join("\n"),
        lines.len() - max
    )
}

/// `rm ID`.
/// `sessions verify ID`: exit 0 when the chain is intact, 1 with the first broken link.
pub(crate) async fn verify(conn: &ConnectArgs, id: &str, json: bool) -> anyhow::Result<u8> {
    let client = connect(conn).await?;
    let report = client
        .request::<m::SessionVerify>(&amber_proto::SessionIdParams {
            session_id: id.to_owned(),
        })
        .await?;
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else if let Some(broken) = &report.first_broken
        && let Some(record) = broken.record
    {
        println!(
            "session {id}: corrupt record {record}: {}; {} messages, {} events before it",
            broken.reason.as_deref().unwrap_or("unreadable"),
            report.messages,
            report.events
        );
    } else if let Some(broken) = &report.first_broken {
        println!(
            "session {id}: chain broken at message {} (stored {}, computed {}); {} messages, {} events",
            broken.index, broken.stored, broken.computed, report.messages, report.events
        );
    } else {
        let torn = if report.torn_tail {
            " (the log ends in a torn record, dropped on next load)"
        } else {
            ""
        };
        println!(
            "session {id}: chain intact — {} messages, {} events{torn}",
            report.messages, report.events
        );
    }
    Ok(if report.ok { 0 } else { 1 })
}

/// `rm ID [--keep-worktree | --remove-worktree]` (`worktree_rm.rs` decides about the
/// worktree).
pub(crate) async fn remove(
    conn: &ConnectArgs,
    id: &str,
    choice: WorktreeChoice,
) -> anyhow::Result<u8> {
    let client = connect(conn).await?;
    crate::worktree_rm::delete(&client, id, choice).await
}

/// `cancel ID`.
pub(crate) async fn cancel(conn: &ConnectArgs, id: &str) -> anyhow::Result<u8> {
    let res = connect(conn).await?.session_cancel(id).await?;
    output::line(if res.cancelled {
        "cancelled"
    } else {
        "nothing to cancel"
    })?;
    Ok(exit::OK)
}

/// `command NAME [ARGS…] [--session ID] [--json]`: `command/run`, output printed.
pub(crate) async fn command(
    conn: &ConnectArgs,
    name: &str,
    args: &[String],
    session: Option<&str>,
    json: bool,
) -> anyhow::Result<u8> {
    let params = amber_proto::CommandRunParams {
        session_id: session.map(str::to_owned),
        name: name.to_owned(),
        args: serde_json::Value::String(args.join(" ")),
    };
    let result = connect(conn)
        .await?
        .request::<m::CommandRun>(&params)
        .await?;
    if json {
        output::line(&serde_json::to_string(&result)?)?;
    } else {
        output::line(&result.output)?;
    }
    Ok(exit::OK)
}

/// `attach ID [--json] [--replay]`: events live until Ctrl-C (which leaves the session running).
pub(crate) async fn attach(
    conn: &ConnectArgs,
    id: &str,
    json: bool,
    replay: bool,
) -> anyhow::Result<u8> {
    let mut client = connect(conn).await?;
    let got = client.session_snapshot(id).await?;
    let mut last_seq = if replay { 0 } else { got.last_seq };
    let mut renderer = HumanRenderer::new(true);
    if !json && !replay {
        for a in &got.pending_approvals {
            note(&format!(
                "pending approval {}: {} ({})",
                a.request_id, a.tool, a.reason
            ));
        }
    }
    let mut interrupts = signal(SignalKind::interrupt()).context("cannot watch Ctrl-C")?;
    let mut events = client.subscribe_raw(id, Some(last_seq)).await?;
    let mut resubscribes = 0u32;
    loop {
        tokio::select! {
            item = events.next() => match item {
                Some(Ok(raw)) => {
                    if let Some(seq) = raw.event.as_ref().and_then(|e| e.seq) {
                        if seq <= last_seq {
                            continue;
                        }
                        last_seq = seq;
                    }
                    if json {
                        output::line(raw.json())?;
                    } else if let Some(event) = &raw.event {
                        if matches!(event.kind, amber_proto::EventKind::Synced { .. }) {
                            renderer.synced();
                        }
                        output::emit(renderer.render(event))?;
                    }
                }
                Some(Err(e)) if crate::reconnect::is_connection_loss(&e, &client) => {
                    let interrupted = async {
                        interrupts.recv().await;
                    };
                    let opts = connect_options(conn, false);
                    match crate::reconnect::resume(&opts, id, last_seq, &e, interrupted).await? {
                        Some((again, resumed)) => {
                            client = again;
                            events = resumed;
                            renderer.resumed();
                        }
                        None => return Ok(exit::OK),
                    }
                }
                Some(Err(ClientError::SubscriptionClosed { reason })) if client.is_connected() && resubscribes < 5 => {
                    resubscribes += 1;
                    note(&format!("event stream closed ({reason}); resuming after seq {last_seq}"));
                    events = client.subscribe_raw(id, Some(last_seq)).await?;
                }
                Some(Err(e)) => return Err(e.into()),
                None => return Ok(exit::OK),
            },
            _ = interrupts.recv() => {
                if !json {
                    output::emit(renderer.finish())?;
                }
                let _ = events.unsubscribe().await;
                return Ok(exit::OK);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info(id: &str, title: &str) -> SessionInfo {
        serde_json::from_value(json!({
            "sessionId": id, "cwd": "/ws", "mode": "write", "model": "m", "title": title,
            "state": "idle", "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:01Z",
            "usage": {}
        }))
        .unwrap()
    }

    #[test]
    fn ids_are_shown_by_their_shortest_unique_prefix_of_eight_or_more() {
        let ids = [
            "3f2a9c1d-0000-4000-8000-000000000001",
            "3f2a9c1d-0000-4000-8000-000000000002",
            "77b0e4aa-1111-4111-8111-111111111111",
            "s-1",
            "3f2a9c1e-aaaa",
        ];
        assert_eq!(
            short_ids(&ids),
            [
                "3f2a9c1d-0000-4000-8000-000000000001",
                "3f2a9c1d-0000-4000-8000-000000000002",
                "77b0e4aa",
                "s-1",
                "3f2a9c1e",
            ]
        );
        let near = ["abcdefgh1234", "abcdefgh5678"];
        assert_eq!(short_ids(&near), ["abcdefgh1", "abcdefgh5"]);
    }

    #[test]
    fn table_aligns_columns() {
        let t = table(&[info("s-1", "first"), info("s-22", "")]);
        assert_eq!(
            t,
            "ID    STATE  MODE   UPDATED               CWD  TITLE\n\
             s-1   idle   write  2026-01-01T00:00:01Z  /ws  first\n\
             s-22  idle   write  2026-01-01T00:00:01Z  /ws\n"
        );
    }

    #[test]
    fn table_shows_the_worktree_branch_when_a_session_has_one() {
        let mut with = info("s-1", "first");
        with.worktree = Some(amber_proto::WorktreeInfo {
            path: "/data/worktrees/s-1".into(),
            branch: "amber/s-1".into(),
        });
        let t = table(&[with, info("s-22", "")]);
        assert_eq!(
            t,
            "ID    STATE  MODE   UPDATED               CWD  BRANCH     TITLE\n\
             s-1   idle   write  2026-01-01T00:00:01Z  /ws  amber/s-1  first\n\
             s-22  idle   write  2026-01-01T00:00:01Z  /ws  -\n"
        );
    }

    #[test]
    fn the_fleet_table_lists_fleet_sessions_with_their_runner() {
        let fleet = |state, runner: Option<&str>| amber_proto::EnvironmentInfo {
            spec: "fleet".into(),
            state: amber_proto::EnvironmentState::Queued,
            executor: None,
            reason: None,
            fleet: Some(amber_proto::FleetInfo {
                repo: "https://git.example.com/app.git".into(),
                git_ref: "main".into(),
                setup: Vec::new(),
                labels: Default::default(),
                priority: 0,
                state,
                runner: runner.map(str::to_owned),
                pool: runner.map(|_| "default".to_owned()),
                attempts: u32::from(runner.is_some()),
                push: None,
            }),
        };
        let mut on = info("s-1", "fix it");
        on.environment = Some(fleet(amber_proto::FleetState::Assigned, Some("r0")));
        let mut waiting = info("s-22", "");
        waiting.environment = Some(fleet(amber_proto::FleetState::Queued, None));
        assert_eq!(
            fleet_table(&[on, waiting, info("s-333", "local")]),
            "ID    STATE  FLEET     RUNNER  POOL     TRIES  REPO                                  TITLE\n\
             s-1   idle   assigned  r0      default  1      https://git.example.com/app.git@main  fix it\n\
             s-22  idle   queued    -       -        0      https://git.example.com/app.git@main\n"
        );
    }

    #[test]
    fn table_shows_where_tools_run_when_a_session_runs_them_elsewhere() {
        let mut remote = info("s-1", "first");
        remote.environment = Some(amber_proto::EnvironmentInfo {
            spec: "ssh://build1/src".into(),
            state: amber_proto::EnvironmentState::Connected,
            executor: None,
            reason: None,
            fleet: None,
        });
        let t = table(&[remote, info("s-22", "")]);
        assert_eq!(
            t,
            "ID    STATE  MODE   UPDATED               CWD  ENV               TITLE\n\
             s-1   idle   write  2026-01-01T00:00:01Z  /ws  ssh://build1/src  first\n\
             s-22  idle   write  2026-01-01T00:00:01Z  /ws  local\n"
        );
    }

    #[test]
    fn table_shows_names_after_the_id_when_a_session_has_one() {
        let mut named = info("s-1", "first");
        named.name = Some("fix-auth".into());
        let t = table(&[named.clone(), info("s-22", "")]);
        assert_eq!(
            t,
            "ID    NAME      STATE  MODE   UPDATED               CWD  TITLE\n\
             s-1   fix-auth  idle   write  2026-01-01T00:00:01Z  /ws  first\n\
             s-22  -         idle   write  2026-01-01T00:00:01Z  /ws\n"
        );
        assert_eq!(renamed_line(&named), "s-1  fix-auth");
        assert_eq!(
            renamed_line(&info("3f2a9c1d-0000", "")),
            "3f2a9c1d  (no name)"
        );
    }

    #[test]
    fn show_lists_messages_and_tool_calls() {
        let got: SessionGetResult = serde_json::from_value(json!({
            "session": serde_json::to_value(info("s1", "t")).unwrap(),
            "messages": [
                {"role": "user", "content": "list files"},
                {"role": "assistant", "content": "", "toolCalls": [{"id": "c1", "name": "bash", "arguments": "{\"command\":\"ls\"}"}]},
                {"role": "tool", "content": "a\nb", "toolCallId": "c1"},
                {"role": "assistant", "content": "Two files."}
            ],
            "pendingApprovals": [],
            "todos": [{"id": "1", "text": "check", "status": "done"}],
            "lastSeq": 9
        }))
        .unwrap();
        let text = show_text(&got);
        assert!(text.contains("session   s1\n"), "{text}");
        assert!(text.contains("── user\nlist files\n"), "{text}");
        assert!(text.contains("▸ bash ls  [c1]\n"), "{text}");
        assert!(text.contains("── tool result c1\na\nb\n"), "{text}");
        assert!(text.contains("  [x] check\n"), "{text}");
        assert_eq!(clip_lines("1\n2\n3", 2), "1\n2\n… (1 more lines)");
    }
}
