//! Session names through the real daemon and amber-cli: a name given by `session/new` or
//! `session/rename` stands for the session's id wherever params carry a `sessionId`
//! (`session/get`, `amber-cli run --session NAME`); a taken name is refused naming the
//! session that has it, an invalid one saying why, and nothing is made; a rename moves or
//! clears a name and watchers hear of it; a name survives a daemon restart (the stored,
//! unloaded session is listed and found by it) and a fork does not copy it; `amber-cli
//! sessions` shows names in its table and its JSON.

use amber_client::Client;
use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::SessionChangeKind;
use amber_tests::TestDaemon;
use amber_tests::steps::{connect, done, run_bounded, spawn, within};
use futures::StreamExt;
use serde_json::{Value, json};

fn new_named(daemon: &TestDaemon, name: &str) -> Value {
    daemon.rpc(
        "session/new",
        json!({ "cwd": daemon.workspace.display().to_string(), "name": name }),
    )
}

fn session_count(daemon: &TestDaemon) -> usize {
    daemon.rpc_ok("session/list", json!({}))["sessions"]
        .as_array()
        .unwrap()
        .len()
}

/// The JSON-RPC error of `response`: (code, message).
fn error_of(response: &Value) -> (i64, String) {
    let error = &response["error"];
    assert!(error.is_object(), "expected an error: {response}");
    (
        error["code"].as_i64().unwrap(),
        error["message"].as_str().unwrap().to_owned(),
    )
}

fn short(id: &str) -> &str {
    &id[..8]
}

#[tokio::test(flavor = "multi_thread")]
async fn a_name_given_at_creation_stands_for_the_id_and_a_taken_one_is_refused_naming_its_holder() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    let info = daemon.rpc_ok(
        "session/new",
        json!({ "cwd": daemon.workspace.display().to_string(), "name": "fix-auth" }),
    );
    assert_eq!(info["name"], "fix-auth", "{info}");
    let id = info["sessionId"].as_str().unwrap().to_owned();

    let got = daemon.rpc_ok("session/get", json!({ "sessionId": "fix-auth" }));
    assert_eq!(got["session"]["sessionId"], id.as_str());
    assert_eq!(got["session"]["name"], "fix-auth");
    // The daemon's own `/sessions` names it too.
    let listed = daemon.rpc_ok("command/run", json!({ "name": "sessions" }));
    let row = listed["output"]
        .as_str()
        .unwrap()
        .lines()
        .find(|l| l.starts_with(id.as_str()))
        .unwrap_or_else(|| panic!("no row: {listed}"))
        .to_owned();
    assert!(row.contains("[fix-auth]"), "{row}");
    // Other methods resolve it the same way.
    let status = daemon.rpc("status/get", json!({ "sessionId": "fix-auth" }));
    assert!(status.get("error").is_none(), "{status}");

    let (code, message) = error_of(&new_named(&daemon, "fix-auth"));
    assert_eq!(code, -32602, "{message}");
    assert_eq!(
        message,
        format!(
            "invalid params: name: `fix-auth` is taken by session {}",
            short(&id)
        )
    );
    assert_eq!(session_count(&daemon), 1, "a taken name makes nothing");

    let too_long = "z".repeat(65);
    for (bad, why) in [
        ("my task", "whitespace"),
        ("-fix", "starts with `-`"),
        ("cafe", "hex digits"),
        ("3f2a-9c1d", "hex digits"),
        ("tab\there", "control character"),
        (too_long.as_str(), "longer than 64"),
    ] {
        let (code, message) = error_of(&new_named(&daemon, bad));
        assert_eq!(code, -32602, "{bad:?}: {message}");
        assert!(
            message.starts_with("invalid params: name: ") && message.contains(why),
            "{bad:?}: {message}"
        );
        let (code, message) =
            error_of(&daemon.rpc("session/rename", json!({ "sessionId": id, "name": bad })));
        assert_eq!(code, -32602, "rename {bad:?}: {message}");
        assert!(message.contains(why), "rename {bad:?}: {message}");
    }
    assert_eq!(session_count(&daemon), 1, "an invalid name makes nothing");
    assert_eq!(
        daemon.rpc_ok("session/get", json!({ "sessionId": id }))["session"]["name"],
        "fix-auth",
        "a refused rename changes nothing"
    );

    // An empty name is no name.
    let unnamed = new_named(&daemon, "");
    assert!(unnamed["result"].get("name").is_none(), "{unnamed}");
}

