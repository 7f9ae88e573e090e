//! Results that reach a session from outside its turn (a background sub-agent's), put
//! into the conversation between two rounds as a call the daemon made and its answer.
//!
//! **Invariant:** a delivery is pushed whole — the assistant message with the one call,
//! then its tool message — and its call id is [`DELIVERY_CALL_PREFIX`] + its id, so the
//! tool message in the log is the record that it was delivered: restore reads those ids
//! back and never pushes one twice. It is never pushed while the silent confirm question
//! waits for its answer.

use amber_proto::{EventKind, Message, ToolCall, ToolStatus};
use amber_store::context::Context;

use super::TurnHost;

/// The call id of a delivery is this followed by the delivery's id.
pub(crate) const DELIVERY_CALL_PREFIX: &str = "amber_delivery_";

/// One result for the session.
pub(crate) struct Delivery {
    /// Unique among the session's deliveries.
    pub id: String,
    /// The tool the call names, and its arguments (JSON).
    pub tool: String,
    pub arguments: serde_json::Value,
    pub output: String,
    pub ok: bool,
    /// Run once the delivery is in the conversation.
    pub delivered: Option<Box<dyn FnOnce() + Send>>,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("id", &self.id)
            .field("tool", &self.tool)
            .finish_non_exhaustive()
    }
}

impl Delivery {
    /// The id of the call that carries it.
    pub(crate) fn call_id(&self) -> String {
        format!("{DELIVERY_CALL_PREFIX}{}", self.id)
    }
}

/// The delivery id a call id carries, if it is a delivery's.
pub(crate) fn delivery_id(call_id: &str) -> Option<&str> {
    call_id.strip_prefix(DELIVERY_CALL_PREFIX)
}

/// Pushes each delivery as a call and its answer, and tells the clients as tool events.
pub(crate) fn push_all(context: &mut Context, deliveries: Vec<Delivery>, host: &dyn TurnHost) {
    if deliveries.is_empty() {
        return;
    }
    for delivery in deliveries {
        let call_id = delivery.call_id();
        let call = ToolCall {
            id: call_id.clone(),
            name: delivery.tool.clone(),
            arguments: delivery.arguments.to_string(),
        };
        context.push(Message::assistant("", vec![call]));
        context.push(Message::tool(call_id.clone(), delivery.output.clone()));
        host.context_changed(context);
        host.emit(EventKind::ToolCallStarted {
            item_id: call_id.clone(),
            call_id: call_id.clone(),
            name: delivery.tool,
            arguments: delivery.arguments,
        });
        host.emit(EventKind::ToolCallCompleted {
            call_id,
            status: if delivery.ok {
                ToolStatus::Ok
            } else {
                ToolStatus::Error
            },
            output: delivery.output,
            duration_ms: 0,
            diff: None,
        });
        if let Some(delivered) = delivery.delivered {
            delivered();
        }
    }
}
