//! Goals as a session feature: `session/setGoal` (and `/goal`) gives a session a
//! completion condition, kept in its `SessionInfo.goal`; while it is active, a turn asks
//! the model whether it is met before it ends (`agent::goal`), goes on while it is not,
//! and ends with a summary once it is. Every step is a durable event: `goal_set`,
//! `goal_check`, `goal_met`.
//!
//! **Bounded:** the check is one of the turn's model requests, so a turn's iteration cap
//! and the session's budgets end a goal that is never met; the turn then ends with the
//! goal still active (`max_iterations`, `budget_exceeded`), and the next prompt goes on.

use std::sync::{Arc, Weak};

use amber_proto::{EventKind, GoalInfo, GoalState, SessionChangeKind, SessionInfo};

use crate::session::feature::{Attach, Feature, SessionFeature};
use crate::session::{SessionError, SessionShared};

/// The feature: a session's goal lives in its info.
pub(crate) struct GoalsFeature;

impl Feature for GoalsFeature {
    fn attach(&self, session: &Attach<'_>) -> Option<Arc<dyn SessionFeature>> {
        Some(Arc::new(SessionGoal {
            shared: session.session.clone(),
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

/// One session's part: reads and records its goal.
struct SessionGoal {
    shared: Weak<SessionShared>,
}

impl SessionFeature for SessionGoal {
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
