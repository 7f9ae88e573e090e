//! The MCP Tasks extension (`io.modelcontextprotocol/tasks`) as a host: amberd declares it,
//! so a server may answer a long `tools/call` with a task instead of holding the request
//! open. The call then follows the task — `tasks/get` at the interval the server suggests,
//! its `inputRequests` answered through the session's person (`tasks/update`) — until it
//! is completed (its inlined result is the call's), failed or cancelled.
//!
//! **Invariants:** the call's timeout and its turn's cancel bound the whole task, and a
//! task left behind that way is cancelled on the server (`tasks/cancel`); a task's input
//! requests are answered once each.

use std::collections::BTreeSet;
use std::time::Duration;

use rmcp::ServiceError;
use rmcp::model::{
    CallToolResult, CancelTaskParams, CreateTaskResult, GetTaskParams, TaskPayload,
    UpdateTaskParams,
};

use super::client::Peer;
use super::supervisor::Server;

/// Poll bounds: a server's suggestion is kept within them.
const MIN_POLL: Duration = Duration::from_millis(50);
const MAX_POLL: Duration = Duration::from_secs(5);
/// Without a suggestion.
const DEFAULT_POLL: Duration = Duration::from_millis(500);

/// Follows the task `created` to its end; its result is the call's.
pub(super) async fn follow(
    server: &Server,
    peer: &Peer,
    created: CreateTaskResult,
) -> Result<CallToolResult, ServiceError> {
    let task_id = created.task.task_id.clone();
    let mut guard = CancelOnDrop {
        peer: peer.clone(),
        task_id: Some(task_id.clone()),
    };
    let mut poll = interval(created.task.poll_interval_ms);
    let mut answered: BTreeSet<String> = BTreeSet::new();
    loop {
        let got = peer.get_task(GetTaskParams::new(task_id.clone())).await?;
        if let Some(ms) = got.task.task.poll_interval_ms {
            poll = interval(Some(ms));
        }
        match got.task.payload {
            TaskPayload::Completed { result } => {
                guard.task_id = None;
                return serde_json::from_value(serde_json::Value::Object(result))
                    .map_err(|_| ServiceError::UnexpectedResponse);
            }
            TaskPayload::Failed { error } => {
                guard.task_id = None;
                let message = error
                    .get("message")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("the task failed")
                    .to_owned();
                let code = error
                    .get("code")
                    .and_then(serde_json::Value::as_i64)
                    .and_then(|c| i32::try_from(c).ok())
                    .unwrap_or(-32603);
                return Err(ServiceError::McpError(rmcp::ErrorData::new(
                    rmcp::model::ErrorCode(code),
                    format!("task {task_id} failed: {message}"),
                    None,
                )));
            }
            TaskPayload::Cancelled => {
                guard.task_id = None;
                return Err(ServiceError::McpError(rmcp::ErrorData::new(
                    rmcp::model::ErrorCode::INTERNAL_ERROR,
                    format!("task {task_id} was cancelled by the server"),
                    None,
                )));
            }
            TaskPayload::InputRequired { input_requests } => {
                // Each request once: the server may still list one it was answered.
                let fresh: rmcp::model::InputRequests = input_requests
                    .into_iter()
                    .filter(|(key, _)| !answered.contains(key))
                    .collect();
                if !fresh.is_empty() {
                    answered.extend(fresh.keys().cloned());
                    let answers = super::adapters::answer_inputs(server, fresh).await?;
                    peer.update_task(UpdateTaskParams::new(task_id.clone(), answers))
                        .await?;
                    continue;
                }
            }
            TaskPayload::Working => {}
            // A status of a later revision of the extension: keep polling.
            _ => {}
        }
        tokio::time::sleep(poll).await;
    }
}

fn interval(suggested_ms: Option<u64>) -> Duration {
    suggested_ms
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_POLL)
        .clamp(MIN_POLL, MAX_POLL)
}

/// Cancels the task on the server when its call is dropped before the task ended (the
/// call's timeout, or its turn cancelled).
struct CancelOnDrop {
    peer: Peer,
    task_id: Option<String>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(task_id) = self.task_id.take() else {
            return;
        };
        let peer = self.peer.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let cancel = peer.cancel_task(CancelTaskParams::new(task_id));
                let _ = tokio::time::timeout(Duration::from_secs(10), cancel).await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amberd_offers_the_tasks_extension_beside_its_asks() {
        let offered = serde_json::to_value(super::super::client::client_capabilities()).unwrap();
        assert!(
            offered["extensions"][rmcp::model::TASKS_EXTENSION_ID].is_object(),
            "{offered}"
        );
        assert!(offered["elicitation"].is_object(), "{offered}");
        assert!(offered["sampling"].is_object(), "{offered}");
    }

    #[test]
    fn the_poll_interval_keeps_within_its_bounds() {
        assert_eq!(interval(None), DEFAULT_POLL);
        assert_eq!(interval(Some(1)), MIN_POLL);
        assert_eq!(interval(Some(200)), Duration::from_millis(200));
        assert_eq!(interval(Some(600_000)), MAX_POLL);
    }
}
