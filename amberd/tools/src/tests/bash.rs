//! bash with real processes: exit codes, streaming, caps, timeout and cancel
//! killing the whole process group.

use std::time::{Duration, Instant};

use amber_proto::ToolStatus;
use serde_json::json;

use super::workspace;
use crate::bash::BashTool;
use crate::{Tool, ToolContext, ToolOutcome};

async fn bash(ctx: &ToolContext, args: serde_json::Value) -> ToolOutcome {
    BashTool.call(args, ctx).await
}

/// The pgid printed by a command starting with `echo pgid=$$`.
fn pgid_of(output: &str) -> libc::pid_t {
    let line = output.lines().find(|l| l.starts_with("pgid=")).unwrap();
    line["pgid=".len()..].trim().parse().unwrap()
}

/// Processes of group `pgid` that are still alive (zombies waiting for a
/// non-reaping init do not count: they are dead and hold nothing).
pub(super) fn live_members(pgid: libc::pid_t) -> Vec<libc::pid_t> {
    // SAFETY: signal 0 only checks for existence; pgid is positive.
    let rc = unsafe { libc::kill(-pgid, 0) };
    if rc == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return Vec::new();
    }
    let mut live = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<libc::pid_t>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp …
        let Some(rest) = stat.rsplit_once(')').map(|(_, rest)| rest) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let state = fields[0];
        let pgrp: libc::pid_t = fields[2].parse().unwrap();
        if pgrp == pgid && state != "Z" && state != "X" {
            live.push(pid);
        }
    }
    live
}

pub(super) async fn assert_group_gone(pgid: libc::pid_t) {
    for _ in 0..200 {
        if live_members(pgid).is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "group {pgid} still has live processes: {:?}",
        live_members(pgid)
    );
}

#[tokio::test]
async fn reports_exit_code_and_interleaves_stderr() {
    let (_dir, ctx) = workspace();
    let out = bash(
        &ctx,
        json!({"command": "echo out; echo err >&2; echo out2; exit 3"}),
    )
    .await;
    assert_eq!(out.status, ToolStatus::Error);
    assert_eq!(out.output, "out\nerr\nout2\n[exit code: 3]");
    let out = bash(&ctx, json!({"command": "printf done"})).await;
    assert_eq!(out.status, ToolStatus::Ok);
    assert_eq!(out.output, "done\n[exit code: 0]");
    let out = bash(&ctx, json!({"command": "true"})).await;
    assert_eq!(out.output, "[exit code: 0]");
}

#[tokio::test]
async fn runs_in_the_workspace_with_stdin_from_dev_null() {
    let (_dir, ctx) = workspace();
    std::fs::create_dir(ctx.workspace.join("sub")).unwrap();
    let out = bash(&ctx, json!({"command": "pwd; cat; echo after-cat"})).await;
    assert_eq!(
        out.output,
        format!("{}\nafter-cat\n[exit code: 0]", ctx.workspace.display())
    );
    let out = bash(&ctx, json!({"command": "pwd", "cwd": "sub"})).await;
    assert!(
        out.output
            .starts_with(&format!("{}/sub\n", ctx.workspace.display()))
    );
}

#[tokio::test]
async fn cwd_is_confined_and_args_are_checked() {
    let (_dir, ctx) = workspace();
    let out = bash(&ctx, json!({"command": "pwd", "cwd": "../"})).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(
        out.output.contains("outside the workspace"),
        "{}",
        out.output
    );
    let out = bash(&ctx, json!({"command": "pwd", "cwd": "missing"})).await;
    assert!(out.output.contains("not a directory"), "{}", out.output);
    let out = bash(&ctx, json!({})).await;
    assert!(out.output.contains("missing required field `command`"));
    let out = bash(&ctx, json!({"command": "true", "timeout_ms": "5"})).await;
    assert!(out.output.contains("`timeout_ms`"), "{}", out.output);
}

