//! End-to-end: `amber-cli doctor` and what it reads, with the real binaries — `daemon/status`
//! names the provider (never its key) and the sandbox, whose probe settles in the background;
//! `doctor --json` reports the provider reachable, and its exit code follows the sandbox and
//! the self-test; with the test switch `AMBER_TEST_SANDBOX_NO_LANDLOCK` the sandbox is
//! unavailable naming Landlock and doctor exits 1; with `AMBER_TEST_SANDBOX_LANDLOCK_ABI=5`
//! (an older kernel, simulated) Landlock's enforcement is reported partial, naming the
//! missing features, with a warning each, and doctor still passes (the other layers hold);
//! without a daemon doctor says so, exit 1.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::steps::{run_bounded, spawn};
use amber_tests::{DaemonOptions, TestDaemon, bin_path};
use serde_json::{Value, json};

/// What `amber-cli --no-autostart doctor --json` printed: (exit code, the JSON, stderr).
fn doctor_json(daemon: &TestDaemon) -> (Option<i32>, Value, String) {
    let mut cmd = daemon.cli();
    cmd.args(["--no-autostart", "doctor", "--json"]);
    let (code, stdout, stderr) = run_bounded(cmd);
    assert!(
        !stdout.contains("test-key") && !stderr.contains("test-key"),
        "doctor printed the API key:\n{stdout}\n{stderr}"
    );
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("doctor --json is not one JSON object ({e}):\n{stdout}\n{stderr}")
    });
    (code, report, stderr)
}

/// `daemon/status.sandbox` once the sandbox probe has a verdict (`sandbox/selftest` starts it
/// and waits for it).
fn settled_sandbox(daemon: &TestDaemon) -> Value {
    daemon.rpc_ok("sandbox/selftest", json!({}));
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let sandbox = daemon.rpc_ok("daemon/status", json!({}))["sandbox"].clone();
        if !sandbox["available"].is_null() {
            return sandbox;
        }
        assert!(
            Instant::now() < deadline,
            "the sandbox probe never settled: {sandbox}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn mock() -> MockLlm {
    MockLlm::start_blocking(vec![MockTurn::text("unused")])
}

#[test]
fn daemon_status_names_the_provider_without_its_key_and_the_sandbox() {
    let mock = mock();
    let daemon = spawn(&mock);
    let (_, body) = daemon.raw_http(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "daemon/status", "params": {}}).to_string(),
    );
    assert!(!body.contains("test-key"), "the key leaked: {body}");
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        status["result"]["provider"],
        json!({"baseUrl": mock.base_url(), "model": "mock-model", "keySet": true, "flavor": "openai"})
    );
    // An idle daemon has not probed (nothing spawned yet), and a status query does not start it.
    assert!(
        status["result"]["sandbox"]["available"].is_null(),
        "{status}"
    );
    let sandbox = settled_sandbox(&daemon);
    assert_eq!(sandbox["defaultMode"], "workspace-write", "{sandbox}");
    assert_eq!(sandbox["network"], false, "{sandbox}");
    assert!(sandbox["seccomp"].is_boolean(), "{sandbox}");
    // This machine's kernel (ABI 7) enforces every Landlock feature the sandbox uses.
    if sandbox["landlockAbi"].as_u64().is_some_and(|abi| abi >= 6) {
        assert_eq!(sandbox["landlockEnforcement"], "full", "{sandbox}");
        assert!(sandbox.get("landlockMissing").is_none(), "{sandbox}");
    }
    // Either verdict is a verdict; an unavailable one says why.
    if sandbox["available"] == false {
        assert!(
            sandbox["reason"].as_str().is_some_and(|r| !r.is_empty()),
            "{sandbox}"
        );
    }
}

