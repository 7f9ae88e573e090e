//! Sub-agents for the `task` tool (SEED.md "sub-agents"): each runs the agent loop with its
//! own `Context`, a sub-agent system prompt, the session's tools minus `task`, the session's
//! gate (policy and approvals), and its own iteration cap. Its tool events reach
//! subscribers tagged with its `agentId`; its text stays private and comes back as the
//! tool output.
//!
//! A task may name a custom agent (`task {agent}`): its body leads the system prompt, its
//! model and provider replace the session's, its `max_iterations` the sub-agent cap.
//! **A sub-agent never gets more than its parent:** its mode is its agent's narrowed to the
//! session's (`amber_policy::narrower_mode`, in the gate too), and its tools are its agent's allow-list
//! within the session agent's.

use std::path::Path;
use std::sync::{Arc, Weak};

use amber_proto::{EventKind, Message, Mode, Role, StopReason, Usage};
use amber_store::context::Context;
use futures::StreamExt;
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::SessionShared;
use super::gate::SessionGate;
use super::services::Services;
use super::subagent_budget::SubagentBudget;
use crate::acp::AcpAgentConfig;
use crate::agent::ledger::Spent;
use crate::agent::metered::{Refusal, RequestMeta, Reservation};
use crate::agent::{self, TurnEnv, TurnHost};
use crate::agents::{self, AgentDirs, AgentLimits};
use crate::config::SubagentCaps;
use amber_tools::ToolRegistry;
use amber_tools::gate::Gate;
use amber_tools::session::{SubResult, SubTask, SubagentRunner};

/// The runner a session installs into its `SessionTools`.
pub(crate) struct SessionSubagents {
    pub shared: Weak<SessionShared>,
    pub services: Arc<Services>,
}

/// The most a `task` call's sub-agents may spend: each one's `max_usd`, else its
/// `max_tokens` at the dearer of its model's input and output prices. A sub-agent with
/// neither bound, or a model without a price, has no estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FanoutEstimate {
    pub tasks: usize,
    /// The bounded sub-agents' most, summed.
    pub most: amber_proto::CostUsd,
    /// Sub-agents with no bound on their spend.
    pub unbounded: usize,
}

impl FanoutEstimate {
    /// Of `tasks` in session `shared` (a task's custom agent is read as the plain
    /// sub-agent model here: its model is only known once the agent is read).
    pub(crate) fn of(shared: &SessionShared, services: &Services, tasks: &[SubTask]) -> Self {
        let agents = &services.live().config.agents;
        let model = agents
            .subagent_model()
            .map_or_else(|| shared.model(), str::to_owned);
        let price = services.llm.price(shared.provider().as_deref(), &model);
        let mut estimate = FanoutEstimate {
            tasks: tasks.len(),
            most: amber_proto::CostUsd::ZERO,
            unbounded: 0,
        };
        for task in tasks {
            let caps = agents.subagent_caps(&task.caps).unwrap_or_default();
            let by_tokens = caps.tokens.zip(price).map(|(tokens, price)| {
                let input = price.cost(&Usage {
                    prompt_tokens: tokens,
                    total_tokens: tokens,
                    ..Usage::default()
                });
                let output = price.cost(&Usage {
                    completion_tokens: tokens,
                    total_tokens: tokens,
                    ..Usage::default()
                });
                input.max(output)
            });
            match caps.usd.or(by_tokens) {
                Some(most) => estimate.most = estimate.most.saturating_add(most),
                None => estimate.unbounded += 1,
            }
        }
        estimate
    }

    /// How the model and a person read it.
    pub(crate) fn describe(&self) -> String {
        let n = self.tasks;
        match (self.unbounded, n - self.unbounded) {
            (0, _) => format!(
                "estimated at most ${:.2} for {n} sub-agent(s)",
                self.most.usd()
            ),
            (all, 0) => format!(
                "{all} sub-agent(s) with no cap in dollars or tokens (or no price for their \
                 model): their spend cannot be estimated"
            ),
            (unbounded, bounded) => format!(
                "estimated at most ${:.2} for {bounded} sub-agent(s), and {unbounded} more \
                 whose spend cannot be estimated",
                self.most.usd()
            ),
        }
    }
}

