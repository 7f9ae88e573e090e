//! The `Method` types: one for every method of `methods::ALL` and `methods::EXTENSIONS`,
//! each under the name PROTOCOL.md spells, with the params and result types docs/protocol.md's
//! methods table names; and the wire shapes of the subscription types.

use std::collections::BTreeSet;

use amber_proto::methods::{self, Method, Notification, Subscription};
use amber_proto::{
    CloseCode, EventKind, SubscriptionClosed, SubscriptionId, SubscriptionParams,
    SubscriptionPayload, UnsubscribeParams,
};
use serde_json::json;

/// A method as the tests see it: its name and the short names of its params and result types.
struct Row {
    name: &'static str,
    params: &'static str,
    result: &'static str,
}

fn row<M: Method>() -> Row {
    Row {
        name: M::NAME,
        params: short_type_name::<M::Params>(),
        result: short_type_name::<M::Result>(),
    }
}

/// `amber_proto::types::Empty` → `Empty`.
fn short_type_name<T>() -> &'static str {
    let full = std::any::type_name::<T>();
    full.rsplit("::").next().unwrap_or(full)
}

/// Every `Method` type, with the name PROTOCOL.md (or amber, for an extension) gives it.
fn every_method() -> Vec<(Row, &'static str)> {
    use methods::*;
    vec![
        (row::<Initialize>(), "initialize"),
        (row::<DaemonStatus>(), "daemon/status"),
        (row::<DaemonShutdown>(), "daemon/shutdown"),
        (row::<SessionNew>(), "session/new"),
        (row::<SessionList>(), "session/list"),
        (row::<SessionGet>(), "session/get"),
        (row::<SessionDelete>(), "session/delete"),
        (row::<SessionPrompt>(), "session/prompt"),
        (row::<SessionCancel>(), "session/cancel"),
        (row::<SessionSetMode>(), "session/setMode"),
        (row::<SessionSubscribe>(), "session/subscribe"),
        (row::<SessionUnsubscribe>(), "session/unsubscribe"),
        (row::<ApprovalRespond>(), "approval/respond"),
        (row::<ToolList>(), "tool/list"),
        (row::<McpAdd>(), "mcp/add"),
        (row::<McpList>(), "mcp/list"),
        (row::<McpRemove>(), "mcp/remove"),
        (row::<McpLogin>(), "mcp/login"),
        (row::<McpLogout>(), "mcp/logout"),
        (row::<PluginList>(), "plugin/list"),
        (row::<PluginEnable>(), "plugin/enable"),
        (row::<PluginDisable>(), "plugin/disable"),
        (row::<CommandList>(), "command/list"),
        (row::<AgentList>(), "agent/list"),
        (row::<TrustList>(), "trust/list"),
        (row::<TrustRespond>(), "trust/respond"),
        (row::<SessionCompact>(), "session/compact"),
        (row::<SessionVerify>(), "session/verify"),
        (row::<SessionSetModel>(), "session/setModel"),
        (row::<SessionRename>(), "session/rename"),
        (row::<SessionSend>(), "session/send"),
        (row::<SessionNotifyWhenIdle>(), "session/notifyWhenIdle"),
        (row::<SessionSetGoal>(), "session/setGoal"),
        (row::<CommandRun>(), "command/run"),
        (row::<StatusGet>(), "status/get"),
        (row::<PanelList>(), "panel/list"),
        (row::<PanelGet>(), "panel/get"),
        (row::<ProviderList>(), "provider/list"),
        (row::<ProviderCheck>(), "provider/check"),
        (row::<SandboxSelftest>(), "sandbox/selftest"),
        (row::<CheckpointList>(), "checkpoint/list"),
        (row::<CheckpointDiff>(), "checkpoint/diff"),
        (row::<SessionRewind>(), "session/rewind"),
        (row::<SessionFork>(), "session/fork"),
        (row::<SessionWatch>(), "session/watch"),
        (row::<SessionUnwatch>(), "session/unwatch"),
        (row::<RoutineAdd>(), "routine/add"),
        (row::<RoutineList>(), "routine/list"),
        (row::<RoutineRemove>(), "routine/remove"),
        (row::<RoutineRun>(), "routine/run"),
        (row::<RoutineTick>(), "routine/tick"),
    ]
}

