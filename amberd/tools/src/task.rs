//! The `task` tool: hands work to sub-agents (SEED.md "sub-agents"). Each sub-agent has its
//! own context and system prompt, the same tools minus `task`, and the session's policy;
//! the tool output is each sub-agent's final reply.

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::args::Args;
use super::session::{SubTask, TaskCaps};
use super::{Tool, ToolContext, ToolOutcome};

/// Most tasks one call may hand out.
const MAX_TASKS: usize = 16;

pub(crate) struct TaskTool;

impl Tool for TaskTool {
    fn name(&self) -> &str {
        "task"
    }

    fn description(&self) -> &str {
        "Hand work to sub-agents with their own context. `prompt` runs one sub-agent; `tasks` \
         ([{prompt, description?}]) runs several, one after another (`mode: \"serial\"`, the \
         default) or concurrently (`mode: \"parallel\"`, for independent work). Each sub-agent \
         has the same tools except `task`; its final reply is returned here. Give each a \
         self-contained prompt: it does not see this conversation. `agent` runs a task as a \
         custom agent (its prompt, tools and mode), for all tasks or per task. `max_tokens`, \
         `max_requests`, `max_seconds` and `max_usd` cap each sub-agent (for all tasks or per \
         task), within the configured caps: a capped sub-agent stops with the cap it reached. \
         `background: true` starts each task as a background sub-agent and returns at once \
         with its handle; its result arrives later as a `task_wait` result (see `task_status`, \
         `task_wait`, `task_cancel`)."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "prompt": {"type": "string", "description": "The task for one sub-agent."},
                "description": {"type": "string", "description": "A few words naming the task."},
                "mode": {"type": "string", "enum": ["serial", "parallel"]},
                "background": {"type": "boolean", "description": "Run the tasks as background sub-agents: this call returns at once, each result arrives when its sub-agent is done."},
                "agent": {"type": "string", "description": "A custom agent's name (`plan`, `review`, …) to run the tasks as."},
                "max_tokens": {"type": "integer", "minimum": 1, "description": "Most tokens each sub-agent may use."},
                "max_requests": {"type": "integer", "minimum": 1, "description": "Most model requests each sub-agent may make."},
                "max_seconds": {"type": "integer", "minimum": 1, "description": "Most seconds each sub-agent may run."},
                "max_usd": {"type": "number", "minimum": 0, "description": "Most US dollars each sub-agent may spend."},
                "tasks": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "prompt": {"type": "string"},
                            "description": {"type": "string"},
                            "agent": {"type": "string"},
                            "max_tokens": {"type": "integer", "minimum": 1},
                            "max_requests": {"type": "integer", "minimum": 1},
                            "max_seconds": {"type": "integer", "minimum": 1},
                            "max_usd": {"type": "number", "minimum": 0}
                        },
                        "required": ["prompt"]
                    }
                }
            }
        })
    }

    fn read_only(&self) -> bool {
        // Sub-agents' own calls go through the policy one by one.
        true
    }

    /// Its sub-agents may write: their changes belong to this turn's checkpoint.
    fn may_change_files(&self, _args: &Value) -> bool {
        true
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let (tasks, parallel) = match parse(&args) {
                Ok(parsed) => parsed,
                Err(message) => return ToolOutcome::error(message),
            };
            // The most the fan-out may spend leads the output, so the model sees its cost.
            let estimate = ctx
                .session
                .subagents()
                .and_then(|runner| runner.estimate(&tasks))
                .map(|e| format!("[{e}]\n"))
                .unwrap_or_default();
            match args.get("background") {
                None | Some(Value::Null | Value::Bool(false)) => {}
                Some(Value::Bool(true)) => {
                    let outcome = spawn(tasks, ctx).await;
                    return ToolOutcome {
                        output: format!("{estimate}{}", outcome.output),
                        ..outcome
                    };
                }
                Some(other) => {
                    return ToolOutcome::error(format!(
                        "`background` must be true or false, got {other}"
                    ));
                }
            }
            let Some(runner) = ctx.session.subagents() else {
                return ToolOutcome::error("sub-agents are not available in this session");
            };
            let results = match runner.run(tasks.clone(), parallel, &ctx.cancel).await {
                Ok(results) => results,
                Err(message) => return ToolOutcome::error(message),
            };
            let all_ok = results.iter().all(|r| r.ok);
            let text = if let [only] = results.as_slice() {
                only.text.clone()
            } else {
                results
                    .iter()
                    .zip(&tasks)
                    .enumerate()
                    .map(|(i, (result, task))| {
                        let name = task.description.as_deref().unwrap_or("task");
                        let status = if result.ok { "" } else { " (did not finish)" };
                        format!("## Task {}: {name}{status}\n{}", i + 1, result.text)
                    })
                    .collect::<Vec<_>>()
                    .join("\n\n")
            };
            let text = format!("{estimate}{text}");
            if all_ok {
                ToolOutcome::ok(text)
            } else {
                ToolOutcome::error(text)
            }
        })
    }
}

