//! End-to-end: external ACP agents (`[agents.acp.NAME]`) as sub-agents of the `task` tool.
//! The agent is `tests/mcp-servers/acp-agent.mjs`, built on the official ACP TypeScript SDK
//! and scripted by its prompt (`!say`, `!read`, `!write`, `!run`, `!usage`, `!sleep`,
//! `!crash`), or another amber (`amber-cli acp`). amberd drives it as its ACP client: the
//! agent's permission asks become the session's approvals, its file access runs under the
//! session's policy, its spending counts to the session.

use std::path::PathBuf;
use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::{ApprovalRespondParams, Decision, methods as m};
use amber_tests::steps::{Events, connect, done, new_session, prompt_turn, spawn_config};
use amber_tests::tool_calls::{call, calls, connect_approver, next_approval, request_id};
use serde_json::{Value, json};

/// The SDK-built test agent.
fn sdk_agent() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp-servers");
    assert!(
        root.join("node_modules/@agentclientprotocol/sdk").exists(),
        "the ACP SDK is missing: run `npm ci --prefix tests/mcp-servers` (.ci/run does)"
    );
    root.join("acp-agent.mjs")
}

fn config(extra: &str) -> String {
    format!(
        "[provider]\nmax_retries = 1\nretry_base_ms = 10\n\n\
         [agents.acp.sdk]\ncommand = \"node\"\nargs = [{:?}]\n\
         description = \"the SDK test agent\"\n{extra}",
        sdk_agent().display().to_string()
    )
}

/// A model that hands `script` to the `sdk` agent (call `t1`, with `caps` merged into the
/// task's arguments), then ends its turn.
async fn delegating(script: &str, caps: Value) -> MockLlm {
    let mut arguments = json!({"prompt": script, "agent": "sdk", "description": "acp"});
    if let (Some(args), Some(caps)) = (arguments.as_object_mut(), caps.as_object()) {
        args.extend(caps.clone());
    }
    MockLlm::start(vec![
        calls(vec![call("t1", "task", &arguments)]),
        MockTurn::text("done"),
        done(),
    ])
    .await
}

fn task_output(turn: &[Value]) -> (String, String) {
    let completed = turn
        .iter()
        .find(|e| e["type"] == "tool_call_completed" && e["callId"] == "t1")
        .unwrap_or_else(|| panic!("no task result: {turn:#?}"));
    (
        completed["status"].as_str().unwrap_or_default().to_owned(),
        completed["output"].as_str().unwrap_or_default().to_owned(),
    )
}

