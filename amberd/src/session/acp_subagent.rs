//! A `task` whose agent is an external ACP agent (`[agents.acp.NAME]`): the session's side
//! of [`crate::acp::run`]. Its events are the sub-agent's (tagged with its `agentId`), its
//! permission asks are approvals of the session, its file reads pass the session's policy
//! for `read` and its writes run as the session's `write` tool (mode, rules, approvals,
//! the turn's checkpoint), and what it reports spending counts to the session and to its
//! caps.
//!
//! **Invariants:** an agent that does not report its cost (`reports_cost`) never starts
//! under a dollar cap, the session's or its own (the ledger refuses it as unpriced); a
//! permission ask of an unsandboxed agent is for a person only (`--yes` never answers it).

use std::sync::atomic::{AtomicU64, Ordering};

use amber_proto::{Approval, Decision, EventKind, Mode, ToolCall, ToolStatus, Usage};
use amber_tools::ToolRegistry;
use amber_tools::dispatch::{DispatchEvent, DispatchRequest, dispatch};
use amber_tools::gate::{Gate, GateCall, GateVerdict};
use amber_tools::session::SubTask;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::SessionShared;
use super::gate::{Answer, SessionGate, request_approval};
use super::services::Services;
use super::subagent_budget::SubagentBudget;
use crate::acp::{AcpAgentConfig, AcpHost, PermissionAnswer, PermissionAsk};
use crate::agent::metered::{Refusal, RequestEstimate};

/// Largest file an agent may read through amber (its own reads are its business).
const MAX_READ_BYTES: u64 = 16 * 1024 * 1024;

/// How an ACP agent's task ended.
pub(crate) struct AcpEnd {
    pub stop: amber_proto::StopReason,
    pub error: Option<String>,
    pub reply: String,
}

/// Runs `task` on the ACP agent `name`.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_acp_task(
    shared: &SessionShared,
    services: &Services,
    turn_id: &str,
    agent_id: &str,
    (name, config): (&str, &AcpAgentConfig),
    task: &SubTask,
    tools: ToolRegistry,
    budget: &SubagentBudget,
    cancel: &CancellationToken,
) -> AcpEnd {
    let model = format!("acp:{name}");
    if let Err(reason) = admit(shared, budget, config, &model, cancel).await {
        return AcpEnd {
            stop: amber_proto::StopReason::BudgetExceeded,
            error: Some(reason),
            reply: String::new(),
        };
    }
    let host = SessionAcpHost {
        shared,
        services,
        turn_id,
        agent_id,
        agent: name,
        model,
        budget,
        tools,
        gate: SessionGate {
            shared,
            services,
            turn_id,
            cancel,
            mode_ceiling: None,
        },
        cancel,
        calls: AtomicU64::new(0),
    };
    let outcome = crate::acp::run(
        name,
        config,
        &services.sandbox,
        &shared.workspace,
        &task.prompt,
        &host,
        cancel,
    )
    .await;
    AcpEnd {
        stop: outcome.stop,
        error: outcome.error,
        reply: outcome.reply,
    }
}

/// Whether the agent may start under the budgets in force: the session's and its own caps
/// are asked as for a model request, priced when the agent reports its cost.
async fn admit(
    shared: &SessionShared,
    budget: &SubagentBudget,
    config: &AcpAgentConfig,
    model: &str,
    cancel: &CancellationToken,
) -> Result<(), String> {
    let estimate = RequestEstimate {
        tokens: 0,
        cost: config.reports_cost.then_some(amber_proto::CostUsd::ZERO),
    };
    let refused = |refusal: Refusal| match refusal {
        Refusal::BudgetExceeded(spent) => spent.message,
        Refusal::Unpriced => format!(
            "the ACP agent `{}` does not report its cost (`reports_cost` in its table), so it \
             cannot run under a budget in dollars",
            model.trim_start_matches("acp:")
        ),
        Refusal::Cancelled => "cancelled".to_owned(),
    };
    budget.reserve(estimate, cancel).await.map_err(refused)?;
    let meta = crate::agent::metered::RequestMeta { estimate, model };
    shared
        .features
        .reserve(meta, cancel)
        .await
        .map(drop)
        .map_err(refused)
}

struct SessionAcpHost<'a> {
    shared: &'a SessionShared,
    services: &'a Services,
    turn_id: &'a str,
    agent_id: &'a str,
    agent: &'a str,
    /// `acp:NAME`, the model its usage is booked under.
    model: String,
    budget: &'a SubagentBudget,
    /// The sub-agent's tools: its file access runs as these.
    tools: ToolRegistry,
    gate: SessionGate<'a>,
    cancel: &'a CancellationToken,
    calls: AtomicU64,
}

impl SessionAcpHost<'_> {
    fn next_call_id(&self, what: &str) -> String {
        let n = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        format!(
            "acp_{}_{what}{n}_{}",
            self.agent,
            &self.agent_id[6.min(self.agent_id.len())..]
        )
    }
}

