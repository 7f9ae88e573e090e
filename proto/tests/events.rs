//! Every event type inside the `Event` envelope, as PROTOCOL.md's "Events" table writes it:
//! round trips, `type_name()` against the serialized `type`, durable/live classification
//! against the table's "durable" column, and the `session/event` notification shape.

use std::collections::BTreeSet;

use crate::common::{Check, rt, run_table};
use amber_proto::{CostUsd, Event, EventKind, McpStatus, StopReason, Usage, UsagePurpose, methods};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// PROTOCOL.md's event table: type and its "durable" column.
const PROTOCOL_EVENTS: &[(&str, bool)] = &[
    ("turn_started", true),
    ("message_delta", false),
    ("reasoning_delta", false),
    ("message_completed", true),
    ("tool_call_started", true),
    ("tool_output_delta", false),
    ("tool_call_completed", true),
    ("approval_requested", true),
    ("approval_resolved", true),
    ("steer", true),
    ("compaction_started", true),
    ("compaction_completed", true),
    ("compaction_failed", true),
    ("usage", true),
    ("todo_updated", true),
    ("subagent_started", true),
    ("subagent_completed", true),
    ("mcp_status", true),
    ("turn_completed", true),
    ("error", true),
    // PROTOCOL.md's second-wave table.
    ("prompt_queued", true),
    ("rewound", true),
    ("hook_failed", true),
];

/// amber's own event types beyond the table, with their durability.
const EXTENSION_EVENTS: &[(&str, bool)] = &[
    ("synced", false),
    ("retrying", false),
    ("environment_connected", true),
    ("environment_lost", true),
    ("environment_resumed", true),
    ("fleet_changed", true),
    ("fleet_setup", true),
    ("fleet_pushed", true),
    ("message_sent", true),
    ("message_received", true),
    ("goal_set", true),
    ("goal_check", true),
    ("goal_met", true),
    ("budget_warning", true),
    ("subagent_queued", true),
    ("routine_finished", true),
    ("network_connection", true),
];

/// Exhaustive on purpose: a new variant does not compile until it gets a row below.
fn variant_index(kind: &EventKind) -> usize {
    match kind {
        EventKind::TurnStarted { .. } => 0,
        EventKind::MessageDelta { .. } => 1,
        EventKind::ReasoningDelta { .. } => 2,
        EventKind::MessageCompleted { .. } => 3,
        EventKind::ToolCallStarted { .. } => 4,
        EventKind::ToolOutputDelta { .. } => 5,
        EventKind::ToolCallCompleted { .. } => 6,
        EventKind::ApprovalRequested(_) => 7,
        EventKind::ApprovalResolved { .. } => 8,
        EventKind::Steer { .. } => 9,
        EventKind::CompactionStarted { .. } => 10,
        EventKind::CompactionCompleted { .. } => 11,
        EventKind::CompactionFailed { .. } => 12,
        EventKind::Usage { .. } => 13,
        EventKind::TodoUpdated { .. } => 14,
        EventKind::SubagentStarted { .. } => 15,
        EventKind::SubagentCompleted { .. } => 16,
        EventKind::McpStatus(_) => 17,
        EventKind::TurnCompleted { .. } => 18,
        EventKind::Error { .. } => 19,
        EventKind::Synced { .. } => 20,
        EventKind::Retrying { .. } => 21,
        EventKind::PromptQueued { .. } => 22,
        EventKind::Rewound { .. } => 23,
        EventKind::HookFailed { .. } => 24,
        EventKind::EnvironmentConnected { .. } => 25,
        EventKind::EnvironmentLost { .. } => 26,
        EventKind::EnvironmentResumed { .. } => 27,
        EventKind::FleetChanged { .. } => 28,
        EventKind::FleetSetup { .. } => 29,
        EventKind::FleetPushed { .. } => 30,
        EventKind::MessageSent { .. } => 31,
        EventKind::MessageReceived { .. } => 32,
        EventKind::GoalSet { .. } => 33,
        EventKind::GoalCheck { .. } => 34,
        EventKind::GoalMet { .. } => 35,
        EventKind::BudgetWarning { .. } => 37,
        EventKind::SubagentQueued { .. } => 38,
        EventKind::RoutineFinished { .. } => 36,
        EventKind::NetworkConnection(_) => 39,
    }
}
const VARIANTS: usize = 40;

