//! How far caps and budgets are passed under fan-out: a daemon of this KPI's own and a
//! scripted model whose sub-agents never finish (each request calls a tool again, so only a
//! cap stops them). Three cases, each run `--runs` times (default 3):
//!
//! - **subagent**: one `task` call, 8 parallel sub-agents each capped at `max_tokens`;
//!   overshoot = each sub-agent's `limit.used − limit.cap` (its `subagent_completed`).
//! - **session**: a session with `maxTokensTotal`, the same 8 parallel sub-agents uncapped;
//!   overshoot = the session's usage − its budget.
//! - **parent**: a session with `maxTokensTotal` starting 4 background children;
//!   overshoot = the parent's and its children's usage − the parent's budget.
//!
//! Each overshoot is also given in requests: tokens ÷ the costliest request the case sent
//! (the scripted model counts a request's body bytes ÷ 4 as its prompt). The claim the
//! figures check: a cap is passed by at most one in-flight request per session.

use std::time::{Duration, Instant};

use amber_client::Client;
use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::{EventKind, SessionNewParams, StopReason};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::daemon::{DaemonProc, DaemonSpec};
use crate::error::BenchError;
use crate::suite::Suite;
use crate::task;

/// Runs per case, unless `--runs` says otherwise.
const RUNS: usize = 3;
/// Sub-agents of the foreground cases, background children of the parent case.
const FOREGROUND: usize = 8;
const BACKGROUND: usize = 4;
/// Each foreground sub-agent's cap, and the budgets of the other two cases, in tokens.
const SUBAGENT_CAP: u64 = 20_000;
const SESSION_BUDGET: u64 = 60_000;
/// How long one case may take.
const CASE_TIMEOUT: Duration = Duration::from_secs(120);
/// The parent's prompt names its fan-out: `FANOUT <task arguments>`.
const FANOUT: &str = "FANOUT ";
const SUBAGENT_MARK: &str = "You are a sub-agent of amber";

/// One case's worst run.
#[derive(Debug, Default, Clone, Copy)]
struct Worst {
    tokens: f64,
    requests: f64,
    sessions: f64,
}

pub(crate) async fn measure(s: &mut Suite) -> Result<(), BenchError> {
    let endpoint = MockLlm::builder().model(&s.args.model).start_blocking()?;
    endpoint.set_responder(respond);
    let spec = DaemonSpec {
        base_url: endpoint.base_url(),
        api_key: Some("amber-bench".to_owned()),
        extra_config: "[agents]\nmax_running = 16\nmax_running_per_parent = 16\n".to_owned(),
        ..s.spec.clone()
    };
    let daemon = DaemonProc::start(&spec, "budgets").await?;
    let client = Client::connect(task::connect_options(&daemon.socket)).await?;
    let workspace = s.scratch.path().join("budgets");
    std::fs::create_dir_all(&workspace).map_err(|e| BenchError::Failed(e.to_string()))?;
    let cwd = workspace.to_string_lossy().into_owned();
    let runs = s.args.runs(RUNS);
    let mut worst = [Worst::default(); 3];
    for _ in 0..runs {
        let cases = [
            subagent_case(&client, &endpoint, &cwd).await?,
            session_case(&client, &endpoint, &cwd).await?,
            parent_case(&client, &endpoint, &cwd).await?,
        ];
        for (slot, run) in worst.iter_mut().zip(cases) {
            if run.requests > slot.requests {
                *slot = run;
            }
        }
    }
    daemon.stop();
    let r = &mut s.report;
    r.section("Caps and budgets under fan-out (worst of the runs)");
    let names = [
        ("subagent", "a sub-agent's max_tokens, 8 parallel"),
        (
            "session",
            "a session's maxTokensTotal, 8 parallel sub-agents",
        ),
        ("parent", "a parent's maxTokensTotal, 4 background children"),
    ];
    for ((key, label), w) in names.iter().zip(worst) {
        r.put(
            &format!("budgets_{key}_worst_overshoot_tokens_count"),
            &format!("{label}: overshoot, tokens"),
            w.tokens,
        );
        r.put(
            &format!("budgets_{key}_worst_overshoot_requests_ratio"),
            &format!("{label}: overshoot ÷ the costliest request"),
            w.requests,
        );
        r.put(
            &format!("budgets_{key}_worst_overshoot_per_session_ratio"),
            &format!("{label}: overshoot per session ÷ the costliest request"),
            w.requests / w.sessions.max(1.0),
        );
    }
    r.note(format!(
        "budgets: {runs} run(s) per case; caps {SUBAGENT_CAP} tokens per sub-agent, \
         budgets {SESSION_BUDGET} tokens; a request's cost is what the scripted model \
         reports for it"
    ));
    Ok(())
}

/// The scripted model: the parent fans out as its prompt says, sub-agents call a tool
/// forever, everything else is answered briefly.
fn respond(request: &Value) -> MockTurn {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let text = |m: &Value| m["content"].as_str().unwrap_or_default().to_owned();
    let subagent = messages
        .first()
        .is_some_and(|m| text(m).starts_with(SUBAGENT_MARK));
    if subagent {
        let n = messages.len();
        return MockTurn::tool_call("bash", &json!({"command": format!("echo dig {n}")}));
    }
    let fanout = messages
        .iter()
        .find(|m| m["role"] == "user")
        .map(text)
        // Without the tail amber appends to the last user message.
        .and_then(|t| {
            let prompt = t
                .split("<system-reminder>")
                .next()
                .unwrap_or_default()
                .trim();
            prompt.strip_prefix(FANOUT).map(str::to_owned)
        })
        .and_then(|args| serde_json::from_str::<Value>(&args).ok());
    let called = messages.iter().any(|m| {
        m["tool_calls"]
            .as_array()
            .is_some_and(|calls| calls.iter().any(|c| c["function"]["name"] == "task"))
    });
    match fanout {
        Some(args) if !called => MockTurn::tool_call("task", &args),
        _ => MockTurn::text("DONE"),
    }
}