/// Reads events until the turn ends.
async fn until_turn_ends(events: &mut Events, mut seen: Vec<Value>) -> Vec<Value> {
    loop {
        let event = events.next().await;
        let done = event["type"] == "turn_completed";
        seen.push(event);
        if done {
            return seen;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_acp_agent_serves_a_task_its_asks_and_files_going_through_amber() {
    let script = "!say hello from the agent\n!read seed.txt\n!write out.txt made by acp\n\
                  !usage 100 20 0.05";
    let mock = delegating(script, json!({})).await;
    let daemon = spawn_config(&mock, &config(""));
    std::fs::write(daemon.workspace.join("seed.txt"), "seeded").unwrap();
    let approver = connect_approver(&daemon).await;
    let sid = new_session(&approver, &daemon, None).await;
    let mut events = Events::live(&approver, &sid).await;
    approver.session_prompt(&sid, "delegate").await.unwrap();

    let (before, asked) = next_approval(&mut events).await;
    assert_eq!(asked["tool"], "acp__sdk__edit", "{asked}");
    // The agent runs unsandboxed: only a person may allow what it asks.
    assert_eq!(asked["personOnly"], true, "{asked}");
    assert_eq!(asked["unsandboxed"], true, "{asked}");
    assert!(
        asked["reason"].as_str().unwrap().contains("Write out.txt"),
        "{asked}"
    );
    let started = before
        .iter()
        .find(|e| e["type"] == "tool_call_started" && e["name"] == "acp__sdk__edit")
        .unwrap_or_else(|| panic!("the agent's tool call: {before:#?}"));
    assert_eq!(started["callId"], asked["callId"], "{started}");
    allow_once(&approver, &sid, &asked).await;
    let turn = until_turn_ends(&mut events, before).await;

    let (status, output) = task_output(&turn);
    assert_eq!(status, "ok", "{output}");
    for said in [
        "hello from the agent",
        "read seed.txt: seeded",
        "wrote out.txt",
    ] {
        assert!(output.contains(said), "{said:?} missing from {output}");
    }
    // The write ran as the session's `write` tool, in the workspace.
    assert_eq!(
        std::fs::read_to_string(daemon.workspace.join("out.txt")).unwrap(),
        "made by acp"
    );
    let agent_id = turn
        .iter()
        .find(|e| e["type"] == "subagent_started")
        .unwrap_or_else(|| panic!("{turn:#?}"))["agentId"]
        .clone();
    for event in turn.iter().filter(|e| {
        (e["type"] == "tool_call_started" || e["type"] == "tool_call_completed")
            && e["callId"] != "t1"
    }) {
        assert_eq!(event["agentId"], agent_id, "{event}");
    }
    assert!(
        turn.iter()
            .any(|e| e["type"] == "tool_call_started" && e["name"] == "write"),
        "the write as amber's own tool: {turn:#?}"
    );
    // What it reported spending counts to the session, as the sub-agent's.
    let usage = turn
        .iter()
        .find(|e| {
            e["type"] == "usage" && e["agentId"] == agent_id && e["usage"]["costUsd"].is_number()
        })
        .unwrap_or_else(|| panic!("the agent's cost: {turn:#?}"));
    assert!(
        (usage["usage"]["costUsd"].as_f64().unwrap() - 0.05).abs() < 1e-9,
        "{usage}"
    );
    let tokens = turn
        .iter()
        .find(|e| {
            e["type"] == "usage" && e["agentId"] == agent_id && e["usage"]["promptTokens"] == 100
        })
        .unwrap_or_else(|| panic!("the agent's tokens: {turn:#?}"));
    assert_eq!(tokens["usage"]["completionTokens"], 20, "{tokens}");
    let info = daemon.rpc_ok("session/get", json!({"sessionId": sid}));
    let cost = info["session"]["usage"]["costUsd"].as_f64().unwrap_or(0.0);
    assert!(cost >= 0.05 - 1e-9, "{info}");
    // The agent process is gone once its task ended.
    assert_eq!(agent_processes_of(&daemon), 0);
}

/// Test agents started by this daemon (their cwd is its workspace).
fn agent_processes_of(daemon: &amber_tests::TestDaemon) -> usize {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let mut found = 0;
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let cwd = std::fs::read_link(entry.path().join("cwd")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains("acp-agent.mjs")
                && cwd == daemon.workspace
            {
                found += 1;
            }
        }
        if found == 0 || std::time::Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn with_nobody_to_ask_the_agents_asks_are_rejected_and_nothing_is_written() {
    let mock = delegating("!write out.txt nope\n!run rm -rf /", json!({})).await;
    let daemon = spawn_config(&mock, &config(""));
    let turn = one_turn(&daemon, None, "delegate").await;
    let (status, output) = task_output(&turn);
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("write rejected"), "{output}");
    assert!(output.contains("run rejected"), "{output}");
    assert!(!daemon.workspace.join("out.txt").exists());
    let resolved: Vec<&Value> = turn
        .iter()
        .filter(|e| e["type"] == "approval_resolved")
        .collect();
    assert_eq!(resolved.len(), 2, "{turn:#?}");
    assert!(
        resolved.iter().all(|e| e["by"] == "no_approver"),
        "{resolved:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn in_read_mode_the_agent_may_read_but_its_other_asks_are_refused_unasked() {
    let mock = delegating("!read seed.txt\n!run touch x\n!write out.txt no", json!({})).await;
    let daemon = spawn_config(&mock, &config(""));
    std::fs::write(daemon.workspace.join("seed.txt"), "readable").unwrap();
    let approver = connect_approver(&daemon).await;
    let sid = new_session(&approver, &daemon, None).await;
    approver
        .request::<m::SessionSetMode>(&amber_proto::SessionSetModeParams {
            session_id: sid.clone(),
            mode: amber_proto::Mode::Read,
        })
        .await
        .unwrap();
    let mut events = Events::live(&approver, &sid).await;
    let turn = prompt_turn(&approver, &mut events, &sid, "delegate").await;
    let (_, output) = task_output(&turn);
    assert!(output.contains("read seed.txt: readable"), "{output}");
    assert!(output.contains("run rejected"), "{output}");
    assert!(output.contains("write rejected"), "{output}");
    assert!(
        !turn.iter().any(|e| e["type"] == "approval_requested"),
        "nothing is asked in read mode: {turn:#?}"
    );
    assert!(!daemon.workspace.join("out.txt").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_that_dies_mid_task_is_a_failed_task_and_the_turn_goes_on() {
    let mock = delegating("!say partial\n!crash", json!({})).await;
    let daemon = spawn_config(&mock, &config(""));
    let turn = one_turn(&daemon, None, "delegate").await;
    assert_eq!(turn.last().unwrap()["stopReason"], "end_turn", "{turn:#?}");
    let (status, output) = task_output(&turn);
    assert_eq!(status, "error", "{output}");
    assert!(output.contains("sub-agent stopped: error"), "{output}");
    assert!(output.contains("ACP agent `sdk`"), "{output}");
    assert!(
        output.contains("partial"),
        "what it said before dying: {output}"
    );
    let completed = turn
        .iter()
        .find(|e| e["type"] == "subagent_completed")
        .unwrap();
    assert_eq!(completed["stopReason"], "error", "{completed}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_turn_cancels_the_agent_and_leaves_no_process() {
    let mock = delegating("!say waiting\n!sleep 60000\n!say never", json!({})).await;
    let daemon = spawn_config(&mock, &config(""));
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    client.session_prompt(&sid, "delegate").await.unwrap();
    // Once the agent runs, cancel the turn.
    let mut seen = Vec::new();
    loop {
        let event = events.next().await;
        let started = event["type"] == "subagent_started";
        seen.push(event);
        if started {
            break;
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    client
        .request::<m::SessionCancel>(&amber_proto::SessionIdParams {
            session_id: sid.clone(),
        })
        .await
        .unwrap();
    let turn = tokio::time::timeout(Duration::from_secs(20), until_turn_ends(&mut events, seen))
        .await
        .expect("the turn ends soon after the cancel");
    assert_eq!(turn.last().unwrap()["stopReason"], "cancelled", "{turn:#?}");
    let completed = turn
        .iter()
        .find(|e| e["type"] == "subagent_completed")
        .unwrap_or_else(|| panic!("{turn:#?}"));
    assert_eq!(completed["stopReason"], "cancelled", "{completed}");
    assert_eq!(agent_processes_of(&daemon), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dollar_cap_refuses_an_agent_that_does_not_report_its_cost() {
    let cases = [
        // It reports nothing: it cannot be held to dollars.
        ("", "does not report its cost"),
        // It reports, and its reported spend passes the cap: stopped, typed.
        ("reports_cost = true\n", "budget"),
    ];
    for (table, want) in cases {
        let mock = delegating(
            "!usage 10 10 2.5\n!sleep 3000\n!say after",
            json!({"max_usd": 1.0}),
        )
        .await;
        let daemon = spawn_config(&mock, &config(table));
        let turn = one_turn(&daemon, None, "delegate").await;
        let (status, output) = task_output(&turn);
        assert_eq!(status, "error", "{table}: {output}");
        assert!(output.contains("budget_exceeded"), "{table}: {output}");
        assert!(output.contains(want), "{table}: {output}");
        assert!(!output.contains("after"), "{table}: {output}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn acp_agents_are_listed_and_serve_tasks_only() {
    let mock = MockLlm::start(vec![]).await;
    let daemon = spawn_config(&mock, &config(""));
    let list = daemon.rpc_ok("agent/list", json!({}));
    let sdk = list["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "sdk")
        .unwrap_or_else(|| panic!("{list}"));
    assert_eq!(sdk["source"], "acp", "{sdk}");
    assert_eq!(sdk["description"], "the SDK test agent", "{sdk}");
    let refused = daemon.rpc(
        "session/new",
        json!({"cwd": daemon.workspace, "agent": "sdk"}),
    );
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("`task` tool"), "{refused}");
}

/// Another amber as the external agent: `amber-cli acp` against the same daemon, whose
/// inner session answers from the same scripted model.
#[tokio::test(flavor = "multi_thread")]
async fn another_amber_serves_a_task_over_acp() {
    let mock = MockLlm::start(Vec::new()).await;
    outer_and_inner(&mock, "inner task: name a metal", |_| {
        MockTurn::text("bismuth, said the inner amber")
    });
    let daemon = inner_amber_daemon(
        &mock,
        "[[provider.prices]]\nmodel = \"mock-model\"\ninput = 1000.0\noutput = 1000.0\n",
    );
    let turn = one_turn(&daemon, None, "ask the other amber").await;
    let (status, output) = task_output_any(&turn);
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("bismuth, said the inner amber"), "{output}");
    assert_eq!(turn.last().unwrap()["stopReason"], "end_turn", "{turn:#?}");
    // The inner amber reported what its session spent; the outer counts it as its
    // sub-agent's.
    let agent_id = &turn
        .iter()
        .find(|e| e["type"] == "subagent_started")
        .unwrap_or_else(|| panic!("{turn:#?}"))["agentId"];
    let reported = turn
        .iter()
        .find(|e| {
            e["type"] == "usage" && &e["agentId"] == agent_id && e["usage"]["costUsd"].is_number()
        })
        .unwrap_or_else(|| panic!("the inner amber's cost: {turn:#?}"));
    assert!(
        reported["usage"]["costUsd"].as_f64().unwrap() > 0.0,
        "{reported}"
    );
}

fn task_output_any(turn: &[Value]) -> (String, String) {
    let started = turn
        .iter()
        .find(|e| e["type"] == "tool_call_started" && e["name"] == "task" && e["agentId"].is_null())
        .unwrap_or_else(|| panic!("no task call: {turn:#?}"));
    let call_id = started["callId"].clone();
    let completed = turn
        .iter()
        .find(|e| e["type"] == "tool_call_completed" && e["callId"] == call_id)
        .unwrap_or_else(|| panic!("no task result: {turn:#?}"));
    (
        completed["status"].as_str().unwrap_or_default().to_owned(),
        completed["output"].as_str().unwrap_or_default().to_owned(),
    )
}

/// The inner amber's own approval (its model runs a command) reaches the outer session's
/// approver as the external agent's permission ask, and its answer goes back down.
#[tokio::test(flavor = "multi_thread")]
async fn another_ambers_approval_is_asked_of_the_outer_sessions_approver() {
    let mock = MockLlm::start(Vec::new()).await;
    outer_and_inner(&mock, "inner task: touch a file", |has_tool| {
        if has_tool {
            MockTurn::text("touched it")
        } else {
            MockTurn::tool_call(
                "bash",
                &json!({"command": "touch made-inside.txt", "sandbox": false}),
            )
        }
    });
    let daemon = inner_amber_daemon(&mock, "");
    let approver = connect_approver(&daemon).await;
    let sid = new_session(&approver, &daemon, None).await;
    let mut events = Events::live(&approver, &sid).await;
    approver.session_prompt(&sid, "delegate").await.unwrap();
    let (before, asked) = next_approval(&mut events).await;
    assert!(
        asked["tool"].as_str().unwrap().starts_with("acp__inner__"),
        "{asked}"
    );
    assert_eq!(asked["personOnly"], true, "{asked}");
    assert!(
        asked.to_string().contains("touch made-inside.txt"),
        "the inner command is shown: {asked}"
    );
    allow_once(&approver, &sid, &asked).await;
    let turn = until_turn_ends(&mut events, before).await;
    let (status, output) = task_output_any(&turn);
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("touched it"), "{output}");
    assert!(daemon.workspace.join("made-inside.txt").exists());
}

/// A sandboxed agent (`sandbox = "workspace-write"`) starts in the OS sandbox, and in yolo
/// mode what it asks is allowed without a person; unsandboxed, the same ask waits for one.
#[tokio::test(flavor = "multi_thread")]
async fn in_yolo_mode_a_sandboxed_agents_asks_are_allowed_unasked() {
    let mock = delegating("!run make test", json!({})).await;
    let daemon = spawn_config(&mock, &config("sandbox = \"workspace-write\"\n"));
    let turn = one_turn(&daemon, Some(amber_proto::Mode::Yolo), "delegate").await;
    let (status, output) = task_output(&turn);
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("ran make test"), "{output}");
    assert!(
        !turn.iter().any(|e| e["type"] == "approval_requested"),
        "{turn:#?}"
    );
}

/// The model of an outer session that hands `task` to the `inner` amber, then says
/// `outer done`; the inner session (its prompt is `task`) answers with `inner(has a tool
/// result)`.
fn outer_and_inner(
    mock: &MockLlm,
    task: &'static str,
    inner: impl Fn(bool) -> MockTurn + Send + Sync + 'static,
) {
    mock.set_responder(move |request: &Value| {
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        let text = |m: &Value| m["content"].as_str().unwrap_or_default().to_owned();
        let all: String = messages.iter().map(text).collect::<Vec<_>>().join("\n");
        let has_tool = messages.iter().any(|m| m["role"] == "tool");
        if all.contains("Are you finished") {
            return MockTurn::text("DONE");
        }
        if all.contains(task) {
            return inner(has_tool);
        }
        if has_tool {
            return MockTurn::text("outer done");
        }
        MockTurn::tool_call("task", &json!({"prompt": task, "agent": "inner"}))
    });
}

/// A daemon whose `[agents.acp.inner]` is another amber: `amber-cli acp` against this same
/// daemon, which it finds where amberd serves by default, under the XDG_RUNTIME_DIR the
/// test daemon runs with (passed on by the agent's `env`). `extra`: more config.
fn inner_amber_daemon(mock: &MockLlm, extra: &str) -> amber_tests::TestDaemon {
    let cli = amber_tests::bin_path("amber-cli");
    spawn_config(
        mock,
        &format!(
            "[provider]\nmax_retries = 1\nretry_base_ms = 10\n\n{extra}\n\
             [agents.acp.inner]\ncommand = {:?}\nargs = [\"--no-autostart\", \"acp\"]\n\
             env = {{ XDG_RUNTIME_DIR = \"${{XDG_RUNTIME_DIR}}\" }}\n",
            cli.display().to_string()
        ),
    )
}

/// A task naming an agent nobody has: the error lists the external ACP agents too, so the
/// model can pick one.
#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_agents_error_names_the_acp_agents() {
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "t1",
            "task",
            &json!({"prompt": "x", "agent": "nobody"}),
        )]),
        MockTurn::text("done"),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, &config(""));
    let turn = one_turn(&daemon, None, "delegate").await;
    let (status, output) = task_output(&turn);
    assert_eq!(status, "error", "{output}");
    assert!(output.contains("unknown agent `nobody`"), "{output}");
    assert!(output.contains("external ACP agents: sdk"), "{output}");
}

/// One session of `daemon` (in `mode`, when given) prompted with `prompt`: its turn's events.
async fn one_turn(
    daemon: &amber_tests::TestDaemon,
    mode: Option<amber_proto::Mode>,
    prompt: &str,
) -> Vec<Value> {
    let client = connect(daemon).await;
    let sid = new_session(&client, daemon, None).await;
    if let Some(mode) = mode {
        client
            .request::<m::SessionSetMode>(&amber_proto::SessionSetModeParams {
                session_id: sid.clone(),
                mode,
            })
            .await
            .unwrap();
    }
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, prompt).await
}

/// Answers the approval `asked` of session `sid` with allow_once; the answer is taken.
async fn allow_once(approver: &amber_client::Client, sid: &str, asked: &Value) {
    let params = ApprovalRespondParams {
        session_id: sid.to_owned(),
        request_id: request_id(asked),
        decision: Decision::AllowOnce,
        feedback: None,
        content: None,
    };
    let answered = approver
        .request::<m::ApprovalRespond>(&params)
        .await
        .unwrap();
    assert!(answered.accepted);
}
