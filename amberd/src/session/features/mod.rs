//! The session features: each one module implementing the kernel's seam (`feature.rs`),
//! composed in the order [`all`] lists them. Nothing in the kernel names one of them.

pub(crate) mod budgets;
pub(crate) mod checkpoints;
pub(crate) mod custom_agents;
pub(crate) mod hooks;
pub(crate) mod mcp;
mod rewind;
pub(crate) mod sandbox;
pub(crate) mod worktree;

use std::sync::Arc;

use super::feature::Feature;

/// The daemon's features, in the order they are told of a session's fixed points: the
/// sandbox is settled before a hook runs in it, the hooks may block a turn before a checkpoint row records it, the MCP servers are waited
/// for last, and a custom agent's allow-list applies to their tools too.
pub(crate) fn all() -> Vec<Arc<dyn Feature>> {
    vec![
        Arc::new(sandbox::SandboxFeature),
        Arc::new(hooks::HooksFeature),
        Arc::new(budgets::BudgetsFeature),
        Arc::new(checkpoints::CheckpointsFeature),
        Arc::new(mcp::McpFeature),
        Arc::new(custom_agents::CustomAgentsFeature),
        Arc::new(worktree::WorktreeFeature),
    ]
}
