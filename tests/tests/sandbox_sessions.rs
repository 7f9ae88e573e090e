//! End-to-end: every session's effective OS sandbox through the real daemon — `[sandbox]`
//! and `session/new {sandbox}` give the requested one, read mode makes it `read-only` (also
//! when `session/setMode` switches mid-session, and back again), `off` reports the network
//! on, `session/get` and `session/list` report it, a restart restores it, `amber-cli run
//! --sandbox` and `amber --sandbox` (the TUI, in tmux) ask for it, and a sandboxed session's
//! private temp directory exists while the session does. A read-only session refuses
//! workspace writes but keeps `$TMPDIR` writable; a `writable_roots` directory is writable in
//! workspace-write only. (The rest of what the sandbox refuses is the escape suite's.)

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::steps::{FAST_RETRIES, done, run_bounded, spawn, spawn_config};
use amber_tests::{DaemonOptions, TestDaemon};
use serde_json::{Value, json};

use crate::support::tmux;

fn new_session(daemon: &TestDaemon, extra: Value) -> Value {
    let mut params = json!({"cwd": daemon.workspace.display().to_string()});
    params
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    daemon.rpc_ok("session/new", params)
}

fn id(info: &Value) -> String {
    info["sessionId"].as_str().unwrap().to_owned()
}

fn got(daemon: &TestDaemon, id: &str) -> Value {
    daemon.rpc_ok("session/get", json!({"sessionId": id}))["session"]["sandbox"].clone()
}

fn listed(daemon: &TestDaemon, id: &str) -> Value {
    let list = daemon.rpc_ok("session/list", json!({}));
    list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionId"] == id)
        .unwrap_or_else(|| panic!("{id} not listed: {list}"))["sandbox"]
        .clone()
}

fn sandbox(mode: &str, network: bool) -> Value {
    let network_mode = if network { "on" } else { "off" };
    json!({"mode": mode, "network": network, "networkMode": network_mode})
}

#[tokio::test]
async fn the_effective_sandbox_follows_request_and_mode_and_survives_a_restart() {
    let mock = MockLlm::start(Vec::new()).await;
    let mut daemon = spawn(&mock);

    let default = new_session(&daemon, json!({}));
    assert_eq!(
        default["sandbox"],
        sandbox("workspace-write", false),
        "{default}"
    );
    let off = new_session(&daemon, json!({"sandbox": {"mode": "off"}}));
    assert_eq!(off["sandbox"], sandbox("off", true), "{off}");
    let read = new_session(
        &daemon,
        json!({"mode": "read", "sandbox": {"network": true}}),
    );
    assert_eq!(read["sandbox"], sandbox("read-only", true), "{read}");
    // Read mode wins over an explicit `off` too.
    let read_off = new_session(&daemon, json!({"mode": "read", "sandbox": {"mode": "off"}}));
    assert_eq!(
        read_off["sandbox"],
        sandbox("read-only", false),
        "{read_off}"
    );

    // Into read mode and out again: read-only, then what was asked.
    let (default, off, read, read_off) = (id(&default), id(&off), id(&read), id(&read_off));
    let switched = daemon.rpc_ok(
        "session/setMode",
        json!({"sessionId": default, "mode": "read"}),
    );
    assert_eq!(
        switched["sandbox"],
        sandbox("read-only", false),
        "{switched}"
    );
    assert_eq!(got(&daemon, &default), sandbox("read-only", false));
    let back = daemon.rpc_ok(
        "session/setMode",
        json!({"sessionId": read_off, "mode": "yolo"}),
    );
    assert_eq!(back["sandbox"], sandbox("off", true), "{back}");
    assert_eq!(listed(&daemon, &read_off), sandbox("off", true));
    assert_eq!(listed(&daemon, &read), sandbox("read-only", true));

    daemon.restart();
    // Listed from the store before any is loaded, then loaded by session/get: the same.
    let expected = [
        (&default, sandbox("read-only", false)),
        (&off, sandbox("off", true)),
        (&read, sandbox("read-only", true)),
        (&read_off, sandbox("off", true)),
    ];
    for (id, want) in &expected {
        assert_eq!(&listed(&daemon, id), want, "{id} listed after the restart");
        assert_eq!(&got(&daemon, id), want, "{id} loaded after the restart");
    }
    // The restored session still goes back to what it asked for when it leaves read mode.
    let back = daemon.rpc_ok(
        "session/setMode",
        json!({"sessionId": default, "mode": "write"}),
    );
    assert_eq!(back["sandbox"], sandbox("workspace-write", false), "{back}");
}

