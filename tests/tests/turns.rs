//! End-to-end: a turn's course through the real `amberd`, amber-client and a scripted model.
//!
//! - A real multi-tool task (write → edit → read → bash → reply) and the silent confirm turn.
//! - Prompts sent while a turn runs queue and run in order, each as its own turn, and the
//!   later turn sees the earlier one's history.
//! - `session/cancel` while the model streams and while a bash command runs: the turn ends
//!   `cancelled`, the stream is abandoned, no process is left behind, and the session keeps
//!   working.

use std::time::{Duration, Instant};

use amber_mock_llm::{MockLlm, MockToolCall, MockTurn};
use amber_tests::steps::{
    Events, connect, done, durable, envelope, eventually, last_message, messages, new_session,
    of_type, prompt_turn, seqs, spawn, stop_reason, tool_messages, types, within, without_tail,
};
use serde_json::{Value, json};

fn call(id: &str, name: &str, args: Value) -> MockTurn {
    MockTurn::ToolCalls(vec![MockToolCall {
        id: Some(id.to_owned()),
        name: name.to_owned(),
        arguments: args.to_string(),
    }])
}

#[tokio::test(flavor = "multi_thread")]
async fn write_edit_read_bash_task_runs_and_reports_every_step() {
    let ids = ["call_w", "call_e", "call_r", "call_b"];
    let reply = "notes.txt now says alpha and gamma.";
    let mock = MockLlm::start(vec![
        call(
            ids[0],
            "write",
            json!({"path": "notes.txt", "content": "alpha\nbeta\n"}),
        ),
        call(
            ids[1],
            "edit",
            json!({"path": "notes.txt", "old_string": "beta", "new_string": "gamma"}),
        ),
        call(ids[2], "read", json!({"path": "notes.txt"})),
        call(
            ids[3],
            "bash",
            json!({"command": "cat notes.txt && echo done"}),
        ),
        MockTurn::text(reply),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "make notes.txt").await;

    // The file on disk went through write and edit.
    let on_disk = std::fs::read_to_string(daemon.workspace.join("notes.txt")).unwrap();
    assert_eq!(on_disk, "alpha\ngamma\n");

    // Durable events, in order: one usage per LLM call (the silent confirm included).
    let mut expected = vec!["prompt_queued", "turn_started"];
    for _ in ids {
        expected.extend(["usage", "tool_call_started", "tool_call_completed"]);
    }
    expected.extend(["usage", "message_completed", "usage", "turn_completed"]);
    let durable_events = durable(&turn);
    assert_eq!(types(&durable_events), expected, "events: {turn:#?}");
    assert_eq!(stop_reason(&turn), "end_turn");
    assert!(turn.last().unwrap()["error"].is_null());
    // A fresh session: seqs start at 1 and rise by exactly one.
    let seq_list = seqs(&turn);
    assert_eq!(seq_list, (1..=seq_list.len() as u64).collect::<Vec<_>>());
    assert_eq!(turn[0]["prompt"], "make notes.txt");
    assert!(turn.iter().all(|e| e["sessionId"] == sid.as_str()));
    let turn_id = &turn[0]["turnId"];
    assert!(turn_id.is_string());
    assert!(turn.iter().all(|e| &e["turnId"] == turn_id));

    // Tool calls: started/completed pairs in call order, every one ok.
    let started = of_type(&turn, "tool_call_started");
    let completed = of_type(&turn, "tool_call_completed");
    let started_ids: Vec<_> = started.iter().map(|e| e["callId"].clone()).collect();
    let completed_ids: Vec<_> = completed.iter().map(|e| e["callId"].clone()).collect();
    assert_eq!(started_ids, ids.map(Value::from).to_vec());
    assert_eq!(completed_ids, started_ids);
    let names: Vec<_> = started
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["write", "edit", "read", "bash"]);
    assert_eq!(started[1]["arguments"]["new_string"], "gamma");
    for done_call in &completed {
        assert_eq!(done_call["status"], "ok", "{done_call}");
    }
    let bash_output = completed[3]["output"].as_str().unwrap();
    assert!(
        bash_output.contains("alpha\ngamma\ndone"),
        "bash output: {bash_output:?}"
    );

    // The reply streamed as live deltas of the same item, then completed.
    let message = of_type(&turn, "message_completed")[0];
    assert_eq!(message["text"], reply);
    assert_eq!(message["role"], "assistant");
    let deltas = of_type(&turn, "message_delta");
    assert!(!deltas.is_empty(), "no message_delta events");
    assert!(deltas.iter().all(|d| d.get("seq").is_none()));
    assert!(deltas.iter().all(|d| d["itemId"] == message["itemId"]));
    let streamed: String = deltas
        .iter()
        .map(|d| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, reply);
    let usage = of_type(&turn, "usage");
    assert!(usage[0]["usage"]["totalTokens"].as_u64().unwrap() > 0);
    let total = &usage.last().unwrap()["total"]["totalTokens"];
    assert_eq!(&turn.last().unwrap()["usage"]["totalTokens"], total);

    // What the model saw: one tool message per call, in call order, with matching ids.
    let requests = mock.requests();
    assert_eq!(requests.len(), 6);
    assert_eq!(messages(&requests[0])[0]["role"], "system");
    for (n, request) in requests.iter().enumerate().take(5) {
        let tools = tool_messages(request);
        let got: Vec<_> = tools.iter().map(|m| m["tool_call_id"].clone()).collect();
        assert_eq!(got, ids[..n].iter().map(|i| json!(i)).collect::<Vec<_>>());
    }
    let final_tools = tool_messages(&requests[4]);
    for tool in &final_tools {
        assert_eq!(envelope(tool)["status"], "ok", "{tool}");
    }
    let read_out = envelope(final_tools[2])["output"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(read_out.contains("gamma"), "read output: {read_out:?}");
    assert!(!read_out.contains("beta"), "read output: {read_out:?}");
    let bash_seen = envelope(final_tools[3])["output"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(bash_seen, bash_output, "the event shows what the model saw");
    // Each tool message follows the assistant message that made the call.
    let msgs = messages(&requests[4]);
    for tool in final_tools {
        let at = msgs.iter().position(|m| m == tool).unwrap();
        let assistant = &msgs[at - 1];
        assert_eq!(assistant["role"], "assistant");
        assert_eq!(assistant["tool_calls"][0]["id"], tool["tool_call_id"]);
    }
    // The sixth request is the silent confirm.
    let confirm = last_message(&requests[5]);
    assert_eq!(confirm["role"], "user");
    assert!(
        confirm["content"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("finished"),
        "{confirm}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn confirm_turn_is_silent_and_leaves_no_trace() {
    let reply = "The answer is 42.";
    let mock = MockLlm::start(vec![MockTurn::text(reply), done()]).await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "what is the answer?").await;
    assert_eq!(stop_reason(&turn), "end_turn");

    // The daemon asked once more, with the confirm prompt last.
    let requests = mock.requests();
    assert_eq!(
        requests.len(),
        2,
        "a text reply gets exactly one confirm request"
    );
    let confirm = last_message(&requests[1]).clone();
    assert_eq!(confirm["role"], "user");
    let prior = &messages(&requests[1])[messages(&requests[1]).len() - 2];
    assert_eq!(prior["role"], "assistant");
    assert_eq!(prior["content"], reply);

    // Only the real reply produced message events.
    let completed = of_type(&turn, "message_completed");
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0]["text"], reply);
    for delta in of_type(&turn, "message_delta") {
        assert_eq!(delta["itemId"], completed[0]["itemId"], "{delta}");
    }
    let streamed: String = of_type(&turn, "message_delta")
        .iter()
        .map(|d| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, reply);

    // The confirm exchange is gone from the session's history.
    let got = within("session/get", client.session_get(&sid))
        .await
        .unwrap();
    let history = serde_json::to_value(&got.messages).unwrap();
    let history = history.as_array().unwrap();
    assert!(
        history.iter().all(|m| m["content"] != confirm["content"]),
        "confirm prompt left in history: {history:#?}"
    );
    assert!(history.iter().all(|m| m["content"] != "DONE"));
    let last = history.last().unwrap();
    assert_eq!(
        (&last["role"], &last["content"]),
        (&json!("assistant"), &json!(reply))
    );
    assert_eq!(got.last_seq, *seqs(&turn).last().unwrap());

    // The confirm request is the turn's with one question more and a tiny reply cap; its
    // usage is labelled and added up on its own.
    assert!(requests[0].get("max_tokens").is_none(), "{}", requests[0]);
    assert_eq!(requests[1]["max_tokens"], 32);
    let first = messages(&requests[0]);
    let sent = messages(&requests[1]);
    assert_eq!(sent[0], first[0], "the head is the cached prefix");
    let usages = of_type(&turn, "usage");
    assert_eq!(usages.len(), 2);
    assert!(usages[0].get("purpose").is_none(), "{}", usages[0]);
    assert_eq!(usages[1]["purpose"], "confirm");
    let completed = of_type(&turn, "turn_completed");
    let confirm_usage = &completed[0]["confirmUsage"];
    assert_eq!(confirm_usage, &usages[1]["usage"], "{}", completed[0]);
    assert!(confirm_usage["promptTokens"].as_u64().unwrap() > 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reply_ending_with_the_finish_signal_skips_the_confirm_exchange() {
    let mock = MockLlm::start(vec![MockTurn::Chunks(
        ["All set: notes.txt ", "is fixed.\n\nDO", "NE\n"]
            .map(String::from)
            .to_vec(),
    )])
    .await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "fix notes.txt").await;

    assert_eq!(stop_reason(&turn), "end_turn");
    assert_eq!(mock.requests().len(), 1, "no confirm request after DONE");
    let reply = "All set: notes.txt is fixed.";
    let completed = of_type(&turn, "message_completed");
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0]["text"], reply);
    // The signal line never reached a client, not even in pieces.
    let streamed: String = of_type(&turn, "message_delta")
        .iter()
        .map(|d| d["delta"].as_str().unwrap())
        .collect();
    assert!(!streamed.contains("DO"), "{streamed:?}");
    assert_eq!(streamed.trim_end(), reply);
    assert!(
        of_type(&turn, "turn_completed")[0]
            .get("confirmUsage")
            .is_none()
    );
    let got = within("session/get", client.session_get(&sid))
        .await
        .unwrap();
    assert_eq!(got.messages.last().unwrap().content, reply);

    // A reply that merely mentions DONE gets the confirm question as before.
    mock.push([
        MockTurn::text("DONE with the parser; the lexer is next."),
        done(),
    ]);
    let turn = prompt_turn(&client, &mut events, &sid, "go on").await;
    assert_eq!(stop_reason(&turn), "end_turn");
    assert_eq!(mock.requests().len(), 3);
}

