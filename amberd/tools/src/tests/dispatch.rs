//! Whole dispatches: ordering, denials, policy, truncation, events.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use amber_proto::{Mode, ToolCall, ToolStatus};
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use super::workspace;
use crate::gate::ModeGate;
use crate::{
    DispatchEvent, DispatchRequest, DispatchResult, Tool, ToolContext, ToolLimits, ToolOutcome,
    ToolRegistry, dispatch,
};

/// A test tool: sleeps `ms`, logs start and end, echoes `label` (or emits
/// `size` bytes, or panics).
struct Probe {
    name: &'static str,
    read_only: bool,
    /// Writes every path of its `paths` argument (as a patch does), not its `path`.
    many_paths: bool,
    log: Arc<Mutex<Vec<String>>>,
}

impl Tool for Probe {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "test probe"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn read_only(&self) -> bool {
        self.read_only
    }
    fn written_paths(&self, args: &Value) -> Vec<String> {
        if !self.many_paths {
            return args["path"]
                .as_str()
                .map(str::to_owned)
                .into_iter()
                .collect();
        }
        args["paths"]
            .as_array()
            .map(|paths| {
                paths
                    .iter()
                    .filter_map(|p| p.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }
    fn call<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let label = args["label"].as_str().unwrap_or("").to_owned();
            if args.get("panic").is_some() {
                panic!("probe exploded");
            }
            self.log.lock().unwrap().push(format!("start {label}"));
            tokio::time::sleep(Duration::from_millis(args["ms"].as_u64().unwrap_or(0))).await;
            self.log.lock().unwrap().push(format!("end {label}"));
            match args["size"].as_u64() {
                Some(size) => ToolOutcome::ok("x".repeat(size as usize)),
                None => ToolOutcome::ok(label),
            }
        })
    }
}

struct Harness {
    _dir: tempfile::TempDir,
    ctx: ToolContext,
    registry: ToolRegistry,
    log: Arc<Mutex<Vec<String>>>,
    cancel: CancellationToken,
    limits: ToolLimits,
}

fn harness() -> Harness {
    let (dir, ctx) = workspace();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut registry = ToolRegistry::builtin();
    for (name, read_only, many_paths) in [
        ("probe", true, false),
        ("probe_writer", false, false),
        ("probe_patch", false, true),
    ] {
        registry.register(Arc::new(Probe {
            name,
            read_only,
            many_paths,
            log: Arc::clone(&log),
        }));
    }
    Harness {
        _dir: dir,
        ctx,
        registry,
        log,
        cancel: CancellationToken::new(),
        limits: ToolLimits::default(),
    }
}

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments: arguments.to_owned(),
    }
}

impl Harness {
    async fn run(
        &self,
        calls: &[ToolCall],
        previous: &[ToolCall],
        mode: Mode,
    ) -> (Vec<DispatchResult>, Vec<DispatchEvent>) {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let results = dispatch(DispatchRequest {
            registry: &self.registry,
            calls,
            previous_calls: previous,
            gate: &ModeGate(mode),
            session: &Arc::new(crate::SessionTools::detached()),
            workspace: &self.ctx.workspace,
            cancel: &self.cancel,
            limits: &self.limits,
            events: &tx,
        })
        .await;
        (results, drain(&mut rx))
    }
}

fn drain(rx: &mut UnboundedReceiver<DispatchEvent>) -> Vec<DispatchEvent> {
    let mut events = Vec::new();
    while let Ok(event) = rx.try_recv() {
        events.push(event);
    }
    events
}

fn envelope(result: &DispatchResult) -> (String, String) {
    let value: Value = serde_json::from_str(&result.envelope).unwrap();
    (
        value["status"].as_str().unwrap().to_owned(),
        value["output"].as_str().unwrap().to_owned(),
    )
}