/// `task {background: true}`: the children start, and the call answers with their handles.
async fn spawn(tasks: Vec<SubTask>, ctx: &ToolContext) -> ToolOutcome {
    let Some(agents) = ctx.session.background() else {
        return ToolOutcome::error("background sub-agents are not available in this session");
    };
    match agents.spawn(tasks, &ctx.cancel).await {
        Ok(started) => {
            let lines: Vec<String> = started
                .iter()
                .map(|child| {
                    format!(
                        "- {} ({}): session {}, {}",
                        child.agent_id, child.task, child.session_id, child.state
                    )
                })
                .collect();
            ToolOutcome::ok(format!(
                "Started {} background sub-agent(s):\n{}\nEach result arrives as a task_wait \
                 result when its sub-agent is done; `task_wait` waits for them, `task_status` \
                 shows where they stand.",
                started.len(),
                lines.join("\n")
            ))
        }
        Err(message) => ToolOutcome::error(message),
    }
}

/// The tasks a `task` call's arguments name (for a look before the call runs).
pub fn tasks_of(args: &Value) -> Result<Vec<SubTask>, String> {
    parse(args).map(|(tasks, _)| tasks)
}

fn parse(args: &Value) -> Result<(Vec<SubTask>, bool), String> {
    let value = args;
    let args = Args::new("task", value).map_err(|e| e.to_string())?;
    let parallel = match args.opt_string("mode").map_err(|e| e.to_string())? {
        None | Some("serial") => false,
        Some("parallel") => true,
        Some(other) => {
            return Err(format!(
                "`mode` must be \"serial\" or \"parallel\", got \"{other}\""
            ));
        }
    };
    let agent = args
        .opt_string("agent")
        .map_err(|e| e.to_string())?
        .map(str::to_owned);
    let caps = caps(value, "")?;
    let tasks = match value.get("tasks") {
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let prompt = item
                    .get("prompt")
                    .and_then(Value::as_str)
                    .filter(|p| !p.trim().is_empty())
                    .ok_or_else(|| format!("`tasks[{i}].prompt` must be a non-empty string"))?;
                let description = item
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let own_agent = match item.get("agent") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(name)) => Some(name.clone()),
                    Some(_) => return Err(format!("`tasks[{i}].agent` must be a string")),
                };
                Ok(SubTask {
                    prompt: prompt.to_owned(),
                    description,
                    agent: own_agent.or_else(|| agent.clone()),
                    caps: self::caps(item, &format!("tasks[{i}].")).map(|own| own.or(caps))?,
                })
            })
            .collect::<Result<Vec<_>, String>>()?,
        Some(Value::Null) | None => Vec::new(),
        Some(_) => return Err("`tasks` must be an array of {prompt, description?}".into()),
    };
    let tasks = if tasks.is_empty() {
        let prompt = args
            .opt_string("prompt")
            .map_err(|e| e.to_string())?
            .filter(|p| !p.trim().is_empty())
            .ok_or("give `prompt` (one task) or `tasks` (several)")?;
        vec![SubTask {
            prompt: prompt.to_owned(),
            description: args
                .opt_string("description")
                .map_err(|e| e.to_string())?
                .map(str::to_owned),
            agent,
            caps,
        }]
    } else {
        tasks
    };
    if tasks.len() > MAX_TASKS {
        return Err(format!(
            "at most {MAX_TASKS} tasks per call, got {}",
            tasks.len()
        ));
    }
    Ok((tasks, parallel))
}

