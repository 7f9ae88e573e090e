//! docs/protocol.md's examples are the wire as this crate writes it: every row of the events
//! table and every shared type's example is parsed, deserialized into the proto type and
//! serialized back, and must survive unchanged (a field the docs name that proto lacks, or a
//! misspelt one, is lost on the way and fails). The events table lists exactly the types
//! `EventKind::type_name` knows, with the right "durable" column; the error table lists exactly
//! the codes of `amber_proto::errors`; every params/result example of a method section is an
//! instance of the types the methods table names for it.

use std::collections::BTreeSet;

use amber_proto::{Approval, Event, McpServerInfo, Message, SessionInfo, Todo, Usage};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

const DOC: &str = include_str!("../../docs/protocol.md");
const EVENTS_RS: &str = include_str!("../src/events.rs");
const ERRORS_RS: &str = include_str!("../src/errors.rs");

/// The section of the document that starts with this heading, up to the next `## `.
fn section(heading: &str) -> &'static str {
    let start = DOC
        .find(heading)
        .unwrap_or_else(|| panic!("no `{heading}` section"));
    let rest = &DOC[start + heading.len()..];
    &rest[..rest.find("\n## ").unwrap_or(rest.len())]
}

/// The example values the docs write as bare type names inside JSON.
fn placeholders() -> Vec<(&'static str, Value)> {
    let usage = json!({"promptTokens":1,"completionTokens":2,"cachedTokens":0,"totalTokens":3});
    let session = json!({"sessionId":"s_01","cwd":"/w","mode":"write","model":"m","title":"t",
        "state":"idle","createdAt":"2025-01-02T03:04:05Z","updatedAt":"2025-01-02T03:04:05Z",
        "usage":usage});
    vec![("Usage", usage), ("SessionInfo", session)]
}

/// Replaces bare type names (`"usage":Usage`) with sample values so the example parses.
fn substitute(text: &str) -> String {
    let mut out = text.to_owned();
    for (name, value) in placeholders() {
        for end in [",", "}", "]"] {
            out = out.replace(&format!(":{name}{end}"), &format!(":{value}{end}"));
        }
    }
    out
}

/// `value` survives a round trip through `T` unchanged.
fn round_trips<T: DeserializeOwned + Serialize>(what: &str, value: &Value) {
    let typed: T = serde_json::from_value(value.clone())
        .unwrap_or_else(|e| panic!("{what}: docs example does not deserialize: {e}\n{value}"));
    let back = serde_json::to_value(&typed).unwrap();
    assert_eq!(
        &back, value,
        "{what}: docs example does not survive a round trip (a field proto lacks or names differently?)"
    );
}

/// The `type` strings `EventKind::type_name` returns, read from its (exhaustive) match.
fn proto_event_types() -> BTreeSet<String> {
    let body = &EVENTS_RS[EVENTS_RS.find("fn type_name").expect("type_name")..];
    let body = &body[..body.find("\n    }\n").expect("end of type_name")];
    body.lines()
        .filter_map(|line| line.split("=> \"").nth(1))
        .map(|rest| rest.trim_end_matches(['"', ',']).to_owned())
        .collect()
}

struct EventRow {
    ty: String,
    durable: bool,
    fields: Map<String, Value>,
}

/// The rows of the events table: type, durable column, and the first example span as JSON.
fn event_rows() -> Vec<EventRow> {
    section("## Events")
        .lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line.split(" | ").collect();
            let ty = cells[0].trim_start_matches("| `");
            let ty = ty[..ty.find('`').unwrap()].to_owned();
            let durable = match cells[1].trim() {
                "yes" => true,
                "no" => false,
                other => panic!("event `{ty}`: durable column `{other}`"),
            };
            let example = cells[2]
                .split('`')
                .nth(1)
                .unwrap_or_else(|| panic!("event `{ty}`: no example span in the fields column"));
            let fields = serde_json::from_str(&substitute(&format!("{{{example}}}")))
                .unwrap_or_else(|e| panic!("event `{ty}`: example is not JSON ({e}): {example}"));
            EventRow {
                ty,
                durable,
                fields,
            }
        })
        .collect()
}