const T: &str = "2025-01-02T03:04:05.678Z";

fn usage(p: u64, c: u64) -> Value {
    json!({"promptTokens": p, "completionTokens": c, "cachedTokens": 0, "totalTokens": p + c})
}

/// A `Usage` with a cost (amber extension `costUsd`).
fn priced(p: u64, c: u64, cost: f64) -> Value {
    let mut u = usage(p, c);
    u["costUsd"] = json!(cost);
    u
}

/// A durable event: envelope with `seq` and `turnId`, then the type's fields.
fn durable(seq: u64, kind: Value) -> Value {
    envelope(
        json!({"seq": seq, "sessionId": "s_01", "turnId": "t_1", "time": T}),
        kind,
    )
}

/// A live event: no `seq`.
fn live(kind: Value) -> Value {
    envelope(
        json!({"sessionId": "s_01", "turnId": "t_1", "time": T}),
        kind,
    )
}

fn envelope(mut head: Value, kind: Value) -> Value {
    let obj = head.as_object_mut().unwrap();
    for (k, v) in kind.as_object().unwrap() {
        obj.insert(k.clone(), v.clone());
    }
    head
}

/// Every event type, at least once, as a whole `Event`.
fn event_cases() -> Vec<Value> {
    vec![
        durable(
            1,
            json!({"type": "turn_started", "prompt": "run the tests"}),
        ),
        live(json!({"type": "message_delta", "itemId": "i_1", "delta": "Hel"})),
        live(json!({"type": "reasoning_delta", "itemId": "i_0", "delta": "thinking"})),
        durable(
            2,
            json!({"type": "message_completed", "itemId": "i_1", "role": "assistant", "text": "Hello"}),
        ),
        durable(
            3,
            json!({"type": "tool_call_started", "itemId": "i_2", "callId": "call_1", "name": "bash",
                   "arguments": {"command": "cargo test", "timeout_ms": 60000}}),
        ),
        live(
            json!({"type": "tool_output_delta", "callId": "call_1", "chunk": "running 3 tests\n"}),
        ),
        durable(
            4,
            json!({"type": "tool_call_completed", "callId": "call_1", "status": "ok",
                   "output": "test result: ok", "durationMs": 1532}),
        ),
        durable(
            5,
            json!({"type": "tool_call_completed", "callId": "call_2", "status": "denied",
                   "output": "denied by user", "durationMs": 0}),
        ),
        // amber: a file-changing tool's unified diff (absent above: omitted, not null).
        durable(
            5,
            json!({"type": "tool_call_completed", "callId": "call_4", "status": "ok",
                   "output": "edited `a.rs`: 1 replacement", "durationMs": 2,
                   "diff": "--- a/a.rs\n+++ b/a.rs\n@@ -1 +1 @@\n-x\n+y\n"}),
        ),
        durable(
            6,
            json!({"type": "approval_requested", "requestId": "r_1", "callId": "call_3", "tool": "bash",
                   "arguments": {"command": "rm -rf target"}, "reason": "destructive command",
                   "scope": "bash:rm"}),
        ),
        durable(
            7,
            json!({"type": "approval_resolved", "requestId": "r_1", "decision": "allow_once", "by": "client"}),
        ),
        durable(
            8,
            json!({"type": "approval_resolved", "requestId": "r_2", "decision": "deny", "by": "no_approver"}),
        ),
        durable(
            9,
            json!({"type": "steer", "reason": "repeated_text", "text": "You repeated yourself."}),
        ),
        durable(
            10,
            json!({"type": "compaction_started", "tokensBefore": 104000}),
        ),
        durable(
            11,
            json!({"type": "compaction_completed", "tokensBefore": 104000, "tokensAfter": 21000}),
        ),
        durable(
            12,
            json!({"type": "compaction_failed", "tokensBefore": 104000, "error": "provider error 500"}),
        ),
        durable(
            13,
            // The last call's fields are at the top level too (PROTOCOL.md: "Usage of the
            // last LLM call, and session total").
            envelope(
                json!({"type": "usage", "usage": usage(900, 50), "total": usage(2900, 150)}),
                usage(900, 50),
            ),
        ),
        durable(
            14,
            json!({"type": "todo_updated", "todos": [
                {"id": "1", "text": "reproduce", "status": "done"},
                {"id": "2", "text": "fix", "status": "in_progress"},
                {"id": "3", "text": "test", "status": "pending"}]}),
        ),
        durable(
            15,
            json!({"type": "subagent_started", "agentId": "a_1", "task": "find callers"}),
        ),
        durable(
            16,
            json!({"type": "subagent_completed", "agentId": "a_1", "task": "find callers",
                   "result": "3 callers"}),
        ),
        durable(
            17,
            json!({"type": "subagent_completed", "agentId": "a_2", "task": "cancelled one"}),
        ),
        // A sub-agent's tool call: tagged `agent` (kept for existing clients) and `agentId`.
        durable(
            23,
            json!({"type": "tool_call_completed", "agent": "a_1", "agentId": "a_1",
                   "callId": "call_9", "status": "ok", "output": "3 callers", "durationMs": 4}),
        ),
        // A tagged `subagent_*` event carries `agentId` once, as its own field.
        envelope(
            durable(
                24,
                json!({"type": "subagent_started", "agentId": "a_3", "task": "t"}),
            ),
            json!({"agent": "a_3"}),
        ),
        durable(
            18,
            json!({"type": "mcp_status", "name": "github", "status": "ready", "protocolVersion": "2025-06-18",
                   "tools": 12, "resources": 0, "prompts": 2}),
        ),
        durable(
            19,
            json!({"type": "mcp_status", "name": "fs", "status": "failed", "tools": 0, "resources": 0,
                   "prompts": 0, "error": "exited with status 1"}),
        ),
        durable(
            20,
            json!({"type": "turn_completed", "stopReason": "end_turn", "usage": usage(2900, 150)}),
        ),
        durable(
            21,
            json!({"type": "turn_completed", "stopReason": "error",
                   "error": {"code": "provider_error", "message": "401 Unauthorized"},
                   "usage": usage(0, 0)}),
        ),
        durable(
            22,
            json!({"type": "error", "code": "rate_limited", "message": "429, retrying", "retryable": true}),
        ),
        live(
            json!({"type": "retrying", "attempt": 1, "maxAttempts": 4, "delayMs": 8000,
                    "reason": "429 rate limited"}),
        ),
        durable(
            25,
            json!({"type": "prompt_queued", "prompt": "and then the docs"}),
        ),
        durable(
            26,
            json!({"type": "rewound", "restored": ["src/lib.rs"],
                   "conflicts": [], "removedTurns": 2}),
        ),
        durable(
            27,
            json!({"type": "hook_failed", "hookEvent": "pre_tool_use",
                   "command": ["./guard.sh"], "reason": "timed out after 10000 ms",
                   "toolCallId": "c_3"}),
        ),
        // amber: costs with a known price, and a turn stopped by its budget.
        durable(
            28,
            json!({"type": "usage", "usage": priced(900, 50, 0.0031), "total": priced(2900, 150, 0.0102),
                   "promptTokens": 900, "completionTokens": 50, "cachedTokens": 0,
                   "totalTokens": 950, "costUsd": 0.0031, "sessionCostUsd": 0.0102}),
        ),
        durable(
            29,
            json!({"type": "turn_completed", "stopReason": "budget_exceeded",
                   "error": {"code": "budget_exceeded", "message": "budget exceeded: the session \
                             has spent $0.010200 of its $0.010000 budget (maxBudgetUsd)"},
                   "usage": priced(0, 0, 0.0), "costUsd": 0.0, "sessionCostUsd": 0.0102}),
        ),
        // amber: the session's executor answered, dropped, was attached again.
        durable(
            30,
            json!({"type": "environment_connected", "environment": {
                "spec": "ssh://build1/src/app", "state": "connected",
                "executor": {"id": "0f3e", "hostname": "build1", "os": "linux",
                             "arch": "x86_64", "version": "0.1.0", "pid": 4242}}}),
        ),
        durable(
            31,
            json!({"type": "environment_lost", "environment": {
                "spec": "ssh://build1/src/app", "state": "lost",
                "reason": "the link to the executor dropped"}}),
        ),
        durable(
            32,
            json!({"type": "environment_resumed", "replayedChunks": 4, "environment": {
                "spec": "ssh://build1/src/app", "state": "connected",
                "executor": {"id": "0f3e", "hostname": "build1", "os": "linux",
                             "arch": "x86_64", "version": "0.1.0", "pid": 4242}}}),
        ),
        durable(
            33,
            json!({"type": "fleet_changed", "reason": "runner r1 missed 3 heartbeats",
                   "environment": {"spec": "fleet", "state": "queued",
                       "reason": "runner r1 missed 3 heartbeats",
                       "fleet": {"repo": "https://git.example.com/app.git", "ref": "main",
                                 "setup": ["npm ci"], "labels": {"pool": "gpu"},
                                 "priority": 5, "state": "queued", "attempts": 1}}}),
        ),
        durable(
            34,
            json!({"type": "fleet_setup", "command": "npm ci", "exitCode": 0,
                   "output": "added 12 packages"}),
        ),
        durable(
            35,
            json!({"type": "fleet_pushed", "branch": "amber/fix-login",
                   "commit": "0123456789abcdef0123456789abcdef01234567", "changed": true}),
        ),
        durable(
            36,
            json!({"type": "message_sent", "messageId": "msg_1", "to": "s_02",
                   "text": "run the tests"}),
        ),
        durable(
            37,
            json!({"type": "message_received", "messageId": "msg_2", "from": "s_02",
                   "text": "tests pass"}),
        ),
        durable(38, json!({"type": "goal_set", "goal": "the tests pass"})),
        durable(
            39,
            json!({"type": "goal_check", "met": false, "note": "two tests fail"}),
        ),
        durable(
            40,
            json!({"type": "goal_met", "summary": "fixed both tests"}),
        ),
        durable(
            41,
            json!({"type": "budget_warning", "scope": "daily", "period": "2026-12-07",
                   "spentUsd": 16.5, "capUsd": 20.0}),
        ),
        durable(
            41,
            json!({"type": "routine_finished", "name": "triage",
                   "fireTime": "2025-01-06T07:00:00+01:00", "stopReason": "end_turn"}),
        ),
        durable(
            42,
            json!({"type": "subagent_queued", "agentId": "agent_1", "task": "callers"}),
        ),
        durable(
            43,
            json!({"type": "network_connection", "callId": "call_1", "host": "registry.npmjs.org",
                   "port": 443, "protocol": "connect", "verdict": "allowed", "rule": "preset:npm",
                   "bytesSent": 812, "bytesReceived": 48213, "durationMs": 120}),
        ),
        // amber: replay is over. No seq, no turn.
        json!({"sessionId": "s_01", "time": T, "type": "synced", "lastSeq": 22}),
    ]
}

