//! Ending one turn as amber-cli says it: the `--json` result line, the denials summary,
//! the `--yes` refusal note, and the exit code. Following the turn's events is amber-client's
//! `turn::TurnTracker`. Pure: no I/O.

use amber_proto::{CostUsd, ErrorInfo, StopReason, Usage};
use serde::Serialize;
use serde_json::Value;

pub(crate) use amber_client::turn::{Denial, TurnTracker, yes_decision};

/// Exit codes of `amber-cli`.
pub(crate) mod exit {
    pub(crate) const OK: u8 = 0;
    pub(crate) const ERROR: u8 = 1;
    pub(crate) const USAGE: u8 = 2;
    pub(crate) const STOPPED: u8 = 3;
    /// The turn ended, but a tool call it made was denied (nobody could approve it, a
    /// person or `--yes` said no): the task may be unfinished.
    pub(crate) const DENIED: u8 = 4;
    /// The run never started: no daemon, no such session, the prompt refused.
    pub(crate) const NOT_STARTED: u8 = 5;
    /// `--timeout` ran out (as timeout(1) exits).
    pub(crate) const TIMED_OUT: u8 = 124;
    pub(crate) const CANCELLED: u8 = 130;
}

/// The exit code for how a turn ended.
pub(crate) fn exit_code(stop: StopReason, denied: bool) -> u8 {
    match stop {
        StopReason::EndTurn if denied => exit::DENIED,
        StopReason::EndTurn => exit::OK,
        StopReason::Error => exit::ERROR,
        StopReason::LoopDetected
        | StopReason::ToolFailures
        | StopReason::MaxIterations
        | StopReason::BudgetExceeded
        | StopReason::Refusal
        | StopReason::MaxTokens => exit::STOPPED,
        StopReason::Cancelled => exit::CANCELLED,
    }
}

/// Why `--yes` denied a request, for stderr.
pub(crate) fn yes_refusal(a: &amber_proto::Approval) -> String {
    if a.unsandboxed {
        "it would run without the OS sandbox, which --yes never approves (a `sandbox = false` rule allows it)".to_owned()
    } else {
        format!(
            "only a person may answer it, which --yes never does ({}); answer it in `amber` or at `amber-cli run` without --yes",
            a.reason
        )
    }
}

/// The first line of `amber-cli run --json`: what the run runs with, before any event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionStartedLine {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub schema_version: u32,
    /// This amber-cli's version.
    pub amber_version: &'static str,
    pub session_id: String,
    /// The session's name (`run --name`, or the name of the `--session` continued).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The session existed (`--session`) rather than being made for this run.
    pub resumed: bool,
    pub model: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    pub cwd: String,
    pub mode: amber_proto::Mode,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<amber_proto::SandboxInfo>,
    /// The tools the session's turns are offered, by name.
    pub tools: Vec<String>,
}

impl SessionStartedLine {
    pub(crate) fn new(info: &amber_proto::SessionInfo, resumed: bool, tools: Vec<String>) -> Self {
        SessionStartedLine {
            kind: "session_started",
            schema_version: 1,
            amber_version: env!("CARGO_PKG_VERSION"),
            session_id: info.session_id.clone(),
            name: info.name.clone(),
            resumed,
            model: info.model.clone(),
            provider: info.provider.clone(),
            agent: info.agent.clone(),
            cwd: info.cwd.clone(),
            mode: info.mode,
            sandbox: info.sandbox,
            tools,
        }
    }
}

/// The last line of `amber-cli run --json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResultLine {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub schema_version: u32,
    pub session_id: String,
    pub turn_id: String,
    pub stop_reason: &'static str,
    pub text: String,
    pub usage: Usage,
    pub duration_ms: u64,
    /// The model's replies the turn showed (text or tool calls).
    pub num_turns: u32,
    /// Model requests the turn made, the silent confirm exchange and compaction included.
    pub num_requests: u32,
    pub permission_denials: Vec<Denial>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    /// The final answer parsed and valid against `--output-schema` (`turn_completed.output`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// What the turn cost (`turn_completed.costUsd`); absent when the model's price is
    /// unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<CostUsd>,
    /// The session's total cost after the turn (`turn_completed.sessionCostUsd`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_cost_usd: Option<CostUsd>,
    /// The part of `usage` the silent confirm exchange spent (`turn_completed.confirmUsage`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirm_usage: Option<Usage>,
    /// What the turn's commands reached through the egress proxy; absent when they made no
    /// connection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkSummary>,
}

