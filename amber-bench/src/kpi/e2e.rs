//! End-to-end time of each task scenario through amber-client (prompt sent → `turn_completed`
//! received) and the daemon's own share of it: the total minus the endpoint's time, which the
//! embedded endpoint records per request (received → last byte handed over). Also the
//! first-token relay latency (endpoint hands over its first content frame → the client has the
//! first `message_delta`), model requests per task and tool-call outcomes.

use std::time::Duration;

use crate::args::Kpi;
use crate::error::BenchError;
use crate::scenario::{Role, Scenario};
use crate::stats::{Summary, ms};
use crate::suite::Suite;
use crate::task;

const DEFAULT_RUNS: usize = 50;

/// The samples of one scenario.
#[derive(Default)]
struct Samples {
    total: Vec<f64>,
    setup: Vec<f64>,
    endpoint: Vec<f64>,
    daemon: Vec<f64>,
    per_request: Vec<f64>,
    per_request_no_tools: Vec<f64>,
    tool_ms: Vec<f64>,
    requests: Vec<f64>,
    relay: Vec<f64>,
    errors: usize,
    first_error: Option<String>,
    mismatches: usize,
}

pub(crate) async fn measure(s: &mut Suite) -> Result<(), BenchError> {
    let full = s.args.wants(Kpi::E2e) || s.args.wants(Kpi::Tools);
    let primary = s.primary()?;
    let scenarios = if full {
        s.of_role(Role::Task)
    } else {
        vec![primary.clone()]
    };
    let runs = s.args.runs(DEFAULT_RUNS);
    let mut relay = Vec::new();
    if full {
        s.report
            .section("end to end, warm daemon, through amber-client");
    }
    for scenario in &scenarios {
        let m = run_scenario(s, scenario, runs).await?;
        if full {
            report(s, scenario, &m);
        }
        if scenario.name == primary.name {
            relay = m.relay;
        }
    }
    if s.args.wants(Kpi::Relay) {
        s.report.section("first-token relay");
        match Summary::of(&relay) {
            Some(r) => s.report.put_summary(
                "first_token_relay_ms",
                &format!(
                    "{}: endpoint's first content byte → client's first message_delta",
                    primary.name
                ),
                &r,
            ),
            None if s.endpoint.is_none() => s.report.note(
                "relay: skipped: needs the embedded endpoint's timestamps (not available with --base-url)",
            ),
            None => s
                .report
                .note("relay: no run had both a streamed content byte and a delta"),
        }
    }
    Ok(())
}

