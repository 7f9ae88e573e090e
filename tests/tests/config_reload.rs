//! End-to-end: config that follows the user. amberd re-reads its config file
//! when it changes — providers, `[[rules]]` and MCP servers apply to new turns without a
//! restart; an invalid edit (even while a turn runs) is reported by `daemon/status
//! .configError` and the last good config stays in force. And the trap the issue names: an
//! unconfigured amberd, a shell that exports `AMBER_BASE_URL` afterwards — amber-cli warns,
//! the `not_configured` error names `amber-cli daemon restart`, and that command starts the
//! daemon again with the shell's environment.

use std::fs;
use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::Mode;
use amber_tests::mcp_plugins::everything;
use amber_tests::steps::{
    Events, connect, done, eventually, new_session, of_type, prompt_turn, run_bounded, stop_reason,
};
use amber_tests::tool_calls::{bash, envelope_for};
use amber_tests::{DaemonOptions, TestDaemon};
use serde_json::{Value, json};

use crate::support::tmux;

/// How long a config edit may take to apply (the daemon polls every 500 ms).
const RELOAD: Duration = Duration::from_secs(10);

fn provider(mock: &MockLlm, model: &str) -> String {
    format!(
        "[provider]\nbase_url = {:?}\nmodel = {model:?}\nmax_retries = 0\n",
        mock.base_url()
    )
}

/// A daemon whose provider comes from its config file alone (no `AMBER_*`).
fn spawn_from_file(config_toml: &str) -> TestDaemon {
    TestDaemon::spawn_with(DaemonOptions {
        base_url: None,
        config_toml: config_toml.to_owned(),
        env: Vec::new(),
    })
}

fn write_config(daemon: &TestDaemon, text: &str) {
    // Saved as editors do: a new file renamed over the old one.
    let path = daemon.dir.path().join("config.toml");
    let tmp = daemon.dir.path().join("config.toml.swp");
    fs::write(&tmp, text).unwrap();
    fs::rename(&tmp, &path).unwrap();
}

fn status(daemon: &TestDaemon) -> Value {
    daemon.rpc_ok("daemon/status", json!({}))
}

