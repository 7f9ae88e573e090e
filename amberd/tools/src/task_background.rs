//! `task_status`, `task_wait` and `task_cancel`: a session's view of the background
//! sub-agents it started (`task {background: true}`). Their results are not returned
//! here: each arrives once, as its own `task_wait` result, between two model requests.

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::args::Args;
use super::session::{BackgroundAgents, ChildStatus};
use super::{Tool, ToolContext, ToolOutcome};

/// How often `task_wait` looks again.
const POLL: Duration = Duration::from_millis(100);
/// `task_wait`'s wait when the call names none, and the most it may name.
const DEFAULT_WAIT_SECS: u64 = 300;
const MAX_WAIT_SECS: u64 = 3600;

fn agents(ctx: &ToolContext) -> Result<&dyn BackgroundAgents, ToolOutcome> {
    ctx.session
        .background()
        .map(|agents| agents.as_ref())
        .ok_or_else(|| {
            ToolOutcome::error("background sub-agents are not available in this session")
        })
}

fn table(children: &[ChildStatus]) -> String {
    serde_json::to_string_pretty(children).unwrap_or_default()
}

pub(crate) struct TaskStatusTool;

impl Tool for TaskStatusTool {
    fn name(&self) -> &str {
        "task_status"
    }

    fn description(&self) -> &str {
        "Where this session's background sub-agents stand: each one's agentId, task, state \
         (queued, running, done, delivered), stop reason and spend. `agentId` shows one."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"agentId": {"type": "string"}}
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let agents = match agents(ctx) {
                Ok(agents) => agents,
                Err(outcome) => return outcome,
            };
            let wanted = match Args::new("task_status", &args).and_then(|a| a.opt_string("agentId"))
            {
                Ok(wanted) => wanted.map(str::to_owned),
                Err(e) => return ToolOutcome::error(e.to_string()),
            };
            let mut children = agents.status();
            if let Some(id) = &wanted {
                children.retain(|c| &c.agent_id == id);
                if children.is_empty() {
                    return ToolOutcome::error(format!("no background sub-agent `{id}`"));
                }
            }
            if children.is_empty() {
                return ToolOutcome::ok("No background sub-agents.");
            }
            ToolOutcome::ok(table(&children))
        })
    }
}

pub(crate) struct TaskWaitTool;

impl Tool for TaskWaitTool {
    fn name(&self) -> &str {
        "task_wait"
    }

    fn description(&self) -> &str {
        "Wait until background sub-agents are done (`agentIds`, default all of them), at most \
         `timeout_secs` (default 300). Their results follow, each as its own task_wait result."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "agentIds": {"type": "array", "items": {"type": "string"}},
                "timeout_secs": {"type": "integer", "minimum": 1, "maximum": MAX_WAIT_SECS}
            }
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let agents = match agents(ctx) {
                Ok(agents) => agents,
                Err(outcome) => return outcome,
            };
            let (wanted, timeout) = match wait_args(&args) {
                Ok(parsed) => parsed,
                Err(message) => return ToolOutcome::error(message),
            };
            let known = agents.status();
            if let Some(unknown) = wanted
                .iter()
                .find(|id| !known.iter().any(|c| &&c.agent_id == id))
            {
                return ToolOutcome::error(format!("no background sub-agent `{unknown}`"));
            }
            let deadline = tokio::time::Instant::now() + timeout;
            loop {
                let children: Vec<ChildStatus> = agents
                    .status()
                    .into_iter()
                    .filter(|c| wanted.is_empty() || wanted.contains(&c.agent_id))
                    .collect();
                if children.iter().all(ChildStatus::finished) {
                    return ToolOutcome::ok(format!(
                        "Done; the results follow.\n{}",
                        table(&children)
                    ));
                }
                tokio::select! {
                    () = tokio::time::sleep(POLL) => {}
                    () = ctx.cancel.cancelled() => return ToolOutcome::error("cancelled"),
                }
                if tokio::time::Instant::now() >= deadline {
                    return ToolOutcome::ok(format!(
                        "Still running after {} s; their results arrive when they are done.\n{}",
                        timeout.as_secs(),
                        table(&children)
                    ));
                }
            }
        })
    }
}

fn wait_args(args: &Value) -> Result<(Vec<String>, Duration), String> {
    let wanted = match args.get("agentIds") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(ids)) => ids
            .iter()
            .map(|id| {
                id.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| "`agentIds` must be an array of strings".to_owned())
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("`agentIds` must be an array of strings".into()),
    };
    let secs = match args.get("timeout_secs") {
        None | Some(Value::Null) => DEFAULT_WAIT_SECS,
        Some(v) => v
            .as_u64()
            .filter(|s| (1..=MAX_WAIT_SECS).contains(s))
            .ok_or_else(|| format!("`timeout_secs` must be 1 to {MAX_WAIT_SECS}, got {v}"))?,
    };
    Ok((wanted, Duration::from_secs(secs)))
}

pub(crate) struct TaskCancelTool;

impl Tool for TaskCancelTool {
    fn name(&self) -> &str {
        "task_cancel"
    }

    fn description(&self) -> &str {
        "Cancel a background sub-agent (`agentId`): a running one stops, a queued one never \
         starts. Its result (cancelled, with what it had) still arrives once."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"agentId": {"type": "string"}},
            "required": ["agentId"]
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let agents = match agents(ctx) {
                Ok(agents) => agents,
                Err(outcome) => return outcome,
            };
            let id = match Args::new("task_cancel", &args).and_then(|a| a.string("agentId")) {
                Ok(id) => id.to_owned(),
                Err(e) => return ToolOutcome::error(e.to_string()),
            };
            match agents.cancel(&id) {
                Ok(child) => ToolOutcome::ok(format!(
                    "Cancelling {id}; its result arrives once it has stopped.\n{}",
                    table(&[child])
                )),
                Err(message) => ToolOutcome::error(message),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_arguments_are_checked() {
        let (ids, timeout) = wait_args(&json!({})).unwrap();
        assert!(ids.is_empty());
        assert_eq!(timeout, Duration::from_secs(DEFAULT_WAIT_SECS));
        let (ids, timeout) =
            wait_args(&json!({"agentIds": ["agent_1"], "timeout_secs": 5})).unwrap();
        assert_eq!(ids, ["agent_1"]);
        assert_eq!(timeout, Duration::from_secs(5));
        // (arguments, the field the error names)
        let bad = [
            (json!({"agentIds": "agent_1"}), "agentIds"),
            (json!({"agentIds": [1]}), "agentIds"),
            (json!({"timeout_secs": 0}), "timeout_secs"),
            (json!({"timeout_secs": 999_999}), "timeout_secs"),
        ];
        for (args, field) in bad {
            let err = wait_args(&args).unwrap_err();
            assert!(err.contains(field), "{args}: {err}");
        }
    }
}
