//! The real `amber-cli` binary against a scripted fake daemon: `run --json` output,
//! exit codes, and `--yes` answering approval requests (which the real daemon only
//! sends).

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jsonrpsee::server::{RpcModule, SubscriptionMessage};
use serde_json::{Value, json};
use tokio::sync::{Notify, broadcast};

#[derive(Default)]
struct State {
    approver: Mutex<bool>,
    decision: Mutex<Option<String>>,
    answered: Notify,
    events: Mutex<Option<broadcast::Sender<Value>>>,
}

fn event(seq: Option<u64>, body: Value) -> Value {
    let mut v = json!({"sessionId": "s1", "turnId": "t1", "time": "2026-01-01T00:00:00Z"});
    if let Some(seq) = seq {
        v["seq"] = seq.into();
    }
    v.as_object_mut()
        .unwrap()
        .extend(body.as_object().unwrap().clone());
    v
}

/// The scripted turn: a bash call that needs approval, then a final message.
async fn play_turn(state: Arc<State>, tx: broadcast::Sender<Value>, stop: &'static str) {
    let send = |v: Value| {
        let _ = tx.send(v);
    };
    send(event(
        Some(1),
        json!({"type": "turn_started", "prompt": "go"}),
    ));
    // Another turn's event: must not show up in the output.
    send(
        json!({"seq": 2, "sessionId": "s1", "turnId": "t0", "time": "x", "type": "message_completed", "itemId": "z", "role": "assistant", "text": "not mine"}),
    );
    send(event(
        Some(3),
        json!({"type": "tool_call_started", "itemId": "m1", "callId": "c1", "name": "bash", "arguments": {"command": "rm -rf build"}}),
    ));
    send(event(
        Some(4),
        json!({"type": "approval_requested", "requestId": "r1", "callId": "c1", "tool": "bash", "arguments": {"command": "rm -rf build"}, "reason": "destructive", "scope": "command"}),
    ));
    let approver = *state.approver.lock().unwrap();
    let allowed = approver
        && tokio::time::timeout(Duration::from_secs(5), state.answered.notified())
            .await
            .is_ok()
        && state.decision.lock().unwrap().as_deref() == Some("allow_once");
    if allowed {
        send(event(
            Some(5),
            json!({"type": "approval_resolved", "requestId": "r1", "decision": "allow_once", "by": "client"}),
        ));
        send(event(
            Some(6),
            json!({"type": "tool_call_completed", "callId": "c1", "status": "ok", "output": "", "durationMs": 2}),
        ));
    } else {
        send(event(
            Some(5),
            json!({"type": "approval_resolved", "requestId": "r1", "decision": "deny", "by": "no_approver"}),
        ));
        send(event(
            Some(6),
            json!({"type": "tool_call_completed", "callId": "c1", "status": "denied", "output": "no approver", "durationMs": 0}),
        ));
    }
    send(event(
        None,
        json!({"type": "message_delta", "itemId": "m2", "delta": "Do"}),
    ));
    send(event(None, json!({"type": "something_new", "x": 1})));
    send(event(
        Some(7),
        json!({"type": "message_completed", "itemId": "m2", "role": "assistant", "text": "Done."}),
    ));
    send(event(
        Some(8),
        json!({"type": "turn_completed", "stopReason": stop, "usage": {"promptTokens": 3, "completionTokens": 2, "cachedTokens": 0, "totalTokens": 5}}),
    ));
}