#[test]
fn doctor_reports_the_daemon_and_a_reachable_provider_and_exits_by_the_sandbox() {
    let mock = mock();
    let daemon = spawn(&mock);
    let (code, report, stderr) = doctor_json(&daemon);
    assert_eq!(report["client"]["name"], "amber-cli");
    assert_eq!(report["daemon"]["pid"], daemon.pid());
    assert_eq!(report["daemon"]["version"], report["client"]["version"]);
    assert_eq!(
        report["daemon"]["socket"],
        daemon.socket.display().to_string()
    );
    let provider = &report["provider"];
    assert_eq!(provider["baseUrl"], mock.base_url());
    assert_eq!(provider["model"], "mock-model");
    assert_eq!(provider["keySet"], true);
    assert_eq!(provider["reachable"], true, "{provider}");
    assert_eq!(provider["httpStatus"], 200, "{provider}");
    // The self-test waited for the probe: the verdict is in.
    let available = report["sandbox"]["available"].as_bool();
    assert!(available.is_some(), "{report}");
    let checks = report["selftest"]["checks"].as_array().unwrap();
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "write_outside_workspace",
            "loopback_connect",
            "write_inside_workspace"
        ]
    );
    let fine = available == Some(true) && report["selftest"]["ok"] == true;
    assert_eq!(report["ok"], fine, "{report}");
    assert_eq!(code, Some(if fine { 0 } else { 1 }), "{report}\n{stderr}");
}

#[test]
fn doctor_prints_a_readable_report() {
    let mock = mock();
    let daemon = spawn(&mock);
    let mut cmd = daemon.cli();
    cmd.args(["--no-autostart", "doctor"]);
    let (_, stdout, stderr) = run_bounded(cmd);
    for label in [
        "amber-cli",
        "amberd",
        "socket",
        "provider",
        "reachable",
        "sandbox",
        "landlock",
        "seccomp",
        "namespaces",
        "self-test",
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(label)),
            "no `{label}` line:\n{stdout}\n{stderr}"
        );
    }
    assert!(stdout.contains("API key set"), "{stdout}");
    assert!(stdout.contains("→ HTTP 200"), "{stdout}");
    assert!(!stdout.contains("test-key"), "{stdout}");
}

/// Needs the kernel enforcement: fails until `enforce` lands.
#[test]
fn doctor_finds_a_working_sandbox_and_every_check_passing() {
    let mock = mock();
    let daemon = spawn(&mock);
    let (code, report, stderr) = doctor_json(&daemon);
    assert_eq!(report["sandbox"]["available"], true, "{report}\n{stderr}");
    assert_eq!(report["sandbox"]["namespaces"], true, "{report}");
    for check in report["selftest"]["checks"].as_array().unwrap() {
        assert_eq!(check["ok"], true, "{check}");
    }
    assert_eq!(report["selftest"]["ok"], true, "{report}");
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(code, Some(0), "{report}\n{stderr}");
}

#[test]
fn without_landlock_doctor_reports_the_sandbox_unavailable_and_exits_1() {
    let mock = mock();
    let daemon = TestDaemon::spawn_with(DaemonOptions {
        base_url: Some(mock.base_url()),
        env: vec![("AMBER_TEST_SANDBOX_NO_LANDLOCK".into(), "1".into())],
        ..DaemonOptions::default()
    });
    let (code, report, stderr) = doctor_json(&daemon);
    assert_eq!(code, Some(1), "{report}\n{stderr}");
    assert_eq!(report["ok"], false);
    let sandbox = &report["sandbox"];
    assert_eq!(sandbox["available"], false, "{sandbox}");
    assert!(
        sandbox["reason"]
            .as_str()
            .unwrap_or("")
            .contains("Landlock"),
        "{sandbox}"
    );
    assert!(sandbox.get("landlockAbi").is_none(), "{sandbox}");
    assert_eq!(report["selftest"]["ok"], false);
    assert!(stderr.contains("Landlock"), "{stderr}");
    // Failing closed: every check failed because nothing could run sandboxed.
    for check in report["selftest"]["checks"].as_array().unwrap() {
        assert_eq!(check["ok"], false, "{check}");
    }
}