/// The connections of a turn's commands through the egress proxy, summed up.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NetworkSummary {
    pub allowed: u32,
    pub denied: u32,
    pub failed: u32,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// The denied and failed connections (the first [`NetworkSummary::MAX_REFUSED`]).
    pub refused: Vec<amber_proto::NetworkConnection>,
}

impl NetworkSummary {
    pub(crate) const MAX_REFUSED: usize = 20;

    /// `None` when there was no connection.
    pub(crate) fn of(connections: &[amber_proto::NetworkConnection]) -> Option<Self> {
        use amber_proto::ConnectionVerdict;
        if connections.is_empty() {
            return None;
        }
        let count = |verdict: ConnectionVerdict| {
            let n = connections.iter().filter(|c| c.verdict == verdict).count();
            u32::try_from(n).unwrap_or(u32::MAX)
        };
        Some(NetworkSummary {
            allowed: count(ConnectionVerdict::Allowed),
            denied: count(ConnectionVerdict::Denied),
            failed: count(ConnectionVerdict::Failed),
            bytes_sent: connections.iter().map(|c| c.bytes_sent).sum(),
            bytes_received: connections.iter().map(|c| c.bytes_received).sum(),
            refused: connections
                .iter()
                .filter(|c| c.verdict != ConnectionVerdict::Allowed)
                .take(Self::MAX_REFUSED)
                .cloned()
                .collect(),
        })
    }

    /// The closing stderr line of a human run whose commands had connections refused.
    pub(crate) fn refusals_line(&self) -> Option<String> {
        if self.refused.is_empty() {
            return None;
        }
        let hosts: Vec<String> = self
            .refused
            .iter()
            .map(|c| format!("{}:{}", c.host, c.port))
            .collect();
        Some(format!(
            "network: {} connection(s) allowed, {} refused or failed: {}",
            self.allowed,
            self.denied + self.failed,
            hosts.join(", ")
        ))
    }
}

impl ResultLine {
    /// The result line of a run that failed before its turn began (no such session, no
    /// daemon, …): `code` is the daemon's JSON-RPC code, or `client`.
    pub(crate) fn not_started(
        session_id: &str,
        duration_ms: u64,
        code: String,
        message: String,
    ) -> Self {
        ResultLine {
            kind: "result",
            schema_version: 1,
            session_id: session_id.to_owned(),
            turn_id: String::new(),
            stop_reason: StopReason::Error.as_str(),
            text: String::new(),
            usage: Usage::default(),
            duration_ms,
            num_turns: 0,
            num_requests: 0,
            permission_denials: Vec::new(),
            error: Some(ErrorInfo::new(code, message)),
            output: None,
            cost_usd: None,
            session_cost_usd: None,
            confirm_usage: None,
            network: None,
        }
    }
}

impl ResultLine {
    /// The result line of `wait` on a session that has had no turn: nothing ran, nothing
    /// failed (`turnId` empty, stopReason `end_turn`).
    pub(crate) fn no_turn(session_id: &str) -> Self {
        let mut line = Self::not_started(session_id, 0, String::new(), String::new());
        line.stop_reason = StopReason::EndTurn.as_str();
        line.error = None;
        line
    }
}

impl ResultLine {
    /// The result line of a turn followed by `tracker`, once it completed; a client-side
    /// failure otherwise.
    pub(crate) fn of(tracker: &TurnTracker, session_id: &str, duration_ms: u64) -> Self {
        let completion = tracker.completion();
        let (cost_usd, session_cost_usd, confirm_usage) = completion
            .map_or((None, None, None), |c| {
                (c.cost_usd, c.session_cost_usd, c.confirm_usage)
            });
        let (stop, error, usage, output) = match completion {
            Some(c) => (c.stop_reason, c.error.clone(), c.usage, c.output.clone()),
            None => (
                StopReason::Error,
                Some(ErrorInfo::new("incomplete", "the turn did not complete")),
                Usage::default(),
                None,
            ),
        };
        ResultLine {
            kind: "result",
            schema_version: 1,
            session_id: session_id.to_owned(),
            turn_id: tracker.turn_id().to_owned(),
            stop_reason: stop.as_str(),
            text: tracker.text().to_owned(),
            usage,
            duration_ms,
            num_turns: tracker.replies(),
            num_requests: tracker.requests(),
            permission_denials: tracker.denials().to_vec(),
            error,
            output,
            cost_usd,
            session_cost_usd,
            confirm_usage,
            network: NetworkSummary::of(tracker.network()),
        }
    }

    /// The result line for a run that failed on the client side (connection lost, ...).
    pub(crate) fn failed(
        tracker: &TurnTracker,
        session_id: &str,
        duration_ms: u64,
        message: String,
    ) -> Self {
        let mut line = Self::of(tracker, session_id, duration_ms);
        line.stop_reason = StopReason::Error.as_str();
        line.error = Some(ErrorInfo::new("client", message));
        line
    }
}