#[tokio::test]
async fn the_config_sets_the_default_and_a_request_overrides_it_field_by_field() {
    let mock = MockLlm::start(Vec::new()).await;
    let config = format!("{FAST_RETRIES}[sandbox]\nmode = \"read-only\"\nnetwork = true\n");
    let daemon = spawn_config(&mock, &config);
    let default = new_session(&daemon, json!({}));
    assert_eq!(default["sandbox"], sandbox("read-only", true), "{default}");
    let asked = new_session(&daemon, json!({"sandbox": {"mode": "workspace-write"}}));
    assert_eq!(
        asked["sandbox"],
        sandbox("workspace-write", true),
        "{asked}"
    );
}

#[test]
fn a_relative_writable_root_stops_the_daemon_with_a_config_error() {
    let mut cmd = std::process::Command::new(amber_tests::bin_path("amberd"));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[sandbox]\nwritable_roots = [\"cache\"]\n").unwrap();
    cmd.arg("--config")
        .arg(&config)
        .arg("--socket")
        .arg(dir.path().join("s.sock"))
        .arg("--data-dir")
        .arg(dir.path().join("data"));
    let (code, _, stderr) = run_bounded(cmd);
    assert_ne!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("sandbox.writable_roots") && stderr.contains("absolute"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_sandboxed_session_has_a_private_temp_dir_until_it_is_deleted() {
    let mock = MockLlm::start(Vec::new()).await;
    // The daemon's own temp dir, so its `amber-tmp-UID` is this test's.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let daemon = TestDaemon::spawn_with(DaemonOptions {
        base_url: Some(mock.base_url()),
        config_toml: FAST_RETRIES.to_owned(),
        env: vec![("TMPDIR".into(), tmp.path().display().to_string())],
    });
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let root = tmp.path().join(format!("amber-tmp-{uid}"));
    let sandboxed = id(&new_session(&daemon, json!({})));
    let dir: PathBuf = root.join(&sandboxed);
    for d in [&root, &dir] {
        let meta = std::fs::symlink_metadata(d)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", d.display(), daemon.log()));
        assert!(meta.is_dir(), "{}", d.display());
        assert_eq!(meta.mode() & 0o7777, 0o700, "{}", d.display());
        assert_eq!(meta.uid(), uid);
    }
    // Unsandboxed: nothing to give it.
    let off = id(&new_session(&daemon, json!({"sandbox": {"mode": "off"}})));
    assert!(!root.join(&off).exists());

    std::fs::write(dir.join("left-behind"), "x").unwrap();
    daemon.rpc_ok("session/delete", json!({"sessionId": sandboxed}));
    assert!(!dir.exists(), "the temp dir outlived its session");
}

