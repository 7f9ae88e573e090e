//! `mock-llm`: the scripted endpoint as a standalone server, answering the "two-request
//! task" forever — for `hyperfine` runs of `amber-cli run` (docs/benchmarks.md).
//!
//! Each conversation goes: user prompt → a `bash` tool call (`echo hello`) → after the tool
//! result, a short reply → after amber's confirm prompt, `DONE`. Prints its base URL.

use amber_mock_llm::{MockLlm, MockTurn};
use serde_json::{Value, json};

fn respond(request: &Value) -> MockTurn {
    // The last message that is not amberd's per-turn tail (a `<system-reminder>` user
    // message after a tool result; on a user prompt the tail is appended to its text).
    let last = request["messages"]
        .as_array()
        .and_then(|m| {
            m.iter().rev().find(|m| {
                !(m["role"] == "user"
                    && m["content"]
                        .as_str()
                        .is_some_and(|c| c.trim_start().starts_with("<system-reminder>")))
            })
        })
        .cloned()
        .unwrap_or_default();
    let role = last["role"].as_str().unwrap_or("");
    let content = last["content"].as_str().unwrap_or("");
    match role {
        "tool" => MockTurn::text("The command printed hello."),
        "user" if content.contains("Are you finished") => MockTurn::text("DONE"),
        _ => MockTurn::tool_call("bash", &json!({"command": "echo hello"})),
    }
}

fn main() {
    let mock = MockLlm::start_blocking(Vec::new());
    mock.set_responder(respond);
    println!("{}", mock.base_url());
    // Serve until killed.
    loop {
        std::thread::park();
    }
}
