//! `session/rewind`, run by the session's actor between turns: the files (planned and
//! journaled by `checkpoints::rewind`), then the conversation popped back to where the
//! turn began, then the durable `rewound` event. A rewind a crash interrupted is finished
//! by [`recover`] when the session's actor starts.

use std::sync::Arc;

use amber_proto::{EventKind, SessionRewindParams, SessionRewindResult};
use amber_store::context::Context;

use crate::checkpoints::SessionCheckpoints;
use crate::checkpoints::rewind::{Journal, RewindError};
use crate::session::{SessionError, SessionShared};

/// Rewinds the session to before `params.turn_id`.
pub(super) async fn rewind(
    checkpoints: Arc<SessionCheckpoints>,
    shared: &Arc<SessionShared>,
    context: &mut Context,
    params: SessionRewindParams,
) -> Result<SessionRewindResult, SessionError> {
    if shared.queued() > 0 {
        return Err(SessionError::InvalidParams(
            "sessionId: the session is running (a turn is queued); only an idle session can \
             be rewound — wait for it or cancel it first"
                .into(),
        ));
    }
    if !checkpoints.enabled() {
        return Err(SessionError::InvalidParams(
            "sessionId: this daemon keeps no session store, so it records no turns to rewind to"
                .into(),
        ));
    }
    if params.files && !checkpoints.snapshots() {
        return Err(SessionError::InvalidParams(
            "files: checkpoints are disabled ([checkpoints] enabled = false), so no files can \
             be restored; rewind the conversation only (files: false)"
                .into(),
        ));
    }
    if !params.files && !params.conversation {
        return Err(SessionError::InvalidParams(
            "files, conversation: at least one of them must be true".into(),
        ));
    }
    let rows = checkpoints.rows();
    let Some(at) = rows.iter().position(|r| r.turn_id == params.turn_id) else {
        return Err(SessionError::InvalidParams(format!(
            "turnId: no turn {} in this session's history (checkpoint/list names them; a \
             turn already rewound away is gone)",
            params.turn_id
        )));
    };
    let row = rows[at].clone();
    let context_len = if params.conversation {
        if !starts_with(context, row.context_len, &row.context_head) {
            return Err(SessionError::InvalidParams(format!(
                "turnId: the conversation was compacted or cleared after turn {} began, so it \
                 cannot be popped back to it; rewind the files only (conversation: false) or \
                 fork the session",
                params.turn_id
            )));
        }
        Some(row.context_len)
    } else {
        None
    };
    let removed_turns = if params.conversation {
        u32::try_from(rows.len() - at).unwrap_or(u32::MAX)
    } else {
        0
    };
    let files = if params.files {
        let cps = checkpoints.clone();
        let force = params.force;
        let planned = tokio::task::spawn_blocking(move || cps.plan_files(&rows, at, force))
            .await
            .map_err(|e| SessionError::Internal(format!("the rewind task failed: {e}")))?;
        Some(planned.map_err(|e| match e {
            RewindError::Refused(reason) => {
                SessionError::InvalidParams(format!("turnId: {reason}"))
            }
            failed @ RewindError::Store(_) => SessionError::Failed(Box::new(failed)),
        })?)
    } else {
        None
    };
    let journal = Journal::new(
        &params.turn_id,
        files.as_ref(),
        context_len,
        shared.hub.last_seq(),
        removed_turns,
    );
    // A crash from here on is finished at the next start: the busy marker makes the
    // daemon load the session then, and loading finds the journal.
    shared.mark_busy();
    let written = {
        let cps = checkpoints.clone();
        let journal = journal.clone();
        tokio::task::spawn_blocking(move || cps.write_journal(&journal)).await
    };
    if let Err(err) = written
        .map_err(|e| e.to_string())
        .and_then(|written| written.map_err(|e| format!("cannot journal the rewind: {e}")))
    {
        shared.settle_marker();
        return Err(SessionError::Internal(err));
    }
    let result = finish(&checkpoints, shared, context, journal, true).await;
    shared.settle_marker();
    result.map(|(restored, conflicts)| SessionRewindResult {
        restored,
        conflicts,
        removed_turns,
    })
}

/// Carries out a journaled rewind: files, context, event, rows; then drops the journal.
/// Every step can run again after a crash. Returns the paths restored and the conflicts:
/// the journal's, with the paths the restore had to leave alone moved to the conflicts.
async fn finish(
    checkpoints: &Arc<SessionCheckpoints>,
    shared: &Arc<SessionShared>,
    context: &mut Context,
    journal: Journal,
    live: bool,
) -> Result<(Vec<String>, Vec<String>), SessionError> {
    let applied = {
        let cps = checkpoints.clone();
        let journal = journal.clone();
        tokio::task::spawn_blocking(move || cps.apply_journal(&journal, live)).await
    };
    let refused = match applied
        .map_err(|e| e.to_string())
        .and_then(|a| a.map_err(|e| e.to_string()))
    {
        Ok(refused) => refused,
        // The journal stays: the next load of the session finishes the restore.
        Err(err) => {
            return Err(SessionError::Internal(format!(
                "the rewind could not restore the files: {err}; it is retried when the \
                 session is next loaded"
            )));
        }
    };
    let (restored, conflicts) = journal.outcome(&refused);
    if let Some(len) = journal.context_len {
        while context.len() > len {
            context.pop();
        }
        shared.publish_messages(context);
    }
    // Published once: a crash after the event and before the journal went leaves it in
    // the log. Other events may have come since (an executor attached again).
    if !shared.hub.published_since(journal.last_seq, "rewound") {
        shared.hub.publish(
            Some(&journal.turn_id),
            EventKind::Rewound {
                restored: restored.clone(),
                conflicts: conflicts.clone(),
                removed_turns: journal.removed_turns,
            },
        );
    }
    if journal.context_len.is_some() {
        checkpoints.forget_from(&journal.turn_id);
    }
    checkpoints.remove_journal();
    Ok((restored, conflicts))
}

/// Finishes a rewind a crash interrupted (its journal is still there). At actor start.
pub(super) async fn recover(
    checkpoints: &Arc<SessionCheckpoints>,
    shared: &Arc<SessionShared>,
    context: &mut Context,
) {
    let Some(journal) = checkpoints.pending_journal() else {
        return;
    };
    tracing::warn!(session = %shared.id, turn = %journal.turn_id, "finishing an interrupted rewind");
    if let Err(err) = finish(checkpoints, shared, context, journal, false).await {
        tracing::error!(session = %shared.id, %err, "cannot finish an interrupted rewind");
    }
    shared.settle_marker();
}

/// Whether `context` still begins with the `len` messages whose last link is `head`.
fn starts_with(context: &Context, len: usize, head: &str) -> bool {
    if len == 0 {
        return true;
    }
    context
        .links()
        .nth(len - 1)
        .is_some_and(|(_, hash)| format!("{hash:016x}") == head)
}