impl AcpHost for SessionAcpHost<'_> {
    fn publish(&self, kind: EventKind) {
        self.shared
            .hub
            .publish_as(Some(self.turn_id), Some(self.agent_id), kind);
    }

    fn mode(&self) -> Mode {
        self.gate.mode()
    }

    fn ask(&self, ask: PermissionAsk) -> BoxFuture<'_, PermissionAnswer> {
        Box::pin(async move {
            let arguments = match ask.raw_input {
                Value::Null => json!({"title": ask.title}),
                input => input,
            };
            let approval = Approval {
                request_id: format!("apr_{}", uuid::Uuid::new_v4().simple()),
                call_id: ask.call_id,
                tool: ask.tool,
                arguments,
                reason: format!("ACP agent `{}` asks: {}", self.agent, ask.title),
                scope: "this agent's task".to_owned(),
                unsandboxed: ask.unsandboxed,
                person_only: ask.unsandboxed,
                mcp: None,
            };
            let answer = request_approval(
                self.shared,
                self.services,
                self.turn_id,
                self.cancel,
                approval,
                false,
            )
            .await;
            match answer {
                Answer::Decided(Decision::AllowOnce) => PermissionAnswer::AllowOnce,
                Answer::Decided(Decision::AllowSession | Decision::AllowAlways) => {
                    PermissionAnswer::AllowAlways
                }
                Answer::Decided(Decision::Deny) | Answer::NoApprover | Answer::ApproverLeft => {
                    PermissionAnswer::Reject
                }
                Answer::Cancelled => PermissionAnswer::Cancelled,
            }
        })
    }

    fn read_text<'a>(
        &'a self,
        path: &'a str,
        line: Option<u64>,
        limit: Option<u64>,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let Some(tool) = self.tools.get("read") else {
                return Err(format!(
                    "reading files is not among this sub-agent's tools (ACP agent `{}`)",
                    self.agent
                ));
            };
            let args = json!({"path": path});
            let call = ToolCall {
                id: self.next_call_id("read"),
                name: "read".to_owned(),
                arguments: args.to_string(),
            };
            let verdict = self
                .gate
                .check(GateCall {
                    call: &call,
                    tool: tool.as_ref(),
                    args: &args,
                })
                .await;
            if let GateVerdict::Deny(reason) = verdict {
                return Err(reason);
            }
            let resolved =
                amber_policy::confine(&self.shared.workspace, path).map_err(|e| e.to_string())?;
            tokio::task::spawn_blocking(move || read_lines(&resolved, line, limit))
                .await
                .map_err(|e| format!("read failed: {e}"))?
        })
    }

    fn write_text<'a>(
        &'a self,
        path: &'a str,
        content: &'a str,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let call = ToolCall {
                id: self.next_call_id("write"),
                name: "write".to_owned(),
                arguments: json!({"path": path, "content": content}).to_string(),
            };
            let live = self.services.live();
            let publish =
                |event: DispatchEvent| self.publish(crate::agent::dispatch_event_kind(event));
            let results = dispatch(DispatchRequest {
                registry: &self.tools,
                calls: std::slice::from_ref(&call),
                previous_calls: &[],
                gate: &self.gate,
                session: &self.shared.tools,
                workspace: &self.shared.workspace,
                cancel: self.cancel,
                limits: &live.limits,
                events: &publish,
            })
            .await;
            let Some(result) = results.into_iter().next() else {
                return Err("the write did not run".to_owned());
            };
            match result.status {
                ToolStatus::Ok => Ok(()),
                _ => {
                    let envelope: Value =
                        serde_json::from_str(&result.envelope).unwrap_or(Value::Null);
                    Err(envelope
                        .get("output")
                        .and_then(Value::as_str)
                        .unwrap_or("the write failed")
                        .to_owned())
                }
            }
        })
    }

    fn spent(&self, usage: &Usage) -> Option<String> {
        self.budget.add(usage);
        let total = self.shared.add_subagent_usage(usage, &self.model);
        self.publish(EventKind::usage_of(*usage, total, None));
        self.shared
            .refuses_requests()
            .or_else(|| self.budget.exceeded())
            .map(|spent| spent.message)
    }
}

/// The text of `path`, from 1-based `line` for `limit` lines (ACP's `fs/read_text_file`).
fn read_lines(
    path: &std::path::Path,
    line: Option<u64>,
    limit: Option<u64>,
) -> Result<String, String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    if meta.is_dir() {
        return Err(format!("{shown} is a directory"));
    }
    if meta.len() > MAX_READ_BYTES {
        return Err(format!(
            "{shown} is {} bytes; amber reads at most {MAX_READ_BYTES} for an agent",
            meta.len()
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|_| format!("{shown} is not UTF-8 text"))?;
    if line.is_none() && limit.is_none() {
        return Ok(text);
    }
    let skip = usize::try_from(line.unwrap_or(1).max(1) - 1).unwrap_or(usize::MAX);
    let take = limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
    Ok(text.split_inclusive('\n').skip(skip).take(take).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_take_the_lines_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f.txt");
        std::fs::write(&file, "one\ntwo\nthree\n").unwrap();
        let cases = [
            (None, None, "one\ntwo\nthree\n"),
            (Some(2), None, "two\nthree\n"),
            (Some(2), Some(1), "two\n"),
            (None, Some(1), "one\n"),
            (Some(9), None, ""),
        ];
        for (line, limit, want) in cases {
            assert_eq!(
                read_lines(&file, line, limit).unwrap(),
                want,
                "{line:?} {limit:?}"
            );
        }
        assert!(
            read_lines(dir.path(), None, None)
                .unwrap_err()
                .contains("directory")
        );
        std::fs::write(&file, [0xff, 0xfe]).unwrap();
        assert!(read_lines(&file, None, None).unwrap_err().contains("UTF-8"));
    }
}
