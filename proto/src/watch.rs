//! `session/watch` (amber extension): one subscription over every session of the daemon.
//! Each `session/changed` notification carries a session's info after a change (created,
//! state, title, usage) and the durable event that caused it, or says it was deleted. A
//! console lists sessions from it live and notices approvals and finished turns of sessions
//! it is not attached to.

use serde::{Deserialize, Serialize};

use crate::{Event, SessionInfo};

/// Params of `session/watch`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionWatchParams {
    /// On an approver connection: while the watch lasts, the connection is an approver of
    /// every session (their approval requests wait for an answer instead of being denied
    /// for want of an approver). Ignored on a connection that is not an approver.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approvals: bool,
}

/// What happened to the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionChangeKind {
    /// Created, or its info changed.
    Updated,
    /// Deleted; `session` is its last info.
    Deleted,
}

/// One `session/changed` notification's item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionChange {
    pub change: SessionChangeKind,
    /// The session's info after the change.
    pub session: SessionInfo,
    /// The durable event that caused the change, when one did (`prompt_queued`,
    /// `turn_started`, `approval_requested`, `approval_resolved`, `turn_completed`,
    /// `usage`, `rewound`, `routine_finished`), as `session/subscribe` would send it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<Event>,
}