#[test]
fn every_event_round_trips_inside_the_envelope() {
    let cases: Vec<(&str, Check, Value)> = event_cases()
        .into_iter()
        .map(|v| ("event", rt::<Event> as Check, v))
        .collect();
    run_table(&cases);
}

#[test]
fn every_variant_and_every_protocol_type_has_a_case() {
    let events: Vec<Event> = event_cases()
        .into_iter()
        .map(crate::common::parse)
        .collect();
    let covered: BTreeSet<usize> = events.iter().map(|e| variant_index(&e.kind)).collect();
    assert_eq!(covered, (0..VARIANTS).collect(), "a variant has no case");

    let names: BTreeSet<&str> = events.iter().map(|e| e.kind.type_name()).collect();
    for (name, _) in PROTOCOL_EVENTS.iter().chain(EXTENSION_EVENTS) {
        assert!(names.contains(name), "no case for `{name}`");
    }
    assert_eq!(names.len(), PROTOCOL_EVENTS.len() + EXTENSION_EVENTS.len());
}

#[test]
fn type_name_equals_serialized_type() {
    for literal in event_cases() {
        let event: Event = crate::common::parse(literal.clone());
        let serialized = serde_json::to_value(&event).unwrap();
        assert_eq!(serialized["type"], json!(event.kind.type_name()));
        assert_eq!(literal["type"], json!(event.kind.type_name()));
        // The kind alone serializes with the same tag.
        assert_eq!(
            serde_json::to_value(&event.kind).unwrap()["type"],
            json!(event.kind.type_name())
        );
    }
}

