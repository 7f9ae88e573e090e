//! A well-behaved plugin: handshake, tools in the registries, calls (concurrent,
//! cancelled, failing), disable with `shutdown`, restart after a failure.

use std::time::{Duration, Instant};

use amber_proto::{PluginKind, PluginState, ToolStatus};
use serde_json::json;

use super::{GENEROUS, Harness, alive, config, wait_gone};
use crate::plugins::runtime::Plugin;

fn normal() -> crate::plugins::PluginsConfig {
    config(GENEROUS, GENEROUS)
}

#[tokio::test]
async fn the_example_plugin_contributes_working_tools() {
    let h = Harness::example(&normal());
    let info = h.enable().await;
    assert_eq!(info.state, PluginState::Active, "{info:?}");
    assert_eq!(info.kind, PluginKind::External);
    let caps: Vec<String> = info
        .capabilities
        .iter()
        .map(|c| format!("{}:{}", c.kind, c.name))
        .collect();
    assert_eq!(caps, ["tool:word_count", "tool:reverse_lines"]);
    for entry in h.registries.tool_entries() {
        assert_eq!(entry.source, "plugin:wordcount");
        assert!(entry.tool.read_only(), "declared readOnly");
        assert!(!entry.tool.destructive());
        assert_eq!(entry.tool.input_schema()["required"], json!(["text"]));
        assert!(!entry.tool.description().is_empty());
    }

    let counted = h
        .call("word_count", json!({"text": "hello big\nworld"}))
        .await;
    assert_eq!(counted.status, ToolStatus::Ok);
    assert_eq!(counted.output, "lines: 2, words: 3, characters: 15");
    let reversed = h.call("reverse_lines", json!({"text": "a\nb\nc"})).await;
    assert_eq!(
        (reversed.status, reversed.output.as_str()),
        (ToolStatus::Ok, "c\nb\na")
    );
    let bad = h.call("word_count", json!({"text": 7})).await;
    assert_eq!(bad.status, ToolStatus::Error);
    assert!(bad.output.contains("must be a string"), "{bad:?}");

    let pid = h.plugin.pid().unwrap();
    let info = h.runtime.disable("wordcount").await.unwrap();
    assert_eq!(info.state, PluginState::Deactivated);
    assert!(h.tool_names().is_empty());
    assert!(!alive(pid), "disable returns after the process is gone");
}

#[tokio::test]
async fn concurrent_calls_are_matched_by_id() {
    let h = Harness::mock("ok", &normal());
    assert_eq!(h.enable().await.state, PluginState::Active);
    // The daemon says who it is and which protocol it speaks.
    let init = h
        .events()
        .into_iter()
        .find(|e| e.starts_with("initialize"))
        .unwrap();
    let params: serde_json::Value = serde_json::from_str(&init["initialize ".len()..]).unwrap();
    assert_eq!(
        params,
        json!({"protocolVersion": 1, "daemon": {"name": "amberd", "version": env!("CARGO_PKG_VERSION")}})
    );
    assert!(h.tool("peek").read_only());
    assert!(!h.tool("act").read_only());

    let tool = h.tool("act");
    // Later calls answer first: each answer must still reach its own caller.
    let calls = [0.6, 0.3, 0.0].map(|delay| {
        let tool = tool.clone();
        let ctx = h.ctx(&format!("call-{delay}"));
        async move { tool.call(json!({"do": "echo", "delay": delay}), &ctx).await }
    });
    let outcomes = futures::future::join_all(calls).await;
    for (outcome, delay) in outcomes.iter().zip([0.6, 0.3, 0.0]) {
        assert_eq!(outcome.status, ToolStatus::Ok, "{outcome:?}");
        // Non-string output arrives as JSON text.
        let output: serde_json::Value = serde_json::from_str(&outcome.output).unwrap();
        assert_eq!(output["args"]["delay"], json!(delay));
        assert_eq!(output["callId"], json!(format!("call-{delay}")));
    }
    assert_eq!(h.info().state, PluginState::Active);
}