#[test]
fn amber_cli_run_asks_for_the_sandbox_it_is_given() {
    let mock = MockLlm::start_blocking(vec![MockTurn::text("ok"), done()]);
    let daemon = spawn(&mock);
    let mut cmd = daemon.cli();
    cmd.args([
        "run",
        "--json",
        "--no-autostart",
        "--sandbox",
        "read-only",
        "--network",
        "--cwd",
    ])
    .arg(&daemon.workspace)
    .arg("hello");
    let (code, stdout, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let result: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let session = result["sessionId"].as_str().unwrap();
    assert_eq!(got(&daemon, session), sandbox("read-only", true));

    let mut cmd = daemon.cli();
    cmd.args(["run", "--no-autostart", "--sandbox", "strict", "hi"]);
    let (code, _, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("workspace-write"), "{stderr}");
}

#[test]
fn amber_asks_for_the_sandbox_it_is_given() {
    let mock = MockLlm::start_blocking(Vec::new());
    let daemon = spawn(&mock);
    let tmux = tmux::Tmux::new("sandbox");
    tmux.start("ro", &daemon, &["--sandbox", "read-only", "--network"]);
    tmux.wait("ro", "the sandbox on the status line", |s| {
        s.contains("read-only +net")
    });
    let list = daemon.rpc_ok("session/list", json!({}));
    let sessions = list["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{list}");
    assert_eq!(sessions[0]["sandbox"], sandbox("read-only", true), "{list}");
}

/// The sandbox mounts `.amber/` read-only and creates it first when the workspace has none:
/// commands of one batch start side by side, and every one of them must run although
/// another's helper created it a moment before.
#[tokio::test(flavor = "multi_thread")]
async fn a_batch_of_commands_in_a_workspace_without_amber_dir_all_run() {
    let batch: Vec<_> = (0..8)
        .map(|n| {
            amber_tests::tool_calls::call(
                &format!("b{n}"),
                "bash",
                &json!({"command": format!("echo {n} > out{n}.txt")}),
            )
        })
        .collect();
    let mock = MockLlm::start(vec![
        amber_tests::tool_calls::calls(batch),
        MockTurn::text("ran"),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    assert!(!daemon.workspace.join(".amber").exists());
    let client = amber_tests::steps::connect(&daemon).await;
    let sid = amber_tests::steps::new_session(&client, &daemon, None).await;
    let mut events = amber_tests::steps::Events::live(&client, &sid).await;
    let turn = amber_tests::steps::prompt_turn(&client, &mut events, &sid, "run").await;
    for n in 0..8 {
        let (status, output) = amber_tests::tool_calls::result_of(&turn, &format!("b{n}"));
        assert_eq!(status, "ok", "b{n}: {output}");
    }
}

/// A yolo session with `sandbox` (as `session/new` takes it) that runs `batch` side by side.
async fn run_batch(
    daemon: &TestDaemon,
    mock: &MockLlm,
    sandbox: Value,
    batch: &[(&str, String)],
) -> Vec<Value> {
    amber_tests::steps::run_batch(daemon, mock, Some(sandbox), batch).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_session_refuses_a_workspace_write_but_tmpdir_stays_writable() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    let ws = &daemon.workspace;
    amber_tests::tool_calls::put(&ws.join("existing.txt"), "original\n");
    let turn = run_batch(
        &daemon,
        &mock,
        json!({"mode": "read-only"}),
        &[
            ("new_file", "echo pwned > ro_new.txt".to_owned()),
            ("overwrite", "echo pwned > existing.txt".to_owned()),
            ("mkdir", "mkdir ro_dir".to_owned()),
            (
                "tmpdir",
                "f=$(mktemp) && echo temp-ok > \"$f\" && cat \"$f\" && case \"$f\" in \"$TMPDIR\"/*) echo in-tmpdir;; esac"
                    .to_owned(),
            ),
        ],
    )
    .await;
    for id in ["new_file", "overwrite", "mkdir"] {
        let (status, output) = amber_tests::tool_calls::result_of(&turn, id);
        assert_eq!(status, "error", "{id}: {output}");
        assert!(output.contains("[sandbox:"), "{id}: {output}");
        assert!(output.contains("read-only"), "{id}: {output}");
    }
    assert!(!ws.join("ro_new.txt").exists(), "a read-only session wrote");
    assert!(
        !ws.join("ro_dir").exists(),
        "a read-only session made a dir"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("existing.txt")).unwrap(),
        "original\n"
    );
    let (status, output) = amber_tests::tool_calls::result_of(&turn, "tmpdir");
    assert_eq!(status, "ok", "{output}");
    assert!(
        output.contains("temp-ok") && output.contains("in-tmpdir"),
        "{output}"
    );
    assert!(!output.contains("[sandbox:"), "{output}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_writable_root_is_writable_in_workspace_write_and_not_in_read_only() {
    let mock = MockLlm::start(Vec::new()).await;
    let root = tempfile::tempdir().unwrap();
    let root = root.path().canonicalize().unwrap();
    // A sibling directory that is no writable root: the sandbox still refuses it.
    let elsewhere = tempfile::tempdir().unwrap();
    let elsewhere = elsewhere.path().canonicalize().unwrap();
    let config = format!(
        "{FAST_RETRIES}[sandbox]\nmode = \"workspace-write\"\nwritable_roots = [{:?}]\n",
        root.display().to_string()
    );
    let daemon = spawn_config(&mock, &config);

    let turn = run_batch(
        &daemon,
        &mock,
        json!({}),
        &[
            (
                "root",
                format!(
                    "echo ok > {0}/from_ws_write && mkdir {0}/dir",
                    root.display()
                ),
            ),
            (
                "elsewhere",
                format!("echo pwned > {}/not_a_root", elsewhere.display()),
            ),
        ],
    )
    .await;
    let (status, output) = amber_tests::tool_calls::result_of(&turn, "root");
    assert_eq!(status, "ok", "{output}");
    assert_eq!(
        std::fs::read_to_string(root.join("from_ws_write")).unwrap(),
        "ok\n"
    );
    assert!(root.join("dir").is_dir());
    let (status, output) = amber_tests::tool_calls::result_of(&turn, "elsewhere");
    assert_eq!(status, "error", "{output}");
    assert!(output.contains("[sandbox:"), "{output}");
    assert!(!elsewhere.join("not_a_root").exists());

    let turn = run_batch(
        &daemon,
        &mock,
        json!({"mode": "read-only"}),
        &[(
            "root_ro",
            format!("echo pwned > {}/from_read_only", root.display()),
        )],
    )
    .await;
    let (status, output) = amber_tests::tool_calls::result_of(&turn, "root_ro");
    assert_eq!(status, "error", "{output}");
    assert!(
        output.contains("[sandbox:") && output.contains("read-only"),
        "{output}"
    );
    assert!(
        !root.join("from_read_only").exists(),
        "a read-only session wrote into a writable root"
    );
}