impl SubagentRunner for SessionSubagents {
    fn estimate(&self, tasks: &[SubTask]) -> Option<String> {
        let shared = self.shared.upgrade()?;
        Some(FanoutEstimate::of(&shared, &self.services, tasks).describe())
    }

    fn run<'a>(
        &'a self,
        tasks: Vec<SubTask>,
        parallel: bool,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Vec<SubResult>, String>> {
        Box::pin(async move {
            let Some(shared) = self.shared.upgrade() else {
                return Err("the session is closing".into());
            };
            // A spent budget starts no sub-agent: none could make a request.
            if let Some(spent) = shared.refuses_requests() {
                return Err(format!("no sub-agent started: {}", spent.message));
            }
            let turn_id = shared.lock_live().turn_id.clone().unwrap_or_default();
            let services = &self.services;
            let plans = Plan::resolve_all(&shared, services, &turn_id, cancel, &tasks).await?;
            let runs = tasks
                .into_iter()
                .zip(plans)
                .map(|(task, plan)| run_one(&shared, services, &turn_id, task, plan, cancel));
            if parallel {
                let cap = services.live().config.agent.subagent_parallel.max(1);
                // `buffered` keeps results in task order while running up to `cap` at once.
                Ok(futures::stream::iter(runs).buffered(cap).collect().await)
            } else {
                let mut results = Vec::new();
                for run in runs {
                    results.push(run.await);
                }
                Ok(results)
            }
        })
    }
}

/// How one task runs: the agent loop with a profile, or on an external ACP agent.
pub(crate) enum Plan {
    Loop(Profile),
    Acp {
        name: String,
        config: AcpAgentConfig,
        /// The sub-agent's tools: the agent's file access through amber runs as these.
        tools: ToolRegistry,
        caps: SubagentCaps,
    },
}

impl Plan {
    /// Each task's plan, in order: a task whose `agent` names `[agents.acp.NAME]` runs on
    /// that agent; the others as [`Profile::resolve_all`] says.
    async fn resolve_all(
        shared: &SessionShared,
        services: &Services,
        turn_id: &str,
        cancel: &CancellationToken,
        tasks: &[SubTask],
    ) -> Result<Vec<Plan>, String> {
        let live = services.live();
        let external = |task: &SubTask| {
            task.agent
                .as_deref()
                .and_then(|name| live.config.agents.acp.get_key_value(name))
        };
        let looped: Vec<SubTask> = tasks
            .iter()
            .filter(|task| external(task).is_none())
            .cloned()
            .collect();
        let mut profiles = Profile::resolve_all(shared, services, turn_id, cancel, &looped)
            .await
            .map_err(|e| {
                // An unknown name: the external ACP agents are names too.
                let names: Vec<&str> = live.config.agents.acp.keys().map(String::as_str).collect();
                if e.contains("unknown agent") && !names.is_empty() {
                    format!("{e}; external ACP agents: {}", names.join(", "))
                } else {
                    e
                }
            })?
            .into_iter();
        tasks
            .iter()
            .map(|task| match external(task) {
                Some((name, config)) => Ok(Plan::Acp {
                    name: name.clone(),
                    config: config.clone(),
                    tools: shared.offered_tools(services.subagent_tools()),
                    caps: live.config.agents.subagent_caps(&task.caps)?,
                }),
                None => profiles
                    .next()
                    .map(Plan::Loop)
                    .ok_or_else(|| "a task lost its profile".to_owned()),
            })
            .collect()
    }

    fn caps(&self) -> SubagentCaps {
        match self {
            Plan::Loop(profile) => profile.caps,
            Plan::Acp { caps, .. } => *caps,
        }
    }
}

/// How one sub-agent runs: the session's defaults, or what its custom agent sets.
pub(crate) struct Profile {
    pub system_prompt: String,
    pub model: String,
    pub provider: Option<String>,
    pub tools: ToolRegistry,
    pub mode_ceiling: Option<Mode>,
    pub max_iterations: u32,
    pub caps: SubagentCaps,
}

