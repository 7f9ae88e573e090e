//! What MCP servers ask of the person — elicitation (a form) and sampling (the model) — as
//! approvals of the session whose tool call runs on the server: an `approval_requested`
//! with `mcp: {server, kind, message, requestedSchema | maxTokens}`, for a person only
//! (`--yes` never answers it). Allowing an elicitation accepts it with the values the
//! approver sent (`approval/respond {content}`) or, without them, the schema's defaults;
//! allowing sampling runs the session's model on the server's messages and counts what it
//! spent to the session. Denied, or with nobody attached to ask: declined (the safe
//! default); the turn cancelled while asking: cancelled.

use std::sync::{Arc, Weak};

use amber_llm::ChatRequest;
use amber_proto::{Approval, Decision, McpAsk, McpAskKind, Message};
use amber_tools::session::{Elicited, SampleRequest, Sampled, ServerAsks};
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::session::SessionShared;
use crate::session::feature::{Attach, Feature, SessionFeature};
use crate::session::gate::{Answer, request_approval};
use crate::session::services::Services;

/// The most of a sampling request shown in its approval.
const PREVIEW_CHARS: usize = 600;

pub(crate) struct McpAsksFeature;

impl Feature for McpAsksFeature {
    fn attach(&self, session: &Attach<'_>) -> Option<Arc<dyn SessionFeature>> {
        Some(Arc::new(SessionAsks {
            services: session.services.clone(),
        }))
    }
}

struct SessionAsks {
    services: Arc<Services>,
}

impl SessionFeature for SessionAsks {
    fn started(&self, shared: &Arc<SessionShared>, _restored: bool) {
        shared.tools.set_server_asks(Arc::new(Asker {
            shared: Arc::downgrade(shared),
            services: self.services.clone(),
        }));
    }
}

/// The session's side of [`ServerAsks`].
struct Asker {
    shared: Weak<SessionShared>,
    services: Arc<Services>,
}

impl Asker {
    /// Asks the session's approvers; the answer, and the request's id.
    async fn ask(
        &self,
        shared: &SessionShared,
        call_id: &str,
        server: &str,
        ask: McpAsk,
    ) -> (Answer, String) {
        let request_id = format!("apr_{}", uuid::Uuid::new_v4().simple());
        let (tool, reason) = match ask.kind {
            McpAskKind::Elicitation => (
                format!("mcp__{server}__elicitation"),
                format!("MCP server `{server}` asks: {}", ask.message),
            ),
            McpAskKind::Sampling => (
                format!("mcp__{server}__sampling"),
                format!("MCP server `{server}` asks to use the model"),
            ),
        };
        let approval = Approval {
            request_id: request_id.clone(),
            call_id: call_id.to_owned(),
            tool,
            arguments: json!({
                "message": ask.message,
                "requestedSchema": ask.requested_schema,
                "maxTokens": ask.max_tokens,
            }),
            reason,
            scope: "this request only".to_owned(),
            unsandboxed: false,
            person_only: true,
            mcp: Some(ask),
        };
        let turn_id = shared.lock_live().turn_id.clone().unwrap_or_default();
        // Its own token: the server's tool call going away (a cancelled turn) ends the
        // request on the server's side; the approval is then withdrawn with the turn.
        let cancel = CancellationToken::new();
        let answer =
            request_approval(shared, &self.services, &turn_id, &cancel, approval, false).await;
        (answer, request_id)
    }
}

impl ServerAsks for Asker {
    fn elicit<'a>(
        &'a self,
        call_id: &'a str,
        server: &'a str,
        message: &'a str,
        schema: &'a Value,
    ) -> BoxFuture<'a, Elicited> {
        Box::pin(async move {
            let Some(shared) = self.shared.upgrade() else {
                return Elicited::Decline;
            };
            let ask = McpAsk {
                server: server.to_owned(),
                kind: McpAskKind::Elicitation,
                message: message.to_owned(),
                requested_schema: Some(schema.clone()),
                max_tokens: None,
            };
            match self.ask(&shared, call_id, server, ask).await {
                (Answer::Decided(Decision::Deny), _) => Elicited::Decline,
                (Answer::Decided(_), id) => Elicited::Accept(
                    shared
                        .approvals
                        .take_content(&id)
                        .unwrap_or_else(|| crate::mcp::asks::schema_defaults(schema)),
                ),
                (Answer::Cancelled, _) => Elicited::Cancel,
                (Answer::NoApprover | Answer::ApproverLeft, _) => Elicited::Decline,
            }
        })
    }

    fn sample<'a>(
        &'a self,
        call_id: &'a str,
        server: &'a str,
        request: SampleRequest,
    ) -> BoxFuture<'a, Result<Sampled, String>> {
        Box::pin(async move {
            let shared = self.shared.upgrade().ok_or("the session is gone")?;
            let preview: String = request
                .messages
                .last()
                .map(|(_, text)| text.chars().take(PREVIEW_CHARS).collect())
                .unwrap_or_default();
            let ask = McpAsk {
                server: server.to_owned(),
                kind: McpAskKind::Sampling,
                message: preview,
                requested_schema: None,
                max_tokens: Some(request.max_tokens),
            };
            match self.ask(&shared, call_id, server, ask).await.0 {
                Answer::Decided(Decision::Deny) => Err("the user declined".to_owned()),
                Answer::Decided(_) => self.run_model(&shared, request).await,
                Answer::Cancelled => Err("cancelled".to_owned()),
                Answer::NoApprover | Answer::ApproverLeft => {
                    Err("declined: nobody was there to allow it".to_owned())
                }
            }
        })
    }
}

impl Asker {
    /// The session's model on the server's messages, metered as the session's requests
    /// are (its budgets first; its usage and cost counted to the session).
    async fn run_model(
        &self,
        shared: &SessionShared,
        request: SampleRequest,
    ) -> Result<Sampled, String> {
        let model = shared.model();
        let mut messages = Vec::new();
        if let Some(system) = request.system.filter(|s| !s.trim().is_empty()) {
            messages.push(Message::system(system));
        }
        for (role, text) in request.messages {
            messages.push(if role == "assistant" {
                Message::assistant(text, Vec::new())
            } else {
                Message::user(text)
            });
        }
        let chat = ChatRequest {
            model: model.clone(),
            messages,
            tools: Vec::new(),
            response_format: None,
            cache_key: None,
            max_tokens: Some(request.max_tokens.max(1)),
        };
        let turn_id = shared.lock_live().turn_id.clone().unwrap_or_default();
        let reply = crate::session::actor::request_for_session(
            shared,
            &self.services,
            &turn_id,
            &chat,
            &CancellationToken::new(),
        )
        .await?;
        Ok(Sampled {
            text: reply.text,
            model,
            stop_reason: if reply.finish_reason.as_deref() == Some("length") {
                "maxTokens".to_owned()
            } else {
                "endTurn".to_owned()
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allowed_form_without_values_takes_the_schema_defaults() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "amber"},
            "count": {"type": "integer", "default": 3},
            "note": {"type": "string"}
        }});
        assert_eq!(
            crate::mcp::asks::schema_defaults(&schema),
            json!({"name": "amber", "count": 3})
        );
        assert_eq!(crate::mcp::asks::schema_defaults(&json!({})), json!({}));
    }
}
