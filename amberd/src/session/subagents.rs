//! Sub-agents for the `task` tool (SEED.md "sub-agents"): each runs the agent loop with its
//! own `Context`, a sub-agent system prompt, the session's tools minus `task`, the session's
//! gate (policy and approvals), and its own iteration cap. Its tool events reach
//! subscribers tagged with its `agentId`; its text stays private and comes back as the
//! tool output.

use std::path::Path;
use std::sync::{Arc, Weak};

use amber_proto::{EventKind, Message, Mode, Role, StopReason, Usage};
use amber_store::context::Context;
use futures::StreamExt;
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::SessionShared;
use super::deps::Deps;
use super::gate::SessionGate;
use crate::agent::{self, AgentHooks, TurnEnv};
use crate::tools::gate::Gate;
use crate::tools::session::{SubResult, SubTask, SubagentRunner};

/// The runner a session installs into its `SessionTools`.
pub struct SessionSubagents {
    pub shared: Weak<SessionShared>,
    pub deps: Arc<Deps>,
}

impl SubagentRunner for SessionSubagents {
    fn run<'a>(
        &'a self,
        tasks: Vec<SubTask>,
        parallel: bool,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Vec<SubResult>> {
        Box::pin(async move {
            let Some(shared) = self.shared.upgrade() else {
                let gone = SubResult {
                    ok: false,
                    text: "the session is closing".into(),
                };
                return vec![gone; tasks.len()];
            };
            let turn_id = shared.lock_live().turn_id.clone().unwrap_or_default();
            let deps = &self.deps;
            let runs = tasks
                .into_iter()
                .map(|task| run_one(&shared, deps, &turn_id, task, cancel));
            if parallel {
                let cap = deps.config.agent.subagent_parallel.max(1);
                // `buffered` keeps results in task order while running up to `cap` at once.
                futures::stream::iter(runs).buffered(cap).collect().await
            } else {
                let mut results = Vec::new();
                for run in runs {
                    results.push(run.await);
                }
                results
            }
        })
    }
}

async fn run_one(
    shared: &SessionShared,
    deps: &Deps,
    turn_id: &str,
    task: SubTask,
    cancel: &CancellationToken,
) -> SubResult {
    let agent_id = format!("agent_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let label = task
        .description
        .clone()
        .unwrap_or_else(|| task.prompt.chars().take(80).collect());
    let hooks = SubagentHooks {
        shared,
        turn_id,
        agent_id: &agent_id,
        gate: SessionGate {
            shared,
            deps,
            turn_id,
            cancel,
        },
    };
    hooks.publish(EventKind::SubagentStarted {
        agent_id: agent_id.clone(),
        task: label.clone(),
    });

    let mut context = Context::new();
    let system_prompt = subagent_prompt(&shared.workspace);
    // The session's head blocks (refreshed when the parent's turn began) after the
    // sub-agent prompt: the same bytes for every sub-agent of the session.
    let head = shared.head.head(&system_prompt);
    context.push(Message::system(system_prompt));
    let model = shared.model();
    let provider = shared.provider();
    let llm = deps.llm.client(provider.as_deref());
    let compaction = deps.compaction_for(provider.as_deref());
    let tools = deps.subagent_tools();
    let env = TurnEnv {
        llm: llm.as_ref().map_err(String::as_str),
        model: &model,
        tools: &tools,
        session_tools: &shared.tools,
        head: &head,
        workspace: &shared.workspace,
        limits: &deps.limits,
        max_iterations: deps.config.agent.subagent_max_iterations,
        confirm_finish: deps.config.agent.confirm_finish,
        compaction: &compaction,
        skills_dir: Some(&shared.skills_dir),
        cancel,
        hooks: &hooks,
    };
    let outcome = agent::run_turn(&mut context, &task.prompt, &env).await;
    let reply = context
        .messages()
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant && !m.content.trim().is_empty())
        .map(|m| m.content.clone())
        .unwrap_or_default();
    let (ok, text) = match outcome.stop {
        StopReason::EndTurn => (true, reply),
        stop => {
            let why = outcome
                .error
                .map(|e| format!(": {}", e.message))
                .unwrap_or_default();
            let partial = if reply.is_empty() {
                String::new()
            } else {
                format!("\nLast reply: {reply}")
            };
            (
                false,
                format!("[sub-agent stopped: {}{why}]{partial}", stop.as_str()),
            )
        }
    };
    hooks.publish(EventKind::SubagentCompleted {
        agent_id: agent_id.clone(),
        task: label,
        result: Some(text.clone()),
    });
    SubResult { ok, text }
}

/// The system prompt of every sub-agent: the same text for all, so serial sub-agents'
/// requests share a prefix and provider prompt caches stay warm.
fn subagent_prompt(workspace: &Path) -> String {
    format!(
        "You are a sub-agent of amber, a coding agent, working in the directory {ws}. You \
         were given one task by the main agent. Use the tools to do it; paths stay inside \
         {ws}. You cannot see the main conversation. When done, reply with a concise report \
         of what you found or changed: that reply is all the main agent receives.",
        ws = workspace.display()
    )
}

struct SubagentHooks<'a> {
    shared: &'a SessionShared,
    turn_id: &'a str,
    agent_id: &'a str,
    gate: SessionGate<'a>,
}

impl SubagentHooks<'_> {
    fn publish(&self, kind: EventKind) {
        self.shared
            .hub
            .publish_as(Some(self.turn_id), Some(self.agent_id), kind);
    }
}

impl AgentHooks for SubagentHooks<'_> {
    fn emit(&self, kind: EventKind) {
        // The sub-agent's own text goes back to the parent as the tool output; streaming
        // it too would mix it into the main reply for clients that ignore `agentId`.
        if matches!(
            kind,
            EventKind::MessageDelta { .. }
                | EventKind::ReasoningDelta { .. }
                | EventKind::MessageCompleted { .. }
        ) {
            return;
        }
        self.publish(kind);
    }

    fn mode(&self) -> Mode {
        self.shared.mode()
    }

    fn add_usage(&self, usage: &Usage) -> Usage {
        self.shared.add_subagent_usage(usage)
    }

    fn context_changed(&self, _context: &Context) {}

    fn gate(&self) -> &dyn Gate {
        &self.gate
    }
}