#[test]
fn durability_matches_the_protocol_table() {
    for literal in event_cases() {
        let event: Event = crate::common::parse(literal);
        let name = event.kind.type_name();
        let (_, expected) = PROTOCOL_EVENTS
            .iter()
            .chain(EXTENSION_EVENTS)
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("`{name}` is in neither table"));
        assert_eq!(event.kind.is_durable(), *expected, "durability of `{name}`");
        // The examples follow the rule: durable events carry a seq, live ones none.
        assert_eq!(event.seq.is_some(), *expected, "seq of `{name}`");
    }
}

#[test]
fn envelope_optional_fields_default_and_extra_fields_are_tolerated() {
    let event: Event = crate::common::parse(json!({
        "sessionId": "s", "time": T, "type": "message_delta", "itemId": "i", "delta": "d"
    }));
    assert_eq!((event.seq, event.turn_id.as_deref()), (None, None));
    assert_eq!(
        serde_json::to_value(&event).unwrap(),
        json!({"sessionId": "s", "time": T, "type": "message_delta", "itemId": "i", "delta": "d"})
    );

    let event: Event = crate::common::parse(json!({
        "seq": 3, "sessionId": "s", "time": T, "type": "turn_completed", "stopReason": "cancelled",
        "usage": {"promptTokens": 1, "completionTokens": 1, "cachedTokens": 0, "totalTokens": 2}
    }));
    match event.kind {
        EventKind::TurnCompleted {
            stop_reason, error, ..
        } => {
            assert_eq!(stop_reason, StopReason::Cancelled);
            assert_eq!(error, None);
        }
        other => panic!("expected turn_completed, got {other:?}"),
    }

    // "You may add fields": an event with a field this crate does not know still parses.
    let event: Event = crate::common::parse(json!({
        "seq": 4, "sessionId": "s", "time": T, "type": "usage", "futureField": [1, 2],
        "usage": {"promptTokens": 5}, "total": {}
    }));
    match event.kind {
        EventKind::Usage { usage, total, .. } => {
            assert_eq!(usage.prompt_tokens, 5);
            assert_eq!(total, Usage::default());
        }
        other => panic!("expected usage, got {other:?}"),
    }

    let event: Event = crate::common::parse(json!({
        "seq": 5, "sessionId": "s", "time": T, "type": "mcp_status", "name": "m", "status": "closed"
    }));
    match event.kind {
        EventKind::McpStatus(info) => assert_eq!(info.status, McpStatus::Closed),
        other => panic!("expected mcp_status, got {other:?}"),
    }
}