async fn run_scenario(
    s: &mut Suite,
    scenario: &Scenario,
    runs: usize,
) -> Result<Samples, BenchError> {
    let client = s.client()?.clone();
    let mut m = Samples::default();
    let (mut tools_ok, mut tools_total) = (0, 0);
    for i in 0..runs {
        let mark = s.endpoint.as_ref().map(|e| e.request_count());
        let cwd = task::workspace(scenario, s.scratch.path(), None, &format!("e2e-{i}"))?;
        let run = match task::run(&client, &[], scenario, cwd).await {
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
        tools_total += seen.tools.len();
        tools_ok += seen.tools_ok();
        m.mismatches += seen.mismatches();
        if !seen.ok() {
            m.errors += 1;
            m.first_error.get_or_insert(seen.outcome());
            continue;
        }
        let tool_ms: u64 = seen.tools.iter().map(|(_, d)| d).sum();
        m.total.push(ms(run.total));
        m.setup.push(ms(run.setup));
        m.tool_ms.push(tool_ms as f64);
        let (Some(endpoint), Some(mark)) = (&s.endpoint, mark) else {
            continue;
        };
        let records = endpoint.recorded_since(mark);
        if records.is_empty() {
            continue;
        }
        let in_endpoint: Duration = records.iter().filter_map(|r| r.endpoint_time()).sum();
        let daemon = ms(run.total.saturating_sub(in_endpoint));
        let n = records.len() as f64;
        m.requests.push(n);
        m.endpoint.push(ms(in_endpoint));
        m.daemon.push(daemon);
        m.per_request.push(daemon / n);
        m.per_request_no_tools
            .push((daemon - tool_ms as f64).max(0.0) / n);
        let first_sent = records
            .iter()
            .find_map(|r| r.content_times.first().copied());
        if let (Some(sent), Some(got)) = (first_sent, seen.first_delta()) {
            m.relay.push(ms(got.saturating_duration_since(sent)));
        }
    }
    s.count_tools(tools_ok, tools_total);
    Ok(m)
}

fn report(s: &mut Suite, scenario: &Scenario, m: &Samples) {
    let name = &scenario.name;
    let r = &mut s.report;
    if let Some(t) = Summary::of(&m.total) {
        r.put_summary(
            &format!("e2e_{name}_ms"),
            &format!("{name}: prompt → turn_completed"),
            &t,
        );
    }
    if let Some(t) = Summary::of(&m.setup) {
        r.put_median(
            &format!("e2e_{name}_setup_ms"),
            &format!("{name}: session/new + subscribe"),
            &t,
        );
    }
    if let Some(t) = Summary::of(&m.endpoint) {
        r.put_median(
            &format!("e2e_{name}_endpoint_ms"),
            &format!("{name}: endpoint's time (all requests)"),
            &t,
        );
    }
    if let Some(t) = Summary::of(&m.daemon) {
        r.put_summary(
            &format!("e2e_{name}_daemon_ms"),
            &format!("{name}: daemon's share (total − endpoint)"),
            &t,
        );
    }
    if let Some(t) = Summary::of(&m.per_request) {
        r.put_summary(
            &format!("e2e_{name}_daemon_ms_per_request"),
            &format!("{name}: daemon's share per model request"),
            &t,
        );
    }
    if let Some(t) = Summary::of(&m.per_request_no_tools) {
        r.put_median(
            &format!("e2e_{name}_daemon_ms_per_request_excl_tools"),
            &format!("{name}: daemon's share per request, tool run time (durationMs) taken out"),
            &t,
        );
    }
    if let Some(t) = Summary::of(&m.tool_ms) {
        r.put_median(
            &format!("e2e_{name}_tool_ms"),
            &format!("{name}: Σ tool durationMs"),
            &t,
        );
    }
    if let Some(t) = Summary::of(&m.requests) {
        r.put_median(
            &format!("e2e_{name}_model_requests_count"),
            &format!("{name}: model requests per task"),
            &t,
        );
    }
    r.put(
        &format!("e2e_{name}_runs_count"),
        &format!("{name}: runs"),
        (m.total.len() + m.errors) as f64,
    );
    r.put(
        &format!("e2e_{name}_errors_count"),
        &format!("{name}: runs that did not end with end_turn"),
        m.errors as f64,
    );
    r.put(
        &format!("e2e_{name}_text_mismatches_count"),
        &format!("{name}: replies whose deltas ≠ message_completed"),
        m.mismatches as f64,
    );
    if let Some(e) = &m.first_error {
        r.note(format!("e2e {name}: first error: {e}"));
    }
    if m.requests.is_empty() && !m.total.is_empty() {
        r.note(if s.endpoint.is_none() {
            format!(
                "e2e {name}: --base-url: the endpoint's time is unknown, so no daemon share, model request count or relay latency"
            )
        } else {
            format!(
                "e2e {name}: the embedded endpoint saw no request (the --socket daemon talks to another endpoint; start it against --listen's address): no daemon share"
            )
        });
    }
}

/// Tool-call outcomes of every task run in this suite.
pub(crate) fn tool_summary(s: &mut Suite) {
    if !s.args.wants(Kpi::Tools) && s.tools.1 == 0 {
        return;
    }
    let (ok, total) = s.tools;
    s.report.section("tool calls (every task run of the suite)");
    s.report.put("tool_calls_count", "tool calls", total as f64);
    if total > 0 {
        s.report.put(
            "tool_success_pct",
            "tool calls with status ok",
            ok as f64 * 100.0 / total as f64,
        );
    }
}
