//! Custom agents end to end (real amberd, scripted endpoint): a workspace agent's prompt,
//! model and tool allow-list reach the model's requests and the allow-list is enforced at
//! dispatch; `agent/list` merges workspace, user and bundled agents; the bundled `plan` runs
//! in read mode; `amber-cli run --agent`; `task {agent}` sub-agents get that agent's prompt,
//! tools and (never looser) mode; bad names and files are invalid params; a restored session
//! keeps its agent, limits included, even after the file changed.

use std::path::PathBuf;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::TestDaemon;
use amber_tests::steps::{
    Events, connect, done, messages, offered_tools, prompt_turn, run_bounded, spawn,
};
use amber_tests::tool_calls::{call, calls, envelope_for, put, result_of};
use serde_json::{Value, json};

const DOCS_MARK: &str = "You are the docs agent (docs-agent-mark).";

/// A workspace agent with every key: its own model, `read` and `todowrite` only.
fn docs_agent() -> String {
    format!(
        "---\n\
         description: Writes the docs\n\
         model: docs-model\n\
         tools: [read, todowrite]\n\
         max_iterations: 6\n\
         ---\n\
         {DOCS_MARK}\n"
    )
}

/// Writes a workspace agent and, when it is usable, trusts this version (as the user would
/// with `amber-cli trust`): an untrusted workspace agent is never used.
fn workspace_agent(daemon: &TestDaemon, name: &str, text: &str) -> PathBuf {
    let path = daemon
        .workspace
        .join(".amber/agents")
        .join(format!("{name}.md"));
    put(&path, text);
    daemon.trust_if_pending(&format!(".amber/agents/{name}.md"));
    path
}

/// The user's agents folder of the daemon's isolated HOME (`$XDG_CONFIG_HOME/amber/agents`).
fn user_agent(daemon: &TestDaemon, name: &str, text: &str) {
    let dir = daemon.dir.path().join("home/.config/amber/agents");
    put(&dir.join(format!("{name}.md")), text);
}

fn simple_agent(description: &str, body: &str) -> String {
    format!("+++\ndescription = \"{description}\"\n+++\n{body}\n")
}

fn cwd(daemon: &TestDaemon) -> String {
    daemon.workspace.display().to_string()
}

/// The system prompt of a recorded request.
fn system_prompt(request: &Value) -> &str {
    let first = &messages(request)[0];
    assert_eq!(first["role"], "system", "{request}");
    first["content"].as_str().unwrap()
}

fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort();
    names
}

fn new_session(daemon: &TestDaemon, params: Value) -> Value {
    daemon.rpc_ok("session/new", params)
}