#[test]
fn the_events_table_lists_exactly_proto_event_types() {
    let documented: BTreeSet<String> = event_rows().into_iter().map(|r| r.ty).collect();
    let proto = proto_event_types();
    assert!(proto.len() >= 21, "type_name scan found {proto:?}");
    assert_eq!(
        documented, proto,
        "docs/protocol.md events table vs EventKind"
    );
}

#[test]
fn every_event_example_round_trips_with_the_documented_durability() {
    for row in event_rows() {
        let mut value = Map::new();
        value.insert("sessionId".into(), json!("s_01"));
        value.insert("time".into(), json!("2025-01-02T03:04:05.678Z"));
        value.insert("type".into(), json!(row.ty));
        value.extend(row.fields);
        if row.durable {
            value.insert("seq".into(), json!(7));
        }
        let value = Value::Object(value);
        round_trips::<Event>(&format!("event `{}`", row.ty), &value);
        let event: Event = serde_json::from_value(value).unwrap();
        assert_eq!(
            event.kind.is_durable(),
            row.durable,
            "event `{}`: durable column disagrees with EventKind::is_durable",
            row.ty
        );
    }
}

/// The examples of the "Shared types" block: `(type name, JSON)`, one per example.
fn shared_type_examples() -> Vec<(String, Value)> {
    let block = section("## Shared types");
    let block = &block[block.find("```json").expect("json block") + 7..];
    let block = &block[..block.find("```").expect("end of block")];
    let mut examples = Vec::new();
    let mut name = String::new();
    let mut pending = String::new();
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        if !line.starts_with(' ') && pending.is_empty() {
            let (head, rest) = line.split_once(' ').expect("`Name {json}`");
            name = head.to_owned();
            pending = rest.trim().to_owned();
        } else {
            pending.push_str(line.trim());
        }
        if let Ok(value) = serde_json::from_str::<Value>(&substitute(&pending)) {
            examples.push((name.clone(), value));
            pending.clear();
        }
    }
    assert!(
        pending.is_empty(),
        "unparsable shared type example: {pending}"
    );
    examples
}

#[test]
fn every_shared_type_example_round_trips() {
    let examples = shared_type_examples();
    let names: BTreeSet<&str> = examples.iter().map(|(n, _)| n.as_str()).collect();
    for expected in [
        "SessionInfo",
        "Usage",
        "McpServerInfo",
        "Approval",
        "Todo",
        "Message",
    ] {
        assert!(names.contains(expected), "no `{expected}` example");
    }
    for (name, value) in &examples {
        let what = format!("shared type `{name}`");
        match name.as_str() {
            "SessionInfo" => round_trips::<SessionInfo>(&what, value),
            "Usage" => round_trips::<Usage>(&what, value),
            "McpServerInfo" => round_trips::<McpServerInfo>(&what, value),
            "Approval" => round_trips::<Approval>(&what, value),
            "Todo" => round_trips::<Todo>(&what, value),
            "Message" => round_trips::<Message>(&what, value),
            other => panic!("docs document a shared type `{other}` this test does not know"),
        }
    }
}

#[test]
fn the_error_table_lists_exactly_proto_error_codes() {
    let proto: BTreeSet<(i64, String)> = ERRORS_RS
        .lines()
        .filter_map(|line| line.strip_prefix("pub const "))
        .map(|decl| {
            let (name, rest) = decl.split_once(':').unwrap();
            let code = rest.split('=').nth(1).unwrap().trim().trim_end_matches(';');
            (code.parse().unwrap(), name.trim().to_owned())
        })
        .collect();
    let documented: BTreeSet<(i64, String)> = section("## Errors")
        .lines()
        .filter(|line| line.starts_with("| -"))
        .map(|line| {
            let cells: Vec<&str> = line.split(" | ").collect();
            let code = cells[0]
                .trim_start_matches("| ")
                .split_whitespace()
                .next()
                .unwrap()
                .parse()
                .unwrap();
            (code, cells[1].trim_matches('`').to_owned())
        })
        .collect();
    assert!(proto.len() >= 11, "errors.rs scan found {proto:?}");
    assert_eq!(
        documented, proto,
        "docs/protocol.md error table vs amber_proto::errors"
    );
}

