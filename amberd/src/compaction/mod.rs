//! Context compaction (SEED.md "compression"): a library the agent loop calls when the
//! gate ([`needs_compaction`]) fires, when the provider reports a context overflow, or on
//! request.
//!
//! [`compact`] takes a snapshot of the context (`messages[0]` is the system prompt, always
//! kept) and never touches the live context: 1) repair and collapse tool-call loops
//! (`collapse`); 2) a classify request over the numbered transcript (`requests`, `parse`);
//! 3) an extract request that replays the classify request as a content-identical prefix
//! plus its answer, so the provider's KV cache is reused; 4) rebuild (`apply`). Any
//! failure — LLM error, unparsable answer, cancel — is an `Err` and the caller keeps its
//! context as it was; on `Ok` the caller replaces the context with `messages` (clear +
//! push) and may save `skills` with [`save_skills`] under the workspace's skills folder
//! (`tools::skills::workspace_skills_dir`).

mod apply;
mod collapse;
mod estimate;
mod parse;
mod requests;
mod store;

#[cfg(test)]
mod tests;

use amber_llm::{ApiError, ChatRequest, StreamEvent, ToolSpec};
use amber_proto::{Message, Usage};
use tokio_util::sync::CancellationToken;

use crate::agent::metered::{ModelRequests, RequestError};
pub(crate) use estimate::{PromptUsage, estimate_tokens, needs_compaction, tools_tokens};
pub(crate) use store::save_skills;

/// When to compact and how much room to leave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionSettings {
    /// Compact when the context uses more than this fraction of the window (0.8).
    pub threshold: f64,
    /// Fraction of the window left free after compaction (0.4).
    pub headroom: f64,
    /// The provider's context window in tokens; 0 = unknown (the gate never fires and
    /// compaction keeps every `context` message).
    pub context_window: u64,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        Self {
            threshold: 0.8,
            headroom: 0.4,
            context_window: 128_000,
        }
    }
}

impl CompactionSettings {
    /// The most estimated tokens a rebuilt context may use: (1 − headroom) × window.
    pub fn budget(&self) -> u64 {
        if self.context_window == 0 {
            return u64::MAX;
        }
        let free = self.headroom.clamp(0.0, 1.0);
        ((1.0 - free) * self.context_window as f64) as u64
    }
}

/// A reusable procedure the extract request found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExtractedSkill {
    pub name: String,
    pub description: String,
    /// Markdown instructions.
    pub body: String,
}

/// The result of a successful compaction.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Compacted {
    /// The new context, system prompt first, then the memories message (if any).
    pub messages: Vec<Message>,
    pub memories: Vec<String>,
    pub skills: Vec<ExtractedSkill>,
    /// `estimate_tokens` of the input and of `messages`, tool schemas included.
    pub tokens_before: u64,
    pub tokens_after: u64,
}

/// Why compaction failed; the context must be left as it was.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CompactionError {
    #[error("compaction request failed: {0}")]
    Llm(ApiError),
    #[error("compaction {stage} answer could not be parsed: {message}")]
    Parse {
        stage: &'static str,
        message: String,
    },
    #[error("nothing to compact")]
    NothingToCompact,
    #[error("compaction cancelled")]
    Cancelled,
    /// A request was refused: the session's budget is spent (the message names it).
    #[error("{}", .0.message)]
    BudgetExceeded(crate::agent::ledger::Spent),
}

impl CompactionError {
    /// Stable snake_case code for `compaction_failed` and error replies.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            CompactionError::Llm(e) => e.code(),
            CompactionError::Parse { .. } => "compaction_parse",
            CompactionError::NothingToCompact => "nothing_to_compact",
            CompactionError::Cancelled => "cancelled",
            CompactionError::BudgetExceeded(_) => crate::agent::BUDGET_EXCEEDED,
        }
    }
}

impl From<ApiError> for CompactionError {
    fn from(err: ApiError) -> Self {
        match err {
            ApiError::Cancelled => CompactionError::Cancelled,
            other => CompactionError::Llm(other),
        }
    }
}