#[tokio::test]
async fn a_cancelled_call_returns_promptly_and_the_plugin_stays() {
    let h = Harness::mock("ok", &normal());
    h.enable().await;
    let tool = h.tool("act");
    let ctx = h.ctx("slow");
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let outcome = tool.call(json!({"do": "echo", "delay": 30}), &ctx).await;
    assert_eq!(
        (outcome.status, outcome.output.as_str()),
        (ToolStatus::Error, "cancelled")
    );
    assert!(started.elapsed() < GENEROUS);

    // The plugin heard about it, and keeps working.
    let deadline = Instant::now() + GENEROUS;
    while !h
        .events()
        .iter()
        .any(|e| e.starts_with("notification $/cancelRequest"))
    {
        assert!(Instant::now() < deadline, "{:?}", h.events());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let again = h.call("act", json!({"do": "echo"})).await;
    assert_eq!(again.status, ToolStatus::Ok);
    assert_eq!(h.info().state, PluginState::Active);

    // A call on an already cancelled turn is not even sent.
    let ctx = h.ctx("late");
    ctx.cancel.cancel();
    assert_eq!(tool.call(json!({}), &ctx).await.output, "cancelled");
}

#[tokio::test]
async fn failing_calls_and_stray_messages_leave_the_plugin_running() {
    let h = Harness::mock("ok", &normal());
    h.enable().await;
    let failed = h.call("act", json!({"do": "fail"})).await;
    assert_eq!(
        (failed.status, failed.output.as_str()),
        (ToolStatus::Error, "it did not work")
    );
    let rpc = h.call("act", json!({"do": "rpc_error"})).await;
    assert_eq!(rpc.status, ToolStatus::Error);
    assert!(rpc.output.contains("bad arguments"), "{rpc:?}");
    // An answer to an unknown id, a log line, an unknown notification, a request to us.
    let stray = h.call("act", json!({"do": "stray"})).await;
    assert_eq!(
        (stray.status, stray.output.as_str()),
        (ToolStatus::Ok, "still here")
    );
    let deadline = Instant::now() + GENEROUS;
    while !h.events().iter().any(|e| e == "answer ask-1 -32601") {
        assert!(Instant::now() < deadline, "{:?}", h.events());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(h.info().state, PluginState::Active);
    assert_eq!(h.tool_names(), ["act", "peek"]);
}

#[tokio::test]
async fn disable_sends_shutdown_and_reaps_the_process() {
    let h = Harness::mock("ok", &normal());
    h.enable().await;
    let pid = h.plugin.pid().unwrap();
    assert!(alive(pid));
    let info = h.runtime.disable("mock").await.unwrap();
    assert_eq!(info.state, PluginState::Deactivated);
    assert!(info.capabilities.is_empty() && h.tool_names().is_empty());
    assert!(
        h.events().contains(&"shutdown".to_owned()),
        "{:?}",
        h.events()
    );
    assert!(!alive(pid));
    assert_eq!(h.plugin.pid(), None);

    // Enabled again: a new process, the same tools.
    assert_eq!(h.enable().await.state, PluginState::Active);
    assert_ne!(h.plugin.pid(), Some(pid));
    assert_eq!(h.call("act", json!({})).await.status, ToolStatus::Ok);
    h.runtime.shutdown().await;
    for pid in h.started_pids() {
        assert!(!alive(pid));
    }
}

#[tokio::test]
async fn a_plugin_ignoring_shutdown_is_killed_after_the_grace_period() {
    let h = Harness::mock("ignore_shutdown", &normal());
    h.enable().await;
    let pid = h.plugin.pid().unwrap();
    let started = Instant::now();
    h.runtime.disable("mock").await.unwrap();
    let took = started.elapsed();
    assert!(h.events().contains(&"shutdown".to_owned()));
    assert!(!alive(pid), "killed once the grace period ran out");
    assert!(
        took >= super::super::process::SHUTDOWN_GRACE - Duration::from_millis(100),
        "{took:?}"
    );
}

#[tokio::test]
async fn enable_after_a_failure_starts_a_fresh_process() {
    let h = Harness::mock("ok", &normal());
    h.enable().await;
    let first = h.plugin.pid().unwrap();
    let crashed = h.call("act", json!({"do": "crash"})).await;
    assert_eq!(crashed.status, ToolStatus::Error);
    h.assert_failed("exited with status 3").await;

    let info = h.enable().await;
    assert_eq!(info.state, PluginState::Active, "{info:?}");
    assert_eq!(info.error, None);
    let second = h.plugin.pid().unwrap();
    assert_ne!(first, second);
    let ok = h.call("act", json!({"do": "echo"})).await;
    assert_eq!(ok.status, ToolStatus::Ok, "{ok:?}");
    h.runtime.disable("mock").await.unwrap();
    wait_gone(second).await;
}

#[tokio::test]
async fn a_late_shutdown_for_a_failed_process_spares_its_successor() {
    let h = Harness::mock("ok", &normal());
    h.enable().await;
    h.call("act", json!({"do": "crash"})).await;
    h.assert_failed("exited with status 3").await;
    h.enable().await;
    let pid = h.plugin.pid().unwrap();
    // The runtime answers a failure with a spawned `shutdown`; simulate it arriving only
    // now, after the restart.
    let old = super::super::lock(&h.plugin.slot).serial - 1;
    super::super::lock(&h.plugin.slot).failed = Some(old);
    h.plugin.shutdown().await;
    assert!(alive(pid), "the new process was left alone");
    assert_eq!(h.call("act", json!({})).await.status, ToolStatus::Ok);
    h.runtime.disable("mock").await.unwrap();
    assert!(!alive(pid));
}