fn completed_ids(events: &[DispatchEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            DispatchEvent::Completed { call_id, .. } => Some(call_id.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn results_keep_the_original_order_while_calls_run_in_parallel() {
    let h = harness();
    let calls = [
        call("a", "probe", r#"{"label":"a","ms":300}"#),
        call("b", "probe", r#"{"label":"b","ms":10}"#),
        call("c", "probe", r#"{"label":"c","ms":100}"#),
    ];
    let (results, events) = h.run(&calls, &[], Mode::Read).await;
    let ids: Vec<&str> = results.iter().map(|r| r.call_id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c"]);
    assert_eq!(results[0].envelope, r#"{"status":"ok","output":"a"}"#);
    assert_eq!(completed_ids(&events), ["b", "c", "a"]);
    let log = h.log.lock().unwrap().clone();
    assert_eq!(&log[..3], ["start a", "start b", "start c"]);
}

#[tokio::test]
async fn writers_are_serialized_per_path_only() {
    let h = harness();
    let calls = [
        call(
            "1",
            "probe_writer",
            r#"{"path":"x.txt","label":"x1","ms":100}"#,
        ),
        call(
            "2",
            "probe_writer",
            r#"{"path":"./x.txt","label":"x2","ms":10}"#,
        ),
        call(
            "3",
            "probe_writer",
            r#"{"path":"y.txt","label":"y","ms":50}"#,
        ),
    ];
    let (results, _) = h.run(&calls, &[], Mode::Write).await;
    assert!(results.iter().all(|r| r.status == ToolStatus::Ok));
    let log = h.log.lock().unwrap().clone();
    let pos = |s: &str| log.iter().position(|l| l == s).unwrap();
    assert!(pos("end x1") < pos("start x2"), "{log:?}");
    assert!(pos("start y") < pos("end x1"), "{log:?}");
}

#[tokio::test]
async fn a_call_writing_several_files_waits_for_the_writers_of_each_and_joins_their_lanes() {
    let h = harness();
    let calls = [
        call(
            "1",
            "probe_writer",
            r#"{"path":"x.txt","label":"x","ms":80}"#,
        ),
        call(
            "2",
            "probe_writer",
            r#"{"path":"y.txt","label":"y","ms":40}"#,
        ),
        call(
            "3",
            "probe_patch",
            r#"{"paths":["x.txt","y.txt"],"label":"p","ms":10}"#,
        ),
        call(
            "4",
            "probe_writer",
            r#"{"path":"y.txt","label":"y2","ms":0}"#,
        ),
        call(
            "5",
            "probe_writer",
            r#"{"path":"z.txt","label":"z","ms":10}"#,
        ),
    ];
    let (results, _) = h.run(&calls, &[], Mode::Write).await;
    assert!(results.iter().all(|r| r.status == ToolStatus::Ok));
    let log = h.log.lock().unwrap().clone();
    let pos = |s: &str| log.iter().position(|l| l == s).unwrap();
    assert!(pos("end x") < pos("start p"), "{log:?}");
    assert!(pos("end y") < pos("start p"), "{log:?}");
    assert!(
        pos("end p") < pos("start y2"),
        "calls stay in call order: {log:?}"
    );
    assert!(
        pos("start z") < pos("end x"),
        "other files run alongside: {log:?}"
    );
}

#[tokio::test]
async fn unknown_tools_are_denied_with_the_list() {
    let h = harness();
    let (results, events) = h.run(&[call("u", "grep", "{}")], &[], Mode::Yolo).await;
    assert_eq!(results[0].status, ToolStatus::Denied);
    let (status, output) = envelope(&results[0]);
    assert_eq!(status, "denied");
    assert!(
        output.starts_with("unknown tool `grep`; available: read, write, edit, bash"),
        "{output}"
    );
    assert_eq!(events.len(), 2);
}

#[tokio::test]
async fn invalid_json_and_non_objects_are_denied() {
    let h = harness();
    let calls = [
        call("j", "read", r#"{"path": "a.txt""#),
        call("k", "read", r#"["a.txt"]"#),
    ];
    let (results, events) = h.run(&calls, &[], Mode::Write).await;
    assert_eq!(results[0].status, ToolStatus::Denied);
    assert!(envelope(&results[0]).1.contains("not valid JSON"));
    assert_eq!(results[1].status, ToolStatus::Denied);
    assert!(
        envelope(&results[1])
            .1
            .contains("must be a JSON object, got an array")
    );
    assert_eq!(
        events[0],
        DispatchEvent::Started {
            call_id: "j".to_owned(),
            name: "read".to_owned(),
            arguments: json!({"_raw": r#"{"path": "a.txt""#}),
        }
    );
}

#[tokio::test]
async fn duplicates_of_the_previous_turn_are_denied() {
    let h = harness();
    std::fs::write(h.ctx.workspace.join("a.txt"), "hello\n").unwrap();
    let previous = [call("p1", "read", r#"{"path":"a.txt","limit":5}"#)];
    let calls = [
        call("n1", "read", r#"{ "limit": 5,  "path": "a.txt" }"#),
        call("n2", "read", r#"{"path":"a.txt","limit":6}"#),
    ];
    let (results, _) = h.run(&calls, &previous, Mode::Write).await;
    assert_eq!(results[0].status, ToolStatus::Denied);
    assert!(
        envelope(&results[0])
            .1
            .contains("duplicate of a call made in the previous turn")
    );
    assert_eq!(results[1].status, ToolStatus::Ok);
}

#[tokio::test]
async fn read_mode_denies_every_non_read_only_tool() {
    let h = harness();
    std::fs::write(h.ctx.workspace.join("a.txt"), "hello\n").unwrap();
    let calls = [
        call("r", "read", r#"{"path":"a.txt"}"#),
        call("w", "write", r#"{"path":"b.txt","content":"x"}"#),
        call(
            "e",
            "edit",
            r#"{"path":"a.txt","old_string":"hello","new_string":"bye"}"#,
        ),
        call("b", "bash", r#"{"command":"touch c.txt"}"#),
    ];
    let (results, _) = h.run(&calls, &[], Mode::Read).await;
    let statuses: Vec<ToolStatus> = results.iter().map(|r| r.status).collect();
    use ToolStatus::{Denied, Ok};
    assert_eq!(statuses, [Ok, Denied, Denied, Denied]);
    assert!(envelope(&results[1]).1.contains("read mode"));
    assert!(!h.ctx.workspace.join("b.txt").exists());
    assert!(!h.ctx.workspace.join("c.txt").exists());
    let (results, _) = h.run(&calls[1..], &[], Mode::Write).await;
    assert!(results.iter().all(|r| r.status == Ok), "{results:?}");
}

#[tokio::test]
async fn long_outputs_are_truncated_with_a_marker_everywhere() {
    let mut h = harness();
    h.limits.max_output_bytes = 1000;
    let (results, events) = h
        .run(&[call("t", "probe", r#"{"size":50000}"#)], &[], Mode::Read)
        .await;
    let (_, output) = envelope(&results[0]);
    assert!(output.len() <= 1000);
    assert!(output.contains("… [truncated "), "{output}");
    let Some(DispatchEvent::Completed { output: seen, .. }) = events.last() else {
        panic!("no completion: {events:?}");
    };
    assert_eq!(seen, &output);
}

#[tokio::test]
async fn invalid_arguments_are_errors_naming_the_field() {
    let h = harness();
    let (results, _) = h
        .run(&[call("x", "read", r#"{"path": 7}"#)], &[], Mode::Write)
        .await;
    assert_eq!(results[0].status, ToolStatus::Error);
    assert!(envelope(&results[0]).1.contains("`path`"));
}

#[tokio::test]
async fn bash_output_streams_before_completion() {
    let h = harness();
    let (results, events) = h
        .run(
            &[call("s", "bash", r#"{"command":"echo one; echo two"}"#)],
            &[],
            Mode::Write,
        )
        .await;
    assert_eq!(envelope(&results[0]).1, "one\ntwo\n[exit code: 0]");
    assert!(matches!(
        events.first(),
        Some(DispatchEvent::Started { .. })
    ));
    let streamed: String = events
        .iter()
        .filter_map(|e| match e {
            DispatchEvent::Output(chunk) => Some(chunk.chunk.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, "one\ntwo\n");
    assert!(matches!(
        events.last(),
        Some(DispatchEvent::Completed {
            status: ToolStatus::Ok,
            ..
        })
    ));
}

#[tokio::test]
async fn panics_and_cancellation_still_give_one_result_per_call() {
    let h = harness();
    let (results, _) = h
        .run(
            &[
                call("p", "probe", r#"{"panic":true}"#),
                call("q", "probe", ""),
            ],
            &[],
            Mode::Read,
        )
        .await;
    assert_eq!(results[0].status, ToolStatus::Error);
    assert!(envelope(&results[0]).1.contains("probe exploded"));
    assert_eq!(results[1].status, ToolStatus::Ok);
    h.cancel.cancel();
    let (results, events) = h.run(&[call("c", "probe", "{}")], &[], Mode::Read).await;
    assert_eq!(results[0].status, ToolStatus::Error);
    assert!(envelope(&results[0]).1.contains("cancelled"));
    assert_eq!(events.len(), 2);
}