async fn wait_for_status(daemon: &TestDaemon, what: &str, cond: impl Fn(&Value) -> bool) {
    eventually(what, RELOAD, || cond(&status(daemon))).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_edited_provider_applies_to_the_next_turn_without_a_restart() {
    let first = MockLlm::start(vec![MockTurn::text("from the first"), done()]).await;
    let second = MockLlm::start(vec![MockTurn::text("from the second"), done()]).await;
    let daemon = spawn_from_file("");
    let client = connect(&daemon).await;
    let id = new_session(&client, &daemon, Some(Mode::Write)).await;
    let mut events = Events::live(&client, &id).await;

    // Unconfigured: the error says how to fix it, the restart included.
    let turn = prompt_turn(&client, &mut events, &id, "hello").await;
    assert_eq!(stop_reason(&turn), "error");
    let completed = of_type(&turn, "turn_completed")[0];
    assert_eq!(completed["error"]["code"], "not_configured");
    let message = completed["error"]["message"].as_str().unwrap();
    assert!(message.contains("amber-cli daemon restart"), "{message}");
    assert!(message.contains("config.toml"), "{message}");

    write_config(&daemon, &provider(&first, "model-one"));
    let url = first.base_url();
    wait_for_status(&daemon, "the first provider in force", |s| {
        s["provider"]["baseUrl"] == url.as_str()
    })
    .await;
    // The session goes on with the new endpoint and, since nobody chose its model, the
    // model the fixed config names (not the default it was made with under no config).
    let turn = prompt_turn(&client, &mut events, &id, "hello again").await;
    assert_eq!(stop_reason(&turn), "end_turn");
    assert_eq!(first.request_count(), 2);
    assert_eq!(first.requests()[0]["model"], "model-one");
    let got = client.session_snapshot(&id).await.unwrap();
    assert_eq!(got.session.model, "model-one");

    write_config(&daemon, &provider(&second, "model-two"));
    let url = second.base_url();
    wait_for_status(&daemon, "the second provider in force", |s| {
        s["provider"]["baseUrl"] == url.as_str() && s["provider"]["model"] == "model-two"
    })
    .await;
    // A new session gets the new default model.
    let fresh = new_session(&client, &daemon, Some(Mode::Write)).await;
    let mut fresh_events = Events::live(&client, &fresh).await;
    let turn = prompt_turn(&client, &mut fresh_events, &fresh, "and again").await;
    assert_eq!(stop_reason(&turn), "end_turn");
    assert_eq!(second.requests()[0]["model"], "model-two");
    assert_eq!(
        first.request_count(),
        2,
        "the first provider got nothing more"
    );
    assert!(status(&daemon).get("configError").is_none());
    assert!(daemon.log().contains("config reloaded"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_invalid_edit_while_a_turn_runs_keeps_the_last_good_config() {
    let mock = MockLlm::start(vec![
        bash("c1", "sleep 1.5; echo slept"),
        MockTurn::text("first done"),
        done(),
        MockTurn::text("second done"),
        done(),
    ])
    .await;
    let good = provider(&mock, "good-model");
    let daemon = spawn_from_file(&good);
    let client = connect(&daemon).await;
    let id = new_session(&client, &daemon, Some(Mode::Yolo)).await;
    let mut events = Events::live(&client, &id).await;

    client.session_prompt(&id, "run it").await.unwrap();
    events.until("tool_call_started").await;
    write_config(&daemon, "[provider\nmodel = \"broken\"\n");
    wait_for_status(&daemon, "the config error reported", |s| {
        s["configError"]
            .as_str()
            .is_some_and(|e| e.contains("config.toml"))
    })
    .await;
    let turn = events.turn().await;
    assert_eq!(stop_reason(&turn), "end_turn", "the running turn went on");
    assert_eq!(envelope_for(&mock, "c1")["status"], "ok");

    // The next turn still uses the last good provider and model.
    let before = mock.request_count();
    let turn = prompt_turn(&client, &mut events, &id, "again").await;
    assert_eq!(stop_reason(&turn), "end_turn");
    assert_eq!(mock.requests()[before]["model"], "good-model");

    // `daemon status` says so, in words.
    let out = daemon.cli().args(["daemon", "status"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("config       not reloaded"), "{text}");
    // And so does every run, with the file, the line and the column.
    mock.push([MockTurn::text("ran anyway"), done()]);
    let mut run = daemon.cli();
    run.args(["run", "--no-autostart", "hi"]);
    let (code, stdout, stderr) = run_bounded(run);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stderr.contains("did not apply the last edit of its config")
            && stderr.contains("config.toml")
            && stderr.contains("line 1"),
        "{stderr}"
    );
    // And `doctor` fails on it.
    let mut doctor = daemon.cli();
    doctor.args(["--no-autostart", "doctor"]);
    let (code, stdout, stderr) = run_bounded(doctor);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("was not applied"), "{stderr}");

    // Fixed: the error goes away.
    write_config(&daemon, &good.replace("good-model", "fixed-model"));
    wait_for_status(&daemon, "the config error cleared", |s| {
        s.get("configError").is_none() && s["provider"]["model"] == "fixed-model"
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn rules_and_mcp_servers_follow_the_config_file() {
    let mock = MockLlm::start(vec![
        bash("c1", "echo allowed"),
        MockTurn::text("ran"),
        done(),
        bash("c2", "echo allowed"),
        MockTurn::text("denied now"),
        done(),
    ])
    .await;
    let base = provider(&mock, "m");
    let daemon = spawn_from_file(&base);
    let client = connect(&daemon).await;
    let id = new_session(&client, &daemon, Some(Mode::Yolo)).await;
    let mut events = Events::live(&client, &id).await;
    prompt_turn(&client, &mut events, &id, "first").await;
    assert_eq!(envelope_for(&mock, "c1")["status"], "ok");

    let server = format!(
        "[mcp.servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\n",
        everything().display().to_string()
    );
    let rule = "[[rules]]\ntool = \"bash\"\npattern = \"echo*\"\ndecision = \"deny\"\n";
    write_config(&daemon, &format!("{base}{rule}{server}"));
    let listed = |daemon: &TestDaemon| {
        daemon.rpc_ok("mcp/list", json!({}))["servers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "everything")
    };
    eventually("the MCP server added by the edit", RELOAD, || {
        listed(&daemon)
    })
    .await;
    prompt_turn(&client, &mut events, &id, "second").await;
    let denied = envelope_for(&mock, "c2");
    assert_eq!(denied["status"], "denied", "{denied}");

    write_config(&daemon, &base);
    eventually("the MCP server removed by the edit", RELOAD, || {
        !listed(&daemon)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_someone_chose_stays_whatever_the_config_says_later() {
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(|_| MockTurn::text("DONE"));
    let daemon = spawn_from_file(&provider(&mock, "model-one"));
    let client = connect(&daemon).await;
    let cwd = daemon.workspace.display().to_string();
    let chosen = client
        .session_new(&amber_proto::SessionNewParams {
            cwd: cwd.clone(),
            model: Some("chosen-at-creation".into()),
            ..Default::default()
        })
        .await
        .unwrap()
        .session_id;
    let switched = new_session(&client, &daemon, None).await;
    client
        .request::<amber_proto::methods::SessionSetModel>(&amber_proto::SessionSetModelParams {
            session_id: switched.clone(),
            model: Some("chosen-later".into()),
            provider: None,
        })
        .await
        .unwrap();
    let following = new_session(&client, &daemon, None).await;

    write_config(&daemon, &provider(&mock, "model-two"));
    wait_for_status(&daemon, "model-two in force", |s| {
        s["provider"]["model"] == "model-two"
    })
    .await;
    let table = [
        (&chosen, "chosen-at-creation"),
        (&switched, "chosen-later"),
        (&following, "model-two"),
    ];
    for (id, model) in table {
        let mut events = Events::live(&client, id).await;
        let before = mock.request_count();
        let turn = prompt_turn(&client, &mut events, id, "go").await;
        assert_eq!(stop_reason(&turn), "end_turn");
        assert_eq!(mock.requests()[before]["model"], model, "{id}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn amber_cli_warns_of_a_shell_the_daemon_does_not_follow_and_restart_applies_it() {
    let mock = MockLlm::start(vec![MockTurn::text("configured at last"), done()]).await;
    let daemon = spawn_from_file("");
    let config = daemon.dir.path().join("config.toml");
    let data = daemon.dir.path().join("data");
    let shell = |cmd: &mut std::process::Command| {
        cmd.env("AMBER_CONFIG", &config)
            .env("AMBER_DATA_DIR", &data)
            .env("AMBER_BASE_URL", mock.base_url())
            .env("AMBER_MODEL", "shell-model")
            .env("AMBER_API_KEY", "k");
    };

    let mut run = daemon.cli();
    shell(&mut run);
    run.args(["run", "--mode", "write", "hello"]);
    let (code, _, stderr) = run_bounded(run);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(
        stderr.matches("amber-cli daemon restart").count(),
        2,
        "one warning, and the error names it too: {stderr}"
    );
    assert!(stderr.contains("warning: the running amberd"), "{stderr}");
    assert!(stderr.contains("AMBER_BASE_URL="), "{stderr}");
    assert!(!stderr.contains("=k"), "never a key: {stderr}");
    assert_eq!(mock.request_count(), 0);

    let mut restart = daemon.cli();
    shell(&mut restart);
    restart.args(["daemon", "restart"]);
    let (code, stdout, stderr) = run_bounded(restart);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("amberd restarted: pid"), "{stdout}");
    // Stop the restarted daemon whatever happens below.
    struct StopOnDrop(std::process::Command);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            let _ = self.0.output();
        }
    }
    let mut stop = daemon.cli();
    stop.args(["daemon", "stop"]);
    let _stop = StopOnDrop(stop);

    let mut run = daemon.cli();
    shell(&mut run);
    run.args(["run", "--mode", "write", "hello"]);
    let (code, stdout, stderr) = run_bounded(run);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("configured at last"), "{stdout}");
    assert!(!stderr.contains("warning"), "{stderr}");
    assert_eq!(mock.requests()[0]["model"], "shell-model");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_autostarted_daemon_is_restarted_to_follow_the_shell() {
    let mock = MockLlm::start(vec![MockTurn::text("from the shell's provider"), done()]).await;
    let daemon = spawn_from_file("");
    // A socket nobody serves yet: the first run autostarts a daemon there.
    let socket = daemon.dir.path().join("own-run").join("amberd.sock");
    let at_socket = |cmd: &mut std::process::Command| {
        cmd.env("AMBER_SOCKET", &socket)
            .env("AMBER_DATA_DIR", daemon.dir.path().join("own-data"));
    };
    struct StopOnDrop(std::process::Command);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            let _ = self.0.output();
        }
    }
    let mut stop = daemon.cli();
    at_socket(&mut stop);
    stop.args(["daemon", "stop"]);
    let _stop = StopOnDrop(stop);

    // First try, before the provider is exported: the autostarted daemon has none.
    let mut first = daemon.cli();
    at_socket(&mut first);
    first.args(["run", "hello"]);
    let (code, _, stderr) = run_bounded(first);
    assert_eq!(code, Some(1), "no provider yet: {stderr}");

    // Exported now: the idle daemon a client started is started again with this shell.
    let mut second = daemon.cli();
    at_socket(&mut second);
    second
        .env("AMBER_BASE_URL", mock.base_url())
        .env("AMBER_MODEL", "shell-model")
        .env("AMBER_API_KEY", "k")
        .args(["run", "hello"]);
    let (code, stdout, stderr) = run_bounded(second);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stderr.contains("restarted amberd"), "{stderr}");
    assert!(stderr.contains("AMBER_MODEL=shell-model"), "{stderr}");
    assert!(!stderr.contains("=k"), "never a key: {stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    assert!(stdout.contains("from the shell's provider"), "{stdout}");
    assert_eq!(mock.requests()[0]["model"], "shell-model");
}

/// The TUI says it too: the warning is the first thing in the transcript.
#[test]
fn the_tui_warns_of_a_shell_the_daemon_does_not_follow() {
    let daemon = spawn_from_file("");
    let tmux = tmux::Tmux::new("drift");
    tmux.start_env(
        "drift",
        &daemon,
        &[
            ("AMBER_BASE_URL", "http://127.0.0.1:9/v1"),
            ("AMBER_MODEL", "shell-model"),
        ],
        &[],
    );
    let screen = tmux.wait("drift", "the drift warning", |s| {
        s.contains("amber-cli daemon restart")
    });
    assert!(screen.contains("warning: the running amberd"), "{screen}");
    assert!(screen.contains("AMBER_MODEL=shell-model"), "{screen}");
}

#[tokio::test(flavor = "multi_thread")]
async fn hooks_follow_the_config_file() {
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(|_| MockTurn::text("DONE"));
    let base = provider(&mock, "m");
    let daemon = spawn_from_file(&base);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let hook = "[[hooks]]\nevent = \"user_prompt\"\ncommand = [\"sh\", \"-c\", \"echo '{\\\"additionalContext\\\": \\\"reloaded hook ran\\\"}'\"]\n";
    write_config(&daemon, &format!("{base}{hook}"));
    eventually("the reload", RELOAD, || {
        daemon.log().matches("config reloaded").count() >= 1
    })
    .await;
    prompt_turn(&client, &mut events, &sid, "one").await;
    let saw = |from: usize| {
        mock.requests()[from..]
            .iter()
            .any(|r| r.to_string().contains("reloaded hook ran"))
    };
    assert!(saw(0), "the added hook ran");
    write_config(&daemon, &base);
    eventually("the second reload", RELOAD, || {
        daemon.log().matches("config reloaded").count() >= 2
    })
    .await;
    let before = mock.requests().len();
    prompt_turn(&client, &mut events, &sid, "two").await;
    assert!(!saw(before), "the removed hook no longer runs");
}
