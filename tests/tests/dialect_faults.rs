//! End-to-end: faulty streams in each of the three dialects (chat completions, Anthropic
//! Messages, the Responses API) through the real daemon, the way a hostile or broken endpoint
//! sends them.
//!
//! - A proxy that holds the connection open after the final event (`[DONE]`,
//!   `message_stop`, `response.completed`) does not hold the turn: each request of a
//!   three-request task has its connection held for a minute, and the turn still ends in
//!   well under that.
//! - An endless reasoning stream, a single 50 MB delta and a line that never ends end the
//!   request with `reply_too_large` (reported, not retried), while amberd's memory stays
//!   bounded — its high-water mark, read from `/proc/<pid>/status` — and comes back
//!   afterwards.
//! - Keep-alives forever end the request at the whole-stream bound `max_reply_bytes` sets.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use amber_mock_llm::{MockLlm, MockToolCall, MockTurn};
use amber_tests::steps::{
    Events, connect, done, new_session, of_type, prompt_turn, spawn_config, stop_reason,
};
use serde_json::{Value, json};

/// How long the mock holds each connection open after the final event.
const HOLD: Duration = Duration::from_secs(60);
/// A turn of three requests whose connections are held must end well within one hold.
const PROMPT: Duration = Duration::from_secs(20);
const MIB: u64 = 1024 * 1024;
/// What one faulty reply may add to amberd's high-water mark. The reply bound is 8 MiB (its
/// events 17 MiB); without it an endless stream grows until cancelled and one 50 MB delta
/// cost about 250 MB.
const PEAK: u64 = 128 * MIB;
/// How far above its baseline amberd's RSS may stay once the faulty turn is over.
const AFTER: u64 = 32 * MIB;

/// The provider as these tests configure it: `flavor`, fast retries (so a retry of the
/// faulty reply would show in the request count), the default idle timeout and reply bound.
fn config(flavor: &str) -> String {
    format!(
        "[provider]\nflavor = \"{flavor}\"\nmax_retries = 2\nretry_base_ms = 10\n\
         retry_max_ms = 50\n"
    )
}

fn held(turn: MockTurn) -> MockTurn {
    MockTurn::Held {
        hold_ms: HOLD.as_millis() as u64,
        then: Box::new(turn),
    }
}