impl Profile {
    /// The profile of each task, in order, once every agent they name is found and
    /// trusted: one bad or untrusted name runs nothing.
    pub(crate) async fn resolve_all(
        shared: &SessionShared,
        services: &Services,
        turn_id: &str,
        cancel: &CancellationToken,
        tasks: &[SubTask],
    ) -> Result<Vec<Profile>, String> {
        // An external ACP agent runs in the foreground only (`Plan`); here it is named by a
        // background task.
        let acp = &services.live().config.agents.acp;
        if let Some(name) = tasks
            .iter()
            .filter_map(|task| task.agent.as_deref())
            .find(|name| acp.contains_key(*name))
        {
            return Err(format!(
                "agent `{name}` is an external ACP agent: it runs as a foreground task only \
                 (without `background: true`)"
            ));
        }
        // Each profile comes from the version that was trusted.
        let agents = tasks
            .iter()
            .map(|task| {
                task.agent
                    .as_deref()
                    .map(|name| {
                        agents::find(&AgentDirs::new(Some(&shared.config_root)), name)
                            .map_err(|e| e.to_string())
                    })
                    .transpose()
            })
            .collect::<Result<Vec<_>, String>>()?;
        super::trust::ensure_agents_trusted(shared, services, turn_id, cancel, &agents).await?;
        agents
            .into_iter()
            .zip(tasks)
            .map(|(agent, task)| Profile::resolve(shared, services, agent, task))
            .collect()
    }

    fn resolve(
        shared: &SessionShared,
        services: &Services,
        agent: Option<agents::Agent>,
        task: &SubTask,
    ) -> Result<Profile, String> {
        let plain = subagent_prompt(&shared.workspace);
        let caps = services.live().config.agents.subagent_caps(&task.caps)?;
        // Within the session agent's allow-list, if it has one.
        let tools = shared.offered_tools(services.subagent_tools());
        let live = services.live();
        let max_iterations = live.config.agent.subagent_max_iterations;
        // A sub-agent whose agent names no model: `[agents] subagent_model`, else the
        // session's.
        let default_model = live
            .config
            .agents
            .subagent_model()
            .map_or_else(|| shared.model(), str::to_owned);
        let Some(agent) = agent else {
            return Ok(Profile {
                system_prompt: plain,
                model: default_model,
                provider: shared.provider(),
                tools,
                mode_ceiling: None,
                max_iterations,
                caps,
            });
        };
        let name = &agent.name;
        let definition = &agent.definition;
        let provider = match definition.provider.as_deref() {
            Some(wanted) => services
                .llm
                .selection(wanted)
                .map_err(|e| format!("agent `{name}` sets provider: {e}"))?,
            None => shared.provider(),
        };
        let model = match (&definition.model, &definition.provider) {
            (Some(model), _) => model.clone(),
            (None, Some(_)) => services.llm.default_model(provider.as_deref()),
            (None, None) => default_model,
        };
        let limits = AgentLimits::of(&agent);
        Ok(Profile {
            system_prompt: format!("{}\n\n{plain}", definition.prompt),
            model,
            provider,
            tools: limits.restrict(tools),
            mode_ceiling: definition.mode,
            max_iterations: limits.max_iterations(max_iterations),
            caps,
        })
    }
}