#[tokio::test]
async fn timeout_kills_the_whole_group() {
    let (_dir, ctx) = workspace();
    let started = Instant::now();
    let out = bash(
        &ctx,
        json!({"command": "echo pgid=$$; sleep 30 & sleep 30", "timeout_ms": 300}),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(out.status, ToolStatus::Error);
    assert!(
        out.output.ends_with("[killed: timeout after 300 ms]"),
        "{}",
        out.output
    );
    assert_group_gone(pgid_of(&out.output)).await;
}

#[tokio::test]
async fn default_timeout_comes_from_the_limits() {
    let (_dir, mut ctx) = workspace();
    ctx.limits.bash_default_timeout = Duration::from_millis(200);
    let out = bash(&ctx, json!({"command": "sleep 30"})).await;
    assert!(
        out.output.ends_with("[killed: timeout after 200 ms]"),
        "{}",
        out.output
    );
}

#[tokio::test]
async fn background_leftovers_do_not_hold_the_call() {
    let (_dir, ctx) = workspace();
    let started = Instant::now();
    let out = bash(
        &ctx,
        json!({"command": "echo pgid=$$; sleep 100 & echo done"}),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(out.status, ToolStatus::Ok);
    assert!(
        out.output.ends_with("done\n[exit code: 0]"),
        "{}",
        out.output
    );
    assert_group_gone(pgid_of(&out.output)).await;
}

#[tokio::test]
async fn cancel_kills_the_group_within_200_ms() {
    let (_dir, mut ctx) = workspace();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    ctx.output = Some(tx);
    let cancel = ctx.cancel.clone();
    let task = tokio::spawn(async move {
        let out = BashTool
            .call(
                json!({"command": "echo pgid=$$; sleep 30 & sleep 30"}),
                &ctx,
            )
            .await;
        (out, Instant::now())
    });
    let mut seen = String::new();
    while !seen.contains('\n') {
        let chunk = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap()
            .unwrap();
        seen.push_str(&chunk.chunk);
    }
    let cancelled_at = Instant::now();
    cancel.cancel();
    let (out, finished_at) = task.await.unwrap();
    let took = finished_at - cancelled_at;
    assert!(took < Duration::from_millis(200), "cancel took {took:?}");
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.output.ends_with("[cancelled]"), "{}", out.output);
    assert_group_gone(pgid_of(&seen)).await;
}

#[tokio::test]
async fn dropping_the_call_kills_the_group() {
    let (_dir, mut ctx) = workspace();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    ctx.output = Some(tx);
    let call = BashTool.call(json!({"command": "echo pgid=$$; sleep 30"}), &ctx);
    let mut call = Box::pin(call);
    let mut seen = String::new();
    while !seen.contains('\n') {
        tokio::select! {
            _ = &mut call => panic!("finished early"),
            Some(chunk) = rx.recv() => seen.push_str(&chunk.chunk),
        }
    }
    drop(call);
    assert_group_gone(pgid_of(&seen)).await;
}

#[tokio::test]
async fn chunks_stream_before_the_command_finishes() {
    let (_dir, mut ctx) = workspace();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    ctx.output = Some(tx);
    ctx.call_id = "call_stream".to_owned();
    let task = tokio::spawn(async move {
        BashTool
            .call(json!({"command": "echo first; sleep 1; echo second"}), &ctx)
            .await
    });
    let first = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.call_id, "call_stream");
    assert_eq!(first.chunk, "first\n");
    assert!(
        !task.is_finished(),
        "the first chunk must arrive while the command runs"
    );
    let out = task.await.unwrap();
    assert_eq!(out.output, "first\nsecond\n[exit code: 0]");
    let second = rx.recv().await.unwrap();
    assert_eq!(second.chunk, "second\n");
}

#[tokio::test]
async fn output_is_capped_with_a_marker() {
    let (_dir, mut ctx) = workspace();
    ctx.limits.max_output_bytes = 2000;
    let out = bash(&ctx, json!({"command": "seq 1 100000; echo tail-end"})).await;
    assert_eq!(out.status, ToolStatus::Ok);
    assert!(out.output.len() <= 2000, "{}", out.output.len());
    assert!(out.output.starts_with("1\n2\n3\n"));
    assert!(out.output.contains("[truncated "), "{}", out.output);
    assert!(
        out.output.ends_with("tail-end\n[exit code: 0]"),
        "{}",
        out.output
    );
}

#[tokio::test]
async fn invalid_utf8_is_replaced_not_fatal() {
    let (_dir, ctx) = workspace();
    let out = bash(
        &ctx,
        json!({"command": r"printf 'a\xffb\n'; printf '\xc3'; printf '\xa9\n'"}),
    )
    .await;
    assert_eq!(out.output, "a\u{FFFD}b\né\n[exit code: 0]");
}

#[tokio::test]
async fn signal_deaths_are_reported() {
    let (_dir, ctx) = workspace();
    let out = bash(&ctx, json!({"command": "kill -TERM $$"})).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert_eq!(out.output, "[killed by signal 15]");
}