#[test]
fn usage_event_puts_the_last_call_at_the_top_level() {
    let last = Usage {
        cache_write_tokens: 0,
        cost_usd: None,
        prompt_tokens: 900,
        completion_tokens: 50,
        cached_tokens: 7,
        total_tokens: 950,
    };
    let total = Usage {
        prompt_tokens: 2900,
        ..Usage::default()
    };
    let value = serde_json::to_value(EventKind::usage(last, total)).unwrap();
    for (key, n) in [
        ("promptTokens", 900),
        ("completionTokens", 50),
        ("cachedTokens", 7),
        ("totalTokens", 950),
    ] {
        assert_eq!(value[key], json!(n), "{key}: {value}");
        assert_eq!(value["usage"][key], json!(n), "{key}: {value}");
    }
    assert_eq!(value["total"]["promptTokens"], json!(2900));
}

#[test]
fn costs_are_plain_usd_numbers_and_absent_without_a_price() {
    let mut last = Usage {
        prompt_tokens: 1000,
        cached_tokens: 400,
        completion_tokens: 100,
        total_tokens: 1100,
        ..Usage::default()
    };
    // No price: no cost field anywhere.
    let value = serde_json::to_value(EventKind::usage(last, last)).unwrap();
    for place in [&value, &value["usage"], &value["total"]] {
        assert!(place.get("costUsd").is_none(), "{value}");
    }
    assert!(value.get("sessionCostUsd").is_none(), "{value}");

    last.cost_usd = CostUsd::from_usd(0.001);
    let mut total = last;
    total.add(&last);
    let value = serde_json::to_value(EventKind::usage(last, total)).unwrap();
    assert_eq!(value["costUsd"], json!(0.001), "the call's: {value}");
    assert_eq!(value["usage"]["costUsd"], json!(0.001));
    assert_eq!(
        value["total"]["costUsd"],
        json!(0.002),
        "the session's: {value}"
    );
    assert_eq!(value["sessionCostUsd"], json!(0.002));
    // A sum with a call that had no price keeps the known part.
    let mut mixed = total;
    mixed.add(&Usage::default());
    assert_eq!(mixed.cost_usd, total.cost_usd);
}