async fn run_one(
    shared: &SessionShared,
    services: &Services,
    turn_id: &str,
    task: SubTask,
    plan: Plan,
    parent_cancel: &CancellationToken,
) -> SubResult {
    // A later task of a serial run, or one a parallel run queued behind the others, starts
    // only while the budget lasts.
    if let Some(spent) = shared.refuses_requests() {
        return SubResult {
            ok: false,
            text: format!(
                "[sub-agent not started: {}: {}]",
                StopReason::BudgetExceeded.as_str(),
                spent.message
            ),
        };
    }
    let agent_id = format!("agent_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let label = task
        .description
        .clone()
        .unwrap_or_else(|| task.prompt.chars().take(80).collect());
    // A slot among the daemon's sub-agents first (`[agents] max_running`); a wait is told.
    let most = services.live().config.agents.max_running();
    let queued = || {
        let kind = EventKind::SubagentQueued {
            agent_id: agent_id.clone(),
            task: label.clone(),
        };
        shared.hub.publish_as(Some(turn_id), Some(&agent_id), kind);
    };
    let Some(_slot) = services
        .subagent_slots
        .enter(most, || background_running(services), parent_cancel, queued)
        .await
    else {
        return SubResult {
            ok: false,
            text: "[sub-agent not started: cancelled while it waited for a slot]".to_owned(),
        };
    };
    // Its caps, its wall clock included, count from here: waiting for a slot is not running.
    let budget = SubagentBudget::new(plan.caps());
    // Fires at the sub-agent's deadline too, so a hung tool call ends with it.
    let own_cancel = budget.cancel_token(parent_cancel);
    let cancel = &own_cancel;
    let publish = |kind: EventKind| shared.hub.publish_as(Some(turn_id), Some(&agent_id), kind);
    publish(EventKind::SubagentStarted {
        agent_id: agent_id.clone(),
        task: label.clone(),
    });
    let (reply, mut stop, mut error) = match plan {
        Plan::Loop(profile) => {
            run_loop(
                shared, services, turn_id, &agent_id, &task, profile, &budget, cancel,
            )
            .await
        }
        Plan::Acp {
            name,
            config,
            tools,
            ..
        } => {
            let end = super::acp_subagent::run_acp_task(
                shared,
                services,
                turn_id,
                &agent_id,
                (&name, &config),
                &task,
                tools,
                &budget,
                cancel,
            )
            .await;
            let error = end.error.map(|message| {
                let code = match end.stop {
                    StopReason::BudgetExceeded => agent::BUDGET_EXCEEDED,
                    _ => "acp_agent",
                };
                amber_proto::ErrorInfo::new(code, message)
            });
            (end.reply, end.stop, error)
        }
    };
    // Cut by its own deadline, not by the parent's cancel: the wall-clock cap stopped it.
    if stop == StopReason::Cancelled
        && !parent_cancel.is_cancelled()
        && let Some(spent) = budget.out_of_time()
    {
        stop = StopReason::BudgetExceeded;
        error = Some(amber_proto::ErrorInfo {
            limit: spent.limit,
            ..amber_proto::ErrorInfo::new(agent::BUDGET_EXCEEDED, spent.message)
        });
    }
    let limit = error.as_ref().and_then(|e| e.limit);
    let (ok, text) = match stop {
        StopReason::EndTurn => (true, reply),
        stop => {
            let cap = limit.map(|l| format!(" ({l})")).unwrap_or_default();
            let why = error
                .map(|e| format!(": {}", e.message))
                .unwrap_or_default();
            let partial = if reply.is_empty() {
                String::new()
            } else {
                format!("\nLast reply: {reply}")
            };
            (
                false,
                format!("[sub-agent stopped: {}{cap}{why}]{partial}", stop.as_str()),
            )
        }
    };
    publish(EventKind::SubagentCompleted {
        agent_id: agent_id.clone(),
        task: label,
        result: Some(text.clone()),
        stop_reason: Some(stop),
        limit,
    });
    SubResult { ok, text }
}

/// A sub-agent on the agent loop: its reply, how it stopped and why.
#[allow(clippy::too_many_arguments)]
async fn run_loop(
    shared: &SessionShared,
    services: &Services,
    turn_id: &str,
    agent_id: &str,
    task: &SubTask,
    profile: Profile,
    budget: &SubagentBudget,
    cancel: &CancellationToken,
) -> (String, StopReason, Option<amber_proto::ErrorInfo>) {
    let host = SubagentTurnHost {
        shared,
        turn_id,
        agent_id,
        budget,
        price: services
            .llm
            .price(profile.provider.as_deref(), &profile.model),
        gate: SessionGate {
            shared,
            services,
            turn_id,
            cancel,
            mode_ceiling: profile.mode_ceiling,
        },
    };

    let mut context = Context::new();
    // The session's head blocks (refreshed when the parent's turn began) after the
    // sub-agent's prompt: the same bytes for every sub-agent of one agent in the session.
    let head = shared.head.head(&profile.system_prompt);
    context.push(Message::system(profile.system_prompt));
    let llm = services.llm.client(profile.provider.as_deref());
    let compaction = services.compaction_for(profile.provider.as_deref());
    let live = services.live();
    let env = TurnEnv {
        session_id: &shared.id,
        llm: llm.as_ref().map_err(String::as_str),
        model: &profile.model,
        tools: &profile.tools,
        refresh_tools: None,
        session_tools: &shared.tools,
        head: &head,
        workspace: &shared.workspace,
        limits: &live.limits,
        max_iterations: profile.max_iterations,
        output_schema: None,
        confirm_finish: live.config.agent.confirm_finish,
        confirm_max_tokens: live.config.agent.confirm_max_tokens,
        compaction: &compaction,
        skills_dir: Some(&shared.skills_dir),
        cancel,
        host: &host,
    };
    let outcome = agent::run_turn(&mut context, &task.prompt, &env).await;
    let reply = context
        .messages()
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant && !m.content.trim().is_empty())
        .map(|m| m.content.clone())
        .unwrap_or_default();
    (reply, outcome.stop, outcome.error)
}

