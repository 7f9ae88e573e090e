//! The runtime: connects (as an approver), picks or creates the session, owns the terminal,
//! and hands over to [`session::attached`] until the user detaches. The terminal is restored
//! on every way out; the session always keeps running in the daemon.

pub mod session;
mod shell;

use std::path::{Path, PathBuf};

use amber_client::{Client, ConnectOptions};
use amber_proto::{SessionInfo, SessionNewParams};
use ratatui::crossterm::event::Event;
use tokio::sync::mpsc;

use crate::Error;
use crate::cli::{Args, Start};
use crate::picker::{Picker, PickerAction};
use crate::terminal::Tui;
use session::{Carry, Console, Outcome};

/// How `amber` ended: the session it left (detached from; `None`: none, or one it made and
/// dropped unused), and the transcript to leave in the terminal's scrollback.
#[derive(Debug, Default)]
pub struct Left {
    pub session: Option<String>,
    pub scrollback: Option<String>,
}

/// Runs `amber` with parsed arguments.
pub async fn run(args: Args) -> Result<Left, Error> {
    let mut opts = ConnectOptions::new("amber", env!("CARGO_PKG_VERSION"));
    opts.socket = args.socket.clone();
    opts.autostart = !args.no_autostart;
    opts.approvals = true;
    opts.remote = args.remote_host().map(amber_client::Remote::from_env);
    let client = Client::connect(opts.clone()).await?;
    // Shown in the first session's transcript (the screen is not up yet).
    let (client, notes) = amber_client::drift::follow(client, &opts).await?;
    let drift = (!notes.is_empty()).then(|| notes.join("\n"));
    let cwd = match opts.remote {
        // A directory on the remote host: the daemon there resolves it.
        Some(_) => remote_workspace(args.cwd.as_deref())?,
        None => workspace(args.cwd.as_deref())?,
    };
    let mut made = None;
    let first = match args.start() {
        Start::New => {
            let id = new_session(&client, &cwd, &args).await?.session_id;
            made = Some(id.clone());
            Some(id)
        }
        Start::Attach(id) => {
            // Fails here, before the screen changes, when the id is wrong; a prefix of an
            // id becomes the whole id.
            Some(client.session_snapshot(&id).await?.session.session_id)
        }
        Start::Continue => Some(match newest_in(&client, &cwd).await? {
            Some(id) => id,
            None => {
                return Err(Error::Usage(format!(
                    "no session in {} to continue (start one with `amber`)",
                    cwd.display()
                )));
            }
        }),
        Start::Picker => None,
    };
    // The console over every session: the watch makes this TUI an approver of each, so a
    // background session's approval waits for the user (and notifies) instead of failing.
    let watch = session::start_watch(&client).await;
    let (mut tui, mut keys) = Tui::enter()?;
    let mut carry = Carry::new(Console {
        watch,
        notifier: crate::notify::Notifier::from_env(),
    });
    carry.note = drift;
    let mut next = match first {
        Some(id) => id,
        None => match pick(&client, &cwd, &args, &mut tui, &mut keys).await? {
            Some(id) => id,
            None => return Ok(Left::default()),
        },
    };
    loop {
        let outcome =
            session::attached(&client, &opts, &next, &mut tui, &mut keys, &mut carry).await?;
        match outcome {
            Outcome::Detach => {
                // Closing with the session this launch made never prompted: it goes, so
                // that opening and closing `amber` leaves nothing behind (nor a
                // `--continue` target), wherever the user went in between.
                let dropped = match made.take() {
                    Some(made) => drop_if_untouched(&client, &made).await && made == next,
                    None => false,
                };
                // A session dropped unused has nothing worth keeping on screen either.
                let scrollback = carry
                    .scrollback
                    .take()
                    .filter(|s| !s.is_empty() && !dropped);
                return Ok(Left {
                    session: (!dropped).then_some(next),
                    scrollback,
                });
            }
            Outcome::Switch(id) => next = id,
            Outcome::Deleted => return Err(Error::SessionDeleted(next)),
        }
    }
}