#[test]
fn every_listed_method_has_a_method_type_of_its_name() {
    let typed = every_method();
    for (row, wire) in &typed {
        assert_eq!(row.name, *wire);
    }
    let names: BTreeSet<&str> = typed.iter().map(|(row, _)| row.name).collect();
    assert_eq!(names.len(), typed.len(), "two types share a name");
    let listed: BTreeSet<&str> = methods::ALL
        .iter()
        .chain(methods::EXTENSIONS)
        .copied()
        .collect();
    assert_eq!(
        names, listed,
        "the Method types are exactly ALL and EXTENSIONS"
    );
}

#[test]
fn the_name_constants_are_the_types_names() {
    use methods::*;
    let table = [
        (INITIALIZE, Initialize::NAME),
        (DAEMON_STATUS, DaemonStatus::NAME),
        (SESSION_SET_MODE, SessionSetMode::NAME),
        (SESSION_SUBSCRIBE, SessionSubscribe::NAME),
        (SESSION_UNSUBSCRIBE, SessionUnsubscribe::NAME),
        (SESSION_EVENT, SessionEvent::NAME),
        (COMMAND_RUN, CommandRun::NAME),
        (SESSION_SET_MODEL, SessionSetModel::NAME),
        (SESSION_RENAME, SessionRename::NAME),
        (PROVIDER_LIST, ProviderList::NAME),
        (AGENT_LIST, AgentList::NAME),
        (SANDBOX_SELFTEST, SandboxSelftest::NAME),
        (CHECKPOINT_LIST, CheckpointList::NAME),
        (CHECKPOINT_DIFF, CheckpointDiff::NAME),
        (SESSION_REWIND, SessionRewind::NAME),
        (SESSION_FORK, SessionFork::NAME),
        (SESSION_WATCH, SessionWatch::NAME),
        (SESSION_UNWATCH, SessionUnwatch::NAME),
        (SESSION_CHANGED, SessionChanged::NAME),
        (ROUTINE_ADD, RoutineAdd::NAME),
        (ROUTINE_LIST, RoutineList::NAME),
        (ROUTINE_REMOVE, RoutineRemove::NAME),
        (ROUTINE_RUN, RoutineRun::NAME),
        (ROUTINE_TICK, RoutineTick::NAME),
    ];
    for (constant, name) in table {
        assert_eq!(constant, name);
    }
    assert_eq!(SessionEvent::NAME, "session/event");
}

#[test]
fn session_subscribe_streams_session_events_until_session_unsubscribe() {
    fn parts<S: Subscription>() -> [&'static str; 3] {
        [
            S::NAME,
            <S::Notification as Notification>::NAME,
            <S::Unsubscribe as Method>::NAME,
        ]
    }
    assert_eq!(
        parts::<methods::SessionSubscribe>(),
        ["session/subscribe", "session/event", "session/unsubscribe"]
    );
    assert_eq!(
        parts::<methods::SessionWatch>(),
        ["session/watch", "session/changed", "session/unwatch"]
    );
}

type SessionChangedParams = <methods::SessionChanged as Notification>::Params;

#[test]
fn session_changed_params_carry_a_change_or_the_close() {
    let info = json!({"sessionId": "s_02", "cwd": "/w", "mode": "write", "model": "m",
        "title": "t", "state": "idle", "createdAt": "1", "updatedAt": "2",
        "usage": {"promptTokens": 1, "completionTokens": 2, "cachedTokens": 0, "totalTokens": 3}});
    let changed = json!({
        "subscription": "sub_3c1d",
        "result": {"change": "updated", "session": info,
                   "event": {"seq": 9, "sessionId": "s_02", "turnId": "t_1",
                             "time": "2025-01-02T03:04:09.120Z", "type": "turn_completed",
                             "stopReason": "end_turn", "usage": info["usage"]}}
    });
    let parsed: SessionChangedParams = serde_json::from_value(changed.clone()).unwrap();
    let SubscriptionPayload::Result(change) = &parsed.payload else {
        panic!("{parsed:?}");
    };
    assert_eq!(change.change, amber_proto::SessionChangeKind::Updated);
    assert!(matches!(
        change.event.as_ref().map(|e| &e.kind),
        Some(EventKind::TurnCompleted { .. })
    ));
    assert_eq!(serde_json::to_value(&parsed).unwrap(), changed);

    // A deletion has no event, and says none.
    let deleted = json!({"subscription": 3, "result": {"change": "deleted", "session": info}});
    let parsed: SessionChangedParams = serde_json::from_value(deleted.clone()).unwrap();
    assert_eq!(serde_json::to_value(&parsed).unwrap(), deleted);

    // Params: `approvals` is left out when false.
    let params = amber_proto::SessionWatchParams::default();
    assert_eq!(serde_json::to_value(&params).unwrap(), json!({}));
    let params: amber_proto::SessionWatchParams =
        serde_json::from_value(json!({"approvals": true})).unwrap();
    assert!(params.approvals);
}

