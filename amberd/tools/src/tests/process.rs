//! process with real processes: output streams into the ring, list, kill of
//! the whole group (with SIGKILL escalation), exit codes, dropped-bytes
//! marker, caps, and shutdown/drop of the session killing everything.

use std::sync::Arc;
use std::time::{Duration, Instant};

use amber_proto::ToolStatus;
use serde_json::{Value, json};

use super::bash::{assert_group_gone, live_members};
use super::workspace;
use crate::process::{MAX_RUNNING, ProcessInfo, ProcessState, ProcessTool};
use crate::{SessionTools, Tool, ToolContext, ToolOutcome};

async fn process(ctx: &ToolContext, args: Value) -> ToolOutcome {
    ProcessTool.call(args, ctx).await
}

async fn start(ctx: &ToolContext, command: &str) -> ProcessInfo {
    let out = process(ctx, json!({"action": "start", "command": command})).await;
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    let id = out.output["started ".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    info(ctx, &id)
}

fn info(ctx: &ToolContext, id: &str) -> ProcessInfo {
    ctx.session
        .processes
        .list()
        .into_iter()
        .find(|p| p.id == id)
        .unwrap()
}

fn pgid(info: &ProcessInfo) -> libc::pid_t {
    libc::pid_t::try_from(info.pid).unwrap()
}

/// Poll `output` until the accumulated text contains `needle`.
async fn read_until(ctx: &ToolContext, id: &str, needle: &str) -> String {
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !seen.contains(needle) {
        assert!(Instant::now() < deadline, "no `{needle}` in {seen:?}");
        let out = process(ctx, json!({"action": "output", "id": id})).await;
        assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
        let (_header, body) = out.output.split_once('\n').unwrap();
        if body != "(no new output)" {
            seen.push_str(body);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    seen
}

async fn wait_finished(ctx: &ToolContext, id: &str) -> ProcessInfo {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = info(ctx, id);
        if !info.state.is_running() {
            return info;
        }
        assert!(Instant::now() < deadline, "{id} still running");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn start_stream_list_kill() {
    let (_dir, ctx) = workspace();
    let p = start(
        &ctx,
        "sleep 60 & echo one; echo two >&2; sleep 0.3; echo three; sleep 60",
    )
    .await;
    assert_eq!(p.id, "p1");
    assert!(p.state.is_running());
    let seen = read_until(&ctx, "p1", "two").await;
    assert!(!seen.contains("three"), "{seen}");
    let seen = read_until(&ctx, "p1", "three").await;
    assert!(!seen.contains("one"), "only new output: {seen}");
    let out = process(&ctx, json!({"action": "output", "id": "p1"})).await;
    assert!(
        out.output
            .starts_with(&format!("p1 (pid {}): running, up ", p.pid)),
        "{}",
        out.output
    );
    assert!(out.output.ends_with("\n(no new output)"), "{}", out.output);

    let out = process(&ctx, json!({"action": "list"})).await;
    assert!(
        out.output
            .starts_with(&format!("p1  pid {}  running  up ", p.pid)),
        "{}",
        out.output
    );
    assert!(out.output.ends_with("sleep 60"), "{}", out.output);
    // Two sleeps (bash may exec the last one in place of itself).
    assert!(live_members(pgid(&p)).len() >= 2);

    let started = Instant::now();
    let out = process(&ctx, json!({"action": "kill", "id": "p1"})).await;
    assert_eq!(out.status, ToolStatus::Ok);
    assert!(
        out.output.starts_with("p1 killed: killed (pid "),
        "{}",
        out.output
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "SIGTERM was enough"
    );
    assert_group_gone(pgid(&p)).await;
    assert_eq!(
        info(&ctx, "p1").state,
        ProcessState::Killed { forced: false }
    );
    let out = process(&ctx, json!({"action": "kill", "id": "p1"})).await;
    assert!(
        out.output.starts_with("p1 was not running"),
        "{}",
        out.output
    );
    let out = process(&ctx, json!({"action": "list"})).await;
    assert!(out.output.contains("  killed  ran "), "{}", out.output);
}

#[tokio::test]
async fn exit_code_is_reported_and_leftovers_are_killed() {
    let (_dir, ctx) = workspace();
    std::fs::create_dir(ctx.workspace.join("sub")).unwrap();
    let out = process(
        &ctx,
        json!({"action": "start", "command": "pwd; sleep 60 & exit 3", "cwd": "sub"}),
    )
    .await;
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    let p = wait_finished(&ctx, "p1").await;
    assert_eq!(p.state, ProcessState::Exited { code: 3 });
    assert_group_gone(pgid(&p)).await;
    let out = process(&ctx, json!({"action": "output", "id": "p1"})).await;
    assert_eq!(
        out.output,
        format!(
            "p1 (pid {}): exited with code 3\n{}/sub\n",
            p.pid,
            ctx.workspace.display()
        )
    );
    let out = process(&ctx, json!({"action": "list"})).await;
    assert!(
        out.output.contains("exited with code 3  ran 0s"),
        "{}",
        out.output
    );
}

#[tokio::test]
async fn the_ring_drops_the_oldest_output_with_a_marker() {
    let (_dir, mut ctx) = workspace();
    ctx.limits.max_output_bytes = 1 << 20;
    let p = start(&ctx, "head -c 400000 /dev/zero | tr '\\0' a; echo END").await;
    wait_finished(&ctx, &p.id).await;
    let out = process(&ctx, json!({"action": "output", "id": "p1"})).await;
    let dropped = 400_004 - 256 * 1024;
    assert!(
        out.output.contains(&format!(
            "\n[{dropped} bytes of older output were dropped: only the newest 256 KiB are kept]\n"
        )),
        "{}",
        &out.output[..200]
    );
    assert!(out.output.ends_with("aaaaEND\n"));
    let body = out.output.split_once("kept]\n").unwrap().1;
    assert_eq!(body.len(), 256 * 1024);
}

#[tokio::test]
async fn output_is_capped_for_the_model() {
    let (_dir, mut ctx) = workspace();
    ctx.limits.max_output_bytes = 4000;
    let p = start(&ctx, "seq 1 50000").await;
    wait_finished(&ctx, &p.id).await;
    let out = process(&ctx, json!({"action": "output", "id": "p1"})).await;
    assert!(out.output.len() <= 4000, "{}", out.output.len());
    assert!(out.output.contains("[truncated "), "{}", out.output);
    assert!(out.output.ends_with("49999\n50000\n"));
}

#[tokio::test]
async fn sigterm_is_escalated_to_sigkill() {
    let (_dir, ctx) = workspace();
    let p = start(&ctx, "trap '' TERM; echo ready; sleep 60 & sleep 60").await;
    read_until(&ctx, "p1", "ready").await;
    let started = Instant::now();
    let out = process(&ctx, json!({"action": "kill", "id": "p1"})).await;
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "grace first"
    );
    assert!(
        out.output.contains("killed (SIGKILL after SIGTERM grace)"),
        "{}",
        out.output
    );
    assert_group_gone(pgid(&p)).await;
}

#[tokio::test]
async fn processes_outlive_a_cancelled_turn() {
    let (_dir, ctx) = workspace();
    let p = start(&ctx, "sleep 60").await;
    ctx.cancel.cancel();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(info(&ctx, "p1").state.is_running());
    assert_eq!(live_members(pgid(&p)).len(), 1);
    ctx.session.shutdown();
    assert_group_gone(pgid(&p)).await;
}

#[tokio::test]
async fn shutdown_kills_all_and_refuses_new_ones() {
    let (_dir, ctx) = workspace();
    let a = start(&ctx, "sleep 60 & sleep 60").await;
    let b = start(&ctx, "sleep 60").await;
    assert_eq!(b.id, "p2");
    ctx.session.shutdown_and_wait().await;
    assert_group_gone(pgid(&a)).await;
    assert_group_gone(pgid(&b)).await;
    assert!(
        ctx.session
            .processes
            .list()
            .iter()
            .all(|p| p.state == ProcessState::Killed { forced: false })
    );
    let out = process(&ctx, json!({"action": "start", "command": "true"})).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.output.contains("shutting down"), "{}", out.output);
}

#[tokio::test]
async fn dropping_the_session_kills_its_processes() {
    let (_dir, mut ctx) = workspace();
    ctx.session = Arc::new(SessionTools::detached());
    let p = start(&ctx, "sleep 60").await;
    drop(ctx);
    assert_group_gone(pgid(&p)).await;
}

#[tokio::test]
async fn running_processes_are_capped() {
    let (_dir, ctx) = workspace();
    for _ in 0..MAX_RUNNING {
        start(&ctx, "sleep 60").await;
    }
    let out = process(&ctx, json!({"action": "start", "command": "sleep 60"})).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(
        out.output.contains(&format!("{MAX_RUNNING} are running")),
        "{}",
        out.output
    );
    process(&ctx, json!({"action": "kill", "id": "p3"})).await;
    start(&ctx, "true").await;
    ctx.session.shutdown_and_wait().await;
    assert_eq!(ctx.session.processes.running(), 0);
}

#[tokio::test]
async fn arguments_are_checked_and_cwd_confined() {
    let (_dir, ctx) = workspace();
    let cases = [
        (json!({}), "missing required field `action`"),
        (
            json!({"action": "stop"}),
            "`action` must be one of start, list, output, kill; got `stop`",
        ),
        (
            json!({"action": "start"}),
            "missing required field `command`",
        ),
        (
            json!({"action": "start", "command": " "}),
            "`command` is empty",
        ),
        (
            json!({"action": "start", "command": "pwd", "cwd": "../"}),
            "outside the workspace",
        ),
        (
            json!({"action": "start", "command": "pwd", "cwd": "nope"}),
            "not a directory",
        ),
        (json!({"action": "output"}), "missing required field `id`"),
        (
            json!({"action": "output", "id": "p9"}),
            "no process `p9`; there are no processes",
        ),
    ];
    for (args, expected) in cases {
        let out = process(&ctx, args.clone()).await;
        assert_eq!(out.status, ToolStatus::Error, "{args}");
        assert!(out.output.contains(expected), "{args}: {}", out.output);
    }
    let out = process(&ctx, json!({"action": "list"})).await;
    assert_eq!(out.output, "no background processes");
    start(&ctx, "true").await;
    let out = process(&ctx, json!({"action": "kill", "id": "p7"})).await;
    assert_eq!(out.output, "no process `p7`; known: p1");
}
