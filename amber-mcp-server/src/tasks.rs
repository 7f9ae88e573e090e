//! A tool call as a task (the MCP Tasks extension, `io.modelcontextprotocol/tasks`): for a
//! client that declared the extension, `amber_run` and `amber_reply` answer at once with a
//! task, and the turn runs on; the client polls `tasks/get` (rmcp's `TaskManager` keeps the
//! state) and may `tasks/cancel`, which cancels the turn as a cancelled request would.
//!
//! Invariants: a task's turn is the same as the request's (`runner`), so its result is the
//! tool result the client would have had; a cancelled task whose turn stopped settles as
//! `cancelled`; a finished task stays readable for [`RETAIN_MS`].

use rmcp::model::{CallToolResponse, CreateTaskResult};
use rmcp::task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions};

use super::note;
use super::runner::{self, Call, Target};

/// How long a task (running or finished) is kept: longer than any turn should take.
const RETAIN_MS: u64 = 24 * 60 * 60 * 1000;
/// The polling interval suggested to clients.
const POLL_MS: u64 = 500;

/// Starts `call` as a task of `tasks`; the answer to hand the client.
pub(crate) fn start(
    tasks: &TaskManager,
    tool: String,
    call: Call,
    target: Target,
) -> CallToolResponse {
    let options = TaskOptions::new()
        .with_ttl_ms(RETAIN_MS)
        .with_poll_interval_ms(POLL_MS)
        .with_status_message(format!("{tool}: the turn runs"));
    let task = tasks.spawn(options, move |context: TaskContext| {
        Box::pin(async move {
            note(&format!("{tool} runs as task {}", context.task_id()));
            let ct = call.ct.clone();
            let watcher = {
                let context = context.clone();
                let ct = ct.clone();
                tokio::spawn(async move {
                    context.cancelled().await;
                    ct.cancel();
                })
            };
            let result = runner::run(call, target).await;
            watcher.abort();
            let stopped = result.is_error == Some(true)
                || result
                    .structured_content
                    .as_ref()
                    .and_then(|s| s.get("stopReason"))
                    .is_some_and(|reason| reason == "cancelled");
            if context.is_cancel_requested() && stopped {
                return Err(TaskExit::Cancelled);
            }
            Ok(result)
        })
    });
    CallToolResponse::Task(CreateTaskResult::new(task))
}