/// Background sub-agents running in the daemon (sessions with a parent, started, no result).
pub(crate) fn background_running(services: &Services) -> usize {
    services.directory.get().map_or(0, |directory| {
        directory
            .children(None)
            .iter()
            .filter(|info| {
                info.parent
                    .as_ref()
                    .is_some_and(amber_proto::ParentLink::running)
            })
            .count()
    })
}

/// The system prompt of every sub-agent: the same text for all, so serial sub-agents'
/// requests share a prefix and provider prompt caches stay warm.
pub(crate) fn subagent_prompt(workspace: &Path) -> String {
    format!(
        "You are a sub-agent of amber, a coding agent, working in the directory {ws}. You \
         were given one task by the main agent. Use the tools to do it; paths stay inside \
         {ws}. You cannot see the main conversation. When done, reply with a concise report \
         of what you found or changed: that reply is all the main agent receives.",
        ws = workspace.display()
    )
}

struct SubagentTurnHost<'a> {
    shared: &'a SessionShared,
    turn_id: &'a str,
    agent_id: &'a str,
    /// Its own caps.
    budget: &'a SubagentBudget,
    /// The sub-agent model's price (it may differ from the session's).
    price: Option<amber_llm::Price>,
    gate: SessionGate<'a>,
}

impl SubagentTurnHost<'_> {
    fn publish(&self, kind: EventKind) {
        self.shared
            .hub
            .publish_as(Some(self.turn_id), Some(self.agent_id), kind);
    }
}

impl TurnHost for SubagentTurnHost<'_> {
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
        self.gate.mode()
    }

    fn add_usage(&self, usage: &Usage, model: &str) -> Usage {
        self.budget.add(usage);
        self.shared.add_subagent_usage(usage, model)
    }

    fn price(&self) -> Option<amber_llm::Price> {
        self.price
    }

    /// The session's budget binds its sub-agents too: they spend from it. Then their own
    /// caps.
    fn budget_exceeded(&self) -> Option<Spent> {
        self.shared
            .refuses_requests()
            .or_else(|| self.budget.exceeded())
    }

    /// And their requests reserve it, alongside their siblings' and the parent's.
    fn reserve<'a>(
        &'a self,
        request: RequestMeta<'a>,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Reservation<'a>, Refusal>> {
        Box::pin(async move {
            let own = self.budget.reserve(request.estimate, cancel).await?;
            let session = self.shared.features.reserve(request, cancel).await?;
            Ok(Reservation::holding((own, session)))
        })
    }

    fn context_changed(&self, _context: &Context) {}

    fn gate(&self) -> &dyn Gate {
        &self.gate
    }
}
