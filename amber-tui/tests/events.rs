//! Decoding and applying events: every event type of `amber_proto`, serialized as the daemon
//! sends it, decodes to itself and is applied as a known event; an event type this build does
//! not know shows as one dimmed transcript line, is counted when it repeats, and is skipped
//! when replayed — never a crash, never silently dropped.

use crate::common::{app_with, draw, envelope, ev, info};
use amber_proto::{
    Decision, ErrorInfo, Event, EventKind, InProgressItem, McpServerInfo, McpStatus, ResolvedBy,
    Role, SteerReason, StopReason, StreamKind, Todo, TodoStatus, ToolStatus, Usage,
};
use amber_tui::app::{App, Incoming, UnknownEvent};
use amber_tui::transcript::Cell;
use ratatui::style::Color;
use serde_json::json;

/// How many event types `amber_proto` has: the arms of [`variant_index`].
const VARIANTS: usize = 40;

/// A number per event type, below [`VARIANTS`]. No catch-all: a new event type in
/// `amber_proto` fails to compile here until it gets a number, and then the coverage test
/// fails until [`VARIANTS`] counts it and [`samples`] has one of it.
fn variant_index(kind: &EventKind) -> usize {
    match kind {
        EventKind::PromptQueued { .. } => 0,
        EventKind::TurnStarted { .. } => 1,
        EventKind::MessageDelta { .. } => 2,
        EventKind::ReasoningDelta { .. } => 3,
        EventKind::MessageCompleted { .. } => 4,
        EventKind::ToolCallStarted { .. } => 5,
        EventKind::ToolOutputDelta { .. } => 6,
        EventKind::Retrying { .. } => 7,
        EventKind::ToolCallCompleted { .. } => 8,
        EventKind::ApprovalRequested(_) => 9,
        EventKind::ApprovalResolved { .. } => 10,
        EventKind::Steer { .. } => 11,
        EventKind::CompactionStarted { .. } => 12,
        EventKind::CompactionCompleted { .. } => 13,
        EventKind::CompactionFailed { .. } => 14,
        EventKind::Usage { .. } => 15,
        EventKind::TodoUpdated { .. } => 16,
        EventKind::SubagentStarted { .. } => 17,
        EventKind::SubagentCompleted { .. } => 18,
        EventKind::McpStatus(_) => 19,
        EventKind::TurnCompleted { .. } => 20,
        EventKind::Error { .. } => 21,
        EventKind::Synced { .. } => 22,
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

/// A session's environment on an executor, in `state`.
fn environment(
    state: amber_proto::EnvironmentState,
    reason: Option<&str>,
) -> amber_proto::EnvironmentInfo {
    amber_proto::EnvironmentInfo {
        spec: "ssh://build1/src/app".into(),
        state,
        executor: Some(amber_proto::ExecutorInfo {
            id: "0f3e".into(),
            hostname: "build1".into(),
            os: "linux".into(),
            arch: "x86_64".into(),
            version: "0.1.0".into(),
            pid: 4242,
        }),
        reason: reason.map(str::to_owned),
        fleet: None,
    }
}

/// One event of every type, in an order a session could produce them.
fn samples() -> Vec<EventKind> {
    let usage = Usage {
        cache_write_tokens: 0,
        cost_usd: None,
        prompt_tokens: 1200,
        completion_tokens: 80,
        cached_tokens: 1000,
        total_tokens: 1280,
    };
    vec![
        EventKind::PromptQueued {
            prompt: "fix it".into(),
        },
        EventKind::TurnStarted {
            prompt: "fix it".into(),
        },
        EventKind::ReasoningDelta {
            item_id: "r_1".into(),
            delta: "thinking".into(),
        },
        EventKind::MessageDelta {
            item_id: "i_1".into(),
            delta: "On it".into(),
        },
        EventKind::MessageCompleted {
            item_id: "i_1".into(),
            role: Role::Assistant,
            text: "On it.".into(),
        },
        EventKind::Retrying {
            attempt: 1,
            max_attempts: 4,
            delay_ms: 500,
            reason: "429 rate limited".into(),
        },
        EventKind::ToolCallStarted {
            item_id: "i_2".into(),
            call_id: "c_1".into(),
            name: "bash".into(),
            arguments: json!({"command": "ls"}),
        },
        EventKind::ApprovalRequested(amber_proto::Approval {
            request_id: "r_1".into(),
            call_id: "c_1".into(),
            tool: "bash".into(),
            arguments: json!({"command": "ls"}),
            reason: "not in the rules".into(),
            scope: "bash: ls".into(),
            unsandboxed: false,
            person_only: false,
            mcp: None,
        }),
        EventKind::ApprovalResolved {
            request_id: "r_1".into(),
            decision: Decision::AllowSession,
            by: ResolvedBy::NoApprover,
        },
        EventKind::ToolOutputDelta {
            call_id: "c_1".into(),
            chunk: "a\n".into(),
        },
        EventKind::ToolCallCompleted {
            call_id: "c_1".into(),
            status: ToolStatus::Error,
            output: "a\nexit 2".into(),
            duration_ms: 40,
            diff: None,
        },
        EventKind::Steer {
            reason: SteerReason::ToolFailures,
            text: "Try another way.".into(),
        },
        EventKind::CompactionStarted {
            tokens_before: 90_000,
        },
        EventKind::CompactionFailed {
            tokens_before: 90_000,
            error: "endpoint down".into(),
        },
        EventKind::CompactionStarted {
            tokens_before: 90_000,
        },
        EventKind::CompactionCompleted {
            tokens_before: 90_000,
            tokens_after: 12_000,
        },
        EventKind::usage(usage, usage),
        EventKind::TodoUpdated {
            todos: vec![Todo {
                id: "1".into(),
                text: "read".into(),
                status: TodoStatus::InProgress,
            }],
        },
        EventKind::SubagentStarted {
            agent_id: "a_1".into(),
            task: "find callers".into(),
        },
        EventKind::SubagentCompleted {
            agent_id: "a_1".into(),
            task: "find callers".into(),
            result: Some("3 callers".into()),
            stop_reason: Some(StopReason::EndTurn),
            limit: None,
        },
        EventKind::McpStatus(McpServerInfo {
            name: "fs".into(),
            status: McpStatus::Ready,
            protocol_version: Some("2025-06-18".into()),
            tools: 3,
            resources: 0,
            prompts: 0,
            error: None,
            signing_in: false,
        }),
        EventKind::Error {
            code: "tool_loop".into(),
            message: "too many failures".into(),
            retryable: false,
        },
        EventKind::TurnCompleted {
            stop_reason: StopReason::ToolFailures,
            error: Some(ErrorInfo::new("tool_loop", "too many failures")),
            usage,
            output: None,
            cost_usd: None,
            session_cost_usd: None,
            confirm_usage: None,
        },
        EventKind::HookFailed {
            hook_event: "post_tool_use".into(),
            command: vec!["notify-send".into(), "done".into()],
            reason: "exited with status 1: no display".into(),
            tool_call_id: Some("c_1".into()),
        },
        EventKind::EnvironmentConnected {
            environment: environment(amber_proto::EnvironmentState::Connected, None),
            restored_files: Some(3),
        },
        EventKind::EnvironmentLost {
            environment: environment(
                amber_proto::EnvironmentState::Lost,
                Some("the link to the executor dropped"),
            ),
        },
        EventKind::EnvironmentResumed {
            environment: environment(amber_proto::EnvironmentState::Connected, None),
            replayed_chunks: 3,
        },
        EventKind::FleetChanged {
            environment: amber_proto::EnvironmentInfo {
                spec: "fleet".into(),
                state: amber_proto::EnvironmentState::Queued,
                executor: None,
                reason: Some("runner r1 missed 3 heartbeats".into()),
                fleet: Some(amber_proto::FleetInfo {
                    repo: "https://git.example.com/app.git".into(),
                    git_ref: "main".into(),
                    setup: vec!["npm ci".into()],
                    labels: Default::default(),
                    priority: 0,
                    state: amber_proto::FleetState::Queued,
                    runner: None,
                    pool: None,
                    attempts: 1,
                    push: None,
                }),
            },
            reason: Some("runner r1 missed 3 heartbeats".into()),
        },
        EventKind::FleetSetup {
            command: "npm ci".into(),
            exit_code: Some(0),
            output: "added 12 packages".into(),
        },
        EventKind::FleetPushed {
            branch: "amber/fix".into(),
            commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
            changed: true,
            error: None,
        },
        EventKind::MessageSent {
            message_id: "msg_1".into(),
            to: "s_02".into(),
            text: "run the tests".into(),
        },
        EventKind::MessageReceived {
            message_id: "msg_2".into(),
            from: Some("s_02".into()),
            text: "tests pass".into(),
        },
        EventKind::GoalSet {
            goal: Some("the tests pass".into()),
        },
        EventKind::GoalCheck {
            met: false,
            note: "two tests fail".into(),
        },
        EventKind::GoalMet {
            summary: "fixed both tests".into(),
        },
        EventKind::SubagentQueued {
            agent_id: "agent_1".into(),
            task: "callers".into(),
        },
        EventKind::BudgetWarning {
            scope: amber_proto::LimitScope::Daily,
            key: None,
            period: "2026-12-07".into(),
            spent_usd: amber_proto::CostUsd::from_usd(16.5).unwrap(),
            cap_usd: amber_proto::CostUsd::from_usd(20.0).unwrap(),
        },
        EventKind::RoutineFinished {
            name: "triage".into(),
            fire_time: "2025-01-06T07:00:00+01:00".into(),
            stop_reason: StopReason::EndTurn,
        },
        EventKind::NetworkConnection(amber_proto::NetworkConnection {
            call_id: "call_1".into(),
            host: "evil.example".into(),
            port: 443,
            protocol: "connect".into(),
            verdict: amber_proto::ConnectionVerdict::Denied,
            rule: Some("evil.example".into()),
            reason: Some("evil.example is denied by the network allowlist".into()),
            bytes_sent: 0,
            bytes_received: 0,
            duration_ms: 1,
        }),
        EventKind::Rewound {
            restored: vec!["src/lib.rs".into()],
            conflicts: vec!["notes.md".into()],
            removed_turns: 1,
        },
        EventKind::Synced {
            last_seq: 0,
            in_progress: vec![InProgressItem {
                item_id: "i_9".into(),
                kind: StreamKind::Message,
                text: "Next".into(),
            }],
        },
    ]
}

/// `kind` in an envelope, durable ones numbered from `seq`, as JSON text.
fn wire(kind: EventKind, seq: &mut u64) -> String {
    let durable = kind.is_durable();
    if durable {
        *seq += 1;
    }
    let event = Event {
        seq: durable.then_some(*seq),
        session_id: "s_1".into(),
        turn_id: Some("t_1".into()),
        agent_id: None,
        time: "2025-01-02T03:04:05Z".into(),
        kind,
    };
    serde_json::to_string(&event).expect("an event serializes")
}

#[test]
fn the_samples_cover_every_event_type() {
    let mut covered = [false; VARIANTS];
    for kind in samples() {
        let idx = variant_index(&kind);
        assert!(
            idx < VARIANTS,
            "VARIANTS does not count {}",
            kind.type_name()
        );
        covered[idx] = true;
    }
    let missing: Vec<usize> = (0..VARIANTS).filter(|&i| !covered[i]).collect();
    assert!(
        missing.is_empty(),
        "event types without a sample: {missing:?}"
    );
}

#[test]
fn every_event_type_decodes_to_itself_and_is_applied() {
    let mut app = App::new("s_1");
    app.load_snapshot(
        info(amber_proto::SessionState::Idle),
        Vec::new(),
        Vec::new(),
    );
    let mut seq = 0;
    for kind in samples() {
        let json = wire(kind.clone(), &mut seq);
        let incoming = Incoming::from_json(&json);
        let Incoming::Known(event) = &incoming else {
            panic!("not decoded: {json}");
        };
        assert_eq!(event.kind, kind, "{json}");
        app.apply_event(incoming);
    }
    assert!(
        !app.transcript
            .cells()
            .any(|c| matches!(c, Cell::Unknown { .. })),
        "a known event was shown as unknown"
    );
    // Each type did its part: a few of them, checked by what they leave behind.
    assert_eq!(app.last_seq, seq);
    assert!(app.synced && app.running, "synced with a reply in progress");
    assert_eq!(app.todos.len(), 1);
    assert!(app.approvals.is_empty(), "the approval was resolved");
    let approval = app.transcript.cells().find_map(|c| match c {
        Cell::Approval { outcome, .. } => outcome.clone(),
        _ => None,
    });
    assert_eq!(approval.as_deref(), Some("allow session (no approver)"));
    let steer = app.transcript.cells().find_map(|c| match c {
        Cell::Steer { reason, .. } => Some(reason.clone()),
        _ => None,
    });
    assert_eq!(steer.as_deref(), Some("tool failures"));
    let tool = app.transcript.cells().find_map(|c| match c {
        Cell::Tool(t) => Some(t.clone()),
        _ => None,
    });
    let tool = tool.expect("a tool cell");
    assert_eq!(
        (tool.status, tool.output.as_str(), tool.duration_ms),
        (Some(ToolStatus::Error), "a\nexit 2", Some(40))
    );
}

/// A `rewound` event as the daemon sends it (its `turnId` is the envelope's): decoded, and
/// one note line saying what the rewind did (the transcript keeps the history as it happened).
#[test]
fn rewound_decodes_from_the_wire() {
    let wire = envelope(
        Some(7),
        json!({"type": "rewound", "restored": ["src/lib.rs"], "conflicts": ["notes.md"],
               "removedTurns": 1}),
    );
    let incoming = Incoming::from_json(&wire.to_string());
    assert!(matches!(incoming, Incoming::Known(_)), "{incoming:?}");
    let app = app_with(&[incoming]);
    let rewound = app.transcript.cells().find_map(|c| match c {
        Cell::Info { text, .. } if text.starts_with("rewound") => Some(text.clone()),
        _ => None,
    });
    assert_eq!(
        rewound.as_deref(),
        Some(
            "rewound: 1 turn(s) removed from the conversation, 1 file(s) restored, 1 conflict(s) left alone: notes.md"
        )
    );
}

#[test]
fn a_sub_agents_call_is_attributed_to_it() {
    let mut seq = 0;
    let json = wire(
        EventKind::ToolCallStarted {
            item_id: "i_1".into(),
            call_id: "c_1".into(),
            name: "read".into(),
            arguments: json!({"path": "a"}),
        },
        &mut seq,
    );
    // What the daemon adds for a sub-agent's events: both names of the tag.
    let mut value: serde_json::Value = serde_json::from_str(&json).expect("json");
    value["agent"] = json!("a_7");
    value["agentId"] = json!("a_7");
    let app = app_with(&[Incoming::from_json(&value.to_string())]);
    let agent = app.transcript.cells().find_map(|c| match c {
        Cell::Tool(t) => t.agent.clone(),
        _ => None,
    });
    assert_eq!(agent.as_deref(), Some("a_7"));
}

fn unknown(seq: Option<u64>, type_name: &str) -> Incoming {
    let incoming = Incoming::from_json(
        &envelope(seq, json!({"type": type_name, "plan": ["a", "b"]})).to_string(),
    );
    assert_eq!(
        incoming,
        Incoming::Unknown(UnknownEvent {
            seq,
            type_name: type_name.into()
        })
    );
    incoming
}

#[test]
fn an_unknown_event_shows_as_one_dimmed_line() {
    let mut app = app_with(&[
        ev(
            Some(1),
            json!({"type": "turn_started", "prompt": "plan it"}),
        ),
        unknown(Some(2), "plan_updated"),
    ]);
    assert_eq!(app.last_seq, 2, "its seq counts like any other");
    let terminal = draw(&mut app, 60, 10);
    let buf = terminal.backend().buffer();
    let row = (0..buf.area.height)
        .find(|&y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
                .contains("unknown event: plan_updated")
        })
        .expect("the unknown event's line");
    let text: String = (0..buf.area.width)
        .map(|x| buf[(x, row)].symbol())
        .collect();
    assert_eq!(text.trim_end(), "· unknown event: plan_updated");
    for x in 0..text.trim_end().chars().count() as u16 {
        assert_eq!(
            buf[(x, row)].fg,
            Color::DarkGray,
            "column {x} is not dimmed"
        );
    }
}

#[test]
fn unknown_events_in_a_row_are_counted_and_a_replay_adds_none() {
    let mut app = app_with(&[]);
    for seq in 1..=3 {
        app.apply_event(unknown(Some(seq), "plan_updated"));
    }
    app.apply_event(unknown(None, "plan_delta"));
    // Replayed after a resubscription: already shown.
    app.apply_event(unknown(Some(2), "plan_updated"));
    app.apply_event(unknown(Some(3), "plan_updated"));
    let cells: Vec<(String, u32)> = app
        .transcript
        .cells()
        .filter_map(|c| match c {
            Cell::Unknown { type_name, count } => Some((type_name.clone(), *count)),
            _ => None,
        })
        .collect();
    assert_eq!(
        cells,
        [("plan_updated".to_owned(), 3), ("plan_delta".to_owned(), 1)]
    );
    assert_eq!(app.transcript.len(), 2);
    let s = crate::common::screen(&mut app, 60, 8);
    assert!(s.contains("· unknown event: plan_updated (×3)"), "{s}");
    assert!(s.contains("· unknown event: plan_delta"), "{s}");
    assert!(!s.contains("plan_delta (×"), "{s}");
}

#[test]
fn an_unknown_event_ends_a_retry_wait_like_any_other() {
    let mut app = app_with(&[]);
    app.apply_event(ev(
        None,
        json!({"type": "retrying", "attempt": 1, "maxAttempts": 4, "delayMs": 500, "reason": "429"}),
    ));
    assert!(app.notice.is_some());
    app.apply_event(unknown(None, "plan_delta"));
    assert_eq!(app.notice, None);
}
