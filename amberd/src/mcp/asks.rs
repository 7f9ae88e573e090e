//! What an MCP server asks of the person while one of its tools runs — elicitation (a form
//! to fill in) and sampling (the use of the model) — routed to the session whose call is
//! running on that server ([`Callers`]), where it becomes an approval any attached client
//! answers. Nobody to route to, or a request of a kind amber does not serve (URL
//! elicitation, sampling with tools or images): the safe answer, declined.

// Sampling is deprecated by the 2026 revision (SEP-2577), but servers of the initialize
// era still send it, and amber serves them.
#![allow(deprecated)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use amber_proto::sync::Locked;
use amber_tools::session::{Elicited, SampleRequest, ServerAsks};
use rmcp::ErrorData;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ElicitationAction,
};
use serde_json::{Value, json};

/// The calls running on one server, newest last, with how to reach their sessions.
#[derive(Default)]
pub(crate) struct Callers {
    next: AtomicU64,
    list: std::sync::Mutex<Vec<Caller>>,
}

/// One running call: its token in the list, its id, its session's way to the person.
struct Caller {
    token: u64,
    call_id: String,
    asks: Arc<dyn ServerAsks>,
}

/// Takes its call off the list when dropped.
pub(crate) struct CallerGuard {
    callers: Arc<Callers>,
    id: u64,
}

impl Drop for CallerGuard {
    fn drop(&mut self) {
        self.callers.list.locked().retain(|c| c.token != self.id);
    }
}

impl Callers {
    /// Registers the call `call_id` of a session for the time it runs.
    pub(crate) fn enter(self: &Arc<Self>, call_id: &str, asks: Arc<dyn ServerAsks>) -> CallerGuard {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.list.locked().push(Caller {
            token: id,
            call_id: call_id.to_owned(),
            asks,
        });
        CallerGuard {
            callers: self.clone(),
            id,
        }
    }

    /// The newest running call: whose session a request of the server goes to.
    fn current(&self) -> Option<(String, Arc<dyn ServerAsks>)> {
        self.list
            .locked()
            .last()
            .map(|c| (c.call_id.clone(), c.asks.clone()))
    }
}

/// An elicitation from `server`: a form asked of the person of the running call's session.
pub(crate) async fn elicit(
    callers: &Callers,
    server: &str,
    request: ElicitRequestParams,
) -> Result<ElicitResult, ErrorData> {
    let ElicitRequestParams::FormElicitationParams {
        message,
        requested_schema,
        ..
    } = request
    else {
        // A URL to open in a browser: not something amber shows; declined.
        return Ok(ElicitResult::new(ElicitationAction::Decline));
    };
    let Some((call_id, asks)) = callers.current() else {
        return Ok(ElicitResult::new(ElicitationAction::Decline));
    };
    let schema = serde_json::to_value(&requested_schema).unwrap_or(Value::Null);
    Ok(
        match asks.elicit(&call_id, server, &message, &schema).await {
            Elicited::Accept(content) => {
                ElicitResult::new(ElicitationAction::Accept).with_content(content)
            }
            Elicited::Decline => ElicitResult::new(ElicitationAction::Decline),
            Elicited::Cancel => ElicitResult::new(ElicitationAction::Cancel),
        },
    )
}

/// A sampling request from `server`: the model answers, once the person allowed it.
pub(crate) async fn sample(
    callers: &Callers,
    server: &str,
    request: CreateMessageRequestParams,
) -> Result<CreateMessageResult, ErrorData> {
    let Some((call_id, asks)) = callers.current() else {
        return Err(ErrorData::invalid_request(
            "amber has nobody to ask: sampling is allowed only by a person, during a call",
            None,
        ));
    };
    let messages = request
        .messages
        .iter()
        .map(|m| {
            let v = serde_json::to_value(m).unwrap_or(Value::Null);
            (
                v["role"].as_str().unwrap_or("user").to_owned(),
                text_of(&v["content"]),
            )
        })
        .collect();
    let asked = SampleRequest {
        system: request.system_prompt.clone(),
        messages,
        max_tokens: request.max_tokens,
    };
    let sampled = asks
        .sample(&call_id, server, asked)
        .await
        .map_err(|why| ErrorData::invalid_request(why, None))?;
    serde_json::from_value(json!({
        "role": "assistant",
        "content": {"type": "text", "text": sampled.text},
        "model": sampled.model,
        "stopReason": sampled.stop_reason,
    }))
    .map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

/// The text of a sampling message's content (one block or several); other kinds are
/// named, not sent.
fn text_of(content: &Value) -> String {
    let blocks: Vec<&Value> = match content {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    blocks
        .iter()
        .map(|b| match b["type"].as_str() {
            Some("text") => b["text"].as_str().unwrap_or_default().to_owned(),
            Some(other) => format!("[{other} content omitted]"),
            None => String::new(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A form's answer taken from its schema: each property's `default`, the others left out.
pub(crate) fn schema_defaults(schema: &Value) -> Value {
    let mut values = serde_json::Map::new();
    if let Some(properties) = schema["properties"].as_object() {
        for (name, property) in properties {
            if let Some(default) = property.get("default") {
                values.insert(name.clone(), default.clone());
            }
        }
    }
    Value::Object(values)
}

/// The asker of a call a person made directly with `--defaults` (`/mcp call --defaults`):
/// a form is accepted with its schema's defaults; sampling, which needs a session's model,
/// is refused.
pub(crate) struct FormDefaults;

impl ServerAsks for FormDefaults {
    fn elicit<'a>(
        &'a self,
        _call_id: &'a str,
        _server: &'a str,
        _message: &'a str,
        schema: &'a Value,
    ) -> futures::future::BoxFuture<'a, Elicited> {
        Box::pin(async move { Elicited::Accept(schema_defaults(schema)) })
    }

    fn sample<'a>(
        &'a self,
        _call_id: &'a str,
        _server: &'a str,
        _request: SampleRequest,
    ) -> futures::future::BoxFuture<'a, Result<amber_tools::session::Sampled, String>> {
        Box::pin(async { Err("sampling needs a session: /mcp call runs outside one".to_owned()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_running_call_is_asked_and_leaves_when_done() {
        struct Named;
        impl ServerAsks for Named {
            fn elicit<'a>(
                &'a self,
                _: &'a str,
                _: &'a str,
                _: &'a str,
                _: &'a Value,
            ) -> futures::future::BoxFuture<'a, Elicited> {
                Box::pin(async { Elicited::Decline })
            }
            fn sample<'a>(
                &'a self,
                _: &'a str,
                _: &'a str,
                _: SampleRequest,
            ) -> futures::future::BoxFuture<'a, Result<amber_tools::session::Sampled, String>>
            {
                Box::pin(async { Err("no".into()) })
            }
        }
        let callers = Arc::new(Callers::default());
        assert!(callers.current().is_none());
        let first = callers.enter("c1", Arc::new(Named));
        let second = callers.enter("c2", Arc::new(Named));
        assert_eq!(callers.current().unwrap().0, "c2");
        drop(second);
        assert_eq!(callers.current().unwrap().0, "c1");
        drop(first);
        assert!(callers.current().is_none());
    }

    #[test]
    fn sampling_content_is_read_as_text() {
        assert_eq!(text_of(&json!({"type": "text", "text": "hi"})), "hi");
        assert_eq!(
            text_of(&json!([{"type": "text", "text": "a"}, {"type": "image", "data": "x"}])),
            "a\n[image content omitted]"
        );
    }
}