/// The caps `value` asks for; `at` prefixes the field names in errors (`tasks[2].`).
fn caps(value: &Value, at: &str) -> Result<TaskCaps, String> {
    let count = |key: &str| -> Result<Option<u64>, String> {
        match value.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .filter(|n| *n > 0)
                .map(Some)
                .ok_or_else(|| format!("`{at}{key}` must be a whole number above 0, got {v}")),
        }
    };
    let max_usd = match value.get("max_usd") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_f64()
                .filter(|usd| usd.is_finite() && *usd >= 0.0)
                .ok_or_else(|| format!("`{at}max_usd` must be a number of dollars ≥ 0, got {v}"))?,
        ),
    };
    Ok(TaskCaps {
        max_tokens: count("max_tokens")?,
        max_requests: count("max_requests")?,
        max_seconds: count("max_seconds")?,
        max_usd,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_prompt_or_several_tasks() {
        let (tasks, parallel) = parse(&json!({"prompt": "do x", "description": "x"})).unwrap();
        assert_eq!(tasks.len(), 1);
        assert!(!parallel);
        let (tasks, parallel) = parse(&json!({
            "mode": "parallel",
            "tasks": [{"prompt": "a"}, {"prompt": "b", "description": "B"}]
        }))
        .unwrap();
        assert_eq!(tasks.len(), 2);
        assert!(parallel);
        assert_eq!(tasks[1].description.as_deref(), Some("B"));
    }

    #[test]
    fn an_agent_for_all_tasks_or_per_task() {
        let (tasks, _) = parse(&json!({"prompt": "p", "agent": "review"})).unwrap();
        assert_eq!(tasks[0].agent.as_deref(), Some("review"));
        let (tasks, _) = parse(&json!({
            "agent": "plan",
            "tasks": [{"prompt": "a"}, {"prompt": "b", "agent": "review"}]
        }))
        .unwrap();
        let agents: Vec<Option<&str>> = tasks.iter().map(|t| t.agent.as_deref()).collect();
        assert_eq!(agents, [Some("plan"), Some("review")]);
        assert!(
            parse(&json!({"prompt": "p", "agent": 3}))
                .unwrap_err()
                .contains("agent")
        );
        let err = parse(&json!({"tasks": [{"prompt": "a", "agent": []}]})).unwrap_err();
        assert!(err.contains("tasks[0].agent"), "{err}");
    }

    #[test]
    fn caps_for_all_tasks_or_per_task() {
        let (tasks, _) = parse(&json!({
            "max_tokens": 5000,
            "max_usd": 0.25,
            "tasks": [{"prompt": "a"}, {"prompt": "b", "max_tokens": 100, "max_seconds": 30}]
        }))
        .unwrap();
        assert_eq!(
            tasks[0].caps,
            TaskCaps {
                max_tokens: Some(5000),
                max_usd: Some(0.25),
                ..TaskCaps::default()
            }
        );
        assert_eq!(
            tasks[1].caps,
            TaskCaps {
                max_tokens: Some(100),
                max_seconds: Some(30),
                max_usd: Some(0.25),
                max_requests: None,
            }
        );
        let (tasks, _) = parse(&json!({"prompt": "p", "max_requests": 3})).unwrap();
        assert_eq!(tasks[0].caps.max_requests, Some(3));
        // (arguments, the field the error names)
        let bad = [
            (json!({"prompt": "p", "max_tokens": 0}), "`max_tokens`"),
            (json!({"prompt": "p", "max_requests": -1}), "`max_requests`"),
            (json!({"prompt": "p", "max_seconds": "10"}), "`max_seconds`"),
            (json!({"prompt": "p", "max_usd": -0.5}), "`max_usd`"),
            (
                json!({"tasks": [{"prompt": "a", "max_tokens": 1.5}]}),
                "`tasks[0].max_tokens`",
            ),
        ];
        for (args, field) in bad {
            let err = parse(&args).unwrap_err();
            assert!(err.contains(field), "{args}: {err}");
        }
    }

    #[test]
    fn bad_arguments_name_the_field() {
        assert!(parse(&json!({})).unwrap_err().contains("prompt"));
        assert!(
            parse(&json!({"mode": "fast", "prompt": "x"}))
                .unwrap_err()
                .contains("mode")
        );
        let err = parse(&json!({"tasks": [{"prompt": ""}]})).unwrap_err();
        assert!(err.contains("tasks[0].prompt"), "{err}");
    }
}
