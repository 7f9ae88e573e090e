//! Goals as a session feature: `session/setGoal` (and `/goal`) gives a session a
//! completion condition, kept in its `SessionInfo.goal`; while it is active, a turn asks
//! the model whether it is met before it ends (`agent::goal`), goes on while it is not,
//! and ends with a summary once it is. Every step is a durable event: `goal_set`,
//! `goal_check`, `goal_met`.
//!
//! **Bounded:** the check is one of the turn's model requests, so a turn's iteration cap
//! and the session's budgets end a goal that is never met. A turn that ends at its
//! iteration cap with the goal unmet and budget left is followed by a continuation turn, at
//! most `[agents] goal_max_turns` (default 3) in a row; a spent budget ends the work there.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Weak};

use amber_proto::{EventKind, GoalInfo, GoalState, SessionChangeKind, SessionInfo, StopReason};
use futures::future::BoxFuture;

use crate::session::feature::{Admission, Attach, Feature, SessionFeature, Turn, TurnStart};
use crate::session::services::Services;
use crate::session::{SessionError, SessionShared};

/// The prompt of a turn that goes on with an unmet goal after the last one hit its cap.
pub(crate) const CONTINUE_PROMPT: &str = "[amber] The session's goal is not met yet and the last turn reached its iteration cap; \
     go on working towards it.";

/// The feature: a session's goal lives in its info.
pub(crate) struct GoalsFeature;

impl Feature for GoalsFeature {
    fn attach(&self, session: &Attach<'_>) -> Option<Arc<dyn SessionFeature>> {
        Some(Arc::new(SessionGoal {
            shared: session.session.clone(),
            services: session.services.clone(),
            continued: AtomicU32::new(0),
        }))
    }
}

/// Sets or clears (`None`, or blank) the goal of session `shared`; its info as changed.
pub(crate) fn set(
    shared: &SessionShared,
    goal: Option<String>,
) -> Result<SessionInfo, SessionError> {
    let goal = goal.map(|g| g.trim().to_owned()).filter(|g| !g.is_empty());
    if let Some(text) = &goal
        && text.chars().count() > 4000
    {
        return Err(SessionError::InvalidParams(
            "goal: at most 4000 characters".into(),
        ));
    }
    {
        let mut live = shared.lock_live();
        live.info.goal = goal.clone().map(|text| GoalInfo {
            text,
            state: GoalState::Active,
            checks: 0,
            summary: None,
        });
    }
    let turn = shared.lock_live().turn_id.clone();
    shared
        .hub
        .publish_stored(turn.as_deref(), EventKind::GoalSet { goal })
        .map_err(SessionError::Store)?;
    shared.save_meta();
    shared.hub.notify_watchers(SessionChangeKind::Updated);
    Ok(shared.info())
}

/// One session's part: reads and records its goal, and goes on after a capped turn.
struct SessionGoal {
    shared: Weak<SessionShared>,
    services: Arc<Services>,
    /// Continuation turns in a row (a prompt of anyone else's starts the count again).
    continued: AtomicU32,
}

impl SessionFeature for SessionGoal {
    fn before_turn<'a>(&'a self, start: &'a TurnStart<'a>) -> BoxFuture<'a, Admission> {
        if start.prompt != CONTINUE_PROMPT {
            self.continued.store(0, Ordering::SeqCst);
        }
        Box::pin(std::future::ready(Admission::Proceed))
    }

    /// A turn cut by its iteration cap with the goal unmet goes on in another, while the
    /// budgets allow and at most `[agents] goal_max_turns` in a row.
    fn turn_ended(&self, turn: &Turn<'_>, stop: StopReason) {
        if stop != StopReason::MaxIterations
            || self.turn_goal().is_none()
            || turn.shared.queued() > 0
            || turn.shared.refuses_requests().is_some()
        {
            return;
        }
        let most = self.services.live().config.agents.goal_max_turns();
        if self.continued.fetch_add(1, Ordering::SeqCst) >= most {
            return;
        }
        let Some(directory) = self.services.directory.get().cloned() else {
            return;
        };
        let id = turn.shared.id.clone();
        tokio::task::spawn_blocking(move || {
            if let Err(err) = directory.prompt(&id, CONTINUE_PROMPT.to_owned()) {
                tracing::warn!(session = %id, %err, "cannot go on with the goal");
            }
        });
    }

    fn turn_goal(&self) -> Option<String> {
        let shared = self.shared.upgrade()?;
        let goal = shared.lock_live().info.goal.clone()?;
        (goal.state == GoalState::Active).then_some(goal.text)
    }

    fn goal_checked(&self, turn_id: &str, met: bool, note: &str) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        {
            let mut live = shared.lock_live();
            if let Some(goal) = &mut live.info.goal {
                goal.checks = goal.checks.saturating_add(1);
                if met {
                    goal.state = GoalState::Met;
                    goal.summary = Some(note.to_owned());
                }
            }
        }
        shared.hub.publish(
            Some(turn_id),
            EventKind::GoalCheck {
                met,
                note: note.to_owned(),
            },
        );
        if met {
            shared.hub.publish(
                Some(turn_id),
                EventKind::GoalMet {
                    summary: note.to_owned(),
                },
            );
        }
        shared.hub.notify_watchers(SessionChangeKind::Updated);
    }
}