fn diggers(n: usize, extra: &Value) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let mut task =
                json!({"prompt": format!("dig forever {i}"), "description": format!("digger {i}")});
            if let (Some(task), Some(extra)) = (task.as_object_mut(), extra.as_object()) {
                task.extend(extra.clone());
            }
            task
        })
        .collect()
}

/// Prompts `session` and reads its events until its turn ends.
async fn turn_events(
    client: &Client,
    session: &str,
    prompt: &str,
) -> Result<Vec<EventKind>, BenchError> {
    let mut events = client.subscribe(session, None).await?;
    client.session_prompt(session, prompt).await?;
    let mut seen = Vec::new();
    let read = async {
        while let Some(event) = events.next().await {
            let event = event?;
            let done =
                matches!(event.kind, EventKind::TurnCompleted { .. }) && event.agent_id.is_none();
            seen.push(event.kind);
            if done {
                break;
            }
        }
        Ok::<(), BenchError>(())
    };
    tokio::time::timeout(CASE_TIMEOUT, read)
        .await
        .map_err(|_| {
            BenchError::Failed(format!("budgets: no turn_completed in {CASE_TIMEOUT:?}"))
        })??;
    Ok(seen)
}

/// The costliest request the endpoint received since request `from`, in tokens as it
/// counts them.
fn costliest(endpoint: &MockLlm, from: usize) -> f64 {
    endpoint.requests()[from..]
        .iter()
        .map(|r| (serde_json::to_string(r).unwrap_or_default().len() as f64 / 4.0).ceil() + 10.0)
        .fold(1.0, f64::max)
}

async fn subagent_case(
    client: &Client,
    endpoint: &MockLlm,
    cwd: &str,
) -> Result<Worst, BenchError> {
    let from = endpoint.requests().len();
    let info = client.session_new(&params(cwd, None)).await?;
    let args = json!({"mode": "parallel", "tasks": diggers(FOREGROUND, &json!({"max_tokens": SUBAGENT_CAP}))});
    let events = turn_events(client, &info.session_id, &format!("{FANOUT}{args}")).await?;
    let over = events
        .iter()
        .filter_map(|kind| match kind {
            EventKind::SubagentCompleted {
                limit: Some(limit), ..
            } => Some(limit.used - limit.cap),
            _ => None,
        })
        .fold(0.0, f64::max);
    let stopped = events
        .iter()
        .filter(|kind| {
            matches!(
                kind,
                EventKind::SubagentCompleted {
                    stop_reason: Some(StopReason::BudgetExceeded),
                    ..
                }
            )
        })
        .count();
    if stopped != FOREGROUND {
        return Err(BenchError::Failed(format!(
            "budgets: {stopped} of {FOREGROUND} capped sub-agents stopped at their cap"
        )));
    }
    let cost = costliest(endpoint, from);
    Ok(Worst {
        tokens: over,
        requests: over / cost,
        sessions: 1.0,
    })
}

async fn session_case(client: &Client, endpoint: &MockLlm, cwd: &str) -> Result<Worst, BenchError> {
    let from = endpoint.requests().len();
    let info = client
        .session_new(&params(cwd, Some(SESSION_BUDGET)))
        .await?;
    let args = json!({"mode": "parallel", "tasks": diggers(FOREGROUND, &json!({}))});
    turn_events(client, &info.session_id, &format!("{FANOUT}{args}")).await?;
    let used = client
        .session_get(&info.session_id)
        .await?
        .session
        .usage
        .total_tokens;
    let over = used.saturating_sub(SESSION_BUDGET) as f64;
    Ok(Worst {
        tokens: over,
        requests: over / costliest(endpoint, from),
        sessions: 1.0,
    })
}

async fn parent_case(client: &Client, endpoint: &MockLlm, cwd: &str) -> Result<Worst, BenchError> {
    let from = endpoint.requests().len();
    let info = client
        .session_new(&params(cwd, Some(SESSION_BUDGET)))
        .await?;
    let parent = info.session_id;
    let args = json!({"background": true, "tasks": diggers(BACKGROUND, &json!({}))});
    turn_events(client, &parent, &format!("{FANOUT}{args}")).await?;
    let deadline = Instant::now() + CASE_TIMEOUT;
    let children = loop {
        let children: Vec<_> = client
            .session_list_all()
            .await?
            .into_iter()
            .filter(|s| s.parent.as_ref().is_some_and(|l| l.session_id == parent))
            .collect();
        let done = children.len() == BACKGROUND
            && children
                .iter()
                .all(|c| c.parent.as_ref().is_some_and(|l| l.result.is_some()));
        if done {
            break children;
        }
        if Instant::now() > deadline {
            return Err(BenchError::Failed(format!(
                "budgets: the parent's children did not all stop in {CASE_TIMEOUT:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let own = client
        .session_get(&parent)
        .await?
        .session
        .usage
        .total_tokens;
    let family = own + children.iter().map(|c| c.usage.total_tokens).sum::<u64>();
    let over = family.saturating_sub(SESSION_BUDGET) as f64;
    Ok(Worst {
        tokens: over,
        requests: over / costliest(endpoint, from),
        sessions: (BACKGROUND + 1) as f64,
    })
}

fn params(cwd: &str, budget: Option<u64>) -> SessionNewParams {
    SessionNewParams {
        cwd: cwd.to_owned(),
        max_tokens_total: budget,
        ..SessionNewParams::default()
    }
}