#[test]
fn a_subagent_tag_goes_out_as_agent_and_agent_id() {
    let tagged = Event {
        seq: Some(1),
        session_id: "s".into(),
        turn_id: None,
        agent_id: Some("a_1".into()),
        time: T.into(),
        kind: EventKind::Steer {
            reason: amber_proto::SteerReason::ToolFailures,
            text: "x".into(),
        },
    };
    let value = serde_json::to_value(&tagged).unwrap();
    assert_eq!(
        (&value["agent"], &value["agentId"]),
        (&json!("a_1"), &json!("a_1"))
    );
    let back: Event = serde_json::from_value(value).unwrap();
    assert_eq!(back, tagged);

    let untagged = Event {
        agent_id: None,
        ..tagged
    };
    let value = serde_json::to_value(&untagged).unwrap();
    assert!(
        value.get("agent").is_none() && value.get("agentId").is_none(),
        "{value}"
    );
}

/// jsonrpsee's subscription notification: `params: {subscription, result}`.
#[derive(Debug, Serialize, Deserialize)]
struct Notification {
    jsonrpc: String,
    method: String,
    params: SubscriptionParams,
}

#[derive(Debug, Serialize, Deserialize)]
struct SubscriptionParams {
    /// jsonrpsee ids may be strings or numbers.
    subscription: Value,
    result: Event,
}

#[test]
fn session_event_notification_carries_an_event() {
    for (subscription, literal) in event_cases().into_iter().enumerate().map(|(i, e)| {
        (
            if i % 2 == 0 {
                json!("sub_8f2a")
            } else {
                json!(8_142_337_u64)
            },
            e,
        )
    }) {
        let notification = json!({
            "jsonrpc": "2.0",
            "method": "session/event",
            "params": {"subscription": subscription, "result": literal}
        });
        let parsed: Notification = crate::common::parse(notification.clone());
        assert_eq!(parsed.method, methods::SESSION_EVENT);
        assert_eq!(parsed.jsonrpc, "2.0");
        assert_eq!(
            serde_json::to_value(&parsed.params.result).unwrap(),
            notification["params"]["result"]
        );
        assert_eq!(serde_json::to_value(&parsed).unwrap(), notification);
    }
}

#[test]
fn a_usage_purpose_is_named_and_one_a_client_does_not_know_reads_as_other() {
    let usage = Usage::default();
    let plain = serde_json::to_value(EventKind::usage(usage, usage)).unwrap();
    assert!(plain.get("purpose").is_none(), "{plain}");
    let confirm = serde_json::to_value(EventKind::usage_of(
        usage,
        usage,
        Some(UsagePurpose::Confirm),
    ))
    .unwrap();
    assert_eq!(confirm["purpose"], "confirm");

    let mut newer = confirm.clone();
    newer["purpose"] = json!("speculation");
    match serde_json::from_value::<EventKind>(newer).unwrap() {
        EventKind::Usage { purpose, .. } => assert_eq!(purpose, Some(UsagePurpose::Other)),
        other => panic!("{other:?}"),
    }
}