/// A chat-completions stream cut by `max_tokens` in the middle of a tool call's arguments.
fn cut_tool_call() -> MockTurn {
    let chunk = |delta: Value, finish: Value| {
        let body = json!({"id": "c", "object": "chat.completion.chunk", "created": 1,
            "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {body}\n\n")
    };
    let call = json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0,
        "id": "call_cut", "type": "function",
        "function": {"name": "write", "arguments": "{\"path\": \"ext"}}]});
    let usage = json!({"id": "c", "object": "chat.completion.chunk", "created": 1,
        "model": "m", "choices": [],
        "usage": {"prompt_tokens": 50, "completion_tokens": 32, "total_tokens": 82}});
    MockTurn::Raw(format!(
        "{}{}data: {usage}\n\ndata: [DONE]\n\n",
        chunk(call, Value::Null),
        chunk(json!({}), json!("length")),
    ))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_confirm_reply_cut_by_its_cap_is_asked_again_without_it() {
    let mock = MockLlm::start(vec![
        MockTurn::text("I think that is all."),
        cut_tool_call(),
        call(
            "call_extra",
            "write",
            json!({"path": "extra.txt", "content": "more"}),
        ),
        MockTurn::text("Now extra.txt exists too."),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "write files").await;

    assert_eq!(stop_reason(&turn), "end_turn");
    let requests = mock.requests();
    assert_eq!(requests.len(), 5);
    // The cut call never ran: the same question went out again, uncapped.
    assert_eq!(requests[1]["max_tokens"], 32);
    assert_eq!(messages(&requests[2]), messages(&requests[1]));
    assert!(requests[2].get("max_tokens").is_none(), "{}", requests[2]);
    let started: Vec<_> = of_type(&turn, "tool_call_started")
        .iter()
        .map(|e| e["callId"].clone())
        .collect();
    assert_eq!(started, [json!("call_extra")]);
    assert_eq!(
        std::fs::read_to_string(daemon.workspace.join("extra.txt")).unwrap(),
        "more"
    );
    // Every silent request counts as the confirm exchange's: the cut one, the one asked
    // again, and the last question.
    let purposes: Vec<_> = of_type(&turn, "usage")
        .iter()
        .map(|u| u["purpose"].clone())
        .collect();
    assert_eq!(
        purposes,
        [
            Value::Null,
            json!("confirm"),
            json!("confirm"),
            Value::Null,
            json!("confirm")
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn confirm_answer_with_a_tool_call_continues_the_loop() {
    let first = "I think that is all.";
    let second = "Now extra.txt exists too.";
    let mock = MockLlm::start(vec![
        MockTurn::text(first),
        call(
            "call_extra",
            "write",
            json!({"path": "extra.txt", "content": "more"}),
        ),
        MockTurn::text(second),
        done(),
    ])
    .await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "write files").await;

    assert_eq!(stop_reason(&turn), "end_turn");
    assert_eq!(
        std::fs::read_to_string(daemon.workspace.join("extra.txt")).unwrap(),
        "more"
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    let confirm_prompt = last_message(&requests[1]).clone();
    assert_eq!(confirm_prompt["role"], "user");
    // The continued confirm exchange stays, followed by the call and its result.
    // (Its tail was on that request's copy only.)
    let confirm_text = without_tail(confirm_prompt["content"].as_str().unwrap());
    let third = messages(&requests[2]);
    let at = third
        .iter()
        .position(|m| m["role"] == "user" && m["content"] == confirm_text)
        .unwrap();
    assert_eq!(third[at + 1]["tool_calls"][0]["id"], "call_extra");
    assert_eq!(third[at + 2]["tool_call_id"], "call_extra");
    assert_eq!(envelope(&third[at + 2])["status"], "ok");
    // ...and after the next reply the model is asked again.
    assert_eq!(last_message(&requests[3]), &confirm_prompt);

    let texts: Vec<_> = of_type(&turn, "message_completed")
        .iter()
        .map(|m| m["text"].clone())
        .collect();
    assert_eq!(texts, [json!(first), json!(second)]);
    let tool_done = of_type(&turn, "tool_call_completed");
    assert_eq!(tool_done.len(), 1);
    assert_eq!(tool_done[0]["status"], "ok");

    let got = within("session/get", client.session_get(&sid))
        .await
        .unwrap();
    let last = got.messages.last().unwrap();
    assert_eq!(last.content, second);
    assert!(got.messages.iter().all(|m| m.content != "DONE"));
}

// Prompts queued behind a running turn.

#[tokio::test(flavor = "multi_thread")]
async fn prompts_sent_during_a_turn_queue_and_run_in_order() {
    let slow = MockTurn::Slow {
        chunks: vec!["first ".into(), "answer".into()],
        interval_ms: 150,
    };
    let mock = MockLlm::start(vec![slow, done(), MockTurn::text("second answer"), done()]).await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;

    let first = within("prompt 1", client.session_prompt(&session, "one"))
        .await
        .unwrap();
    let second = within("prompt 2", client.session_prompt(&session, "two"))
        .await
        .unwrap();
    assert_ne!(first.turn_id, second.turn_id);
    let state = within("session/get", client.session_get(&session))
        .await
        .unwrap();
    assert_eq!(state.session.state, amber_proto::SessionState::Running);

    let turn1 = events.turn().await;
    let turn2 = events.turn().await;
    // Each prompt was queued, durably and in order, when it was accepted: the second one's
    // `prompt_queued` arrives while the first turn runs.
    let queued: Vec<(&Value, &Value)> = turn1
        .iter()
        .chain(&turn2)
        .filter(|e| e["type"] == "prompt_queued")
        .map(|e| (&e["turnId"], &e["prompt"]))
        .collect();
    assert_eq!(
        queued,
        [
            (&json!(first.turn_id), &json!("one")),
            (&json!(second.turn_id), &json!("two"))
        ]
    );
    assert_eq!(turn1[0]["type"], "prompt_queued", "{turn1:?}");
    let without_queueing = |turn: Vec<Value>| -> Vec<Value> {
        turn.into_iter()
            .filter(|e| e["type"] != "prompt_queued")
            .collect()
    };
    let (turn1, turn2) = (without_queueing(turn1), without_queueing(turn2));
    for (turn, id, prompt, text) in [
        (&turn1, &first.turn_id, "one", "first answer"),
        (&turn2, &second.turn_id, "two", "second answer"),
    ] {
        assert_eq!(turn[0]["type"], "turn_started", "{turn:?}");
        assert_eq!(turn[0]["prompt"], prompt);
        assert!(turn.iter().all(|e| e["turnId"] == id.as_str()), "{turn:?}");
        let completed = turn
            .iter()
            .find(|e| e["type"] == "message_completed")
            .unwrap();
        assert_eq!(completed["text"], text);
        assert_eq!(turn.last().unwrap()["stopReason"], "end_turn");
    }

    // The second turn's first request carries the whole first exchange.
    let requests = mock.requests();
    let contents: Vec<String> = messages(&requests[2])
        .iter()
        .map(|m| without_tail(m["content"].as_str().unwrap_or("")).to_owned())
        .collect();
    let one = contents
        .iter()
        .position(|c| c == "one")
        .expect("first prompt");
    let answer = contents
        .iter()
        .position(|c| c == "first answer")
        .expect("first reply");
    let two = contents
        .iter()
        .position(|c| c == "two")
        .expect("second prompt");
    assert!(one < answer && answer < two, "{contents:?}");
    let idle = within("session/get", client.session_get(&session))
        .await
        .unwrap();
    assert_eq!(idle.session.state, amber_proto::SessionState::Idle);
}

// Cancelling a turn.

/// Far beyond any wait below: a cancel that does not work is seen as a timeout.
const SLOW_INTERVAL_MS: u64 = 1_000;

/// Pids of live (non-zombie) processes whose command line has `arg` as an argument.
fn live_processes_with_arg(arg: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline.split(|b| *b == 0).any(|a| a == arg.as_bytes()) && is_alive(pid) {
            found.push(pid);
        }
    }
    found
}

/// A process exists and is not a zombie (a zombie has released everything it held; in a
/// container without a reaping init it may linger).
fn is_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // `pid (comm) S ...`: the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_mid_stream_ends_the_turn_and_hangs_up_on_the_model() {
    let chunks = (0..30).map(|i| format!("tick {i} ")).collect();
    let mock = MockLlm::start(vec![MockTurn::Slow {
        chunks,
        interval_ms: SLOW_INTERVAL_MS,
    }])
    .await;
    let daemon = spawn(&mock);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    client.session_prompt(&sid, "talk slowly").await.unwrap();
    let before = events.until("message_delta").await;
    assert_eq!(before[0]["type"], "prompt_queued");
    assert_eq!(before[1]["type"], "turn_started");
    let running = client.session_get(&sid).await.unwrap().session;
    assert_eq!(serde_json::to_value(running.state).unwrap(), "running");

    let asked = Instant::now();
    let cancel = within("session/cancel", client.session_cancel(&sid))
        .await
        .unwrap();
    assert!(cancel.cancelled);
    let rest = events.turn().await;
    let waited = asked.elapsed();
    assert_eq!(stop_reason(&rest), "cancelled", "{rest:#?}");
    assert!(rest.last().unwrap()["error"].is_null());
    // Nowhere near the 30 s the stream would take; loose bound, not a benchmark.
    assert!(waited < Duration::from_secs(5), "cancel took {waited:?}");
    assert!(of_type(&rest, "error").is_empty());
    eventually(
        "the mock to see the hang-up",
        Duration::from_secs(5),
        || mock.interrupted_streams() == 1,
    )
    .await;

    // Idle now: nothing to cancel, and a new prompt works.
    assert!(!client.session_cancel(&sid).await.unwrap().cancelled);
    mock.push([MockTurn::text("Fast this time."), done()]);
    let turn = prompt_turn(&client, &mut events, &sid, "again").await;
    assert_eq!(stop_reason(&turn), "end_turn");
    // The abandoned partial reply did not enter the context.
    let got = client.session_get(&sid).await.unwrap();
    assert!(got.messages.iter().all(|m| !m.content.contains("tick 0")));
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_mid_bash_kills_the_whole_process_group() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    // Arguments unique to this daemon, to find the processes in /proc.
    let (bg_arg, fg_arg) = (
        format!("31.{}", daemon.pid()),
        format!("32.{}", daemon.pid()),
    );
    let command = format!("sleep {bg_arg} & echo $! > bg.pid; echo started; sleep {fg_arg}");
    mock.push([
        MockTurn::tool_call("bash", &json!({ "command": command })),
        MockTurn::text("unused"),
    ]);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    client.session_prompt(&sid, "sleep").await.unwrap();
    loop {
        let event = events.next().await;
        assert_ne!(event["type"], "turn_completed", "bash ended early: {event}");
        if event["type"] == "tool_output_delta"
            && event["chunk"].as_str().unwrap().contains("started")
        {
            break;
        }
    }
    let bg_pid: u32 = std::fs::read_to_string(daemon.workspace.join("bg.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(is_alive(bg_pid), "background sleep should be running");
    eventually(
        "the foreground sleep to start",
        Duration::from_secs(5),
        || live_processes_with_arg(&fg_arg).len() == 1,
    )
    .await;

    assert!(client.session_cancel(&sid).await.unwrap().cancelled);
    let rest = events.turn().await;
    assert_eq!(stop_reason(&rest), "cancelled", "{rest:#?}");
    let completed = of_type(&rest, "tool_call_completed");
    assert_eq!(
        completed.len(),
        1,
        "the bash call still completes: {rest:#?}"
    );
    assert_ne!(completed[0]["status"], "ok");
    assert_eq!(mock.request_count(), 1, "no LLM call after the cancel");

    eventually(
        "every process of the command to die",
        Duration::from_secs(5),
        || {
            !is_alive(bg_pid)
                && live_processes_with_arg(&bg_arg).is_empty()
                && live_processes_with_arg(&fg_arg).is_empty()
        },
    )
    .await;
    assert_eq!(
        serde_json::to_value(client.session_get(&sid).await.unwrap().session.state).unwrap(),
        "idle"
    );
}