impl From<RequestError> for CompactionError {
    fn from(err: RequestError) -> Self {
        match err {
            RequestError::BudgetExceeded(message) => CompactionError::BudgetExceeded(message),
            RequestError::Api(err) => err.into(),
        }
    }
}

/// Whether `compact` would find anything to remove (no request is made to find out).
pub(crate) fn has_compactable(messages: &[Message]) -> bool {
    apply::has_compactable(&collapse::collapse(messages))
}

/// What a compaction reports while it runs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Progress {
    /// The provider's usage of one request (success or not), already in the session's
    /// total (the requests are metered), for the caller's turn total.
    Usage(Usage),
    /// A request failed before it streamed and waits to be retried
    /// ([`StreamEvent::Retrying`]), so the wait can be shown instead of silence.
    Retrying(StreamEvent),
}

/// Where the compaction requests go, and the head they start with.
#[derive(Clone, Copy)]
pub(crate) struct RequestTarget<'a> {
    /// How the requests go out: the session's metered client, so each reserves its
    /// budget before it is sent.
    pub requests: &'a dyn ModelRequests,
    pub model: &'a str,
    /// The session's request head (system prompt and head blocks): the first message of
    /// both requests, as of every request of the session, so the provider's cached
    /// prefix is shared.
    pub head: &'a str,
}

/// Runs the pipeline over `messages` (a snapshot; `[0]` is the system prompt). `tools`
/// are only counted (requests carry no tools). `on_progress` gets each request's usage
/// and each retry wait. See the module docs.
pub(crate) async fn compact(
    target: RequestTarget<'_>,
    messages: &[Message],
    tools: &[ToolSpec],
    s: &CompactionSettings,
    cancel: &CancellationToken,
    on_progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<Compacted, CompactionError> {
    if cancel.is_cancelled() {
        return Err(CompactionError::Cancelled);
    }
    let tokens_before = estimate_tokens(messages, tools);
    let collapsed = collapse::collapse(messages);
    if !apply::has_compactable(&collapsed) {
        return Err(CompactionError::NothingToCompact);
    }

    let RequestTarget {
        requests: llm,
        model,
        head,
    } = target;
    let classify = requests::classify_messages(head, &collapsed, s.context_window);
    let classify_answer = ask(llm, model, classify.clone(), cancel, on_progress).await?;
    let classes = parse::classification(&classify_answer, collapsed.len())?;

    let extract = requests::extract_messages(&classify, &classify_answer);
    let extract_answer = ask(llm, model, extract, cancel, on_progress).await?;
    let extraction = parse::extraction(&extract_answer)?;

    let rebuilt = apply::apply(
        &collapsed,
        &classes,
        &extraction.memories,
        tools,
        s.budget(),
    );
    let tokens_after = estimate_tokens(&rebuilt, tools);
    tracing::info!(
        tokens_before,
        tokens_after,
        messages_before = messages.len(),
        messages_after = rebuilt.len(),
        memories = extraction.memories.len(),
        skills = extraction.skills.len(),
        "context compacted"
    );
    Ok(Compacted {
        messages: rebuilt,
        memories: extraction.memories,
        skills: extraction.skills,
        tokens_before,
        tokens_after,
    })
}

/// One tool-less request; the reply's text. Its usage and retry waits go to `on_progress`.
async fn ask(
    llm: &dyn ModelRequests,
    model: &str,
    messages: Vec<Message>,
    cancel: &CancellationToken,
    on_progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<String, CompactionError> {
    let request = ChatRequest {
        model: model.to_owned(),
        messages,
        tools: Vec::new(),
        response_format: None,
        cache_key: None,
        max_tokens: None,
    };
    let mut on_event = |event: StreamEvent| {
        if matches!(event, StreamEvent::Retrying { .. }) {
            on_progress(Progress::Retrying(event));
        }
    };
    let reply = llm.send(&request, cancel, &mut on_event).await?;
    if let Some(usage) = reply.usage {
        on_progress(Progress::Usage(usage));
    }
    if cancel.is_cancelled() {
        return Err(CompactionError::Cancelled);
    }
    Ok(reply.text)
}
