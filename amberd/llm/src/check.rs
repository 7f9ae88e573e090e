//! Is a provider usable: reachable, its key accepted, the model one it serves. Asked as the
//! daemon asks, with its key (a client never has it): first `GET {base}/models`, which
//! costs nothing and names the models; when the provider has no such list, one request for
//! one token of the model. Never the key in what it returns.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::{ApiError, ChatRequest, LlmClient, error_chain};
use amber_proto::Message;

/// The bound of each step (the list, the one-token request).
const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Models named in the result at most (a hosted provider lists hundreds).
const MAX_MODELS: usize = 50;

/// What the check found. `None`: the check could not tell.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderCheck {
    /// An HTTP answer came from the endpoint.
    pub reachable: bool,
    /// The status of the models list, when it answered.
    pub status: Option<u16>,
    pub key_accepted: Option<bool>,
    pub model_known: Option<bool>,
    /// The models the provider lists (the first [`MAX_MODELS`]).
    pub models: Vec<String>,
    /// What went wrong, in words.
    pub error: Option<String>,
}

/// Checks `client`'s provider for `model` (empty: the server's default, which any listed
/// model satisfies).
pub async fn check(client: &LlmClient, model: &str) -> ProviderCheck {
    let settings = client.settings();
    let Some(base) = settings
        .base_url
        .as_deref()
        .map(str::trim)
        .filter(|b| !b.is_empty())
    else {
        return ProviderCheck {
            error: Some("no endpoint is configured (AMBER_BASE_URL or [provider] base_url)".into()),
            ..ProviderCheck::default()
        };
    };
    let headers = match client.dialect().request_headers(settings) {
        Ok(headers) => headers,
        Err(e) => {
            return ProviderCheck {
                error: Some(e.to_string()),
                ..ProviderCheck::default()
            };
        }
    };
    // Err only means a provider is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = match reqwest::Client::builder()
        .timeout(STEP_TIMEOUT)
        .user_agent(concat!("amberd/", env!("CARGO_PKG_VERSION"), " (check)"))
        .build()
    {
        Ok(http) => http,
        Err(e) => {
            return ProviderCheck {
                error: Some(format!("HTTP client: {}", error_chain(&e))),
                ..ProviderCheck::default()
            };
        }
    };
    let url = format!("{}/models", base.trim_end_matches('/'));
    let response = match http.get(&url).headers(headers).send().await {
        Ok(response) => response,
        Err(e) => {
            return ProviderCheck {
                error: Some(format!("{url}: {}", error_chain(&e))),
                ..ProviderCheck::default()
            };
        }
    };
    let status = response.status().as_u16();
    let mut found = ProviderCheck {
        reachable: true,
        status: Some(status),
        ..ProviderCheck::default()
    };
    match status {
        401 | 403 => {
            found.key_accepted = Some(false);
            found.error = Some(format!("{url} refused the key (HTTP {status})"));
            found
        }
        200..=299 => {
            found.key_accepted = Some(true);
            let body = response.bytes().await.unwrap_or_default();
            found.models = listed_models(&body);
            found.model_known = match (model, found.models.is_empty()) {
                (_, true) => None,
                ("", false) => Some(true),
                (model, false) => Some(found.models.iter().any(|m| m == model)),
            };
            if found.model_known == Some(false) {
                found.error = Some(format!("the provider does not list the model `{model}`"));
            }
            found.models.truncate(MAX_MODELS);
            found
        }
        // No list here (or not for us): one token of the model says it all.
        _ => one_token(client, model, found).await,
    }
}

/// The model ids of a models list: OpenAI's and Anthropic's `{"data": [{"id"}]}`, or
/// Ollama's `{"models": [{"name"}]}`.
fn listed_models(body: &[u8]) -> Vec<String> {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return Vec::new();
    };
    let (list, field) = match (value.get("data"), value.get("models")) {
        (Some(data), _) => (data, "id"),
        (None, Some(models)) => (models, "name"),
        (None, None) => return Vec::new(),
    };
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m.get(field).and_then(|v| v.as_str()).map(str::to_owned))
        .collect()
}

/// One request for one token of `model`.
async fn one_token(client: &LlmClient, model: &str, mut found: ProviderCheck) -> ProviderCheck {
    let mut settings = client.settings().clone();
    settings.max_tokens = Some(1);
    settings.max_retries = 0;
    settings.idle_timeout = STEP_TIMEOUT;
    let probe = match LlmClient::with_dialect(settings, client.dialect_arc()) {
        Ok(probe) => probe,
        Err(e) => {
            found.error = Some(e.to_string());
            return found;
        }
    };
    let request = ChatRequest {
        model: model.to_owned(),
        messages: vec![Message::user("Reply with one word.")],
        tools: Vec::new(),
        response_format: None,
        cache_key: None,
        max_tokens: None,
    };
    let cancel = CancellationToken::new();
    let asked = tokio::time::timeout(
        STEP_TIMEOUT,
        probe.stream_chat(&request, &cancel, &mut |_| {}),
    )
    .await;
    match asked {
        Ok(Ok(_)) => {
            found.key_accepted = Some(true);
            found.model_known = Some(true);
        }
        Ok(Err(ApiError::Http {
            status: 401 | 403, ..
        })) => {
            found.key_accepted = Some(false);
            found.error = Some("the provider refused the key".into());
        }
        Ok(Err(err @ ApiError::Http { status: 404, .. })) => {
            found.model_known = Some(false);
            found.error = Some(format!("the model or the endpoint was not found: {err}"));
        }
        Ok(Err(
            err @ ApiError::Http {
                status: 400 | 422, ..
            },
        )) => {
            found.key_accepted = Some(true);
            found.model_known = Some(false);
            found.error = Some(format!("the provider refused the request: {err}"));
        }
        Ok(Err(err)) => found.error = Some(err.to_string()),
        Err(_) => {
            cancel.cancel();
            found.error = Some(format!("no answer within {} s", STEP_TIMEOUT.as_secs()));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_lists_of_each_shape_are_read() {
        let table: &[(&str, &[&str])] = &[
            (
                r#"{"data":[{"id":"gpt-4o"},{"id":"gpt-4o-mini"}]}"#,
                &["gpt-4o", "gpt-4o-mini"],
            ),
            (
                r#"{"data":[{"id":"claude-sonnet-4","type":"model"}],"has_more":false}"#,
                &["claude-sonnet-4"],
            ),
            (r#"{"models":[{"name":"qwen3:8b"}]}"#, &["qwen3:8b"]),
            (r#"{"object":"list"}"#, &[]),
            ("not json", &[]),
        ];
        for (body, models) in table {
            assert_eq!(listed_models(body.as_bytes()), *models, "{body}");
        }
    }
}
