//! Round trips of every method's params and result and every shared value type against
//! literal JSON written the way PROTOCOL.md writes it (camelCase fields, `type` tags,
//! snake_case enum values); defaults of omitted optional fields; required fields.
//!
//! Events, the `session/event` notification and durable/live classification are in `events.rs`;
//! method names, error codes and the protocol version in `names.rs`.

use std::collections::BTreeMap;

use crate::common::{Check, rt, run_table};
use amber_proto::{
    AgentListParams, AgentListResult, ApprovalRespondParams, ApprovalRespondResult,
    ClientCapabilities, CommandListResult, DaemonStatus, Decision, Empty, InitializeParams,
    InitializeResult, McpAddParams, McpListResult, McpServerInfo, McpStatus, McpTransport, Message,
    Mode, NameParams, PeerInfo, PluginInfo, PluginKind, PluginListResult, PluginState, ResolvedBy,
    Role, SandboxSelftestResult, SessionCancelResult, SessionGetParams, SessionGetResult,
    SessionIdParams, SessionInfo, SessionListParams, SessionListResult, SessionNewParams,
    SessionPromptParams, SessionPromptResult, SessionRenameParams, SessionSetModeParams,
    SessionState, SessionSubscribeParams, SteerReason, StopReason, TodoStatus, ToolInfo,
    ToolListParams, ToolListResult, ToolStatus, Usage,
};
use serde_json::{Value, json};

fn usage() -> Value {
    json!({"promptTokens": 1200, "completionTokens": 80, "cachedTokens": 1024, "totalTokens": 1280})
}

fn session_info() -> Value {
    json!({
        "sessionId": "s_01", "cwd": "/home/u/proj", "mode": "write", "model": "gpt-4o-mini",
        "title": "fix the build", "state": "waiting_approval",
        "createdAt": "2025-01-02T03:04:05Z", "updatedAt": "2025-01-02T03:05:00.123Z",
        "usage": usage()
    })
}

fn mcp_server_info() -> Value {
    json!({
        "name": "github", "status": "ready", "protocolVersion": "2025-06-18",
        "tools": 12, "resources": 3, "prompts": 0
    })
}

fn plugin_row() -> Value {
    json!({
        "name": "git-status", "state": "active", "kind": "bundled",
        "capabilities": [{"kind": "status", "name": "branch"}, {"kind": "tool", "name": "git_log"}]
    })
}

fn approval() -> Value {
    json!({
        "requestId": "r_1", "callId": "call_9", "tool": "bash",
        "arguments": {"command": "rm -rf build"}, "reason": "destructive command",
        "scope": "bash:rm"
    })
}

