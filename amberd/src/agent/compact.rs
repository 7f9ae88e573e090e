//! Compaction as the agent loop runs it (SEED.md "compression"): events, the rebuild with
//! clear + push only on success, saving extracted skills, and the guard against
//! compacting again before the context has grown.

use std::path::Path;

use amber_llm::ToolSpec;
use amber_proto::{EventKind, Usage};
use amber_store::context::Context;
use tokio_util::sync::CancellationToken;

use super::TurnHost;
use super::metered::Metered;
use crate::compaction::{
    self, CompactionError, CompactionSettings, PromptUsage, estimate_tokens, needs_compaction,
};

/// What one compaction needs besides the context.
pub(crate) struct CompactEnv<'a> {
    /// The session's metered client: compaction's requests reserve its budget too.
    pub llm: &'a Metered<'a>,
    pub model: &'a str,
    pub tools: &'a [ToolSpec],
    /// The head of the session's requests: the compaction requests start with it too, so
    /// they share the provider's cached prefix.
    pub head: &'a str,
    pub settings: &'a CompactionSettings,
    /// Where extracted skills are saved (`None`: not saved).
    pub skills_dir: Option<&'a Path>,
    pub cancel: &'a CancellationToken,
    pub host: &'a dyn TurnHost,
}

/// Runs the pipeline and, on success, rebuilds the context. Any failure leaves the context
/// untouched and is reported as `compaction_failed`. Returns (before, after) estimates.
/// The classify and extract requests' usage is accounted like any LLM call's (session
/// total, `usage` events, by the metered client) and added to `spent`, whatever the
/// outcome. A request the budget refuses fails the compaction with `BudgetExceeded`.
pub(crate) async fn compact_context(
    context: &mut Context,
    env: &CompactEnv<'_>,
    spent: &mut Usage,
) -> Result<(u64, u64), CompactionError> {
    let snapshot = context.snapshot();
    if !compaction::has_compactable(&snapshot) {
        // Nothing but the system prompt and the current exchange: not worth an event.
        return Err(CompactionError::NothingToCompact);
    }
    let tokens_before = estimate_tokens(&snapshot, env.tools);
    env.host
        .emit(EventKind::CompactionStarted { tokens_before });
    let target = compaction::RequestTarget {
        requests: env.llm,
        model: env.model,
        head: env.head,
    };
    let result = compaction::compact(
        target,
        &snapshot,
        env.tools,
        env.settings,
        env.cancel,
        &mut |progress| match progress {
            compaction::Progress::Usage(usage) => spent.add(&usage),
            compaction::Progress::Retrying(event) => {
                if let Some(retrying) = super::retrying_event(event) {
                    env.host.emit(retrying);
                }
            }
        },
    )
    .await;
    match result {
        Ok(compacted) => {
            context.clear();
            for message in compacted.messages {
                context.push(message);
            }
            env.host.context_changed(context);
            env.host.emit(EventKind::CompactionCompleted {
                tokens_before: compacted.tokens_before,
                tokens_after: compacted.tokens_after,
            });
            if let Some(dir) = env.skills_dir
                && !compacted.skills.is_empty()
                && let Err(err) = compaction::save_skills(dir, &compacted.skills)
            {
                tracing::warn!(%err, dir = %dir.display(), "cannot save extracted skills");
            }
            Ok((compacted.tokens_before, compacted.tokens_after))
        }
        Err(err) => {
            env.host.emit(EventKind::CompactionFailed {
                tokens_before,
                error: format!("{} ({})", err, err.code()),
            });
            Err(err)
        }
    }
}

/// Decides, before each LLM call, whether to compact first.
#[derive(Debug, Default)]
pub(crate) struct CompactionGate {
    /// The provider's count of the last request, with our estimate of it.
    last: Option<PromptUsage>,
    /// After a compaction attempt: the estimate the context must grow past before the
    /// next automatic attempt (so a compaction that freed little does not repeat each call).
    rearm_above: Option<u64>,
}

impl CompactionGate {
    pub(crate) fn should_compact(&self, estimated: u64, settings: &CompactionSettings) -> bool {
        if self.rearm_above.is_some_and(|floor| estimated <= floor) {
            return false;
        }
        needs_compaction(estimated, self.last.map(|u| u.project(estimated)), settings)
    }

    /// The provider reported `prompt_tokens` for a request we estimated at `estimated`.
    pub(crate) fn observed(&mut self, prompt_tokens: u64, estimated: u64) {
        if prompt_tokens > 0 {
            self.last = Some(PromptUsage {
                prompt_tokens,
                estimated,
            });
        }
    }

    /// A compaction was attempted: forget the stale count and wait for real growth (a
    /// tenth of the window) before trying again.
    pub(crate) fn attempted(&mut self, estimated_after: u64, settings: &CompactionSettings) {
        self.last = None;
        self.rearm_above = Some(estimated_after + settings.context_window / 10);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> CompactionSettings {
        CompactionSettings {
            threshold: 0.8,
            headroom: 0.4,
            context_window: 1000,
        }
    }

    #[test]
    fn the_gate_fires_over_the_threshold_and_rearms_only_after_growth() {
        let s = settings();
        let mut gate = CompactionGate::default();
        assert!(!gate.should_compact(700, &s));
        assert!(gate.should_compact(900, &s));
        // A compaction that left 850 does not run again until the context grows past 950.
        gate.attempted(850, &s);
        assert!(!gate.should_compact(900, &s));
        assert!(gate.should_compact(960, &s));
    }

    #[test]
    fn provider_counts_take_precedence_over_the_estimate() {
        let s = settings();
        let mut gate = CompactionGate::default();
        // The provider counted 790 for a request we estimated at 500: +60 estimated since.
        gate.observed(790, 500);
        assert!(gate.should_compact(560, &s));
        assert!(!gate.should_compact(505, &s));
    }
}
