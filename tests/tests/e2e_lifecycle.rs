//! End-to-end: the daemon's life on its socket — graceful stop on SIGTERM and
//! `daemon/shutdown`, refusing to start over a live daemon, replacing a stale socket, and
//! refusing peers of another uid.

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::e2e::{Events, connect, new_session, run_bounded, spawn, stop_reason, within};
use amber_tests::{DaemonOptions, TestDaemon, bin_path};
use serde_json::json;

const EXIT_TIMEOUT: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_mid_turn_cancels_it_exits_zero_and_removes_the_socket() {
    let chunks = (0..30).map(|i| format!("word{i} ")).collect();
    let mock = MockLlm::start(vec![MockTurn::Slow {
        chunks,
        interval_ms: 1_000,
    }])
    .await;
    let mut daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    client.session_prompt(&sid, "stream").await.unwrap();
    events.until("message_delta").await;

    daemon.kill(libc::SIGTERM);
    let rest = events.turn().await;
    assert_eq!(stop_reason(&rest), "cancelled", "{rest:#?}");
    // Then the subscription ends (session closed / connection gone), nothing else.
    let end = events.try_next().await;
    assert!(end.is_err(), "expected the end of the stream, got {end:?}");
    let code = tokio::task::block_in_place(|| daemon.wait_exit(EXIT_TIMEOUT));
    assert_eq!(code, Some(0), "amberd exit code after SIGTERM");
    assert!(!daemon.socket.exists(), "socket file left behind");
    assert!(daemon.log().contains("SIGTERM"));
}

#[tokio::test(flavor = "multi_thread")]
async fn daemon_shutdown_rpc_exits_zero() {
    let mut daemon = TestDaemon::spawn_with(DaemonOptions::default());
    let client = connect(&daemon).await;
    let result = within("daemon/shutdown", client.daemon_shutdown())
        .await
        .unwrap();
    assert_eq!(serde_json::to_value(result).unwrap(), json!({}));
    let code = tokio::task::block_in_place(|| daemon.wait_exit(EXIT_TIMEOUT));
    assert_eq!(code, Some(0));
    assert!(!daemon.socket.exists(), "socket file left behind");
    within("the connection to close", client.closed()).await;
}

#[test]
fn a_second_daemon_on_a_live_socket_exits_non_zero_with_a_clear_message() {
    let daemon = TestDaemon::spawn_with(DaemonOptions::default());
    let other = daemon.dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let mut cmd = Command::new(bin_path("amberd"));
    cmd.arg("--socket")
        .arg(&daemon.socket)
        .arg("--data-dir")
        .arg(other.join("data"))
        .arg("--config")
        .arg(daemon.dir.path().join("config.toml"))
        .env("HOME", &other)
        .env_remove("AMBER_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env("AMBER_LOG", "warn");
    let (code, _, stderr) = run_bounded(cmd);
    assert!(matches!(code, Some(c) if c != 0), "exit code {code:?}");
    assert!(
        stderr.contains("already") && stderr.contains(&daemon.socket.display().to_string()),
        "unclear message: {stderr}"
    );
    // The first daemon is untouched.
    let status = daemon.rpc_ok("daemon/status", json!({}));
    assert_eq!(status["pid"], daemon.pid());
}

#[test]
fn a_stale_socket_left_by_sigkill_is_replaced_on_the_next_start() {
    let mut daemon = TestDaemon::spawn_with(DaemonOptions::default());
    let old_pid = daemon.pid();
    daemon.kill(libc::SIGKILL);
    assert_eq!(daemon.wait_exit(EXIT_TIMEOUT), Some(128 + libc::SIGKILL));
    assert!(daemon.socket.exists(), "SIGKILL leaves the socket file");
    let refused = std::os::unix::net::UnixStream::connect(&daemon.socket).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);

    daemon.restart();
    let status = daemon.rpc_ok("daemon/status", json!({}));
    assert_eq!(status["pid"], daemon.pid());
    assert_ne!(daemon.pid(), old_pid);
    assert!(daemon.log().contains("stale"), "the replacement is logged");
}

/// `euid == 0` is needed to act as another user; elsewhere the test says so and returns.
#[test]
fn a_peer_with_another_uid_is_refused() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED a_peer_with_another_uid_is_refused: needs root to connect as uid 65534");
        return;
    }
    let Some(curl) = ["/usr/bin/curl", "/bin/curl", "/usr/local/bin/curl"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file())
    else {
        eprintln!("SKIPPED a_peer_with_another_uid_is_refused: no curl to connect with");
        return;
    };
    let daemon = TestDaemon::spawn_with(DaemonOptions::default());
    // Let uid 65534 reach the socket at all: the refusal must come from the daemon.
    for path in [daemon.dir.path(), daemon.socket.as_path()] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}});
    let mut cmd = Command::new(curl);
    cmd.args(["-sS", "--max-time", "10", "-o", "-", "-w", "\n%{http_code}"])
        .arg("--unix-socket")
        .arg(&daemon.socket)
        .args(["-H", "Content-Type: application/json", "-d"])
        .arg(body.to_string())
        .arg("http://localhost/")
        .env_clear()
        .current_dir("/")
        .uid(65534)
        .gid(65534);
    let started = Instant::now();
    let (code, stdout, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(0), "curl failed: {stderr}");
    let (response, status) = stdout.rsplit_once('\n').unwrap();
    assert_eq!(status, "403", "HTTP status for a foreign uid: {stdout}");
    let response: serde_json::Value = serde_json::from_str(response).unwrap();
    assert!(response.get("result").is_none(), "{response}");
    let message = response["error"]["message"].as_str().unwrap();
    assert!(message.contains("65534"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(10), "refusal hung");

    assert!(
        daemon
            .log()
            .contains("refusing a connection from another user"),
        "the refusal is logged"
    );
    // Our own uid is still served, and nothing was created for the stranger.
    let list = daemon.rpc_ok("session/list", json!({}));
    assert_eq!(list["sessions"], json!([]));
}