#[test]
fn an_older_landlock_abi_is_reported_partial_and_doctor_still_passes() {
    let mock = mock();
    let daemon = TestDaemon::spawn_with(DaemonOptions {
        base_url: Some(mock.base_url()),
        env: vec![("AMBER_TEST_SANDBOX_LANDLOCK_ABI".into(), "5".into())],
        ..DaemonOptions::default()
    });
    let sandbox = settled_sandbox(&daemon);
    assert_eq!(sandbox["available"], true, "{sandbox}");
    assert_eq!(sandbox["landlockAbi"], 5, "{sandbox}");
    assert_eq!(sandbox["landlockEnforcement"], "partial", "{sandbox}");
    let missing: Vec<&str> = sandbox["landlockMissing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["feature"].as_str().unwrap())
        .collect();
    assert_eq!(
        missing,
        ["scope_abstract_unix_socket", "scope_signal"],
        "{sandbox}"
    );
    assert_eq!(sandbox["landlockMissing"][1]["abi"], 6, "{sandbox}");

    let (code, report, stderr) = doctor_json(&daemon);
    assert_eq!(code, Some(0), "{report}\n{stderr}");
    assert_eq!(report["selftest"]["ok"], true, "{report}");
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains("Landlock ABI 5 lacks scope_signal"),
        "{report}"
    );
    let mut cmd = daemon.cli();
    cmd.args(["--no-autostart", "doctor"]);
    let (code, stdout, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let text = format!("{stdout}{stderr}");
    assert!(
        text.contains(
            "ABI 5 · partial enforcement (missing: scope_abstract_unix_socket, scope_signal)"
        ),
        "{text}"
    );
}

#[test]
fn doctor_without_a_daemon_says_so_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    // A private directory, as clients demand of a socket's: nothing answers there.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let socket = dir.path().join("amberd.sock");
    for json in [false, true] {
        let mut cmd = std::process::Command::new(bin_path("amber-cli"));
        cmd.env("AMBER_SOCKET", &socket)
            .env("HOME", dir.path())
            .args(["--no-autostart", "doctor"]);
        if json {
            cmd.arg("--json");
        }
        let (code, stdout, stderr) = run_bounded(cmd);
        assert_eq!(code, Some(1), "{stdout}\n{stderr}");
        assert!(
            stderr.contains("cannot reach amberd") && stderr.contains("not running"),
            "{stderr}"
        );
        if json {
            let report: Value = serde_json::from_str(&stdout).unwrap();
            assert_eq!(report["ok"], false);
            assert!(report["error"].as_str().unwrap().contains("not running"));
        }
    }
}

#[test]
fn doctor_fails_on_a_provider_that_cannot_serve_saying_what_to_do() {
    let mock = mock();
    // (how the daemon is set up, what doctor must say)
    let cases: Vec<(DaemonOptions, &str)> = vec![
        (DaemonOptions::default(), "no LLM endpoint is configured"),
        (
            DaemonOptions {
                base_url: Some("http://127.0.0.1:9/v1".into()),
                ..DaemonOptions::default()
            },
            "did not answer at http://127.0.0.1:9/v1/models",
        ),
        (
            DaemonOptions {
                base_url: Some(mock.base_url()),
                env: vec![("AMBER_MODEL".into(), "no-such-model".into())],
                ..DaemonOptions::default()
            },
            "does not serve the model `no-such-model`; it lists mock-model",
        ),
    ];
    for (opts, says) in cases {
        let daemon = TestDaemon::spawn_with(opts);
        let (code, report, stderr) = doctor_json(&daemon);
        assert_eq!(code, Some(1), "{says}: {report}\n{stderr}");
        assert_eq!(report["ok"], false, "{report}");
        let problems = report["problems"].to_string();
        assert!(problems.contains(says), "{says}: {report}");
        assert!(stderr.contains(says), "{says}: {stderr}");
    }
    // The mock's own model: served, and the key (amberd's, never shown) accepted.
    let daemon = spawn(&mock);
    let (_, report, _) = doctor_json(&daemon);
    assert_eq!(report["provider"]["keyAccepted"], true, "{report}");
    assert_eq!(report["provider"]["modelKnown"], true, "{report}");
    assert!(
        !report["problems"].to_string().contains("provider"),
        "{report}"
    );
}
