//! `rm ID` of a session that has a worktree of its own: whether the worktree goes too.
//!
//! **Rules:** `--keep-worktree` keeps it; `--remove-worktree` removes it; neither asks on a
//! terminal (y/N) and keeps it elsewhere, printing where it is. A worktree with uncommitted
//! changes is never removed silently: the daemon refuses (naming the paths), and only a
//! second "yes" on a terminal removes it anyway (`force`); off a terminal the refusal is
//! the answer (exit 1) and nothing was deleted. The branch always stays.

use std::io::{BufRead, IsTerminal, Write};

use amber_client::{Client, ClientError};
use amber_proto::methods as m;
use amber_proto::{SessionDeleteParams, WorktreeInfo, errors};

use crate::output::note;
use crate::turn::exit;

/// What `rm` was told about the worktree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WorktreeChoice {
    Ask,
    Keep,
    Remove,
}

impl WorktreeChoice {
    pub(crate) fn from_flags(keep: bool, remove: bool) -> Self {
        match (keep, remove) {
            (true, _) => WorktreeChoice::Keep,
            (false, true) => WorktreeChoice::Remove,
            (false, false) => WorktreeChoice::Ask,
        }
    }
}

/// Deletes session `id`, deciding about its worktree (if it has one) by `choice`.
pub(crate) async fn delete(
    client: &Client,
    id: &str,
    choice: WorktreeChoice,
) -> anyhow::Result<u8> {
    let tree = client.session_snapshot(id).await?.session.worktree;
    let Some(tree) = tree else {
        send(client, id, false, false).await?;
        return Ok(exit::OK);
    };
    let terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let remove = match choice {
        WorktreeChoice::Keep => false,
        WorktreeChoice::Remove => true,
        WorktreeChoice::Ask if terminal => {
            ask(&format!(
                "session {id} works in the worktree {} (branch {}). Remove the worktree? \
                 The branch stays. [y/N] ",
                tree.path, tree.branch
            ))
            .await
        }
        WorktreeChoice::Ask => false,
    };
    if !remove {
        send(client, id, false, false).await?;
        note(&kept(&tree));
        return Ok(exit::OK);
    }
    match send(client, id, true, false).await {
        Ok(()) => {}
        Err(ClientError::Rpc { code, message })
            if terminal && code == errors::INVALID_PARAMS && is_dirty_refusal(&message) =>
        {
            note(&message);
            if !ask("Remove it anyway and lose those changes? [y/N] ").await {
                note("nothing was deleted");
                return Ok(exit::ERROR);
            }
            send(client, id, true, true).await?;
        }
        Err(e) => return Err(e.into()),
    }
    note(&format!(
        "removed the worktree {}; the branch {} stays",
        tree.path, tree.branch
    ));
    Ok(exit::OK)
}

/// The note of a kept worktree.
fn kept(tree: &WorktreeInfo) -> String {
    format!(
        "kept the worktree {} (branch {}); remove it with `git worktree remove {}`",
        tree.path, tree.branch, tree.path
    )
}

/// Whether a -32602 is the daemon's refusal to remove a worktree with uncommitted changes.
fn is_dirty_refusal(message: &str) -> bool {
    message.contains("removeWorktree") && message.contains("uncommitted changes")
}

async fn send(client: &Client, id: &str, remove: bool, force: bool) -> Result<(), ClientError> {
    let params = SessionDeleteParams {
        session_id: id.to_owned(),
        remove_worktree: remove.then_some(true),
        force,
    };
    client
        .request::<m::SessionDelete>(&params)
        .await
        .map(|_| ())
}

/// Asks `question` on stderr; true only for an answer of y or yes.
async fn ask(question: &str) -> bool {
    let question = question.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut stderr = std::io::stderr();
        let _ = write!(stderr, "{question}");
        let _ = stderr.flush();
        let mut line = String::new();
        match std::io::stdin().lock().read_line(&mut line) {
            Ok(n) if n > 0 => matches!(line.trim(), "y" | "Y" | "yes" | "YES" | "Yes"),
            _ => false,
        }
    })
    .await
    .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_choose_and_neither_asks() {
        assert_eq!(
            WorktreeChoice::from_flags(true, false),
            WorktreeChoice::Keep
        );
        assert_eq!(
            WorktreeChoice::from_flags(false, true),
            WorktreeChoice::Remove
        );
        assert_eq!(
            WorktreeChoice::from_flags(false, false),
            WorktreeChoice::Ask
        );
    }

    #[test]
    fn only_the_dirty_refusal_is_asked_about_again() {
        assert!(is_dirty_refusal(
            "invalid params: removeWorktree: the worktree /w has uncommitted changes (a.txt)"
        ));
        assert!(!is_dirty_refusal("invalid params: sessionId: missing"));
    }
}