/// `doc` is contained in `back`: every member the docs show is there with the same value
/// (proto may add members the example leaves out, e.g. defaults it writes back).
fn contains(doc: &Value, back: &Value) -> bool {
    match (doc, back) {
        (Value::Object(d), Value::Object(b)) => d
            .iter()
            .all(|(k, v)| b.get(k).is_some_and(|bv| contains(v, bv))),
        (Value::Array(d), Value::Array(b)) => {
            d.len() == b.len() && d.iter().zip(b).all(|(dv, bv)| contains(dv, bv))
        }
        _ => doc == back,
    }
}

/// Whether `value` is an example of the proto type the methods table names `ty`: `None` when
/// the table names no type this test knows (prose like "subscription id").
fn is_example_of(ty: &str, value: &Value) -> Option<bool> {
    fn check<T: DeserializeOwned + Serialize>(value: &Value) -> bool {
        serde_json::from_value::<T>(value.clone())
            .is_ok_and(|typed| contains(value, &serde_json::to_value(typed).unwrap()))
    }
    use amber_proto::*;
    let ty = ty.trim_matches('`');
    let ty = ty
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .trim_matches('`');
    Some(match ty {
        "{}" => value == &json!({}),
        "InitializeParams" => check::<InitializeParams>(value),
        "InitializeResult" => check::<InitializeResult>(value),
        "DaemonStatus" => check::<DaemonStatus>(value),
        "SessionNewParams" => check::<SessionNewParams>(value),
        "SessionInfo" => check::<SessionInfo>(value),
        "SessionListParams" => check::<SessionListParams>(value),
        "SessionListResult" => check::<SessionListResult>(value),
        "SessionIdParams" => check::<SessionIdParams>(value),
        "SessionGetParams" => check::<SessionGetParams>(value),
        "SessionGetResult" => check::<SessionGetResult>(value),
        "SessionPromptParams" => check::<SessionPromptParams>(value),
        "SessionPromptResult" => check::<SessionPromptResult>(value),
        "SessionCancelResult" => check::<SessionCancelResult>(value),
        "SessionSetModeParams" => check::<SessionSetModeParams>(value),
        "SessionSubscribeParams" => check::<SessionSubscribeParams>(value),
        "ApprovalRespondParams" => check::<ApprovalRespondParams>(value),
        "ApprovalRespondResult" => check::<ApprovalRespondResult>(value),
        "ToolListParams" => check::<ToolListParams>(value),
        "ToolListResult" => check::<ToolListResult>(value),
        "McpAddParams" => check::<McpAddParams>(value),
        "McpServerInfo" => check::<McpServerInfo>(value),
        "McpListResult" => check::<McpListResult>(value),
        "NameParams" => check::<NameParams>(value),
        "McpLoginParams" => check::<McpLoginParams>(value),
        "McpLoginResult" => check::<McpLoginResult>(value),
        "McpLogoutResult" => check::<McpLogoutResult>(value),
        "PluginListResult" => check::<PluginListResult>(value),
        "PluginInfo" => check::<PluginInfo>(value),
        "CommandListResult" => check::<CommandListResult>(value),
        "CommandRunParams" => check::<CommandRunParams>(value),
        "CommandRunResult" => check::<CommandRunResult>(value),
        "StatusGetResult" => check::<StatusGetResult>(value),
        "PanelListResult" => check::<PanelListResult>(value),
        "PanelGetParams" => check::<PanelGetParams>(value),
        "PanelGetResult" => check::<PanelGetResult>(value),
        "ProviderListResult" => check::<ProviderListResult>(value),
        "SessionSetModelParams" => check::<SessionSetModelParams>(value),
        "SessionRenameParams" => check::<SessionRenameParams>(value),
        "AgentListParams" => check::<AgentListParams>(value),
        "AgentListResult" => check::<AgentListResult>(value),
        "SandboxSelftestResult" => check::<SandboxSelftestResult>(value),
        "CheckpointListParams" => check::<CheckpointListParams>(value),
        "CheckpointListResult" => check::<CheckpointListResult>(value),
        "CheckpointDiffParams" => check::<CheckpointDiffParams>(value),
        "CheckpointDiffResult" => check::<CheckpointDiffResult>(value),
        "SessionRewindParams" => check::<SessionRewindParams>(value),
        "SessionRewindResult" => check::<SessionRewindResult>(value),
        "SessionForkParams" => check::<SessionForkParams>(value),
        "SessionWatchParams" => check::<SessionWatchParams>(value),
        "SessionSendParams" => check::<SessionSendParams>(value),
        "SessionSendResult" => check::<SessionSendResult>(value),
        "SessionNotifyWhenIdleParams" => check::<SessionNotifyWhenIdleParams>(value),
        "SessionSetGoalParams" => check::<SessionSetGoalParams>(value),
        "RoutineAddParams" => check::<RoutineAddParams>(value),
        "RoutineInfo" => check::<RoutineInfo>(value),
        "RoutineListResult" => check::<RoutineListResult>(value),
        "RoutineFired" => check::<RoutineFired>(value),
        "RoutineTickResult" => check::<RoutineTickResult>(value),
        _ => return None,
    })
}