fn module(state: Arc<State>, stop: &'static str) -> RpcModule<Arc<State>> {
    let mut m = RpcModule::new(state);
    m.register_method("initialize", |params, state, _| {
        let p: Value = params.parse().unwrap();
        *state.approver.lock().unwrap() = p["capabilities"]["approvals"] == true;
        json!({"protocolVersion": 1, "serverInfo": {"name": "fake", "version": "0"}, "capabilities": {}})
    })
    .unwrap();
    m.register_method("session/new", |_, _, _| {
        json!({"sessionId": "s1", "cwd": "/", "mode": "write", "model": "m", "title": "", "state": "idle",
               "createdAt": "x", "updatedAt": "x", "usage": {}})
    })
    .unwrap();
    m.register_method("session/prompt", move |_, state, _| {
        let tx = state.events.lock().unwrap().clone().unwrap();
        tokio::spawn(play_turn(Arc::clone(state), tx, stop));
        json!({"turnId": "t1"})
    })
    .unwrap();
    m.register_method("approval/respond", |params, state, _| {
        let p: Value = params.parse().unwrap();
        *state.decision.lock().unwrap() = p["decision"].as_str().map(str::to_owned);
        state.answered.notify_one();
        json!({"accepted": true})
    })
    .unwrap();
    m.register_subscription(
        "session/subscribe",
        "session/event",
        "session/unsubscribe",
        |_, pending, state, _| async move {
            let mut rx = state.events.lock().unwrap().as_ref().unwrap().subscribe();
            let sink = pending.accept().await.unwrap();
            let synced = json!({"sessionId": "s1", "time": "x", "type": "synced", "lastSeq": 0});
            let raw = serde_json::value::to_raw_value(&synced).unwrap();
            sink.send(SubscriptionMessage::from(raw)).await.unwrap();
            while let Ok(v) = rx.recv().await {
                let raw = serde_json::value::to_raw_value(&v).unwrap();
                if sink.send(SubscriptionMessage::from(raw)).await.is_err() {
                    break;
                }
            }
        },
    )
    .unwrap();
    m
}

fn serve(socket: &Path, state: Arc<State>, stop: &'static str) -> jsonrpsee::server::ServerHandle {
    *state.events.lock().unwrap() = Some(broadcast::channel(64).0);
    crate::support::serve_module(socket, module(state, stop))
}

async fn run_cli(socket: &Path, extra: &[&str]) -> (i32, Vec<Value>, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_amber-cli"));
    cmd.arg("--socket")
        .arg(socket)
        .args(["--no-autostart", "run", "--json"])
        .args(extra)
        .arg("go");
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    let lines = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (
        out.status.code().unwrap(),
        lines,
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// A temp dir fit to hold a socket: clients trust only a private (0700) socket directory,
/// and tempfile leaves the umask's 0755.
fn private_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread")]
async fn yes_answers_approvals_with_allow_once() {
    let dir = private_dir();
    let socket = dir.path().join("amberd.sock");
    let state = Arc::new(State::default());
    let _h = serve(&socket, Arc::clone(&state), "end_turn");

    let (code, lines, stderr) = run_cli(&socket, &["--yes"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        *state.approver.lock().unwrap(),
        "--yes connects as an approver"
    );
    assert_eq!(
        state.decision.lock().unwrap().as_deref(),
        Some("allow_once")
    );
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    // The opening line first; `synced` (the end of the subscription's replay) is an event too.
    assert_eq!(
        types,
        [
            "session_started",
            "synced",
            "turn_started",
            "tool_call_started",
            "approval_requested",
            "approval_resolved",
            "tool_call_completed",
            "message_delta",
            "something_new",
            "message_completed",
            "turn_completed",
            "result"
        ]
    );
    let result = lines.last().unwrap();
    assert_eq!(result["text"], "Done.");
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(result["sessionId"], "s1");
    assert_eq!(result["usage"]["totalTokens"], 5);
    assert_eq!(result["permissionDenials"], json!([]));
}

#[tokio::test(flavor = "multi_thread")]
async fn without_yes_denials_are_reported_and_guards_exit_3() {
    let dir = private_dir();
    let socket = dir.path().join("amberd.sock");
    let state = Arc::new(State::default());
    let _h = serve(&socket, Arc::clone(&state), "tool_failures");

    let (code, lines, stderr) = run_cli(&socket, &[]).await;
    assert_eq!(code, 3, "{stderr}");
    assert!(!*state.approver.lock().unwrap());
    assert_eq!(*state.decision.lock().unwrap(), None);
    let result = lines.last().unwrap();
    assert_eq!(result["stopReason"], "tool_failures");
    assert_eq!(
        result["permissionDenials"],
        json!([{"callId": "c1", "tool": "bash", "arguments": {"command": "rm -rf build"},
                "reason": "destructive", "output": "no approver"}])
    );
}
