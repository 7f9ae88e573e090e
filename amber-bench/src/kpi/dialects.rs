//! The model dialects side by side: the primary task scenario end to end through
//! one fresh daemon per flavor — `openai` (chat completions), `anthropic` (Messages) and
//! `openai-responses` — against the same embedded endpoint, which answers each API with the
//! same scripted conversation. Reported per flavor: prompt → `turn_completed` and the
//! daemon's share per model request; and each dialect's daemon share over chat
//! completions' (the dialects must not be slower).

use std::time::Duration;

use amber_client::Client;

use crate::daemon::DaemonProc;
use crate::error::BenchError;
use crate::stats::{Summary, ms};
use crate::suite::Suite;
use crate::task;

/// The flavors compared; the first is the baseline.
pub(crate) const FLAVORS: [&str; 3] = ["openai", "anthropic", "openai-responses"];

const DEFAULT_RUNS: usize = 30;
/// Unmeasured runs first on each daemon (its first session, first connections).
const WARMUP: usize = 2;
/// The goal: no dialect costs the daemon more per request than this times chat completions.
pub(crate) const GOAL_RATIO: f64 = 1.25;

/// One flavor's samples.
#[derive(Default)]
struct Samples {
    total: Vec<f64>,
    per_request: Vec<f64>,
    errors: usize,
    first_error: Option<String>,
}

pub(crate) async fn measure(s: &mut Suite) -> Result<(), BenchError> {
    s.report
        .section("model dialects: the primary scenario per flavor, one daemon each");
    if s.endpoint.is_none() || s.args.socket.is_some() {
        s.report.note(
            "dialects: skipped: needs the embedded endpoint (it speaks every dialect) and the bench's own daemons",
        );
        return Ok(());
    }
    let scenario = s.primary()?;
    let runs = s.args.runs(DEFAULT_RUNS);
    let mut baseline = None;
    for flavor in FLAVORS {
        let mut spec = s.spec.clone();
        spec.extra_config
            .push_str(&format!("\n[provider]\nflavor = \"{flavor}\"\n"));
        let daemon = DaemonProc::start(&spec, "dialect daemon start").await?;
        let client = Client::connect(task::connect_options(&daemon.socket)).await?;
        let m = run(s, &client, &scenario, flavor, runs).await;
        tokio::task::spawn_blocking(move || daemon.stop())
            .await
            .ok();
        let m = m?;
        let key = flavor.replace('-', "_");
        if let Some(t) = Summary::of(&m.total) {
            s.report.put_summary(
                &format!("dialect_{key}_e2e_ms"),
                &format!("{flavor}: {} prompt → turn_completed", scenario.name),
                &t,
            );
        }
        let per_request = Summary::of(&m.per_request);
        if let Some(t) = &per_request {
            s.report.put_summary(
                &format!("dialect_{key}_daemon_ms_per_request"),
                &format!("{flavor}: daemon's share per model request"),
                t,
            );
        }
        if m.errors > 0 {
            s.report.put(
                &format!("dialect_{key}_errors_count"),
                &format!("{flavor}: failed runs"),
                m.errors as f64,
            );
            if let Some(e) = m.first_error {
                s.report
                    .note(format!("dialect {flavor}: first failure: {e}"));
            }
        }
        match (baseline, per_request.map(|t| t.median)) {
            (None, Some(median)) => baseline = Some(median),
            (Some(base), Some(median)) if base > 0.0 => s.report.put(
                &format!("dialect_{key}_vs_chat_ratio"),
                &format!("{flavor}: daemon ms per request ÷ chat completions' (median)"),
                median / base,
            ),
            _ => {}
        }
    }
    Ok(())
}

async fn run(
    s: &Suite,
    client: &Client,
    scenario: &crate::scenario::Scenario,
    flavor: &str,
    runs: usize,
) -> Result<Samples, BenchError> {
    let mut m = Samples::default();
    let Some(endpoint) = &s.endpoint else {
        return Ok(m);
    };
    for i in 0..runs + WARMUP {
        let mark = endpoint.request_count();
        let cwd = task::workspace(scenario, s.scratch.path(), None, &format!("{flavor}-{i}"))?;
        let run = match task::run(client, &[], scenario, cwd).await {
            Ok(run) => run,
            Err(e) => {
                m.errors += 1;
                m.first_error.get_or_insert(e.to_string());
                continue;
            }
        };
        let Some(seen) = run.observed.first() else {
            continue;
        };
        if !seen.ok() {
            m.errors += 1;
            m.first_error.get_or_insert(seen.outcome());
            continue;
        }
        if i < WARMUP {
            continue;
        }
        m.total.push(ms(run.total));
        let records = endpoint.recorded_since(mark);
        if records.is_empty() {
            continue;
        }
        let in_endpoint: Duration = records.iter().filter_map(|r| r.endpoint_time()).sum();
        let tool_ms: u64 = seen.tools.iter().map(|(_, d)| d).sum();
        let daemon = ms(run.total.saturating_sub(in_endpoint)) - tool_ms as f64;
        m.per_request.push(daemon.max(0.0) / records.len() as f64);
    }
    Ok(m)
}
