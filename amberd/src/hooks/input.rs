//! The one JSON object a hook reads on its stdin:
//! `{event, sessionId, turnId, cwd, tool?, arguments?, result?, prompt?, stopReason?}`.

use std::path::PathBuf;

use amber_proto::StopReason;
use serde::Serialize;
use serde_json::Value;

use super::HookEvent;

/// What a hook is told about the event it runs for.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HookInput {
    pub event: HookEvent,
    pub session_id: String,
    /// `null` outside a turn (`session_started`).
    pub turn_id: Option<String>,
    /// The session's workspace, which is also the hook's working directory.
    pub cwd: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// `post_tool_use`: `{status, output}`, as the model sees it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
}

impl HookInput {
    /// An input for `event` with no optional field set.
    pub fn new(
        event: HookEvent,
        session_id: &str,
        turn_id: Option<&str>,
        cwd: &std::path::Path,
    ) -> HookInput {
        HookInput {
            event,
            session_id: session_id.to_owned(),
            turn_id: turn_id.filter(|t| !t.is_empty()).map(str::to_owned),
            cwd: cwd.to_path_buf(),
            tool: None,
            arguments: None,
            result: None,
            prompt: None,
            stop_reason: None,
        }
    }

    /// The JSON text written to the hook's stdin.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }
}