/// The next `session/changed` item of `session`.
async fn next_change_of(
    watch: &mut amber_client::SessionWatchStream,
    session: &str,
) -> amber_proto::SessionChange {
    loop {
        let change = within("a session change", watch.next())
            .await
            .expect("the watch goes on")
            .expect("a change");
        if change.session.session_id == session {
            return change;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rename_moves_or_clears_a_name_and_watchers_see_it() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    let client: Client = connect(&daemon).await;
    let mut watch = within("session/watch", client.watch_sessions(false))
        .await
        .expect("session/watch");
    let alpha = new_named(&daemon, "alpha")["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let other = daemon.rpc_ok(
        "session/new",
        json!({ "cwd": daemon.workspace.display().to_string() }),
    )["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();

    let (code, message) = error_of(&daemon.rpc(
        "session/rename",
        json!({ "sessionId": other, "name": "alpha" }),
    ));
    assert_eq!(code, -32602);
    assert!(
        message.contains(&format!("taken by session {}", short(&alpha))),
        "{message}"
    );

    // Found by its name, renamed: the old name no longer finds it, the new one does.
    let renamed = daemon.rpc_ok(
        "session/rename",
        json!({ "sessionId": "alpha", "name": "beta" }),
    );
    assert_eq!(renamed["sessionId"], alpha.as_str());
    assert_eq!(renamed["name"], "beta");
    let (code, _) = error_of(&daemon.rpc("session/get", json!({ "sessionId": "alpha" })));
    assert_eq!(code, -32001, "the old name is free");
    assert_eq!(
        daemon.rpc_ok("session/get", json!({ "sessionId": "beta" }))["session"]["sessionId"],
        alpha.as_str()
    );
    // Its own name again is no conflict; the freed name can go to another session.
    daemon.rpc_ok(
        "session/rename",
        json!({ "sessionId": "beta", "name": "beta" }),
    );
    let moved = daemon.rpc_ok(
        "session/rename",
        json!({ "sessionId": short(&other), "name": "alpha" }),
    );
    assert_eq!(moved["name"], "alpha");

    // The watcher saw each session's changes, the rename with the new name and no event.
    let created = next_change_of(&mut watch, &alpha).await;
    assert_eq!(created.session.name.as_deref(), Some("alpha"));
    let changed = next_change_of(&mut watch, &alpha).await;
    assert_eq!(changed.change, SessionChangeKind::Updated);
    assert_eq!(changed.session.name.as_deref(), Some("beta"));
    assert!(changed.event.is_none(), "{changed:?}");

    // null and "" clear it.
    let cleared = daemon.rpc_ok(
        "session/rename",
        json!({ "sessionId": "beta", "name": null }),
    );
    assert!(cleared.get("name").is_none(), "{cleared}");
    let cleared = daemon.rpc_ok(
        "session/rename",
        json!({ "sessionId": "alpha", "name": "" }),
    );
    assert!(cleared.get("name").is_none(), "{cleared}");
    assert_eq!(cleared["sessionId"], other.as_str());
    let (code, _) = error_of(&daemon.rpc("session/get", json!({ "sessionId": "beta" })));
    assert_eq!(code, -32001);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_name_survives_a_restart_and_a_fork_does_not_copy_it() {
    let mock = MockLlm::start(Vec::new()).await;
    let mut daemon = spawn(&mock);
    let id = new_named(&daemon, "keeper")["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    daemon.restart();

    // Listed from the store (not loaded yet) with its name, and found by it.
    let listed = daemon.rpc_ok("session/list", json!({}));
    assert_eq!(listed["sessions"][0]["name"], "keeper", "{listed}");
    let (code, message) = error_of(&new_named(&daemon, "keeper"));
    assert_eq!(code, -32602);
    assert!(
        message.contains(&format!("taken by session {}", short(&id))),
        "{message}"
    );
    let got = daemon.rpc_ok("session/get", json!({ "sessionId": "keeper" }));
    assert_eq!(got["session"]["sessionId"], id.as_str());
    assert_eq!(got["session"]["name"], "keeper");

    let fork = daemon.rpc_ok("session/fork", json!({ "sessionId": "keeper" }));
    assert_ne!(fork["sessionId"], id.as_str());
    assert!(fork.get("name").is_none(), "{fork}");
    assert_eq!(
        daemon.rpc_ok("session/get", json!({ "sessionId": "keeper" }))["session"]["sessionId"],
        id.as_str(),
        "the name stays with the original"
    );
}

/// `amber-cli ARGS` against `daemon`: (exit code, stdout, stderr).
fn cli(daemon: &TestDaemon, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = daemon.cli();
    cmd.args(args);
    run_bounded(cmd)
}

/// The first stdout line of `amber-cli run --json`, the `session_started` record.
fn started_line(stdout: &str) -> Value {
    let first = stdout.lines().next().expect("a first line");
    let line: Value = serde_json::from_str(first).expect("a JSON line");
    assert_eq!(line["type"], "session_started", "{line}");
    line
}

#[test]
fn amber_cli_names_a_run_continues_it_by_name_renames_and_lists_it() {
    let mock = MockLlm::start_blocking(vec![MockTurn::text("First."), done()]);
    let daemon = spawn(&mock);

    let (code, stdout, stderr) = cli(
        &daemon,
        &[
            "run",
            "--json",
            "--no-autostart",
            "--name",
            "fix-auth",
            "hi",
        ],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let started = started_line(&stdout);
    assert_eq!(started["name"], "fix-auth");
    let id = started["sessionId"].as_str().unwrap().to_owned();

    mock.push([MockTurn::text("Again."), done()]);
    let (code, stdout, stderr) = cli(
        &daemon,
        &[
            "run",
            "--json",
            "--no-autostart",
            "--session",
            "fix-auth",
            "again",
        ],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let started = started_line(&stdout);
    assert_eq!(started["sessionId"], id.as_str());
    assert_eq!(started["resumed"], true);
    assert_eq!(started["name"], "fix-auth");

    // A taken name: refused before anything runs.
    let requests = mock.request_count();
    let (code, stdout, stderr) = cli(
        &daemon,
        &["run", "--no-autostart", "--name", "fix-auth", "more"],
    );
    assert_eq!(code, Some(5), "the run never started: {stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!("`fix-auth` is taken by session {}", short(&id))),
        "{stderr}"
    );
    assert_eq!(mock.request_count(), requests, "no model request");
    assert_eq!(session_count(&daemon), 1, "no session made");

    let (code, stdout, stderr) = cli(
        &daemon,
        &["sessions", "--no-autostart", "rename", "fix-auth", "login"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout.trim_end(), format!("{}  login", short(&id)));

    let (code, stdout, stderr) = cli(&daemon, &["sessions", "--no-autostart"]);
    assert_eq!(code, Some(0), "{stderr}");
    let mut lines = stdout.lines();
    let header = lines.next().unwrap();
    assert!(header.starts_with("ID        NAME   STATE"), "{stdout}");
    let row = lines.next().unwrap();
    assert!(
        row.starts_with(&format!("{}  login  idle", short(&id))),
        "{stdout}"
    );

    let (code, stdout, stderr) = cli(&daemon, &["sessions", "--no-autostart", "--json"]);
    assert_eq!(code, Some(0), "{stderr}");
    let rows: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(rows[0]["name"], "login", "{rows}");

    // Every command takes the name: `show` finds the session by it and shows it.
    let (code, stdout, stderr) = cli(&daemon, &["show", "--no-autostart", "login"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with(&format!("session   {id}\n")), "{stdout}");
    assert!(stdout.contains("name      login\n"), "{stdout}");

    let (code, stdout, stderr) = cli(
        &daemon,
        &["sessions", "--no-autostart", "rename", "login", "bad name"],
    );
    assert_ne!(code, Some(0), "{stdout}");
    assert!(
        stderr.contains("name: `bad name` contains whitespace"),
        "{stderr}"
    );

    let (code, stdout, stderr) = cli(
        &daemon,
        &["sessions", "--no-autostart", "rename", "login", "--clear"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout.trim_end(), format!("{}  (no name)", short(&id)));
    let (_, stdout, _) = cli(&daemon, &["sessions", "--no-autostart"]);
    assert!(!stdout.contains("NAME"), "no name, no column: {stdout}");
}
