//! End-to-end: the plugin runtime through the real daemon — `plugin/list` rows with
//! capabilities, `plugin/disable` / `plugin/enable` reflected at once in `tool/list`,
//! `command/list` and in the tools the model is offered; commands (`command/run`), status
//! segments (`status/get`), panels (`panel/*`), providers (`provider/list`,
//! `session/setModel`, `session/new` with `provider`).

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::e2e::{Events, connect, done, new_session, prompt_turn, spawn, stop_reason};
use amber_tests::e2e3::{call, calls, result_of};
use serde_json::{Value, json};

fn names(list: &Value, key: &str) -> Vec<String> {
    list[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn row<'a>(plugins: &'a Value, name: &str) -> &'a Value {
    plugins["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no plugin {name}: {plugins}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn plugin_rows_carry_capabilities_and_disable_enable_change_tools_at_once() {
    let mock = MockLlm::start(vec![]).await;
    let daemon = spawn(&mock);
    let plugins = daemon.rpc_ok("plugin/list", json!({}));
    for name in [
        "core-tools",
        "providers",
        "commands",
        "status",
        "panels",
        "hello",
    ] {
        let r = row(&plugins, name);
        assert_eq!(r["state"], "active", "{r}");
        assert_eq!(r["kind"], "bundled", "{r}");
    }
    let hello = row(&plugins, "hello");
    let caps = hello["capabilities"].as_array().unwrap();
    assert!(
        caps.contains(&json!({"kind": "tool", "name": "hello"})),
        "{hello}"
    );
    assert!(
        caps.contains(&json!({"kind": "command", "name": "hello"})),
        "{hello}"
    );
    let core = row(&plugins, "core-tools");
    assert!(
        core["capabilities"]
            .as_array()
            .unwrap()
            .contains(&json!({"kind": "tool", "name": "bash"}))
    );
    assert!(
        row(&plugins, "providers")["capabilities"]
            .as_array()
            .unwrap()
            .contains(&json!({"kind": "provider", "name": "openrouter"}))
    );

    let tools = daemon.rpc_ok("tool/list", json!({}));
    let source = |tools: &Value, name: &str| {
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["source"].as_str().unwrap().to_owned())
    };
    assert_eq!(source(&tools, "bash").as_deref(), Some("builtin"));
    assert_eq!(source(&tools, "hello").as_deref(), Some("plugin:hello"));

    let disabled = daemon.rpc_ok("plugin/disable", json!({"name": "hello"}));
    assert_eq!(disabled["state"], "deactivated", "{disabled}");
    assert_eq!(disabled["capabilities"], json!([]));
    let tools = daemon.rpc_ok("tool/list", json!({}));
    assert_eq!(source(&tools, "hello"), None, "unwound at once");
    assert!(source(&tools, "bash").is_some());
    let commands = names(&daemon.rpc_ok("command/list", json!({})), "commands");
    assert!(!commands.contains(&"hello".to_owned()), "{commands:?}");

    let enabled = daemon.rpc_ok("plugin/enable", json!({"name": "hello"}));
    assert_eq!(enabled["state"], "active", "{enabled}");
    let tools = daemon.rpc_ok("tool/list", json!({}));
    assert_eq!(source(&tools, "hello").as_deref(), Some("plugin:hello"));

    let unknown = daemon.rpc("plugin/enable", json!({"name": "nope"}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nope")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_model_is_offered_exactly_the_registered_tools_and_can_call_a_plugin_tool() {
    let mock = MockLlm::start(vec![
        calls(vec![call("h1", "hello", &json!({"name": "Ada"}))]),
        MockTurn::text("greeted"),
        done(),
        MockTurn::text("again"),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "say hello").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let (status, output) = result_of(&turn, "h1");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("Hello, Ada!"), "{output}");
    let offered = amber_tests::e2e::offered_tools;
    assert!(offered(&mock.requests()[0]).contains(&"hello".to_owned()));

    daemon.rpc_ok("plugin/disable", json!({"name": "hello"}));
    let turn = prompt_turn(&client, &mut events, &sid, "again").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let last = mock.requests().len() - 2;
    let tools = offered(&mock.requests()[last]);
    assert!(!tools.contains(&"hello".to_owned()), "{tools:?}");
    assert!(tools.contains(&"read".to_owned()), "{tools:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn commands_run_in_the_daemon_against_the_session() {
    let mock = MockLlm::start(vec![MockTurn::text("hi"), done()]).await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;

    let commands = names(&daemon.rpc_ok("command/list", json!({})), "commands");
    for needed in [
        "help", "mode", "model", "compact", "clear", "new", "sessions", "mcp", "plugins", "detach",
    ] {
        assert!(
            commands.contains(&needed.to_owned()),
            "missing {needed}: {commands:?}"
        );
    }
    let help = daemon.rpc_ok("command/run", json!({"name": "help"}));
    assert!(
        help["output"].as_str().unwrap().contains("/compact"),
        "{help}"
    );

    let mode = daemon.rpc_ok(
        "command/run",
        json!({"sessionId": sid, "name": "/mode", "args": "read"}),
    );
    assert_eq!(mode["output"], "mode: read");
    let info = daemon.rpc_ok("session/get", json!({"sessionId": sid}));
    assert_eq!(info["session"]["mode"], "read");
    let bad = daemon.rpc(
        "command/run",
        json!({"sessionId": sid, "name": "mode", "args": "loud"}),
    );
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    let needs = daemon.rpc("command/run", json!({"name": "mode", "args": "read"}));
    assert_eq!(needs["error"]["code"], -32602, "{needs}");
    assert!(
        needs["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sessionId")
    );
    let unknown = daemon.rpc("command/run", json!({"name": "frobnicate"}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

    let detach = daemon.rpc_ok("command/run", json!({"sessionId": sid, "name": "detach"}));
    assert_eq!(detach["action"], json!({"type": "detach"}));

    // A turn, then /clear: the conversation is gone, the system prompt stays.
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "remember me").await;
    let before = daemon.rpc_ok("session/get", json!({"sessionId": sid}));
    assert!(before["messages"].as_array().unwrap().len() >= 3);
    let cleared = daemon.rpc_ok("command/run", json!({"sessionId": sid, "name": "clear"}));
    assert_eq!(cleared["action"], json!({"type": "cleared"}), "{cleared}");
    let after = daemon.rpc_ok("session/get", json!({"sessionId": sid}));
    let messages = after["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["role"], "system");
    let verify = daemon.rpc_ok("session/verify", json!({"sessionId": sid}));
    assert_eq!(verify["ok"], true, "{verify}");

    let new = daemon.rpc_ok("command/run", json!({"sessionId": sid, "name": "new"}));
    let new_id = new["action"]["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(new["action"]["type"], "open_session");
    let created = daemon.rpc_ok("session/get", json!({"sessionId": new_id}));
    assert_eq!(created["session"]["cwd"], after["session"]["cwd"]);
    assert_eq!(created["session"]["mode"], "read", "the mode carries over");

    let sessions = daemon.rpc_ok("command/run", json!({"name": "sessions"}));
    let text = sessions["output"].as_str().unwrap();
    assert!(text.contains(&sid) && text.contains(&new_id), "{text}");

    let listed = daemon.rpc_ok("command/run", json!({"name": "plugins"}));
    assert!(
        listed["output"].as_str().unwrap().contains("hello"),
        "{listed}"
    );
    let off = daemon.rpc_ok(
        "command/run",
        json!({"name": "plugins", "args": ["disable", "hello"]}),
    );
    assert!(
        off["output"].as_str().unwrap().contains("deactivated"),
        "{off}"
    );
    let mcp = daemon.rpc_ok("command/run", json!({"name": "mcp"}));
    assert_eq!(mcp["output"], "no MCP servers");
}

#[tokio::test(flavor = "multi_thread")]
async fn status_segments_panels_and_providers() {
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "t1",
            "todowrite",
            &json!({"todos": [{"id": "1", "text": "write tests", "status": "in_progress"}]}),
        )]),
        MockTurn::text("planned"),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    std::fs::create_dir_all(daemon.workspace.join(".git")).unwrap();
    std::fs::write(
        daemon.workspace.join(".git/HEAD"),
        "ref: refs/heads/topic\n",
    )
    .unwrap();
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "plan").await;

    let status = daemon.rpc_ok("status/get", json!({"sessionId": sid}));
    let segment = |name: &str| {
        status["segments"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| s["text"].as_str().unwrap().to_owned())
    };
    assert_eq!(segment("mode").as_deref(), Some("write"), "{status}");
    assert_eq!(segment("state").as_deref(), Some("idle"), "{status}");
    assert_eq!(segment("git").as_deref(), Some("⎇ topic"), "{status}");
    assert!(segment("context").unwrap().starts_with("ctx "), "{status}");
    assert!(segment("tokens").unwrap().ends_with("tok"), "{status}");
    assert!(segment("model").is_some(), "{status}");
    assert_eq!(segment("processes"), None, "nothing running: left out");
    let missing = daemon.rpc("status/get", json!({"sessionId": "nope"}));
    assert_eq!(missing["error"]["code"], -32001, "{missing}");

    let panels = daemon.rpc_ok("panel/list", json!({}));
    assert_eq!(names(&panels, "panels"), ["todos", "mcp", "processes"]);
    let todos = daemon.rpc_ok("panel/get", json!({"sessionId": sid, "name": "todos"}));
    assert_eq!(todos["lines"], json!(["[~] write tests"]), "{todos}");
    let mcp = daemon.rpc_ok("panel/get", json!({"name": "mcp"}));
    assert_eq!(mcp["lines"], json!([]));
    let bad = daemon.rpc("panel/get", json!({"name": "nope"}));
    assert_eq!(bad["error"]["code"], -32602);

    let providers = daemon.rpc_ok("provider/list", json!({}));
    let listed = names(&providers, "providers");
    for needed in [
        "openai",
        "openrouter",
        "ollama",
        "vllm",
        "llamacpp",
        "lmstudio",
        "groq",
        "deepseek",
        "together",
        "mistral",
    ] {
        assert!(
            listed.contains(&needed.to_owned()),
            "missing {needed}: {listed:?}"
        );
    }

    let switched = daemon.rpc_ok(
        "session/setModel",
        json!({"sessionId": sid, "model": "other-model"}),
    );
    assert_eq!(switched["model"], "other-model");
    let switched = daemon.rpc_ok(
        "session/setModel",
        json!({"sessionId": sid, "provider": "ollama", "model": "qwen3"}),
    );
    assert_eq!(switched["provider"], "ollama");
    assert_eq!(switched["model"], "qwen3");
    let bad = daemon.rpc(
        "session/setModel",
        json!({"sessionId": sid, "provider": "no-such-provider"}),
    );
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    let model_cmd = daemon.rpc_ok(
        "command/run",
        json!({"sessionId": sid, "name": "model", "args": "@default m2"}),
    );
    assert!(
        model_cmd["output"].as_str().unwrap().contains("m2"),
        "{model_cmd}"
    );

    let created = daemon.rpc_ok(
        "session/new",
        json!({"cwd": daemon.workspace, "provider": "groq"}),
    );
    assert_eq!(created["provider"], "groq");
    assert!(
        !created["model"].as_str().unwrap().is_empty(),
        "the preset's default model"
    );
    let bad = daemon.rpc(
        "session/new",
        json!({"cwd": daemon.workspace, "provider": "nope"}),
    );
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
}

#[tokio::test(flavor = "multi_thread")]
async fn amber_cli_runs_commands_and_picks_a_provider() {
    use amber_tests::e2e::run_bounded;
    let mock = MockLlm::start(vec![]).await;
    let daemon = spawn(&mock);

    let mut help = daemon.cli();
    help.args(["--no-autostart", "command", "help"]);
    let (code, out, err) = run_bounded(help);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("/plugins") && out.contains("/detach"), "{out}");

    let mut off = daemon.cli();
    off.args(["--no-autostart", "command", "/plugins", "disable", "hello"]);
    let (code, out, err) = run_bounded(off);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("hello") && out.contains("deactivated"),
        "{out}"
    );
    let row = daemon.rpc_ok("plugin/list", json!({}));
    assert_eq!(row_state(&row, "hello"), "deactivated");

    let mut needs = daemon.cli();
    needs.args(["--no-autostart", "command", "mode", "read"]);
    let (code, _, err) = run_bounded(needs);
    assert_ne!(code, Some(0));
    assert!(err.contains("sessionId"), "{err}");

    let mut bad = daemon.cli();
    bad.args(["--no-autostart", "run", "--provider", "no-such", "hi"]);
    let (code, _, err) = run_bounded(bad);
    assert_ne!(code, Some(0));
    assert!(err.contains("unknown provider"), "{err}");
}

fn row_state(plugins: &Value, name: &str) -> String {
    row(plugins, name)["state"].as_str().unwrap().to_owned()
}
