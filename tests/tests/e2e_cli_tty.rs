//! End-to-end: `amber-cli run` on a terminal (a pty from `script`) asks approvals inline;
//! when another client answers first, the open prompt is dismissed ("answered elsewhere")
//! and amber-cli exits as soon as the turn ends, instead of waiting for the terminal read.

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::Decision;
use amber_tests::bin_path;
use amber_tests::e2e::{Events, done, spawn};
use amber_tests::e2e3::{bash, connect_approver, next_approval, request_id, respond};
use serde_json::json;

/// Shell-quotes one word for `script -c`.
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_answered_elsewhere_dismisses_the_prompt_and_run_exits() {
    let mock = MockLlm::start(vec![
        bash("call_rm", "rm -rf build"),
        MockTurn::text("Removed build."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    std::fs::create_dir_all(daemon.workspace.join("build")).unwrap();

    // amber-cli with a terminal on stdin (so it asks inline), through script(1).
    let cli = daemon.cli();
    let line = [
        quote(&bin_path("amber-cli").display().to_string()),
        "--no-autostart".into(),
        "run".into(),
        quote("remove build"),
    ]
    .join(" ");
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &line, "/dev/null"]);
    for (key, value) in cli.get_envs() {
        match value {
            Some(value) => cmd.env(key, value),
            None => cmd.env_remove(key),
        };
    }
    cmd.current_dir(&daemon.workspace)
        // Kept open and silent: nobody types an answer at the prompt.
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });

    // Another client answers the request while amber-cli's prompt is open.
    let approver = connect_approver(&daemon).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let sid = loop {
        let list = daemon.rpc_ok("session/list", json!({}));
        if let Some(id) = list["sessions"][0]["sessionId"].as_str() {
            break id.to_owned();
        }
        assert!(Instant::now() < deadline, "amber-cli created no session");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let mut events = Events::subscribe(&approver, &sid, Some(0)).await;
    let (_, approval) = next_approval(&mut events).await;
    // Give amber-cli's prompt time to open (it got the same event).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let accepted = respond(&approver, &sid, &request_id(&approval), Decision::AllowOnce)
        .await
        .unwrap();
    assert!(accepted, "amber-cli answered although nobody typed");

    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("amber-cli still waits on its terminal prompt after the turn ended");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    drop(child.stdin.take());
    let out = reader.join().unwrap();
    assert_eq!(status.code(), Some(0), "{out}");
    assert!(out.contains("approval needed: bash: rm -rf build"), "{out}");
    assert!(
        out.contains("was answered elsewhere (allowed once)"),
        "{out}"
    );
    assert!(out.contains("Removed build."), "{out}");
    assert!(!daemon.workspace.join("build").exists());
}
