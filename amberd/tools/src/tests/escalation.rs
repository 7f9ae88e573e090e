//! Dispatch and escalation: a gate's approval of an unsandboxed run reaches that call's
//! `ToolContext` (and no other call's), so `bash` and `process start` run without the OS
//! sandbox exactly when the gate said so — with the session's sandbox on or unavailable.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use amber_exec::sandbox::{SandboxInfo, SandboxMode, SandboxSpec};
use amber_proto::{ToolCall, ToolStatus};
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::workspace;
use crate::gate::{Gate, GateCall, GateVerdict};
use crate::sandbox::{ToolSandbox, Unsandboxed};
use crate::{
    DispatchEvent, DispatchRequest, DispatchResult, SessionTools, ToolLimits, ToolRegistry,
    dispatch,
};

/// Answers each call by its id, as a session gate would after asking.
struct Answers(HashMap<&'static str, GateVerdict>);

impl Gate for Answers {
    fn check<'a>(&'a self, call: GateCall<'a>) -> BoxFuture<'a, GateVerdict> {
        let verdict = self
            .0
            .get(call.call.id.as_str())
            .cloned()
            .unwrap_or_else(|| GateVerdict::Deny("unexpected call".into()));
        Box::pin(async move { verdict })
    }
}

fn sandbox_on(workspace: &Path) -> ToolSandbox {
    ToolSandbox::On(Arc::new(SandboxSpec {
        egress: None,
        masked: Vec::new(),
        allow_unix_sockets: Vec::new(),
        nested_checkouts: Vec::new(),
        mode: SandboxMode::WorkspaceWrite,
        network: false,
        workspace: workspace.to_owned(),
        tmp_dir: std::env::temp_dir(),
        writable_roots: vec![],
        hidden: vec![],
        daemon_pid: None,
        guarded_pids: Vec::new(),
        simulate_landlock_abi: None,
        in_place: false,
    }))
}

fn unavailable() -> ToolSandbox {
    ToolSandbox::Unavailable {
        info: SandboxInfo::new(
            SandboxMode::WorkspaceWrite,
            amber_proto::NetworkMode::from_bool(false),
        ),
        reason: "Landlock is not available in this kernel".into(),
    }
}

fn call(id: &str, name: &str, arguments: &Value) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments: arguments.to_string(),
    }
}

fn touch(id: &str, file: &str) -> ToolCall {
    call(
        id,
        "bash",
        &json!({"command": format!("touch {file}"), "sandbox": false}),
    )
}

async fn run(
    workspace: &Path,
    session: &Arc<SessionTools>,
    calls: &[ToolCall],
    gate: &Answers,
) -> Vec<DispatchResult> {
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel::<DispatchEvent>();
    dispatch(DispatchRequest {
        registry: &ToolRegistry::builtin(),
        calls,
        previous_calls: &[],
        gate,
        session,
        workspace,
        cancel: &CancellationToken::new(),
        limits: &ToolLimits::default(),
        events: &tx,
    })
    .await
}

fn output(result: &DispatchResult) -> String {
    let value: Value = serde_json::from_str(&result.envelope).unwrap();
    value["output"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn an_unsandboxed_approval_lets_that_call_run_and_no_other() {
    let (_dir, ctx) = workspace();
    let ws = ctx.workspace.clone();
    let session = Arc::new(SessionTools::detached());
    session.set_sandbox(sandbox_on(&ws));
    let gate = Answers(HashMap::from([
        (
            "approved",
            GateVerdict::AllowUnsandboxed(Unsandboxed::approved_by_person()),
        ),
        ("plain", GateVerdict::Allow),
    ]));
    let calls = [touch("approved", "approved"), touch("plain", "plain")];
    let results = run(&ws, &session, &calls, &gate).await;

    assert_eq!(results[0].status, ToolStatus::Ok, "{}", results[0].envelope);
    assert!(
        ws.join("approved").exists(),
        "the approved call did not run"
    );
    assert_eq!(
        results[1].status,
        ToolStatus::Denied,
        "{}",
        results[1].envelope
    );
    assert!(
        output(&results[1]).contains("sandbox: false"),
        "{}",
        results[1].envelope
    );
    assert!(
        !ws.join("plain").exists(),
        "a call allowed only inside the sandbox ran unsandboxed"
    );
}

#[tokio::test]
async fn an_unavailable_sandbox_runs_a_command_only_when_approved_unsandboxed() {
    let (_dir, ctx) = workspace();
    let ws = ctx.workspace.clone();
    let session = Arc::new(SessionTools::detached());
    session.set_sandbox(unavailable());
    let gate = Answers(HashMap::from([
        (
            "approved",
            GateVerdict::AllowUnsandboxed(Unsandboxed::approved_by_person()),
        ),
        ("plain", GateVerdict::Allow),
    ]));
    let calls = [
        call("approved", "bash", &json!({"command": "touch approved"})),
        call("plain", "bash", &json!({"command": "touch plain"})),
    ];
    let results = run(&ws, &session, &calls, &gate).await;

    assert_eq!(results[0].status, ToolStatus::Ok, "{}", results[0].envelope);
    assert!(ws.join("approved").exists());
    assert_eq!(results[1].status, ToolStatus::Denied);
    assert!(
        output(&results[1]).contains("Landlock is not available"),
        "{}",
        results[1].envelope
    );
    assert!(!ws.join("plain").exists(), "ran unsandboxed unapproved");
}

#[tokio::test]
async fn a_process_start_approved_unsandboxed_runs_and_an_unapproved_one_does_not() {
    let (_dir, ctx) = workspace();
    let ws = ctx.workspace.clone();
    let session = Arc::new(SessionTools::detached());
    session.set_sandbox(sandbox_on(&ws));
    let gate = Answers(HashMap::from([
        (
            "approved",
            GateVerdict::AllowUnsandboxed(Unsandboxed::approved_by_person()),
        ),
        ("plain", GateVerdict::Allow),
    ]));
    let start = |file: &str| json!({"action": "start", "command": format!("touch {file}"), "sandbox": false});
    let calls = [
        call("approved", "process", &start("approved")),
        call("plain", "process", &start("plain")),
    ];
    let results = run(&ws, &session, &calls, &gate).await;

    assert_eq!(results[0].status, ToolStatus::Ok, "{}", results[0].envelope);
    assert_eq!(
        results[1].status,
        ToolStatus::Denied,
        "{}",
        results[1].envelope
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !ws.join("approved").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the approved start never ran"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!ws.join("plain").exists());
}
