//! Misbehaving plugins: each ends Failed with a clear error, its tools unwound, its
//! pending calls answered, its process gone — and the runtime carries on.

use std::time::Duration;

use amber_proto::{PluginState, ToolStatus};
use serde_json::json;

use super::{GENEROUS, Harness, config};
use crate::plugins::PluginsConfig;

fn normal() -> PluginsConfig {
    config(GENEROUS, GENEROUS)
}

/// Enables the mock, makes one `act` call doing `what`, and checks the call's error and
/// the plugin's.
async fn misbehave(what: &str, config: &PluginsConfig, expected: &str) -> Harness {
    let h = Harness::mock("ok", config);
    assert_eq!(h.enable().await.state, PluginState::Active);
    let outcome = h.call("act", json!({"do": what})).await;
    assert_eq!(outcome.status, ToolStatus::Error, "{outcome:?}");
    assert!(outcome.output.contains(expected), "{outcome:?}");
    h.assert_failed(expected).await;
    h
}

#[tokio::test]
async fn garbage_on_stdout_fails_the_plugin() {
    misbehave(
        "garbage",
        &normal(),
        "printed garbage: oops, this is not JSON",
    )
    .await;
}

#[tokio::test]
async fn a_crash_mid_call_fails_the_plugin() {
    misbehave("crash", &normal(), "exited with status 3").await;
}

#[tokio::test]
async fn a_hung_call_times_out_and_fails_the_plugin() {
    let short = config(GENEROUS, Duration::from_millis(500));
    let h = misbehave("hang", &short, "hung: no answer to tool/call within 500ms").await;
    let error = h.info().error.unwrap();
    assert_eq!(error, "hung: no answer to tool/call within 500ms");
}

#[tokio::test]
async fn an_overlong_line_fails_the_plugin() {
    misbehave(
        "long_line",
        &normal(),
        "floods its output (a line over 1024 KiB)",
    )
    .await;
}

#[tokio::test]
async fn an_output_flood_fails_the_plugin() {
    misbehave("flood", &normal(), "floods its output (more than 8 MiB/s)").await;
}

#[tokio::test]
async fn pending_calls_are_answered_when_the_plugin_dies() {
    let h = Harness::mock("ok", &normal());
    h.enable().await;
    let tool = h.tool("act");
    let (slow, stuck) = (h.ctx("slow"), h.ctx("stuck"));
    let (slow, stuck, crash) = tokio::join!(
        tool.call(json!({"do": "echo", "delay": 30}), &slow),
        tool.call(json!({"do": "hang"}), &stuck),
        h.call("act", json!({"do": "crash", "delay": 0.3})),
    );
    for outcome in [slow, stuck, crash] {
        assert_eq!(outcome.status, ToolStatus::Error);
        assert!(
            outcome.output.contains("exited with status 3"),
            "{outcome:?}"
        );
    }
    h.assert_failed("exited with status 3").await;
    // A tool someone still holds answers at once.
    let late = tool.call(json!({}), &h.ctx("late")).await;
    assert!(
        late.output.contains("is not running: exited with status 3"),
        "{late:?}"
    );
}

#[tokio::test]
async fn exiting_right_after_initialize_fails_the_plugin() {
    let h = Harness::mock("exit_after_init", &normal());
    h.enable().await;
    h.assert_failed("exited with status 0").await;
}

#[tokio::test]
async fn an_initialize_error_fails_the_plugin() {
    let h = Harness::mock("init_error", &normal());
    let info = h.enable().await;
    assert_eq!(info.state, PluginState::Failed);
    assert_eq!(
        info.error.as_deref(),
        Some("initialize failed: the plugin answered with an error: no licence (code -32000)")
    );
    h.assert_failed("no licence").await;
}

#[tokio::test]
async fn a_silent_initialize_times_out() {
    let h = Harness::mock(
        "init_silent",
        &config(Duration::from_millis(1500), GENEROUS),
    );
    let info = h.enable().await;
    assert_eq!(info.state, PluginState::Failed);
    assert_eq!(
        info.error.as_deref(),
        Some("initialize failed: no answer to initialize within 1s 500ms")
    );
    h.assert_failed("within").await;
}

#[tokio::test]
async fn a_banner_before_the_handshake_is_garbage() {
    let h = Harness::mock("init_garbage", &normal());
    h.enable().await;
    h.assert_failed("printed garbage: Welcome to the mock plugin!")
        .await;
}

#[tokio::test]
async fn an_invalid_tool_list_fails_initialize() {
    let h = Harness::mock("bad_tools", &normal());
    h.enable().await;
    h.assert_failed("tools[0] (`bad name!`): the name may only use A-Z a-z 0-9 _ -")
        .await;
}

#[tokio::test]
async fn a_missing_command_fails_initialize() {
    let h = Harness::new("ghost", &normal(), |dir| {
        (dir.join("no-such-plugin").display().to_string(), Vec::new())
    });
    let info = h.enable().await;
    assert_eq!(info.state, PluginState::Failed);
    let error = info.error.unwrap();
    assert!(
        error.starts_with("initialize failed: cannot start `"),
        "{error}"
    );
    assert!(error.contains("No such file or directory"), "{error}");
}