/// Every method's params and result, one row each, as PROTOCOL.md's tables write them.
fn method_cases() -> Vec<(&'static str, Check, Value)> {
    vec![
        (
            "initialize params",
            rt::<InitializeParams>,
            json!({"protocolVersion": 1, "clientInfo": {"name": "amber-cli", "version": "0.1.0"},
                   "capabilities": {"approvals": true}}),
        ),
        (
            "initialize result",
            rt::<InitializeResult>,
            json!({"protocolVersion": 1, "serverInfo": {"name": "amberd", "version": "0.1.0"},
                   "capabilities": {"methods": ["daemon/status", "session/new"]}}),
        ),
        ("daemon/status params", rt::<Empty>, json!({})),
        (
            "daemon/status result",
            rt::<DaemonStatus>,
            json!({"version": "0.1.0", "pid": 4242, "uptimeMs": 91000, "sessions": 3, "connections": 2}),
        ),
        (
            "daemon/status result (provider, sandbox)",
            rt::<DaemonStatus>,
            json!({"version": "0.1.0", "pid": 4242, "uptimeMs": 91000, "sessions": 3, "connections": 2,
                   "sessionsLoaded": 1,
                   "provider": {"baseUrl": "http://127.0.0.1:8080/v1", "model": "qwen3", "keySet": false},
                   "sandbox": {"available": true, "landlockAbi": 7, "seccomp": true, "namespaces": true,
                               "defaultMode": "workspace-write", "network": false,
                               "networkMode": "off"}}),
        ),
        (
            "daemon/status result (sandbox probing, no endpoint)",
            rt::<DaemonStatus>,
            json!({"version": "0.1.0", "pid": 4242, "uptimeMs": 3, "sessions": 0, "connections": 1,
                   "provider": {"model": "gpt-4o-mini", "keySet": false},
                   "sandbox": {"available": null, "seccomp": true,
                               "defaultMode": "read-only", "network": true,
                               "networkMode": "on"}}),
        ),
        (
            "daemon/status result (sandbox unavailable)",
            rt::<DaemonStatus>,
            json!({"version": "0.1.0", "pid": 4242, "uptimeMs": 91000, "sessions": 3, "connections": 2,
                   "sandbox": {"available": false, "reason": "Landlock is not available in this kernel",
                               "seccomp": false, "namespaces": false, "defaultMode": "off", "network": true,
                               "networkMode": "allowlist",
                               "allowlistUnavailable": "no network namespace can be made here"}}),
        ),
        ("sandbox/selftest params", rt::<Empty>, json!({})),
        (
            "sandbox/selftest result",
            rt::<SandboxSelftestResult>,
            json!({"ok": false, "checks": [
                {"name": "write_outside_workspace", "ok": true, "detail": "refused: Read-only file system"},
                {"name": "loopback_connect", "ok": false, "detail": "connected to 127.0.0.1:40123"},
                {"name": "write_inside_workspace", "ok": true, "detail": "written"}
            ]}),
        ),
        ("daemon/shutdown params", rt::<Empty>, json!({})),
        ("daemon/shutdown result", rt::<Empty>, json!({})),
        (
            "session/new params (all)",
            rt::<SessionNewParams>,
            json!({"cwd": "/home/u/proj", "mode": "read", "model": "gpt-4o", "title": "t",
                   "systemPrompt": "You are terse."}),
        ),
        (
            "session/new params (cwd only)",
            rt::<SessionNewParams>,
            json!({"cwd": "/home/u/proj"}),
        ),
        (
            "session/new params (agent)",
            rt::<SessionNewParams>,
            json!({"cwd": "/home/u/proj", "agent": "plan"}),
        ),
        (
            "session/new params (budgets)",
            rt::<SessionNewParams>,
            json!({"cwd": "/home/u/proj", "maxBudgetUsd": 2.5, "maxTokensTotal": 500000}),
        ),
        ("session/new result (budgets, cost)", rt::<SessionInfo>, {
            let mut info = session_info();
            info["maxBudgetUsd"] = json!(2.5);
            info["maxTokensTotal"] = json!(500_000);
            info["usage"]["costUsd"] = json!(0.0421);
            info
        }),
        (
            "session/new params (name)",
            rt::<SessionNewParams>,
            json!({"cwd": "/home/u/proj", "name": "fix-auth"}),
        ),
        ("session/new result (name)", rt::<SessionInfo>, {
            let mut info = session_info();
            info["name"] = json!("fix-auth");
            info
        }),
        (
            "session/rename params",
            rt::<SessionRenameParams>,
            json!({"sessionId": "3f2a", "name": "fix-auth"}),
        ),
        (
            "session/rename params (clear)",
            rt::<SessionRenameParams>,
            json!({"sessionId": "fix-auth", "name": null}),
        ),
        (
            "routine/add params",
            rt::<amber_proto::RoutineAddParams>,
            json!({"name": "triage", "cron": "0 7 * * 1-5", "cwd": "/home/u/proj",
                   "prompt": "Triage new issues", "worktree": true, "maxBudgetUsd": 1.0,
                   "missed": "all"}),
        ),
        (
            "routine/add params (a named session on the fleet)",
            rt::<amber_proto::RoutineAddParams>,
            json!({"cron": "@daily", "cwd": "", "prompt": "p", "session": "nightly",
                   "environment": "fleet", "repo": "https://git.example.com/app.git",
                   "ref": "main", "missed": "latest"}),
        ),
        (
            "routine/list result",
            rt::<amber_proto::RoutineListResult>,
            json!({"routines": [{"name": "triage", "source": "config", "cron": "0 7 * * 1-5",
                   "cwd": "/home/u/proj", "prompt": "Triage", "missed": "skip",
                   "nextFire": "2025-01-07T07:00:00+01:00",
                   "lastFire": "2025-01-06T07:00:00+01:00", "lastSessionId": "s_01",
                   "lastStopReason": "end_turn",
                   "onCalendar": ["Mon..Fri *-*-* 07:00:00"]}]}),
        ),
        (
            "routine/tick result",
            rt::<amber_proto::RoutineTickResult>,
            json!({"fired": [{"name": "triage", "fireTime": "2025-01-06T07:00:00+01:00",
                              "sessionId": "s_01"},
                             {"name": "b", "fireTime": "2025-01-06T07:00:00+01:00",
                              "error": "no such directory"}]}),
        ),
        ("session info (routine)", rt::<SessionInfo>, {
            let mut info = session_info();
            info["routine"] = json!({"name": "triage", "fireTime": "2025-01-06T07:00:00+01:00",
                                     "turnId": "turn_1", "stopReason": "end_turn"});
            info
        }),
        ("session/new result (agent)", rt::<SessionInfo>, {
            let mut info = session_info();
            info["agent"] = json!("plan");
            info
        }),
        (
            "agent/list params",
            rt::<AgentListParams>,
            json!({"cwd": "/home/u/proj"}),
        ),
        (
            "agent/list params (no cwd)",
            rt::<AgentListParams>,
            json!({}),
        ),
        (
            "agent/list result",
            rt::<AgentListResult>,
            json!({"agents": [
                {"name": "docs", "description": "Writes docs", "source": "workspace"},
                {"name": "mine", "description": "Mine", "source": "user"},
                {"name": "plan", "description": "Plans", "source": "bundled"}
            ]}),
        ),
        ("session/new result", rt::<SessionInfo>, session_info()),
        (
            "session/list params",
            rt::<SessionListParams>,
            json!({"cursor": "c_2", "limit": 50}),
        ),
        (
            "session/list params (empty)",
            rt::<SessionListParams>,
            json!({}),
        ),
        (
            "session/list result",
            rt::<SessionListResult>,
            json!({"sessions": [session_info()], "nextCursor": "c_3"}),
        ),
        (
            "session/list result (last page)",
            rt::<SessionListResult>,
            json!({"sessions": []}),
        ),
        (
            "session/get params",
            rt::<SessionGetParams>,
            json!({"sessionId": "s_01"}),
        ),
        (
            "session/get params (a page)",
            rt::<SessionGetParams>,
            json!({"sessionId": "s_01", "messagesLimit": 50, "beforeIndex": 120}),
        ),
        (
            "session/get result",
            rt::<SessionGetResult>,
            json!({
                "session": session_info(),
                "messages": [
                    {"role": "system", "content": "You are amber."},
                    {"role": "user", "content": "list files"},
                    {"role": "assistant", "content": "",
                     "toolCalls": [{"id": "call_1", "name": "bash", "arguments": "{\"command\":\"ls\"}"}]},
                    {"role": "tool", "content": "{\"status\":\"ok\",\"output\":\"a\\nb\"}", "toolCallId": "call_1"}
                ],
                "pendingApprovals": [approval()],
                "todos": [{"id": "1", "text": "build", "status": "in_progress"}],
                "lastSeq": 42,
                "firstIndex": 0,
                "totalMessages": 4,
                "hasMore": false
            }),
        ),
        (
            "session/delete params",
            rt::<SessionIdParams>,
            json!({"sessionId": "s_01"}),
        ),
        ("session/delete result", rt::<Empty>, json!({})),
        (
            "session/prompt params",
            rt::<SessionPromptParams>,
            json!({"sessionId": "s_01", "text": "run the tests"}),
        ),
        (
            "session/prompt result",
            rt::<SessionPromptResult>,
            json!({"turnId": "t_7"}),
        ),
        (
            "session/cancel params",
            rt::<SessionIdParams>,
            json!({"sessionId": "s_01"}),
        ),
        (
            "session/cancel result",
            rt::<SessionCancelResult>,
            json!({"cancelled": true}),
        ),
        (
            "session/setMode params",
            rt::<SessionSetModeParams>,
            json!({"sessionId": "s_01", "mode": "yolo"}),
        ),
        ("session/setMode result", rt::<SessionInfo>, session_info()),
        (
            "session/subscribe params",
            rt::<SessionSubscribeParams>,
            json!({"sessionId": "s_01", "afterSeq": 17}),
        ),
        (
            "session/subscribe params (live only)",
            rt::<SessionSubscribeParams>,
            json!({"sessionId": "s_01"}),
        ),
        (
            "approval/respond params",
            rt::<ApprovalRespondParams>,
            json!({"sessionId": "s_01", "requestId": "r_1", "decision": "allow_session"}),
        ),
        (
            "approval/respond result",
            rt::<ApprovalRespondResult>,
            json!({"accepted": false}),
        ),
        (
            "tool/list params",
            rt::<ToolListParams>,
            json!({"sessionId": "s_01"}),
        ),
        ("tool/list params (empty)", rt::<ToolListParams>, json!({})),
        (
            "tool/list result",
            rt::<ToolListResult>,
            json!({"tools": [
                {"name": "read", "description": "Read a file", "source": "builtin", "readOnly": true,
                 "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
                {"name": "mcp__github__search", "description": "Search", "source": "mcp:github",
                 "readOnly": false, "inputSchema": {"type": "object"}},
                {"name": "git_log", "description": "Log", "source": "plugin:git-status",
                 "readOnly": true, "inputSchema": {}}
            ]}),
        ),
        (
            "mcp/add params (stdio)",
            rt::<McpAddParams>,
            json!({"name": "fs", "transport": {"type": "stdio", "command": "npx",
                   "args": ["-y", "@modelcontextprotocol/server-filesystem"], "env": {"DEBUG": "1"}}}),
        ),
        (
            "mcp/add params (http)",
            rt::<McpAddParams>,
            json!({"name": "github", "transport": {"type": "http", "url": "https://example.test/mcp",
                   "headers": {"Authorization": "Bearer x"}}}),
        ),
        ("mcp/add result", rt::<McpServerInfo>, mcp_server_info()),
        ("mcp/list params", rt::<Empty>, json!({})),
        (
            "mcp/list result",
            rt::<McpListResult>,
            json!({"servers": [mcp_server_info(),
                   {"name": "broken", "status": "failed", "tools": 0, "resources": 0, "prompts": 0,
                    "error": "spawn failed: not found"}]}),
        ),
        (
            "mcp/remove params",
            rt::<NameParams>,
            json!({"name": "github"}),
        ),
        ("mcp/remove result", rt::<Empty>, json!({})),
        ("plugin/list params", rt::<Empty>, json!({})),
        (
            "plugin/list result",
            rt::<PluginListResult>,
            json!({"plugins": [plugin_row(),
                   {"name": "ext", "state": "failed", "kind": "external", "capabilities": [],
                    "error": "handshake timed out"}]}),
        ),
        (
            "plugin/enable params",
            rt::<NameParams>,
            json!({"name": "git-status"}),
        ),
        ("plugin/enable result", rt::<PluginInfo>, plugin_row()),
        (
            "plugin/disable params",
            rt::<NameParams>,
            json!({"name": "git-status"}),
        ),
        (
            "plugin/disable result",
            rt::<PluginInfo>,
            json!({"name": "git-status", "state": "deactivated", "kind": "bundled", "capabilities": []}),
        ),
        ("command/list params", rt::<Empty>, json!({})),
        (
            "command/list result",
            rt::<CommandListResult>,
            json!({"commands": [{"name": "compact", "description": "Compact the context"}]}),
        ),
    ]
}

#[test]
fn every_method_params_and_result_round_trip() {
    run_table(&method_cases());
}

/// Shared value types on their own, including both `McpTransport` variants.
#[test]
fn value_types_round_trip() {
    run_table(&[
        ("Usage", rt::<Usage>, usage()),
        ("SessionInfo", rt::<SessionInfo>, session_info()),
        ("McpServerInfo", rt::<McpServerInfo>, mcp_server_info()),
        (
            "ToolInfo",
            rt::<ToolInfo>,
            json!({"name": "edit", "description": "Edit a file", "source": "builtin", "readOnly": false,
                   "inputSchema": {"type": "object"}}),
        ),
        (
            "PeerInfo",
            rt::<PeerInfo>,
            json!({"name": "amber", "version": "1.2.3"}),
        ),
        (
            "ClientCapabilities",
            rt::<ClientCapabilities>,
            json!({"approvals": false}),
        ),
        (
            "McpTransport stdio",
            rt::<McpTransport>,
            json!({"type": "stdio", "command": "srv", "args": ["--x"], "env": {"A": "b"}}),
        ),
        (
            "McpTransport stdio (bare)",
            rt::<McpTransport>,
            json!({"type": "stdio", "command": "srv"}),
        ),
        (
            "McpTransport http",
            rt::<McpTransport>,
            json!({"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"X-Key": "k"}}),
        ),
        (
            "McpTransport http (bare)",
            rt::<McpTransport>,
            json!({"type": "http", "url": "http://h/mcp"}),
        ),
        (
            "Message user",
            rt::<Message>,
            json!({"role": "user", "content": "hi"}),
        ),
        (
            "Message assistant with tool calls",
            rt::<Message>,
            json!({"role": "assistant", "content": "Let me look.",
                   "toolCalls": [{"id": "call_a", "name": "read", "arguments": "{\"path\":\"a\"}"},
                                 {"id": "call_b", "name": "read", "arguments": "{not json"}]}),
        ),
        (
            "Message tool",
            rt::<Message>,
            json!({"role": "tool", "content": "out", "toolCallId": "call_a"}),
        ),
    ]);
}

/// Every enum value PROTOCOL.md names, as the bare JSON string it writes.
#[test]
fn enum_values_are_snake_case() {
    let s = |v: &str| Value::String(v.to_owned());
    let mut cases: Vec<(&str, Check, Value)> = Vec::new();
    for v in ["read", "write", "yolo"] {
        cases.push(("Mode", rt::<Mode>, s(v)));
    }
    for v in ["allow_once", "allow_session", "allow_always", "deny"] {
        cases.push(("Decision", rt::<Decision>, s(v)));
    }
    for v in [
        "end_turn",
        "cancelled",
        "loop_detected",
        "tool_failures",
        "max_iterations",
        "error",
        "budget_exceeded",
        "refusal",
        "max_tokens",
    ] {
        cases.push(("StopReason", rt::<StopReason>, s(v)));
    }
    for v in ["idle", "running", "waiting_approval"] {
        cases.push(("SessionState", rt::<SessionState>, s(v)));
    }
    for v in ["ok", "error", "denied"] {
        cases.push(("ToolStatus", rt::<ToolStatus>, s(v)));
    }
    for v in ["client", "rule", "policy", "no_approver"] {
        cases.push(("ResolvedBy", rt::<ResolvedBy>, s(v)));
    }
    for v in ["repeated_text", "tool_failures"] {
        cases.push(("SteerReason", rt::<SteerReason>, s(v)));
    }
    for v in ["pending", "in_progress", "done"] {
        cases.push(("TodoStatus", rt::<TodoStatus>, s(v)));
    }
    for v in ["connecting", "ready", "failed", "closed"] {
        cases.push(("McpStatus", rt::<McpStatus>, s(v)));
    }
    for v in ["registered", "active", "deactivated", "failed"] {
        cases.push(("PluginState", rt::<PluginState>, s(v)));
    }
    for v in ["bundled", "external"] {
        cases.push(("PluginKind", rt::<PluginKind>, s(v)));
    }
    for v in ["system", "user", "assistant", "tool"] {
        cases.push(("Role", rt::<Role>, s(v)));
    }
    run_table(&cases);

    // Unknown values are rejected, not silently mapped.
    assert!(serde_json::from_value::<Decision>(s("allow")).is_err());
    assert!(serde_json::from_value::<Mode>(s("Write")).is_err());
}

#[test]
fn enum_string_helpers_match_the_wire() {
    for mode in [Mode::Read, Mode::Write, Mode::Yolo] {
        assert_eq!(serde_json::to_value(mode).unwrap(), json!(mode.as_str()));
        assert_eq!(mode.as_str().parse::<Mode>().unwrap(), mode);
    }
    assert!("bogus".parse::<Mode>().is_err());
    for reason in [
        StopReason::EndTurn,
        StopReason::Cancelled,
        StopReason::LoopDetected,
        StopReason::ToolFailures,
        StopReason::MaxIterations,
        StopReason::Error,
        StopReason::BudgetExceeded,
        StopReason::Refusal,
        StopReason::MaxTokens,
    ] {
        assert_eq!(
            serde_json::to_value(reason).unwrap(),
            json!(reason.as_str())
        );
    }
}

#[test]
fn omitted_optional_fields_take_defaults() {
    let p: SessionNewParams = crate::common::parse(json!({"cwd": "/w"}));
    assert_eq!(
        p,
        SessionNewParams {
            cwd: "/w".into(),
            ..Default::default()
        }
    );

    let p: InitializeParams = crate::common::parse(json!({"protocolVersion": 1}));
    assert_eq!(p.client_info, PeerInfo::default());
    assert!(!p.capabilities.approvals);
    let p: InitializeParams =
        crate::common::parse(json!({"protocolVersion": 1, "capabilities": {}}));
    assert!(!p.capabilities.approvals);

    let r: InitializeResult = crate::common::parse(
        json!({"protocolVersion": 1, "serverInfo": {"name": "amberd", "version": "0"}}),
    );
    assert!(r.capabilities.methods.is_empty());

    let p: SessionListParams = crate::common::parse(json!({}));
    assert_eq!((p.cursor, p.limit), (None, None));
    let r: SessionListResult = crate::common::parse(json!({"sessions": []}));
    assert_eq!(r.next_cursor, None);
    let p: SessionSubscribeParams = crate::common::parse(json!({"sessionId": "s"}));
    assert_eq!(p.after_seq, None);
    let p: ToolListParams = crate::common::parse(json!({}));
    assert_eq!(p.session_id, None);

    let u: Usage = crate::common::parse(json!({}));
    assert_eq!(u, Usage::default());

    let mut info = session_info();
    info.as_object_mut().unwrap().remove("usage");
    let s: SessionInfo = crate::common::parse(info);
    assert_eq!(s.usage, Usage::default());

    let m: McpServerInfo = crate::common::parse(json!({"name": "x", "status": "connecting"}));
    assert_eq!(
        m,
        McpServerInfo {
            name: "x".into(),
            status: McpStatus::Connecting,
            protocol_version: None,
            tools: 0,
            resources: 0,
            prompts: 0,
            error: None,
            signing_in: false,
        }
    );

    let t: McpTransport = crate::common::parse(json!({"type": "stdio", "command": "c"}));
    assert_eq!(
        t,
        McpTransport::Stdio {
            command: "c".into(),
            args: Vec::new(),
            env: BTreeMap::new(),
        }
    );
    let t: McpTransport = crate::common::parse(json!({"type": "http", "url": "u"}));
    assert_eq!(
        t,
        McpTransport::Http {
            url: "u".into(),
            headers: BTreeMap::new(),
        }
    );

    let p: PluginInfo =
        crate::common::parse(json!({"name": "p", "state": "registered", "kind": "external"}));
    assert!(p.capabilities.is_empty());
    assert_eq!(p.error, None);

    let m: Message = crate::common::parse(json!({"role": "assistant"}));
    assert_eq!(m, Message::assistant("", Vec::new()));
}

#[test]
fn required_fields_are_required() {
    let missing: &[(&str, Check, Value)] = &[
        (
            "session/new without cwd",
            rt::<SessionNewParams>,
            json!({"mode": "read"}),
        ),
        (
            "initialize without protocolVersion",
            rt::<InitializeParams>,
            json!({}),
        ),
        (
            "session/prompt without text",
            rt::<SessionPromptParams>,
            json!({"sessionId": "s"}),
        ),
        (
            "approval/respond without decision",
            rt::<ApprovalRespondParams>,
            json!({"sessionId": "s", "requestId": "r"}),
        ),
        (
            "daemon/status sandbox without defaultMode",
            rt::<DaemonStatus>,
            json!({"version": "0.1.0", "pid": 1, "uptimeMs": 1, "sessions": 0, "connections": 0,
                   "sandbox": {"available": true, "seccomp": true, "network": false}}),
        ),
        (
            "mcp transport without type",
            rt::<McpTransport>,
            json!({"command": "c"}),
        ),
        (
            "mcp transport unknown type",
            rt::<McpTransport>,
            json!({"type": "sse", "url": "u"}),
        ),
    ];
    for (name, check, value) in missing {
        assert!(check(value).is_err(), "{name}: parsed but should not");
    }
}
