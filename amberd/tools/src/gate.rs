//! The gate between validation and execution in dispatch: policy and approvals decide
//! whether a call may run. The session supplies the real gate (rules, grants, approvals
//! over the socket); `ModeGate` is the plain mode check for in-process use and tests.

use amber_policy::mode_allows;
use amber_proto::{Mode, ToolCall, ToolStatus};
use futures::future::BoxFuture;
use serde_json::Value;

use super::Tool;
use super::sandbox::Unsandboxed;

/// A validated call waiting for permission.
pub struct GateCall<'a> {
    pub call: &'a ToolCall,
    pub tool: &'a dyn Tool,
    pub args: &'a Value,
}

/// The gate's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateVerdict {
    Allow,
    /// Allowed to run without the OS sandbox (an approval of the unsandboxed run, or a
    /// `sandbox = false` rule): the leave becomes the call's `ToolContext::unsandboxed`.
    AllowUnsandboxed(Unsandboxed),
    /// Allowed with other arguments than the model's (a `pre_tool_use` hook rewrote them,
    /// already checked against the tool's schema); `unsandboxed` as `AllowUnsandboxed`.
    AllowWith {
        arguments: Value,
        unsandboxed: Option<Unsandboxed>,
    },
    /// Denied; the reason is what the model sees.
    Deny(String),
}

/// Decides, possibly after asking someone, whether a call may run.
pub trait Gate: Send + Sync {
    fn check<'a>(&'a self, call: GateCall<'a>) -> BoxFuture<'a, GateVerdict>;

    /// A call the gate let through has run (`post_tool_use` hooks); `arguments` are the
    /// ones it ran with, `output` what the model sees. Must not block. Nothing by default.
    fn after_call(&self, _call: &ToolCall, _arguments: &Value, _status: ToolStatus, _output: &str) {
    }
}

/// Read mode denies every tool that is not read-only; nothing asks.
pub struct ModeGate(pub Mode);

impl Gate for ModeGate {
    fn check<'a>(&'a self, call: GateCall<'a>) -> BoxFuture<'a, GateVerdict> {
        let verdict = match mode_allows(self.0, call.tool.read_only()) {
            Ok(()) => GateVerdict::Allow,
            Err(reason) => GateVerdict::Deny(reason),
        };
        Box::pin(async move { verdict })
    }
}
