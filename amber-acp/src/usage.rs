//! A session's context use and cost as ACP sees them: `usage_update` (how full the context
//! is, amberd's `status/get`, and what the session cost so far, when its model has a price),
//! sent after each turn and when a session is loaded, resumed or forked; and the turn's
//! tokens as the `session/prompt` answer's `usage` (unstable in ACP v1; clients that do not
//! know it ignore it).

use amber_client::Client;
use amber_proto::{ContextUse, CostUsd, SessionIdParams, Usage, methods};
use serde_json::{Value, json};

/// `usage_update`: tokens in context, the context window, and the session's total cost.
pub(crate) fn update(context: ContextUse, cost: Option<CostUsd>) -> Value {
    let mut update = json!({
        "sessionUpdate": "usage_update",
        "used": context.tokens,
        "size": context.window,
    });
    if let Some(cost) = cost {
        update["cost"] = json!({"amount": cost.usd(), "currency": "USD"});
    }
    update
}

/// The `session/prompt` answer's `usage`: what the turn's requests used.
pub(crate) fn turn(usage: &Usage) -> Value {
    json!({
        "totalTokens": usage.total_tokens,
        "inputTokens": usage.prompt_tokens,
        "outputTokens": usage.completion_tokens,
        "cachedReadTokens": usage.cached_tokens,
        "cachedWriteTokens": usage.cache_write_tokens,
    })
}

/// The session's `usage_update` now, with `cost` (the session's total); `None` when amberd
/// cannot say how full the context is (the editor then keeps what it showed).
pub(crate) async fn now(client: &Client, session_id: &str, cost: Option<CostUsd>) -> Option<Value> {
    let params = SessionIdParams {
        session_id: session_id.to_owned(),
    };
    match client.request::<methods::StatusGet>(&params).await {
        Ok(status) => status.context.map(|context| update(context, cost)),
        Err(e) => {
            tracing::debug!("acp: status/get {session_id}: {e}; no usage_update");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_usage_update_has_the_context_and_the_cost_in_dollars_when_known() {
        let context = ContextUse {
            tokens: 1200,
            window: 128_000,
        };
        let priced = update(context, CostUsd::from_usd(0.0125));
        assert_eq!(priced["sessionUpdate"], "usage_update");
        assert_eq!(priced["used"], 1200);
        assert_eq!(priced["size"], 128_000);
        assert_eq!(priced["cost"], json!({"amount": 0.0125, "currency": "USD"}));
        let unpriced = update(context, None);
        assert!(unpriced.get("cost").is_none(), "{unpriced}");
    }

    #[test]
    fn a_turns_usage_names_acp_token_fields() {
        let usage = Usage {
            prompt_tokens: 1000,
            completion_tokens: 100,
            cached_tokens: 400,
            total_tokens: 1100,
            cache_write_tokens: 7,
            cost_usd: None,
        };
        assert_eq!(
            turn(&usage),
            json!({"totalTokens": 1100, "inputTokens": 1000, "outputTokens": 100,
                   "cachedReadTokens": 400, "cachedWriteTokens": 7})
        );
    }
}