/// The methods table: method → (params type, result type), as the docs name them.
fn methods_table() -> Vec<(String, String, String)> {
    section("## Methods")
        .lines()
        .filter(|line| line.starts_with("| `"))
        .flat_map(|line| {
            let cells: Vec<&str> = line.split(" | ").collect();
            let methods: Vec<String> = cells[0]
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect();
            let (params, result) = (cells[1].to_owned(), cells[2].to_owned());
            methods
                .into_iter()
                .map(move |m| (m, params.clone(), result.clone()))
        })
        .collect()
}

/// Every JSON value written in a method section's example block, split at `→`: `(is the
/// result side, value)`. Multi-line values are joined until they parse; `…` elisions dropped.
fn method_examples(body: &str) -> Vec<(bool, Value)> {
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(start) = rest.find("```json\n") {
        let block = &rest[start + 8..];
        let end = block.find("```").expect("end of json block");
        let mut pending = String::new();
        let mut pending_result = false;
        for line in block[..end].lines() {
            let sides: Vec<&str> = line.split('→').collect();
            for (i, side) in sides.iter().enumerate() {
                let side = side.trim();
                if pending.is_empty() {
                    if !side.starts_with('{') && !side.starts_with('[') {
                        continue;
                    }
                    pending_result = i > 0;
                }
                pending.push_str(side);
                let text = substitute(&pending.replace(", …", "").replace(",…", ""));
                if let Ok(value) = serde_json::from_str::<Value>(&text) {
                    out.push((pending_result, value));
                    pending.clear();
                }
            }
        }
        rest = &block[end + 3..];
    }
    out
}

#[test]
fn every_method_example_is_an_instance_of_the_documented_types() {
    let table = methods_table();
    assert!(table.len() >= 25, "methods table: {table:?}");
    let methods = section("## Methods");
    let mut checked = 0;
    for part in methods.split("\n### ").skip(1) {
        let heading = part.lines().next().unwrap_or_default();
        let named: Vec<&(String, String, String)> = table
            .iter()
            .filter(|(m, _, _)| heading.split([',', ' ']).any(|h| h == m))
            .collect();
        for (is_result, value) in method_examples(part) {
            if value.get("jsonrpc").is_some() {
                continue; // a whole JSON-RPC frame (the subscribe walk-through), not params
            }
            let verdicts: Vec<bool> = named
                .iter()
                .filter_map(|(_, params, result)| {
                    is_example_of(if is_result { result } else { params }, &value)
                })
                .collect();
            if verdicts.is_empty() {
                continue; // the table names prose, not a type
            }
            assert!(
                verdicts.contains(&true),
                "### {heading}: example {} {value} is not an instance of the documented type",
                if is_result { "result" } else { "params" }
            );
            checked += 1;
        }
    }
    assert!(checked >= 30, "only {checked} method examples checked");
}
