//! The embedded scripted endpoint: the run's scenarios as amber-mock-llm conversations, served
//! on a thread and runtime of their own (so the harness's clients never delay it), every turn
//! rendered before the first request, zero model latency unless asked. Its records carry the
//! times the KPIs subtract (request received, each content frame and the last one handed to
//! the server), on this process's monotonic clock, like the clients' event times.

use std::net::SocketAddr;
use std::time::Duration;

use amber_mock_llm::{Conversation, MockLlm, MockToolCall, MockTurn};

use crate::error::BenchError;
use crate::scenario::{Scenario, Turn};

/// Serves `scenarios`, and the conversations a KPI generates (`generated`, e.g. the
/// checkpoint KPI's per-turn commands), on `listen` (port 0: any free port), answering as
/// `model`; a turn without a `delay_ms` waits `default_delay_ms`.
pub(crate) fn start(
    scenarios: &[Scenario],
    generated: Vec<Conversation>,
    listen: SocketAddr,
    model: &str,
    default_delay_ms: u64,
) -> Result<MockLlm, BenchError> {
    MockLlm::builder()
        .conversations(scenarios.iter().map(conversation).chain(generated))
        .listen(listen)
        .model(model)
        .default_delay(Duration::from_millis(default_delay_ms))
        .timings_only()
        .start_blocking()
        .map_err(BenchError::from)
}

pub(crate) fn conversation(scenario: &Scenario) -> Conversation {
    Conversation {
        name: scenario.name.clone(),
        prompt: scenario.prompt.clone(),
        turns: scenario.turns.iter().map(turn).collect(),
    }
}

/// A scenario turn as a scripted one: its deltas and calls, paced and delayed as it says.
fn turn(turn: &Turn) -> MockTurn {
    let calls = turn
        .tool_calls
        .iter()
        .map(|c| MockToolCall {
            id: None,
            name: c.name.clone(),
            arguments: c.arguments.clone(),
        })
        .collect();
    let mut scripted = MockTurn::ChunksAndToolCalls {
        chunks: turn.content.clone(),
        calls,
    };
    if let Some(interval_ms) = turn.chunk_interval_ms {
        scripted = MockTurn::Paced {
            interval_ms,
            then: Box::new(scripted),
        };
    }
    if let Some(ms) = turn.delay_ms {
        scripted = MockTurn::Delay {
            ms,
            then: Box::new(scripted),
        };
    }
    scripted
}
