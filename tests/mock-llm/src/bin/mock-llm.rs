//! `mock-llm`: the scripted endpoint as a standalone server, answering the "two-request
//! task" forever — for `hyperfine` runs of `amber-cli run` and the cost measurements of
//! docs/benchmarks.md.
//!
//! Each conversation goes: user prompt → a `bash` tool call (`echo hello`) → after the tool
//! result, a short reply → after amber's confirm prompt, `DONE`. Prints its base URL.
//!
//! Like OpenAI's automatic prompt cache, every usage reports as cached the prefix a request
//! shares with the one before it (in whole blocks of 128 tokens, from 1024 tokens on; a
//! token is a quarter of a byte here, as the mock counts prompts). `--finish-signal` makes
//! the reply end with amber's finish signal (a last line `DONE`), as a model that follows
//! the system prompt does.

use std::sync::Mutex;

use amber_mock_llm::{MockLlm, MockTurn};
use serde_json::{Value, json};

/// Prompt caching starts at this many tokens and counts in blocks of the second.
const CACHE_MIN_TOKENS: u64 = 1024;
const CACHE_BLOCK_TOKENS: u64 = 128;

fn respond(request: &Value, finish_signal: bool) -> MockTurn {
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
        "tool" if finish_signal => MockTurn::text("The command printed hello.\n\nDONE"),
        "tool" => MockTurn::text("The command printed hello."),
        "user" if content.contains("Are you finished") => MockTurn::text("DONE"),
        _ => MockTurn::tool_call("bash", &json!({"command": "echo hello"})),
    }
}

/// What a provider's cache sees of a request: its tools, then its messages.
fn cacheable(request: &Value) -> String {
    format!("{}{}", request["tools"], request["messages"])
}

/// Tokens of `prompt` a prefix cache holding `previous` would serve.
fn cached_tokens(previous: &str, prompt: &str) -> u64 {
    let shared = previous
        .bytes()
        .zip(prompt.bytes())
        .take_while(|(a, b)| a == b)
        .count() as u64;
    let tokens = shared / 4;
    if tokens < CACHE_MIN_TOKENS {
        0
    } else {
        tokens / CACHE_BLOCK_TOKENS * CACHE_BLOCK_TOKENS
    }
}

fn main() {
    let finish_signal = std::env::args().any(|a| a == "--finish-signal");
    let mock = MockLlm::start_blocking(Vec::new());
    let previous = Mutex::new(String::new());
    mock.set_responder(move |request| {
        let prompt = cacheable(request);
        let tokens = {
            let mut previous = previous.lock().unwrap_or_else(|e| e.into_inner());
            let tokens = cached_tokens(&previous, &prompt);
            *previous = prompt;
            tokens
        };
        MockTurn::Cached {
            tokens,
            then: Box::new(respond(request, finish_signal)),
        }
    });
    println!("{}", mock.base_url());
    // Serve until killed.
    loop {
        std::thread::park();
    }
}