/// The closing stderr line of a human run whose tool calls were denied.
pub(crate) fn denials_summary(denials: &[Denial]) -> Option<String> {
    if denials.is_empty() {
        return None;
    }
    let list: Vec<String> = denials
        .iter()
        .map(|d| format!("{} ({})", d.tool, first_line(&d.reason)))
        .collect();
    Some(format!(
        "{} tool call{} denied: {}",
        denials.len(),
        if denials.len() == 1 { " was" } else { "s were" },
        list.join("; ")
    ))
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_proto::Event;
    use serde_json::json;

    fn ev(turn: &str, body: Value) -> Event {
        let mut v = json!({"sessionId": "s1", "turnId": turn, "time": "2026-01-01T00:00:00Z"});
        v.as_object_mut()
            .unwrap()
            .extend(body.as_object().unwrap().clone());
        serde_json::from_value(v).unwrap()
    }

    fn turn_events() -> Vec<Event> {
        vec![
            ev(
                "t1",
                json!({"seq": 1, "type": "turn_started", "prompt": "go"}),
            ),
            ev(
                "t1",
                json!({"type": "message_delta", "itemId": "m1", "delta": "Look"}),
            ),
            ev(
                "t1",
                json!({"seq": 2, "type": "message_completed", "itemId": "m1", "role": "assistant", "text": "Looking."}),
            ),
            ev(
                "t1",
                json!({"seq": 3, "type": "tool_call_started", "itemId": "m1", "callId": "c1", "name": "bash", "arguments": {"command": "rm -rf /"}}),
            ),
            ev(
                "t1",
                json!({"seq": 4, "type": "approval_requested", "requestId": "r1", "callId": "c1", "tool": "bash", "arguments": {"command": "rm -rf /"}, "reason": "destructive command", "scope": "command"}),
            ),
            ev(
                "t1",
                json!({"seq": 5, "type": "approval_resolved", "requestId": "r1", "decision": "deny", "by": "no_approver"}),
            ),
            ev(
                "t1",
                json!({"seq": 6, "type": "tool_call_completed", "callId": "c1", "status": "denied", "output": "denied: no approver", "durationMs": 0}),
            ),
            ev(
                "t1",
                json!({"seq": 7, "type": "tool_call_started", "itemId": "m2", "callId": "c2", "name": "write", "arguments": {"path": "a", "content": "x"}}),
            ),
            ev(
                "t1",
                json!({"seq": 8, "type": "tool_call_completed", "callId": "c2", "status": "denied", "output": "read mode", "durationMs": 0}),
            ),
            // The model's own mistakes, refused by dispatch: not permission denials.
            ev(
                "t1",
                json!({"seq": 8, "type": "tool_call_completed", "callId": "c8", "status": "denied", "output": "duplicate of a call made in the previous turn: `read` with the same arguments; use its result instead of repeating it", "durationMs": 0}),
            ),
            ev(
                "t1",
                json!({"seq": 8, "type": "tool_call_completed", "callId": "c9", "status": "denied", "output": "unknown tool `frobnicate`; available: read", "durationMs": 0}),
            ),
            ev(
                "t1",
                json!({"seq": 9, "type": "tool_call_started", "itemId": "m2", "callId": "c3", "name": "read", "arguments": {"path": "a"}}),
            ),
            ev(
                "t1",
                json!({"seq": 10, "type": "tool_call_completed", "callId": "c3", "status": "ok", "output": "1 x", "durationMs": 3}),
            ),
            ev(
                "t2",
                json!({"seq": 11, "type": "message_completed", "itemId": "m9", "role": "assistant", "text": "other turn"}),
            ),
            ev(
                "t1",
                json!({"seq": 12, "type": "message_completed", "itemId": "m3", "role": "assistant", "text": "Done."}),
            ),
            ev(
                "t1",
                json!({"seq": 13, "type": "turn_completed", "stopReason": "end_turn", "usage": {"promptTokens": 10, "completionTokens": 5, "cachedTokens": 0, "totalTokens": 15}}),
            ),
        ]
    }

    #[test]
    fn result_line_from_a_turn() {
        let mut t = TurnTracker::new("t1");
        for e in turn_events() {
            t.observe(&e);
        }
        assert_eq!(t.completion().unwrap().stop_reason, StopReason::EndTurn);
        let line = serde_json::to_value(ResultLine::of(&t, "s1", 42)).unwrap();
        assert_eq!(
            line,
            json!({
                "type": "result", "schemaVersion": 1, "sessionId": "s1", "turnId": "t1",
                "stopReason": "end_turn", "text": "Done.",
                "usage": {"promptTokens": 10, "completionTokens": 5, "cachedTokens": 0, "totalTokens": 15},
                "durationMs": 42, "numTurns": 3, "numRequests": 0,
                "permissionDenials": [
                    {"callId": "c1", "tool": "bash", "arguments": {"command": "rm -rf /"}, "reason": "destructive command", "output": "denied: no approver"},
                    {"callId": "c2", "tool": "write", "arguments": {"path": "a", "content": "x"}, "reason": "read mode", "output": "read mode"},
                ],
            })
        );
        // `type` leads the line.
        let text = serde_json::to_string(&ResultLine::of(&t, "s1", 42)).unwrap();
        assert!(
            text.starts_with(r#"{"type":"result","schemaVersion":1,"sessionId":"s1""#),
            "{text}"
        );
    }

    #[test]
    fn incomplete_and_failed_turns_are_errors() {
        let mut t = TurnTracker::new("t1");
        t.observe(&turn_events()[0]);
        assert!(t.completion().is_none());
        let line = ResultLine::of(&t, "s1", 1);
        assert_eq!(line.stop_reason, "error");
        let failed = ResultLine::failed(&t, "s1", 1, "connection lost".into());
        assert_eq!(failed.error.unwrap().message, "connection lost");
    }

    #[test]
    fn error_stops_carry_the_error() {
        let mut t = TurnTracker::new("t1");
        t.observe(&ev("t1", json!({"seq": 1, "type": "turn_completed", "stopReason": "error", "error": {"code": "api", "message": "502 from provider"}, "usage": {}})));
        let line = serde_json::to_value(ResultLine::of(&t, "s1", 5)).unwrap();
        assert_eq!(line["stopReason"], "error");
        assert_eq!(
            line["error"],
            json!({"code": "api", "message": "502 from provider"})
        );
    }

    #[test]
    fn a_run_that_never_started_still_has_a_result_line() {
        let line = serde_json::to_value(ResultLine::not_started(
            "nope",
            3,
            "-32001".into(),
            "session not found".into(),
        ))
        .unwrap();
        assert_eq!(line["type"], "result");
        assert_eq!(line["stopReason"], "error");
        assert_eq!(line["sessionId"], "nope");
        assert_eq!(
            line["error"],
            json!({"code": "-32001", "message": "session not found"})
        );
        assert_eq!(line["permissionDenials"], json!([]));
    }

    #[test]
    fn denials_are_summed_up_in_one_line() {
        assert_eq!(denials_summary(&[]), None);
        let denial = |tool: &str, reason: &str| Denial {
            call_id: "c".into(),
            tool: tool.into(),
            arguments: Value::Null,
            reason: reason.into(),
            output: String::new(),
        };
        let one = denials_summary(&[denial("write", "read mode\nmore")]).unwrap();
        assert_eq!(one, "1 tool call was denied: write (read mode)");
        let two = denials_summary(&[denial("write", "a"), denial("bash", "b")]).unwrap();
        assert_eq!(two, "2 tool calls were denied: write (a); bash (b)");
    }

    #[test]
    fn the_result_line_carries_the_turns_output() {
        let mut t = TurnTracker::new("t1");
        t.observe(&ev("t1", json!({"seq": 1, "type": "turn_completed", "stopReason": "end_turn", "usage": {}, "output": {"ok": true}})));
        let line = serde_json::to_value(ResultLine::of(&t, "s1", 5)).unwrap();
        assert_eq!(line["output"], json!({"ok": true}));
        let mut t = TurnTracker::new("t2");
        t.observe(&ev(
            "t2",
            json!({"seq": 1, "type": "turn_completed", "stopReason": "end_turn", "usage": {}}),
        ));
        let line = serde_json::to_value(ResultLine::of(&t, "s1", 5)).unwrap();
        assert!(line.get("output").is_none(), "{line}");
    }

    #[test]
    fn exit_codes() {
        let table = [
            (StopReason::EndTurn, false, 0),
            (StopReason::EndTurn, true, 4),
            (StopReason::Error, false, 1),
            (StopReason::Error, true, 1),
            (StopReason::LoopDetected, false, 3),
            (StopReason::ToolFailures, true, 3),
            (StopReason::MaxIterations, false, 3),
            (StopReason::BudgetExceeded, false, 3),
            (StopReason::Refusal, false, 3),
            (StopReason::MaxTokens, false, 3),
            (StopReason::Cancelled, true, 130),
        ];
        for (stop, denied, code) in table {
            assert_eq!(exit_code(stop, denied), code, "{stop:?}, denied {denied}");
        }
    }
}