/// Deletes session `id` if nothing ever happened in it (no message, nothing running or
/// queued, no worktree); whether it did.
async fn drop_if_untouched(client: &Client, id: &str) -> bool {
    let Ok(got) = client.session_snapshot(id).await else {
        return false;
    };
    // The system prompt is the context's first message; anything else is use.
    let untouched = got
        .messages
        .iter()
        .all(|m| m.role == amber_proto::Role::System)
        && got.pending_approvals.is_empty()
        && got.session.state == amber_proto::SessionState::Idle
        && got.session.worktree.is_none();
    untouched && client.session_delete(id).await.is_ok()
}

/// The workspace: `--cwd` or the current directory, absolute and canonical.
fn workspace(cwd: Option<&Path>) -> Result<PathBuf, Error> {
    let dir = match cwd {
        Some(d) => d.to_owned(),
        None => std::env::current_dir()?,
    };
    dir.canonicalize()
        .map_err(|e| Error::Usage(format!("workspace {}: {e}", dir.display())))
}

/// The workspace on a remote host: `--cwd` (absolute) or the current directory's path, as
/// it is — the daemon there resolves it.
fn remote_workspace(cwd: Option<&Path>) -> Result<PathBuf, Error> {
    match cwd {
        Some(d) if d.is_absolute() => Ok(d.to_owned()),
        Some(d) => Err(Error::Usage(format!(
            "with --remote, --cwd must be an absolute path on the remote host (got {})",
            d.display()
        ))),
        None => Ok(std::env::current_dir()?),
    }
}

async fn new_session(client: &Client, cwd: &Path, args: &Args) -> Result<SessionInfo, Error> {
    let params = SessionNewParams {
        cwd: cwd.display().to_string(),
        mode: args.mode,
        model: args.model.clone(),
        agent: args.agent.clone(),
        sandbox: args.sandbox_request(),
        worktree: args.worktree_request(),
        max_budget_usd: args.max_budget_usd,
        max_tokens_total: args.max_tokens_total,
        ..SessionNewParams::default()
    };
    Ok(client.session_new(&params).await?)
}

/// The session of `cwd` with the latest activity.
async fn newest_in(client: &Client, cwd: &Path) -> Result<Option<String>, Error> {
    let here = cwd.display().to_string();
    let sessions = client.session_list_all().await?;
    Ok(sessions
        .into_iter()
        .filter(|s| s.cwd == here)
        .max_by(|a, b| a.updated_at.cmp(&b.updated_at))
        .map(|s| s.session_id))
}

/// Unix milliseconds now (the running turn's elapsed time).
pub(crate) fn now_unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Unix seconds now (for "5m ago").
pub(crate) fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The picker: returns the session to attach to, or `None` to quit.
async fn pick(
    client: &Client,
    cwd: &Path,
    args: &Args,
    tui: &mut Tui,
    keys: &mut mpsc::UnboundedReceiver<Event>,
) -> Result<Option<String>, Error> {
    let mut picker = Picker::new(client.session_list_all().await?, now_unix());
    loop {
        tui.terminal.draw(|f| crate::ui::picker::draw(&picker, f))?;
        let Some(ev) = keys.recv().await else {
            return Ok(None);
        };
        let Event::Key(key) = ev else { continue };
        match picker.on_key(key) {
            None => {}
            Some(PickerAction::Quit) => return Ok(None),
            Some(PickerAction::Attach(id)) => return Ok(Some(id)),
            Some(PickerAction::New) => {
                return Ok(Some(new_session(client, cwd, args).await?.session_id));
            }
            Some(PickerAction::Delete(id)) => {
                // The picker never removes a worktree: `amber-cli rm` asks about that.
                let tree = picker
                    .sessions
                    .iter()
                    .find(|s| s.session_id == id)
                    .and_then(|s| s.worktree.clone());
                match client.session_delete(&id).await {
                    Ok(_) => {
                        picker.notice = Some(match tree {
                            Some(t) => format!(
                                "deleted {id}; kept its worktree {} (branch {})",
                                t.path, t.branch
                            ),
                            None => format!("deleted {id}"),
                        })
                    }
                    Err(e) => picker.notice = Some(format!("delete failed: {e}")),
                }
                picker.now = now_unix();
                picker.set_sessions(client.session_list_all().await?);
            }
        }
    }
}
