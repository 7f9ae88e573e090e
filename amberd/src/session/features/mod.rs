//! The session features: each one module implementing the kernel's seam (`feature.rs`),
//! composed in the order [`all`] lists them. Nothing in the kernel names one of them.

pub(crate) mod background_agents;
pub(crate) mod budgets;
pub(crate) mod checkpoints;
pub(crate) mod custom_agents;
pub(crate) mod daemon_budget;
pub(crate) mod environment;
pub(crate) mod fleet;
pub(crate) mod goals;
pub(crate) mod hooks;
pub(crate) mod mcp;
pub(crate) mod mcp_asks;
pub(crate) mod messages;
pub(crate) mod metrics;
pub(crate) mod network;
mod rewind;
pub(crate) mod routines;
pub(crate) mod sandbox;
pub(crate) mod telemetry;
pub(crate) mod worktree;

use std::path::Path;
use std::sync::Arc;

use super::feature::Feature;
use crate::config::Config;

/// The daemon's features, in the order they are told of a session's fixed points: the
/// sandbox is settled before a hook runs in it, a fleet session waits for its runner before
/// the environment asks it anything, the environment (where the tools run) is
/// placed before a worktree could be, the hooks may block a turn before a checkpoint row records it, the MCP servers are waited
/// for last, and a custom agent's allow-list applies to their tools too.
/// Each owns its daemon-wide state, made here from the config and the data directory.
pub(crate) fn all(
    config: &Config,
    data_dir: &Path,
    spend: &Arc<daemon_budget::SpendBook>,
) -> Vec<Arc<dyn Feature>> {
    vec![
        Arc::new(sandbox::SandboxFeature),
        Arc::new(network::NetworkFeature::new(data_dir)),
        Arc::new(fleet::FleetFeature),
        Arc::new(environment::EnvironmentFeature::new()),
        Arc::new(hooks::HooksFeature::new(config, data_dir)),
        Arc::new(budgets::BudgetsFeature),
        Arc::new(daemon_budget::DaemonBudgetFeature::new(spend.clone())),
        Arc::new(background_agents::BackgroundAgentsFeature::new()),
        Arc::new(messages::MessagesFeature),
        Arc::new(goals::GoalsFeature),
        Arc::new(checkpoints::CheckpointsFeature::new(config, data_dir)),
        Arc::new(mcp::McpFeature),
        Arc::new(mcp_asks::McpAsksFeature),
        Arc::new(custom_agents::CustomAgentsFeature),
        Arc::new(worktree::WorktreeFeature),
        Arc::new(metrics::MetricsFeature),
        Arc::new(telemetry::TelemetryFeature),
        Arc::new(routines::RoutinesFeature),
    ]
}
