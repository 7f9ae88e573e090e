//! End-to-end: the real `amber-cli rpc` NDJSON bridge against the real `amberd` — a line that
//! is not UTF-8 or not JSON gets a -32700 line and the bridge goes on; at end of input it waits
//! only for the answers the daemon owes (valid ids), so invalid ids never keep it from exiting.

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;

use amber_tests::steps::run_bounded_with_stdin;
use amber_tests::{DaemonOptions, TestDaemon};
use serde_json::{Value, json};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientInfo":{"name":"sh","version":"0"},"capabilities":{"approvals":false}}}"#;

fn status(id: &str) -> Vec<u8> {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"daemon/status","params":{{}}}}"#).into_bytes()
}

/// Pipes `lines` (raw bytes, one per line) into `amber-cli rpc --no-autostart`; returns the
/// exit code, the parsed output lines and stderr.
fn bridge(daemon: &TestDaemon, lines: &[Vec<u8>]) -> (Option<i32>, Vec<Value>, String) {
    let mut input = Vec::new();
    for line in lines {
        input.extend_from_slice(line);
        input.push(b'\n');
    }
    let path = daemon.dir.path().join("rpc-input.ndjson");
    std::fs::write(&path, input).unwrap();
    let mut cmd = daemon.cli();
    cmd.args(["rpc", "--no-autostart"]);
    let stdin = Stdio::from(std::fs::File::open(&path).unwrap());
    let (code, stdout, stderr) = run_bounded_with_stdin(cmd, stdin);
    let answers = stdout
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("output is not JSON ({e}): {l:?}"))
        })
        .collect();
    (code, answers, stderr)
}

fn answer<'a>(answers: &'a [Value], id: &Value) -> &'a Value {
    answers
        .iter()
        .find(|a| &a["id"] == id)
        .unwrap_or_else(|| panic!("no answer with id {id}: {answers:?}"))
}

#[test]
fn rpc_bridge_answers_invalid_utf8_and_garbage_with_parse_errors_and_goes_on() {
    let daemon = TestDaemon::spawn_with(DaemonOptions::default());
    let (code, answers, stderr) = bridge(
        &daemon,
        &[
            INITIALIZE.into(),
            status("2"),
            b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"daemon/st\xffatus\"}".to_vec(),
            status(r#""after-bad-utf8""#),
            b"{this is not json".to_vec(),
            status("4"),
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    for id in [json!(1), json!(2), json!("after-bad-utf8"), json!(4)] {
        assert!(answer(&answers, &id)["result"].is_object(), "{answers:?}");
    }
    let parse_errors: Vec<&Value> = answers
        .iter()
        .filter(|a| a["error"]["code"] == -32700)
        .collect();
    assert_eq!(
        parse_errors.len(),
        2,
        "one -32700 per unparsable line: {answers:?}"
    );
    for error in &parse_errors {
        assert!(error["id"].is_null(), "{error}");
    }
    let messages: Vec<&str> = parse_errors
        .iter()
        .map(|e| e["error"]["message"].as_str().unwrap())
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.contains("line 3") && m.contains("UTF-8")),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.contains("line 5") && m.contains("JSON")),
        "{messages:?}"
    );
    assert!(
        answers.iter().all(|a| a["id"] != 3),
        "the bad line was not forwarded"
    );
}

#[test]
fn rpc_bridge_exits_at_eof_after_requests_with_invalid_ids() {
    let daemon = TestDaemon::spawn_with(DaemonOptions::default());
    let invalid = ["1.5", "true", "[1]", "18446744073709551616", "-0", "null"];
    let mut lines: Vec<Vec<u8>> = vec![INITIALIZE.into()];
    lines.extend(invalid.iter().map(|id| status(id)));
    lines.push(status(r#""valid""#));
    // The last line has an invalid id too: nothing the daemon owes is left after it.
    lines.push(status("1.5"));
    // The generous bound of run_bounded (30 s) is the drain timeout of a bridge that waits
    // for these answers; a bridge that waits only for valid ids ends at end of input.
    let (code, answers, stderr) = bridge(&daemon, &lines);
    assert_eq!(
        code,
        Some(0),
        "the bridge ends cleanly at end of input: {stderr}"
    );
    assert!(answer(&answers, &json!(1))["result"].is_object());
    assert!(answer(&answers, &json!("valid"))["result"].is_object());
}

/// A script (or a person) whose first line comes later than the daemon's `initialize`
/// deadline: the bridge opens its WebSocket only once there is input, so the deadline runs
/// from then and the requests are answered.
#[test]
fn rpc_bridge_connects_when_its_first_line_arrives() {
    use std::io::Write;
    let daemon = TestDaemon::spawn_with(DaemonOptions {
        config_toml: "[server]\ninitialize_timeout_ms = 300\n".into(),
        ..DaemonOptions::default()
    });
    let mut cmd = daemon.cli();
    cmd.args(["rpc", "--no-autostart"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Well past the deadline before anything is typed.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    stdin.write_all(INITIALIZE.as_bytes()).unwrap();
    stdin.write_all(b"\n").unwrap();
    stdin.write_all(&status("2")).unwrap();
    stdin.write_all(b"\n").unwrap();
    drop(stdin);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let output = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the bridge exits at end of input")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    let answers: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for id in [json!(1), json!(2)] {
        assert!(answer(&answers, &id)["result"].is_object(), "{answers:?}");
    }
}
