//! The methods of sessions working together: `session/send`, `session/notifyWhenIdle`
//! and `session/setGoal` (docs/agents.md).

use amber_proto as proto;

use crate::daemon::Daemon;
use crate::session::SessionError;
use crate::session::directory::Directory;
use crate::session::features::{goals, messages};

fn directory(d: &Daemon) -> Result<std::sync::Arc<dyn Directory>, SessionError> {
    d.sessions
        .services()
        .directory
        .get()
        .cloned()
        .ok_or_else(|| SessionError::Internal("the daemon is starting".into()))
}

/// `session/send`: a message from a session (fenced as its tool is) or from the client.
pub(super) fn send(
    d: &Daemon,
    p: proto::SessionSendParams,
) -> Result<proto::SessionSendResult, SessionError> {
    if p.text.trim().is_empty() {
        return Err(SessionError::InvalidParams("text: empty".into()));
    }
    let directory = directory(d)?;
    let to = directory.resolve(&p.to)?;
    let from = p
        .from
        .as_deref()
        .map(|f| directory.resolve(f))
        .transpose()?;
    if let Some(from) = &from {
        let allowed = &d.sessions.services().live().config.agents.message_allow;
        messages::may_message(&directory.info(from)?, &directory.info(&to)?, allowed)
            .map_err(SessionError::InvalidParams)?;
    }
    let sent = messages::deliver(directory.as_ref(), from.as_deref(), &to, &p.text)
        .map_err(SessionError::Internal)?;
    Ok(proto::SessionSendResult {
        message_id: sent.message_id,
        turn_id: sent.turn_id,
    })
}

/// `session/notifyWhenIdle`: `notify` hears when `sessionId` next goes idle.
pub(super) fn notify_when_idle(
    d: &Daemon,
    p: proto::SessionNotifyWhenIdleParams,
) -> Result<proto::Empty, SessionError> {
    let directory = directory(d)?;
    let watched = directory.resolve(&p.session_id)?;
    let watcher = directory.resolve(&p.notify)?;
    if watched == watcher {
        return Err(SessionError::InvalidParams(
            "notify: a session cannot watch itself".into(),
        ));
    }
    directory.notify_when_idle(&watched, &watcher)?;
    Ok(proto::Empty {})
}

/// `session/setGoal`.
pub(super) fn set_goal(
    d: &Daemon,
    p: proto::SessionSetGoalParams,
) -> Result<proto::SessionInfo, SessionError> {
    let handle = d.sessions.get(&p.session_id)?;
    goals::set(&handle.shared, p.goal)
}
