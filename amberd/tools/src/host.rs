//! Where a session's workspace tools run. The tools that touch the workspace
//! ([`Tool::runs_in_workspace`]) go through the session's [`ToolHost`]: in this process by
//! default, or on an executor next to the files (amberd's environments). Everything else
//! about a call (validation, the gate, approvals, ordering, the envelope) stays in dispatch.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

use super::{Tool, ToolContext, ToolOutcome};

/// Runs a workspace tool's calls for one session.
pub trait ToolHost: Send + Sync {
    /// Runs `tool` with `args` (already allowed by the gate). Live output goes through
    /// `ctx.emit`; every chunk is emitted before the future resolves. Dropping the future
    /// stops the call.
    fn call<'a>(
        &'a self,
        tool: &'a Arc<dyn Tool>,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolOutcome>;

    /// Why the calls just run could not finish here (the environment was lost), taken
    /// once: the turn then ends interrupted rather than asking the model again.
    fn take_interruption(&self) -> Option<String> {
        None
    }

    /// Background processes of the session still running there (as last reported): the
    /// session has work there, and unloading it would kill them.
    fn processes_running(&self) -> usize {
        0
    }
}

/// The tools run in this process, on this machine's files (the default).
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalToolHost;

impl ToolHost for LocalToolHost {
    fn call<'a>(
        &'a self,
        tool: &'a Arc<dyn Tool>,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolOutcome> {
        tool.call(args, ctx)
    }
}
