//! Traces of a session's turns and tool calls (`telemetry/`, with `[telemetry]
//! otlp_endpoint`): a span per turn, a child span per tool call. Names, ids and outcomes
//! only: no prompt, argument or output leaves amberd this way.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use amber_proto::sync::Locked;
use amber_proto::{StopReason, ToolStatus};
use amber_tools::gate::GateCall;
use futures::future::BoxFuture;

use super::super::SessionShared;
use super::super::feature::{
    Admission, Attach, Feature, SessionFeature, ToolAdvice, ToolRan, Turn, TurnStart,
};
use crate::telemetry::{Exporter, Span, now_ns, random_id};

/// The feature: a part for each session while traces are exported.
pub(crate) struct TelemetryFeature;

impl Feature for TelemetryFeature {
    fn attach(&self, session: &Attach<'_>) -> Option<Arc<dyn SessionFeature>> {
        let exporter = session.services.telemetry.get()?.clone();
        Some(Arc::new(SessionTelemetry {
            exporter,
            session: session.session.clone(),
            id: session.id.to_owned(),
            turn: Mutex::new(None),
            calls: Mutex::new(HashMap::new()),
        }))
    }
}

/// The running turn's span.
struct TurnSpan {
    trace: [u8; 16],
    span: [u8; 8],
    start: u64,
    turn_id: String,
}

struct SessionTelemetry {
    exporter: Exporter,
    session: Weak<SessionShared>,
    id: String,
    turn: Mutex<Option<TurnSpan>>,
    /// When each running call began, by call id.
    calls: Mutex<HashMap<String, u64>>,
}

impl SessionFeature for SessionTelemetry {
    fn before_turn<'a>(&'a self, start: &'a TurnStart<'a>) -> BoxFuture<'a, Admission> {
        *self.turn.locked() = Some(TurnSpan {
            trace: random_id(),
            span: random_id(),
            start: now_ns(),
            turn_id: start.turn.turn_id.to_owned(),
        });
        Box::pin(std::future::ready(Admission::Proceed))
    }

    fn before_tool<'a>(
        &'a self,
        _turn: &'a Turn<'a>,
        call: &'a GateCall<'a>,
    ) -> BoxFuture<'a, ToolAdvice> {
        self.calls.locked().insert(call.call.id.clone(), now_ns());
        Box::pin(std::future::ready(ToolAdvice::default()))
    }

    fn after_tool(&self, _turn: &Turn<'_>, ran: &ToolRan<'_>) {
        let Some(start) = self.calls.locked().remove(&ran.call.id) else {
            return;
        };
        let Some((trace, parent, turn_id)) = self
            .turn
            .locked()
            .as_ref()
            .map(|t| (t.trace, t.span, t.turn_id.clone()))
        else {
            return;
        };
        let outcome = serde_json::to_value(ran.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        self.exporter.finish(Span {
            trace_id: trace,
            span_id: random_id(),
            parent: Some(parent),
            name: format!("tool {}", ran.call.name),
            start_ns: start,
            end_ns: now_ns(),
            attributes: vec![
                ("amber.session.id", self.id.clone()),
                ("amber.turn.id", turn_id),
                ("amber.tool.name", ran.call.name.clone()),
                ("amber.tool.outcome", outcome),
            ],
            ok: ran.status == ToolStatus::Ok,
        });
    }

    fn turn_ended(&self, _turn: &Turn<'_>, stop: StopReason) {
        let Some(turn) = self.turn.locked().take() else {
            return;
        };
        self.calls.locked().clear();
        let model = self
            .session
            .upgrade()
            .map(|shared| shared.lock_live().info.model.clone())
            .unwrap_or_default();
        self.exporter.finish(Span {
            trace_id: turn.trace,
            span_id: turn.span,
            parent: None,
            name: "turn".to_owned(),
            start_ns: turn.start,
            end_ns: now_ns(),
            attributes: vec![
                ("amber.session.id", self.id.clone()),
                ("amber.turn.id", turn.turn_id),
                ("amber.model", model),
                ("amber.stop_reason", stop.as_str().to_owned()),
            ],
            ok: stop != StopReason::Error,
        });
    }
}
