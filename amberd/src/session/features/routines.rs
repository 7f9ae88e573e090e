//! Routine runs as a session feature: a session a routine's fire made carries the fire in
//! `SessionInfo.routine` (given only by the daemon's scheduler, never the wire; a named
//! session gets each new fire written over the last). When the fire's turn ends, its stop
//! reason is written there before `turn_completed`, and a durable `routine_finished`
//! follows `turn_completed`: the notice `session/watch` carries to every console.

use std::sync::Arc;

use amber_proto::{EventKind, SessionInfo, StopReason};
use futures::future::BoxFuture;

use crate::agent::TurnOutcome;
use crate::session::SessionError;
use crate::session::feature::{Attach, Feature, NewSession, SessionFeature, Turn};

/// The feature: it keeps nothing daemon-wide.
pub(crate) struct RoutinesFeature;

impl Feature for RoutinesFeature {
    fn shape_info(&self, new: &NewSession<'_>, info: &mut SessionInfo) -> Result<(), SessionError> {
        info.routine.clone_from(&new.params.routine);
        Ok(())
    }

    fn attach(&self, _session: &Attach<'_>) -> Option<Arc<dyn SessionFeature>> {
        Some(Arc::new(RoutineTurns))
    }
}

/// One session's part: it watches for the routine's turn to end.
struct RoutineTurns;

impl RoutineTurns {
    /// Writes `stop` into the session's routine run if `turn` is the run's turn and it has
    /// none yet; the run, if it is.
    fn record(turn: &Turn<'_>, stop: StopReason) -> Option<amber_proto::RoutineRun> {
        let mut live = turn.shared.lock_live();
        let run = live.info.routine.as_mut()?;
        if run.turn_id.as_deref() != Some(turn.turn_id) {
            return None;
        }
        run.stop_reason.get_or_insert(stop);
        Some(run.clone())
    }
}

impl SessionFeature for RoutineTurns {
    /// Before `turn_completed`: whoever reads the routine after it finds the stop reason.
    fn turn_ending<'a>(
        &'a self,
        turn: &'a Turn<'a>,
        outcome: &'a TurnOutcome,
    ) -> BoxFuture<'a, ()> {
        Self::record(turn, outcome.stop);
        Box::pin(std::future::ready(()))
    }

    /// After `turn_completed` (the actor saves the metadata next).
    fn turn_ended(&self, turn: &Turn<'_>, stop: StopReason) {
        let Some(run) = Self::record(turn, stop) else {
            return;
        };
        turn.shared.hub.publish(
            Some(turn.turn_id),
            EventKind::RoutineFinished {
                name: run.name,
                fire_time: run.fire_time,
                stop_reason: run.stop_reason.unwrap_or(stop),
            },
        );
    }
}
