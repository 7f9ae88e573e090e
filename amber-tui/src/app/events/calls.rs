//! Tool calls and what hangs off them: their output, the approvals they ask for, and the
//! sub-agents a `task` call starts.

use amber_proto::{Approval, Decision, ResolvedBy, ToolStatus};
use serde_json::Value;

use crate::app::{Action, App};
use crate::transcript::{Cell, ToolCell, tool};

impl App {
    pub(super) fn tool_call_started(
        &mut self,
        call_id: String,
        name: String,
        arguments: Value,
        agent: Option<String>,
    ) {
        self.finish_reasoning();
        let call = ToolCell::new(call_id.clone(), name, arguments, agent);
        let idx = self.transcript.push(Cell::Tool(call));
        self.transcript.calls.insert(call_id, idx);
    }

    pub(super) fn tool_output_delta(&mut self, call_id: &str, chunk: &str) {
        if let Some(&idx) = self.transcript.calls.get(call_id)
            && let Some(Cell::Tool(t)) = self.transcript.cell_mut(idx)
            && t.status.is_none()
        {
            t.output.push_str(chunk);
        }
    }

    pub(super) fn tool_call_completed(
        &mut self,
        call_id: &str,
        status: ToolStatus,
        output: String,
        duration_ms: u64,
        diff: Option<String>,
    ) {
        let mut process = false;
        if let Some(&idx) = self.transcript.calls.get(call_id)
            && let Some(Cell::Tool(t)) = self.transcript.cell_mut(idx)
        {
            t.status = Some(status);
            t.output = output;
            t.duration_ms = Some(duration_ms);
            t.diff = diff;
            process = t.name == "process";
        }
        self.hide_task_output_shown_by_subagents(call_id);
        if process {
            // The processes panel and status segment change with it.
            self.request(Action::RefreshStatus);
            self.refresh_panel();
        }
    }

    /// A `task` call's output is its sub-agents' results, each already in a sub-agent cell
    /// after the call's cell: the tool cell then shows only its header.
    fn hide_task_output_shown_by_subagents(&mut self, call_id: &str) {
        let Some(&idx) = self.transcript.calls.get(call_id) else {
            return;
        };
        let finished_task = matches!(
            self.transcript.get(idx).map(|slot| &slot.cell),
            Some(Cell::Tool(t)) if t.name == "task" && t.status == Some(ToolStatus::Ok)
        );
        if !finished_task {
            return;
        }
        let results_shown = self.transcript.cells().skip(idx + 1).any(|c| {
            matches!(c, Cell::Subagent { done: true, result: Some(r), .. } if !r.trim().is_empty())
        });
        if results_shown && let Some(Cell::Tool(t)) = self.transcript.cell_mut(idx) {
            t.output_elsewhere = true;
        }
    }

    pub(super) fn approval_requested(&mut self, approval: Approval) {
        let cell = Cell::Approval {
            tool: approval.tool.clone(),
            summary: tool::summary(&approval.tool, &approval.arguments),
            reason: approval.reason.clone(),
            scope: approval.scope.clone(),
            outcome: None,
        };
        let idx = self.transcript.push(cell);
        self.transcript
            .requests
            .insert(approval.request_id.clone(), idx);
        if !self
            .approvals
            .iter()
            .any(|a| a.request_id == approval.request_id)
        {
            self.approvals.push_back(approval);
        }
    }

    /// Answered (here, by another client, or by a rule): the overlay drops it and its cell
    /// says how it went.
    pub(super) fn approval_resolved(
        &mut self,
        request_id: &str,
        decision: Decision,
        by: ResolvedBy,
    ) {
        self.approvals.retain(|a| a.request_id != request_id);
        if let Some(&idx) = self.transcript.requests.get(request_id)
            && let Some(Cell::Approval { outcome, .. }) = self.transcript.cell_mut(idx)
        {
            *outcome = Some(format!(
                "{} ({})",
                decision_words(decision),
                resolver_words(by)
            ));
        }
    }

    /// Two cells per sub-agent: the start where the work begins (its tool calls follow), the
    /// result where it ends.
    pub(super) fn subagent(
        &mut self,
        agent_id: String,
        task: String,
        result: Option<String>,
        done: bool,
    ) {
        self.transcript.push(Cell::Subagent {
            agent_id,
            task,
            result,
            done,
        });
    }
}

/// The decision as the approval cell spells it (the wire name, spaced; the cell's colour
/// keys on the `deny` prefix).
fn decision_words(decision: Decision) -> &'static str {
    match decision {
        Decision::AllowOnce => "allow once",
        Decision::AllowSession => "allow session",
        Decision::AllowAlways => "allow always",
        Decision::Deny => "deny",
    }
}

fn resolver_words(by: ResolvedBy) -> &'static str {
    match by {
        ResolvedBy::Client => "client",
        ResolvedBy::Rule => "rule",
        ResolvedBy::Policy => "policy",
        ResolvedBy::NoApprover => "no approver",
    }
}