/// docs/protocol.md's "## Methods" table: (method names, params cell, result cell).
fn documented_rows() -> Vec<(Vec<String>, String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/protocol.md");
    let doc = std::fs::read_to_string(path).expect("docs/protocol.md");
    let start = doc.find("\n## Methods").expect("a Methods section");
    doc[start..]
        .lines()
        .skip_while(|line| !line.starts_with("| method"))
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let names = cells[1]
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect();
            (names, cells[2].to_owned(), cells[3].to_owned())
        })
        .collect()
}

/// The first code span of a cell (`SessionInfo` of "`SessionInfo` — …"); `{}` means `Empty`.
fn first_type(cell: &str) -> &str {
    let span = cell.split('`').nth(1).unwrap_or("");
    if span == "{}" { "Empty" } else { span }
}

#[test]
fn the_documented_methods_table_names_each_methods_types() {
    let rows = documented_rows();
    let typed = every_method();
    for (row, _) in &typed {
        let documented = rows
            .iter()
            .find(|(names, _, _)| names.iter().any(|n| n == row.name))
            .unwrap_or_else(|| panic!("docs/protocol.md's methods table lacks `{}`", row.name));
        let (_, params, result) = documented;
        assert_eq!(
            (first_type(params), first_type(result)),
            (row.params, row.result),
            "`{}`: the table says params {params:?}, result {result:?}",
            row.name
        );
    }
    let documented: usize = rows.iter().map(|(names, _, _)| names.len()).sum();
    assert_eq!(documented, typed.len(), "the table lists each method once");
}

#[test]
fn unsubscribe_params_are_sent_positionally_and_read_either_way() {
    let params = UnsubscribeParams {
        subscription: SubscriptionId::String("sub_8f2a".into()),
    };
    assert_eq!(serde_json::to_value(&params).unwrap(), json!(["sub_8f2a"]));
    for (literal, id) in [
        (
            json!(["sub_8f2a"]),
            SubscriptionId::String("sub_8f2a".into()),
        ),
        (
            json!({"subscription": "sub_8f2a"}),
            SubscriptionId::String("sub_8f2a".into()),
        ),
        (json!([7]), SubscriptionId::Number(7)),
        (json!({"subscription": 7}), SubscriptionId::Number(7)),
    ] {
        let parsed: UnsubscribeParams = serde_json::from_value(literal.clone()).unwrap();
        assert_eq!(parsed.subscription, id, "{literal}");
    }
    for bad in [json!([]), json!(["a", "b"]), json!({}), json!(true)] {
        assert!(
            serde_json::from_value::<UnsubscribeParams>(bad.clone()).is_err(),
            "{bad}"
        );
    }
}

type SessionEventParams = <methods::SessionEvent as Notification>::Params;

#[test]
fn session_event_params_carry_an_event_or_the_close() {
    let event = json!({
        "subscription": "sub_8f2a",
        "result": {"sessionId": "s_01", "turnId": "t_1", "time": "2025-01-02T03:04:05.678Z",
                   "type": "message_delta", "itemId": "i_1", "delta": "Hel"}
    });
    let parsed: SessionEventParams = serde_json::from_value(event.clone()).unwrap();
    assert_eq!(
        parsed.subscription,
        SubscriptionId::String("sub_8f2a".into())
    );
    let SubscriptionPayload::Result(ev) = &parsed.payload else {
        panic!("{parsed:?}");
    };
    assert!(matches!(&ev.kind, EventKind::MessageDelta { delta, .. } if delta == "Hel"));
    assert_eq!(serde_json::to_value(&parsed).unwrap(), event);

    let close = r#"{"subscription":7,"error":{"code":"lagged","lastSeq":41,"message":"resubscribe with afterSeq=41"}}"#;
    let parsed: SessionEventParams = serde_json::from_str(close).unwrap();
    assert_eq!(
        parsed,
        SubscriptionParams {
            subscription: SubscriptionId::Number(7),
            payload: SubscriptionPayload::Error(SubscriptionClosed {
                code: CloseCode::Lagged,
                last_seq: 41,
                message: "resubscribe with afterSeq=41".into(),
            }),
        }
    );
    assert_eq!(serde_json::to_string(&parsed).unwrap(), close);
    let closed: SubscriptionClosed =
        serde_json::from_value(json!({"code": "session_closed", "message": "m", "lastSeq": 0}))
            .unwrap();
    assert_eq!(closed.code, CloseCode::SessionClosed);
}