/// A task of three requests — a reasoning model's tool call, the answer, the confirm —
/// each connection held open after its final event.
async fn the_turn_ends_at_the_final_event(flavor: &str) {
    let mock = MockLlm::start(vec![
        held(MockTurn::Thinking {
            reasoning: "Read the notes first.".into(),
            then: Box::new(MockTurn::ToolCalls(vec![MockToolCall::new(
                "read",
                &json!({"path": "notes.txt"}),
            )])),
        }),
        held(MockTurn::text("The notes say: buy tea.")),
        held(done()),
    ])
    .await;
    let daemon = spawn_config(&mock, &config(flavor));
    std::fs::write(daemon.workspace.join("notes.txt"), "buy tea\n").unwrap();
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let started = Instant::now();
    let turn = prompt_turn(&client, &mut events, &sid, "what do my notes say?").await;
    let took = started.elapsed();
    assert_eq!(stop_reason(&turn), "end_turn", "{flavor}: {turn:#?}");
    assert_eq!(
        of_type(&turn, "message_completed")[0]["text"],
        "The notes say: buy tea.",
        "{flavor}"
    );
    assert_eq!(mock.request_count(), 3, "{flavor}");
    assert!(
        took < PROMPT,
        "{flavor}: the turn took {took:?} with connections held {HOLD:?} after their final event"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_completions_end_at_done_though_the_connection_is_held() {
    the_turn_ends_at_the_final_event("openai").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_messages_end_at_message_stop_though_the_connection_is_held() {
    the_turn_ends_at_the_final_event("anthropic").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_responses_api_ends_at_response_completed_though_the_connection_is_held() {
    the_turn_ends_at_the_final_event("openai-responses").await;
}

/// A `/proc/<pid>/status` field in bytes (`VmRSS`, `VmHWM`).
fn vm(pid: u32, field: &str) -> u64 {
    try_vm(pid, field).unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// `vm`, or `None` once the process is gone.
fn try_vm(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// Samples amberd's RSS every few milliseconds until dropped; `max` is the most seen.
struct RssSampler {
    stop: Arc<AtomicBool>,
    max: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RssSampler {
    fn start(pid: u32) -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let max = Arc::new(AtomicU64::new(0));
        let (halt, most) = (stop.clone(), max.clone());
        let thread = std::thread::spawn(move || {
            while !halt.load(Ordering::Relaxed) {
                let Some(rss) = try_vm(pid, "VmRSS") else {
                    return;
                };
                most.fetch_max(rss, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        RssSampler {
            stop,
            max,
            thread: Some(thread),
        }
    }

    /// Stops sampling; the most RSS seen.
    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
        self.max.load(Ordering::Relaxed)
    }
}

/// A warm-up turn, then `faulty` as the next reply: the turn ends `reply_too_large`, the
/// request is not retried, and amberd's memory stays within [`PEAK`] of its warm baseline
/// during the turn and comes back within [`AFTER`] of it afterwards.
async fn a_faulty_reply_is_refused_within_bounded_memory(flavor: &str, faulty: MockTurn) {
    let mock = MockLlm::start(vec![MockTurn::text("warm"), done(), faulty]).await;
    let daemon = spawn_config(&mock, &config(flavor));
    let pid = daemon.pid();
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let warm = prompt_turn(&client, &mut events, &sid, "warm up").await;
    assert_eq!(stop_reason(&warm), "end_turn", "{flavor}: {warm:#?}");
    let baseline = vm(pid, "VmRSS");

    let sampler = RssSampler::start(pid);
    let turn = prompt_turn(&client, &mut events, &sid, "think hard").await;
    let sampled = sampler.finish();
    let peak = vm(pid, "VmHWM").max(sampled);

    assert_eq!(stop_reason(&turn), "error", "{flavor}: {}", summary(&turn));
    let completed = turn.last().unwrap();
    assert_eq!(
        completed["error"]["code"], "reply_too_large",
        "{flavor}: {completed}"
    );
    let message = completed["error"]["message"].as_str().unwrap();
    assert!(message.contains("max_reply_bytes"), "{flavor}: {message}");
    let errors = of_type(&turn, "error");
    assert_eq!(errors.len(), 1, "{flavor}: {}", summary(&turn));
    assert_eq!(errors[0]["retryable"], false, "{flavor}");
    assert!(
        of_type(&turn, "retrying").is_empty(),
        "{flavor}: not retried"
    );
    assert_eq!(
        mock.request_count(),
        3,
        "{flavor}: warm-up, confirm, faulty"
    );

    // Waited for, not timed: whatever amberd still frees after the turn counts.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut after = vm(pid, "VmRSS");
    while after >= baseline + AFTER {
        assert!(
            Instant::now() < deadline,
            "{flavor}: RSS {} MiB after the turn, baseline {} MiB",
            after / MIB,
            baseline / MIB
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        after = vm(pid, "VmRSS");
    }
    eprintln!(
        "{flavor}: RSS baseline {} MiB, peak +{} MiB, after +{} MiB",
        baseline / MIB,
        peak.saturating_sub(baseline) / MIB,
        after.saturating_sub(baseline) / MIB,
    );
    assert!(
        peak < baseline + PEAK,
        "{flavor}: the faulty reply cost {} MiB at its peak",
        peak.saturating_sub(baseline) / MIB
    );

    // The session goes on: the next reply is served as usual.
    mock.push([MockTurn::text("back to normal"), done()]);
    let next = prompt_turn(&client, &mut events, &sid, "again").await;
    assert_eq!(stop_reason(&next), "end_turn", "{flavor}: {next:#?}");
}

/// The types of `events`, and any error, for a failure message (the deltas are megabytes).
fn summary(events: &[Value]) -> String {
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    let errors: Vec<&Value> = events.iter().filter(|e| e["type"] == "error").collect();
    format!(
        "{} events, errors {errors:?}, last types {:?}",
        types.len(),
        &types[types.len().saturating_sub(5)..]
    )
}

fn endless_reasoning() -> MockTurn {
    MockTurn::EndlessReasoning {
        piece: "Let me think about this once more. ".repeat(120),
    }
}

/// One text delta of 50 MB.
fn one_huge_delta() -> MockTurn {
    MockTurn::Chunks(vec!["x".repeat(50 * 1024 * 1024)])
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endless_reasoning_stream_is_refused_over_chat_completions() {
    a_faulty_reply_is_refused_within_bounded_memory("openai", endless_reasoning()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endless_reasoning_stream_is_refused_over_anthropic_messages() {
    a_faulty_reply_is_refused_within_bounded_memory("anthropic", endless_reasoning()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endless_reasoning_stream_is_refused_over_the_responses_api() {
    a_faulty_reply_is_refused_within_bounded_memory("openai-responses", endless_reasoning()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_50_mb_delta_is_refused_over_chat_completions() {
    a_faulty_reply_is_refused_within_bounded_memory("openai", one_huge_delta()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_50_mb_delta_is_refused_over_anthropic_messages() {
    a_faulty_reply_is_refused_within_bounded_memory("anthropic", one_huge_delta()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_50_mb_delta_is_refused_over_the_responses_api() {
    a_faulty_reply_is_refused_within_bounded_memory("openai-responses", one_huge_delta()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_line_that_never_ends_is_refused() {
    let line = MockTurn::EndlessRaw("data: {\"choices\":[{\"delta\":{\"content\":\"".repeat(64));
    a_faulty_reply_is_refused_within_bounded_memory("openai", line).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn keep_alives_forever_end_the_request_at_the_configured_bound() {
    let mock = MockLlm::start(vec![MockTurn::EndlessRaw(": keep-alive\n\n".repeat(256))]).await;
    // 64 KiB replies: a stream of at most 4 MiB.
    let config = format!("{}max_reply_bytes = 65536\n", config("openai"));
    let daemon = spawn_config(&mock, &config);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "hello?").await;
    assert_eq!(stop_reason(&turn), "error", "{}", summary(&turn));
    let error = &turn.last().unwrap()["error"];
    assert_eq!(error["code"], "reply_too_large", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("the stream") && message.contains("4 MiB"),
        "{message}"
    );
    assert_eq!(mock.request_count(), 1, "not retried");
}