/// `session/new` that must fail with -32602; returns the message.
fn invalid_params(daemon: &TestDaemon, params: Value) -> String {
    let response = daemon.rpc("session/new", params);
    let error = &response["error"];
    assert_eq!(error["code"], -32602, "{response}");
    error["message"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_workspace_agent_sets_the_prompt_model_and_tools_of_its_session() {
    let mock = MockLlm::start(vec![
        calls(vec![
            call("c_read", "read", &json!({"path": "notes.md"})),
            call("c_bash", "bash", &json!({"command": "echo hi"})),
        ]),
        MockTurn::text("the docs are written"),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    workspace_agent(&daemon, "docs", &docs_agent());
    put(&daemon.workspace.join("notes.md"), "some notes");
    let info = new_session(&daemon, json!({"cwd": cwd(&daemon), "agent": "docs"}));
    assert_eq!(info["agent"], "docs", "{info}");
    assert_eq!(info["model"], "docs-model", "{info}");
    assert_eq!(info["mode"], "write", "no mode in the file: the default");
    let session = info["sessionId"].as_str().unwrap();
    let listed = daemon.rpc_ok("tool/list", json!({"sessionId": session}));
    let names: Vec<String> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(sorted(names), ["read", "todowrite"], "{listed}");

    let client = connect(&daemon).await;
    let mut events = Events::live(&client, session).await;
    let turn = prompt_turn(&client, &mut events, session, "write the docs").await;
    assert_eq!(turn.last().unwrap()["stopReason"], "end_turn", "{turn:#?}");

    let requests = mock.requests();
    let first = &requests[0];
    assert_eq!(first["model"], "docs-model");
    assert!(system_prompt(first).contains(DOCS_MARK), "{first}");
    assert_eq!(sorted(offered_tools(first)), ["read", "todowrite"]);
    // Every request of the turn is limited the same way.
    for request in &requests {
        assert_eq!(sorted(offered_tools(request)), ["read", "todowrite"]);
    }
    // The allow-list is enforced at dispatch, not only in what is offered.
    assert_eq!(envelope_for(&mock, "c_read")["status"], "ok");
    let denied = envelope_for(&mock, "c_bash");
    assert_eq!(denied["status"], "denied", "{denied}");
    let reason = denied["output"].as_str().unwrap();
    assert!(
        reason.contains("agent `docs`")
            && reason.contains("`bash`")
            && reason.contains("read, todowrite"),
        "{reason}"
    );
    let (status, _) = result_of(&turn, "c_bash");
    assert_eq!(status, "denied");
}

#[tokio::test]
async fn explicit_session_params_override_the_agent_defaults() {
    let mock = MockLlm::start(vec![MockTurn::text("ok"), done()]).await;
    let daemon = spawn(&mock);
    workspace_agent(&daemon, "docs", &docs_agent());
    let info = new_session(
        &daemon,
        json!({"cwd": cwd(&daemon), "agent": "docs", "model": "picked-model", "mode": "read",
               "systemPrompt": "Explicit prompt."}),
    );
    assert_eq!(
        (info["model"].as_str(), info["mode"].as_str()),
        (Some("picked-model"), Some("read"))
    );
    let session = info["sessionId"].as_str().unwrap();
    let client = connect(&daemon).await;
    let mut events = Events::live(&client, session).await;
    prompt_turn(&client, &mut events, session, "hello").await;
    let first = &mock.requests()[0];
    assert_eq!(first["model"], "picked-model");
    let system = system_prompt(first);
    assert!(
        system.contains("Explicit prompt.") && !system.contains(DOCS_MARK),
        "{system}"
    );
    // The agent's tools still apply.
    assert_eq!(sorted(offered_tools(first)), ["read", "todowrite"]);
}

#[tokio::test]
async fn agent_list_merges_workspace_user_and_bundled_agents() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    workspace_agent(&daemon, "docs", &docs_agent());
    workspace_agent(
        &daemon,
        "broken",
        "---\ndescription: d\nmode: sideways\n---\nbody\n",
    );
    user_agent(&daemon, "mine", &simple_agent("My own agent", "Mine."));
    user_agent(
        &daemon,
        "review",
        &simple_agent("My review", "Review my way."),
    );
    user_agent(
        &daemon,
        "docs",
        &simple_agent("Shadowed by the workspace", "No."),
    );

    let listed = |params: Value| -> Vec<(String, String, String)> {
        let result = daemon.rpc_ok("agent/list", params);
        result["agents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                (
                    a["name"].as_str().unwrap().to_owned(),
                    a["source"].as_str().unwrap().to_owned(),
                    a["description"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let with_workspace = listed(json!({"cwd": cwd(&daemon)}));
    let names: Vec<(&str, &str)> = with_workspace
        .iter()
        .map(|(n, s, _)| (n.as_str(), s.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("docs", "workspace"),
            ("mine", "user"),
            ("plan", "bundled"),
            ("review", "user")
        ]
    );
    assert_eq!(with_workspace[0].2, "Writes the docs");
    assert!(
        daemon.log().contains("broken.md"),
        "the bad file is logged:\n{}",
        daemon.log()
    );

    let without = listed(json!({}));
    let names: Vec<(&str, &str)> = without
        .iter()
        .map(|(n, s, _)| (n.as_str(), s.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("docs", "user"),
            ("mine", "user"),
            ("plan", "bundled"),
            ("review", "user")
        ]
    );

    let relative = daemon.rpc("agent/list", json!({"cwd": "relative/dir"}));
    assert_eq!(relative["error"]["code"], -32004, "{relative}");
}

#[tokio::test]
async fn unknown_invalid_and_broken_agents_are_invalid_params() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    let broken = workspace_agent(
        &daemon,
        "broken",
        "---\ndescription: d\nmax_iterations: 0\n---\nbody\n",
    );
    let ws = cwd(&daemon);

    let unknown = invalid_params(&daemon, json!({"cwd": ws, "agent": "nope"}));
    assert!(
        unknown.contains("unknown agent `nope`") && unknown.contains("plan, review"),
        "{unknown}"
    );
    let invalid = invalid_params(&daemon, json!({"cwd": ws, "agent": "../plan"}));
    assert!(invalid.contains("invalid agent name"), "{invalid}");
    let bad = invalid_params(&daemon, json!({"cwd": ws, "agent": "broken"}));
    assert!(
        bad.contains(&broken.display().to_string()) && bad.contains("max_iterations"),
        "{bad}"
    );
    workspace_agent(
        &daemon,
        "elsewhere",
        "---\ndescription: d\nprovider: no-such-provider\n---\nbody\n",
    );
    let provider = invalid_params(&daemon, json!({"cwd": ws, "agent": "elsewhere"}));
    assert!(
        provider.contains("`elsewhere`") && provider.contains("no-such-provider"),
        "{provider}"
    );
    // Nothing was created by the failed calls.
    let sessions = daemon.rpc_ok("session/list", json!({}));
    assert_eq!(sessions["sessions"], json!([]), "{sessions}");
}

#[tokio::test]
async fn the_bundled_plan_agent_investigates_in_read_mode() {
    let mock = MockLlm::start(vec![
        calls(vec![
            call("c_touch", "bash", &json!({"command": "touch planned.txt"})),
            call("c_ls", "bash", &json!({"command": "ls"})),
            call(
                "c_todo",
                "todowrite",
                &json!({"todos": [{"id": "1", "text": "read the code", "status": "in_progress"}]}),
            ),
        ]),
        MockTurn::text("1. Goal: …"),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let info = new_session(&daemon, json!({"cwd": cwd(&daemon), "agent": "plan"}));
    assert_eq!(
        (info["agent"].as_str(), info["mode"].as_str()),
        (Some("plan"), Some("read"))
    );
    let session = info["sessionId"].as_str().unwrap();
    let client = connect(&daemon).await;
    let mut events = Events::live(&client, session).await;
    let turn = prompt_turn(&client, &mut events, session, "plan the refactor").await;
    assert_eq!(turn.last().unwrap()["stopReason"], "end_turn", "{turn:#?}");

    let first = &mock.requests()[0];
    assert!(system_prompt(first).contains("planning agent"), "{first}");
    let offered = offered_tools(first);
    assert!(offered.iter().any(|t| t == "todowrite"), "{offered:?}");
    assert!(
        !offered.iter().any(|t| t == "write" || t == "edit"),
        "{offered:?}"
    );
    let touch = envelope_for(&mock, "c_touch");
    assert_eq!(touch["status"], "denied", "{touch}");
    assert!(
        touch["output"].as_str().unwrap().contains("read mode"),
        "{touch}"
    );
    assert!(!daemon.workspace.join("planned.txt").exists());
    assert_eq!(envelope_for(&mock, "c_ls")["status"], "ok");
    assert_eq!(envelope_for(&mock, "c_todo")["status"], "ok");
}

#[test]
fn amber_cli_run_starts_its_session_with_the_agent() {
    let mock = MockLlm::start_blocking(vec![MockTurn::text("docs done"), done()]);
    let daemon = spawn(&mock);
    workspace_agent(&daemon, "docs", &docs_agent());
    let mut cmd = daemon.cli();
    cmd.args([
        "run",
        "--json",
        "--no-autostart",
        "--agent",
        "docs",
        "write the docs",
    ]);
    let (code, stdout, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let result: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(result["stopReason"], "end_turn", "{result}");
    let first = &mock.requests()[0];
    assert_eq!(first["model"], "docs-model");
    assert!(system_prompt(first).contains(DOCS_MARK), "{first}");
    let sessions = daemon.rpc_ok("session/list", json!({}));
    assert_eq!(sessions["sessions"][0]["agent"], "docs", "{sessions}");

    // An unknown agent fails the run before any turn.
    let mut cmd = daemon.cli();
    cmd.args(["run", "--no-autostart", "--agent", "nope", "hello"]);
    let (code, _, stderr) = run_bounded(cmd);
    assert_ne!(code, Some(0));
    assert!(stderr.contains("unknown agent `nope`"), "{stderr}");
}

const REVIEW_MARK: &str = "code review agent";

/// The parent delegates a review; the review sub-agent tries a write through `bash` and
/// the `write` tool, then reports.
fn review_responder(request: &Value) -> MockTurn {
    let all = request["messages"].as_array().cloned().unwrap_or_default();
    let last = all.last().cloned().unwrap_or_default();
    let content = last["content"].as_str().unwrap_or("");
    if content.contains("Are you finished") {
        return MockTurn::text("DONE");
    }
    let is_review = all[0]["content"]
        .as_str()
        .is_some_and(|s| s.contains(REVIEW_MARK));
    // Once the sub-agent has results (or a steer after them), it reports.
    let has_results = all.iter().any(|m| m["role"] == "tool");
    match (is_review, has_results) {
        (true, false) => calls(vec![
            call("s_touch", "bash", &json!({"command": "touch reviewed.txt"})),
            call(
                "s_write",
                "write",
                &json!({"path": "w.txt", "content": "x"}),
            ),
            call("s_ls", "bash", &json!({"command": "ls"})),
        ]),
        (true, true) => MockTurn::text("review: looks fine"),
        (false, false) => MockTurn::tool_call(
            "task",
            &json!({"prompt": "review the working tree", "agent": "review"}),
        ),
        (false, true) => MockTurn::text("the review is in"),
    }
}

#[tokio::test]
async fn task_runs_a_sub_agent_as_the_named_agent_never_looser_than_its_parent() {
    let mock = MockLlm::start(Vec::new()).await;
    mock.set_responder(review_responder);
    let daemon = spawn(&mock);
    let info = new_session(&daemon, json!({"cwd": cwd(&daemon), "mode": "yolo"}));
    let session = info["sessionId"].as_str().unwrap();
    let client = connect(&daemon).await;
    let mut events = Events::live(&client, session).await;
    let turn = prompt_turn(&client, &mut events, session, "get a review").await;
    assert_eq!(turn.last().unwrap()["stopReason"], "end_turn", "{turn:#?}");

    let requests = mock.requests();
    let sub = requests
        .iter()
        .find(|r| system_prompt(r).contains(REVIEW_MARK))
        .expect("a request of the review sub-agent");
    // The agent's body leads, the sub-agent's own note follows.
    assert!(system_prompt(sub).contains("You are a sub-agent of amber"));
    assert_eq!(
        sorted(offered_tools(sub)),
        ["bash", "read", "search", "skills", "todowrite"]
    );
    // Its mode is review's read mode although the session runs in yolo.
    let touch = envelope_for(&mock, "s_touch");
    assert_eq!(touch["status"], "denied", "{touch}");
    assert!(
        touch["output"].as_str().unwrap().contains("read mode"),
        "{touch}"
    );
    let write = envelope_for(&mock, "s_write");
    assert_eq!(write["status"], "denied", "{write}");
    assert!(
        write["output"].as_str().unwrap().contains("agent `review`"),
        "{write}"
    );
    assert!(!daemon.workspace.join("reviewed.txt").exists());
    assert!(!daemon.workspace.join("w.txt").exists());
    assert_eq!(envelope_for(&mock, "s_ls")["status"], "ok");
    // The parent got the sub-agent's report.
    let task_call = turn
        .iter()
        .find(|e| e["type"] == "tool_call_completed" && e["agentId"].is_null())
        .unwrap();
    assert_eq!(task_call["status"], "ok", "{task_call}");
    assert!(
        task_call["output"]
            .as_str()
            .unwrap()
            .contains("review: looks fine")
    );
}

#[tokio::test]
async fn task_with_an_unknown_agent_runs_nothing() {
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "c_task",
            "task",
            &json!({"tasks": [{"prompt": "a"}, {"prompt": "b", "agent": "nope"}]}),
        )]),
        MockTurn::text("ok"),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let info = new_session(&daemon, json!({"cwd": cwd(&daemon)}));
    let session = info["sessionId"].as_str().unwrap();
    let client = connect(&daemon).await;
    let mut events = Events::live(&client, session).await;
    let turn = prompt_turn(&client, &mut events, session, "delegate").await;
    let result = envelope_for(&mock, "c_task");
    assert_eq!(result["status"], "error", "{result}");
    assert!(
        result["output"]
            .as_str()
            .unwrap()
            .contains("unknown agent `nope`"),
        "{result}"
    );
    assert!(
        !turn.iter().any(|e| e["type"] == "subagent_started"),
        "{turn:#?}"
    );
    assert_eq!(mock.requests().len(), 3, "no sub-agent request was made");
}

#[tokio::test]
async fn a_restored_session_keeps_its_agent_and_limits() {
    let mock = MockLlm::start(Vec::new()).await;
    let mut daemon = spawn(&mock);
    let scout = "---\n\
                 description: Scouts\n\
                 model: scout-model\n\
                 tools: [read]\n\
                 max_iterations: 1\n\
                 ---\n\
                 You are the scout (scout-mark).\n";
    let file = workspace_agent(&daemon, "scout", scout);
    let info = new_session(&daemon, json!({"cwd": cwd(&daemon), "agent": "scout"}));
    let session = info["sessionId"].as_str().unwrap().to_owned();
    // The file changes after the session was created: the session keeps what it was given.
    std::fs::write(
        &file,
        "---\ndescription: Changed\ntools: [bash]\n---\nA different prompt.\n",
    )
    .unwrap();

    daemon.restart();
    mock.push([MockTurn::tool_call("read", &json!({"path": "x"}))]);
    let client = connect(&daemon).await;
    let mut events = Events::live(&client, &session).await;
    let turn = prompt_turn(&client, &mut events, &session, "scout around").await;
    // `max_iterations: 1`: one request, then the cap.
    assert_eq!(
        turn.last().unwrap()["stopReason"],
        "max_iterations",
        "{turn:#?}"
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    assert_eq!(requests[0]["model"], "scout-model");
    assert!(system_prompt(&requests[0]).contains("scout-mark"));
    assert_eq!(offered_tools(&requests[0]), ["read"]);
    let sessions = daemon.rpc_ok("session/list", json!({}));
    assert_eq!(sessions["sessions"][0]["agent"], "scout", "{sessions}");
}
