//! The one way a session's model requests go out: [`Metered::request`] reserves the
//! request's share of the session's budget before it is sent ([`TurnHost::reserve`]),
//! records its usage when it ends, and only then lets the reservation go. The turn's
//! requests, the confirm exchange, compaction's classify and extract requests and every
//! sub-agent's go through it; nothing else in the daemon calls `LlmClient::stream_chat`.
//!
//! A reservation counts as spent while its request is in flight, so requests running at
//! once (parallel sub-agents) cannot all start on the same remainder: how much a
//! reservation holds and when a request must wait is the session's business
//! (`session::features::budgets`).
//!
//! A call is priced exactly once, where its usage is recorded (`record_usage`, with the
//! price the turn's host read when the turn began); from there `Usage.cost_usd` (whole
//! nano-dollars, so sums are exact) rides every sum of usages and is persisted with them.

use amber_llm::{ApiError, ChatRequest, ChatResponse, LlmClient, StreamEvent};
use amber_proto::{CostUsd, Usage, UsagePurpose};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::TurnHost;
use super::ledger::Spent;
use crate::compaction::estimate_tokens;

/// What a request is expected to cost before it is sent: its estimated prompt, priced at
/// the loop's model when that has a price.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct RequestEstimate {
    pub tokens: u64,
    pub cost: Option<CostUsd>,
}

/// A request about to be sent, as the budgets see it: its estimate and its model (a
/// sub-agent's may differ from its session's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RequestMeta<'a> {
    pub estimate: RequestEstimate,
    pub model: &'a str,
}

/// One request's hold on its session's budget, from before it is sent until its usage is
/// recorded. Dropping it lets the hold go (whatever the request's fate: done, failed,
/// cancelled, or its turn dropped mid-flight).
pub(crate) struct Reservation<'a> {
    _hold: Option<Box<dyn Send + 'a>>,
}

impl<'a> Reservation<'a> {
    /// A reservation that holds nothing (a loop without a budget).
    pub(crate) fn unmetered() -> Self {
        Reservation { _hold: None }
    }

    /// Holds `hold` until the reservation is dropped; its own `Drop` releases it.
    pub(crate) fn holding(hold: impl Send + 'a) -> Self {
        Reservation {
            _hold: Some(Box::new(hold)),
        }
    }
}

/// Why a request was not sent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Refusal {
    /// A budget or cap is spent; it names the spend and the cap.
    BudgetExceeded(Spent),
    /// The session has a budget in dollars and the request's model no price: its cost
    /// could not be counted, so the budget could not be kept.
    Unpriced,
    /// The turn was cancelled while the request waited for in-flight requests to settle.
    Cancelled,
}

/// Why a metered request failed.
#[derive(Debug)]
pub(crate) enum RequestError {
    /// Never sent: a budget or cap is spent (it names which).
    BudgetExceeded(Spent),
    /// Sent, and the provider or the connection failed it (or it was cancelled).
    Api(ApiError),
}

impl RequestError {
    fn refused(refusal: Refusal, model: &str) -> Self {
        match refusal {
            Refusal::BudgetExceeded(message) => RequestError::BudgetExceeded(message),
            Refusal::Unpriced => RequestError::BudgetExceeded(Spent::untyped(format!(
                "budget exceeded: the model `{model}` has no known price, so a budget in \
                 dollars (maxBudgetUsd, max_usd) cannot be kept; give it one with \
                 [[provider.prices]] in config.toml"
            ))),
            Refusal::Cancelled => RequestError::Api(ApiError::Cancelled),
        }
    }
}

/// How compaction (a library that knows no session) sends its requests: in the daemon,
/// always through [`Metered`].
pub(crate) trait ModelRequests: Sync {
    fn send<'a>(
        &'a self,
        request: &'a ChatRequest,
        cancel: &'a CancellationToken,
        on_event: &'a mut (dyn FnMut(StreamEvent) + Send),
    ) -> BoxFuture<'a, Result<ChatResponse, RequestError>>;
}

/// A client whose every request is reserved against, and recorded in, a session's spend.
pub(crate) struct Metered<'a> {
    llm: &'a LlmClient,
    host: &'a dyn TurnHost,
}

impl<'a> Metered<'a> {
    pub(crate) fn new(llm: &'a LlmClient, host: &'a dyn TurnHost) -> Self {
        Metered { llm, host }
    }

    /// Whether the provider takes `response_format` (structured output).
    pub(crate) fn structured_output(&self) -> bool {
        self.llm.structured_output()
    }

    /// Reserves, sends, records. The reply's `usage`, when the provider reported one, is
    /// priced and already in the session's total; the caller adds it to its turn's.
    pub(crate) async fn request(
        &self,
        request: &ChatRequest,
        purpose: Option<UsagePurpose>,
        cancel: &CancellationToken,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<ChatResponse, RequestError> {
        let meta = RequestMeta {
            estimate: self.estimate(request),
            model: &request.model,
        };
        let reservation = self
            .host
            .reserve(meta, cancel)
            .await
            .map_err(|refusal| RequestError::refused(refusal, &request.model))?;
        let mut reply = self
            .llm
            .stream_chat(request, cancel, on_event)
            .await
            .map_err(RequestError::Api)?;
        if let Some(usage) = reply.usage.take() {
            reply.usage = Some(super::record_usage(
                self.host,
                usage,
                purpose,
                &request.model,
            ));
        }
        // Settled: the real usage is in the session's total before the hold goes.
        drop(reservation);
        Ok(reply)
    }

    fn estimate(&self, request: &ChatRequest) -> RequestEstimate {
        let tokens = estimate_tokens(&request.messages, &request.tools);
        let cost = self.host.price().map(|price| {
            price.cost(&Usage {
                prompt_tokens: tokens,
                total_tokens: tokens,
                ..Usage::default()
            })
        });
        RequestEstimate { tokens, cost }
    }
}

impl ModelRequests for Metered<'_> {
    fn send<'a>(
        &'a self,
        request: &'a ChatRequest,
        cancel: &'a CancellationToken,
        on_event: &'a mut (dyn FnMut(StreamEvent) + Send),
    ) -> BoxFuture<'a, Result<ChatResponse, RequestError>> {
        Box::pin(self.request(request, Some(UsagePurpose::Compaction), cancel, on_event))
    }
}

#[cfg(test)]
mod tests {

    use std::path::Path;

    /// Files that may call `LlmClient::stream_chat`: this one, and compaction's tests of
    /// the bare pipeline.
    const ALLOWED: &[&str] = &["agent/metered.rs", "compaction/tests.rs"];

    fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// A request sent around `Metered` would spend past the session's budget unseen.
    #[test]
    fn no_request_bypasses_the_meter() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&root, &mut files);
        assert!(files.len() > 50, "the source tree was not found");
        let bypassing: Vec<String> = files
            .iter()
            .filter_map(|path| {
                let relative = path.strip_prefix(&root).unwrap().to_string_lossy();
                let text = std::fs::read_to_string(path).unwrap();
                (text.contains(".stream_chat(") && !ALLOWED.contains(&relative.as_ref()))
                    .then(|| relative.into_owned())
            })
            .collect();
        assert!(
            bypassing.is_empty(),
            "these files call stream_chat outside agent::metered: {bypassing:?}"
        );
    }
}
