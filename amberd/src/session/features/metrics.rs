//! The daemon's metrics of each session (`metrics/`): its model requests' tokens and cost,
//! its tool calls by outcome, its turns' durations. Counted whether or not a listener serves
//! them (a few atomic adds).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use amber_proto::sync::Locked;
use amber_proto::{StopReason, Usage};
use futures::future::BoxFuture;

use super::super::feature::{Admission, Attach, Feature, SessionFeature, ToolRan, Turn, TurnStart};
use crate::metrics::Metrics;

/// The feature.
pub(crate) struct MetricsFeature;

impl Feature for MetricsFeature {
    fn attach(&self, session: &Attach<'_>) -> Option<Arc<dyn SessionFeature>> {
        Some(Arc::new(SessionMetrics {
            metrics: Arc::clone(&session.services.metrics),
            started: Mutex::new(None),
        }))
    }
}

struct SessionMetrics {
    metrics: Arc<Metrics>,
    /// When the running turn began.
    started: Mutex<Option<Instant>>,
}

impl SessionFeature for SessionMetrics {
    fn before_turn<'a>(&'a self, _start: &'a TurnStart<'a>) -> BoxFuture<'a, Admission> {
        *self.started.locked() = Some(Instant::now());
        Box::pin(std::future::ready(Admission::Proceed))
    }

    fn usage_added(&self, usage: &Usage, model: &str) {
        self.metrics.usage(model, usage);
    }

    fn after_tool(&self, _turn: &Turn<'_>, ran: &ToolRan<'_>) {
        let outcome = serde_json::to_value(ran.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        self.metrics.tool_call(&ran.call.name, &outcome);
    }

    fn turn_ended(&self, _turn: &Turn<'_>, _stop: StopReason) {
        if let Some(started) = self.started.locked().take() {
            self.metrics.turn(started.elapsed().as_secs_f64());
        }
    }
}
