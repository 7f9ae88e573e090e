//! Checkpoints as a session feature (`checkpoints/` does the work): each turn's row and
//! snapshots at the session's fixed points, and the operations on them — list, diff,
//! rewind (run by the actor between turns, `rewind.rs`) and the point a fork starts from.

use std::sync::Arc;

use amber_proto::{
    CheckpointDiffParams, CheckpointDiffResult, CheckpointInfo, Message, SessionRewindParams,
    SessionRewindResult, SessionState,
};
use amber_store::context::Context;
use futures::future::BoxFuture;

use std::path::Path;

use crate::checkpoints::{Checkpoints, DiffError, SessionCheckpoints};
use crate::config::Config;
use crate::session::feature::{Admission, Attach, Feature, SessionFeature, Turn, TurnStart};
use crate::session::manager::ForkPoint;
use crate::session::services::Services;
use crate::session::{SessionError, SessionHandle, SessionManager, SessionShared};

/// The feature: the daemon's checkpoint store, a session's rows beside its log.
pub(crate) struct CheckpointsFeature {
    /// The blob store every session shares (`checkpoints/`).
    store: Arc<Checkpoints>,
}

impl CheckpointsFeature {
    pub(crate) fn new(config: &Config, data_dir: &Path) -> CheckpointsFeature {
        CheckpointsFeature {
            store: Checkpoints::new(config.checkpoints.clone(), data_dir),
        }
    }

    /// Removes checkpoint content no kept checkpoint of any session refers to, in the
    /// background (at start and after a deletion; a turn that expired checkpoints asks for
    /// one itself).
    fn collect(&self, services: &Services) {
        if let Some(store) = &services.store {
            self.store
                .collect_soon(store.sessions_dir().to_owned(), false);
        }
    }
}

impl Feature for CheckpointsFeature {
    fn attach(&self, session: &Attach<'_>) -> Option<Arc<dyn SessionFeature>> {
        let services = session.services;
        let checkpoints = SessionCheckpoints::new(
            self.store.clone(),
            session.workspace.to_owned(),
            services
                .store
                .as_ref()
                .map(|s| s.sessions_dir().join(session.id)),
        );
        // An executor's workspace is snapshot there, once the session's link is set.
        let checkpoints = match &session.meta.info.environment {
            Some(environment) => checkpoints.in_environment(environment.spec.clone()),
            None => checkpoints,
        };
        Some(Arc::new(Checkpointing(Arc::new(checkpoints))))
    }

    /// After the resumed sessions finished any interrupted rewind.
    fn resumed(&self, services: &Services) {
        self.collect(services);
    }

    /// Its checkpoints went with its directory; their content goes now.
    fn deleted(&self, _id: &str, services: &Services) {
        self.collect(services);
    }
}

/// One session's checkpoints.
pub(crate) struct Checkpointing(pub(crate) Arc<SessionCheckpoints>);

impl SessionFeature for Checkpointing {
    /// A rewind a crash cut short is finished before any command.
    fn recover<'a>(
        &'a self,
        shared: &'a Arc<SessionShared>,
        context: &'a mut Context,
    ) -> BoxFuture<'a, ()> {
        Box::pin(super::rewind::recover(&self.0, shared, context))
    }

    /// The turn's row: the context it starts from, for a rewind of the conversation.
    fn before_turn<'a>(&'a self, start: &'a TurnStart<'a>) -> BoxFuture<'a, Admission> {
        self.0.begin_turn(
            start.turn.turn_id,
            start.started_seq,
            start.prompt,
            (start.context_len, start.context_head),
        );
        Box::pin(std::future::ready(Admission::Proceed))
    }

    fn before_changes(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.0.before_changes())
    }

    fn after_changes(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.0.after_changes())
    }

    /// Before `turn_completed`: a client that lists checkpoints then sees what it changed.
    fn turn_ending<'a>(
        &'a self,
        _turn: &'a Turn<'a>,
        _outcome: &'a crate::agent::TurnOutcome,
    ) -> BoxFuture<'a, ()> {
        Box::pin(self.0.end_turn())
    }
}

/// The checkpoints of a session (every session has them; the error is for a daemon
/// composed without the feature).
pub(crate) fn of(shared: &SessionShared) -> Result<Arc<SessionCheckpoints>, SessionError> {
    shared
        .feature::<Checkpointing>()
        .map(|c| c.0.clone())
        .ok_or_else(|| SessionError::Internal("this daemon keeps no checkpoints".into()))
}

/// `checkpoint/list`.
pub(crate) fn list(handle: &SessionHandle, all: bool) -> Result<Vec<CheckpointInfo>, SessionError> {
    Ok(of(&handle.shared)?.list(all))
}

/// `checkpoint/diff`: what one turn changed.
pub(crate) async fn diff(
    sessions: &SessionManager,
    params: CheckpointDiffParams,
) -> Result<CheckpointDiffResult, SessionError> {
    let checkpoints = of(&sessions.get(&params.session_id)?.shared)?;
    tokio::task::spawn_blocking(move || {
        checkpoints.diff_blocking(&params.turn_id, params.path.as_deref())
    })
    .await
    .map_err(|e| SessionError::Internal(format!("the diff task failed: {e}")))?
    .map_err(|e| match e {
        DiffError::NoCheckpoint(message) => SessionError::InvalidParams(message),
        failed @ (DiffError::Untaken { .. } | DiffError::Store(_)) => {
            SessionError::Failed(Box::new(failed))
        }
    })
}

/// `session/rewind`: run by the session's actor between turns (it owns the context).
pub(crate) async fn rewind(
    sessions: &SessionManager,
    params: SessionRewindParams,
) -> Result<SessionRewindResult, SessionError> {
    let handle = sessions.get(&params.session_id)?;
    if handle.shared.state() != SessionState::Idle {
        return Err(SessionError::InvalidParams(
            "sessionId: the session is running; only an idle session can be rewound — \
             wait for its turn to end or cancel it first"
                .into(),
        ));
    }
    let checkpoints = of(&handle.shared)?;
    handle
        .between_turns(move |shared, context| {
            Box::pin(super::rewind::rewind(checkpoints, shared, context, params))
        })
        .await?
}

/// `session/fork {turnId}`: where the history before `turn_id` ends, if the conversation
/// still begins with it.
pub(crate) fn fork_point(shared: &SessionShared, turn_id: &str) -> Result<ForkPoint, SessionError> {
    let rows = of(shared)?.rows();
    let row = rows.iter().find(|r| r.turn_id == turn_id).ok_or_else(|| {
        SessionError::InvalidParams(format!(
            "turnId: no turn {turn_id} in this session's history"
        ))
    })?;
    if !prefix_matches(&shared.messages(), row.context_len, &row.context_head) {
        return Err(SessionError::InvalidParams(format!(
            "turnId: the conversation was compacted or cleared after turn {turn_id} began, \
             so its history before that turn is gone"
        )));
    }
    Ok(ForkPoint {
        messages: row.context_len,
        before_seq: row.seq,
    })
}

/// Whether `messages` still begin with the `len` messages whose last chain link is `head`
/// (a compaction or `/clear` rebuilds the chain).
fn prefix_matches(messages: &[Message], len: usize, head: &str) -> bool {
    if len > messages.len() {
        return false;
    }
    let mut chain = Context::new();
    for message in &messages[..len] {
        chain.push(message.clone());
    }
    len == 0 || format!("{:016x}", chain.head()) == head
}
