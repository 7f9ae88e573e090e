//! The 20k-chunk stream (`stream_20k`): event throughput and per-chunk relay latency to 1 and
//! to 10 subscribers (each its own connection), checking that every subscriber's deltas add up
//! to the completed message; and relaying it to `amber-cli run --json` against reading the same
//! stream straight from the endpoint.
//!
//! Relay latency is per model chunk: the endpoint hands chunk i to its server at `sent[i]`;
//! the first `message_delta` whose cumulative text covers chunk i arrives at `got`; the latency
//! is `got - sent[i]`. Coalesced deltas therefore count the wait of every chunk they carry.

use std::process::Command;
use std::time::Instant;

use amber_client::Client;

use crate::error::BenchError;
use crate::scenario::{Role, Scenario};
use crate::stats::{Summary, ms};
use crate::suite::Suite;
use crate::{direct, proc, task};

const DEFAULT_THROUGHPUT_RUNS: usize = 5;
const DEFAULT_STREAM_RUNS: usize = 10;

fn scenario(s: &Suite, role: Role) -> Result<Scenario, BenchError> {
    s.of_role(role)
        .into_iter()
        .next()
        .ok_or_else(|| BenchError::Usage(format!("no {role:?} scenario")))
}

/// Cumulative byte length of the reply after each chunk.
fn chunk_ends(scenario: &Scenario) -> Vec<usize> {
    let mut end = 0;
    scenario
        .turns
        .iter()
        .rev()
        .find(|t| !t.content.is_empty())
        .map(|t| {
            t.content
                .iter()
                .map(|c| {
                    end += c.len();
                    end
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Latency of every chunk: when the delta covering it arrived minus when it was sent.
fn chunk_latencies(sent: &[Instant], ends: &[usize], deltas: &[(Instant, usize)]) -> Vec<f64> {
    let mut out = Vec::with_capacity(sent.len());
    let mut d = 0;
    for (i, at) in sent.iter().enumerate() {
        let Some(end) = ends.get(i) else { break };
        while d < deltas.len() && deltas[d].1 < *end {
            d += 1;
        }
        let Some((got, _)) = deltas.get(d) else { break };
        out.push(ms(got.saturating_duration_since(*at)));
    }
    out
}

#[derive(Default)]
struct Fanout {
    events_per_s: Vec<f64>,
    deltas_per_s: Vec<f64>,
    slowest_deltas_per_s: Vec<f64>,
    events: Vec<f64>,
    latency: Vec<f64>,
    total: Vec<f64>,
    mismatches: usize,
}

pub(crate) async fn throughput(s: &mut Suite) -> Result<(), BenchError> {
    s.endpoint()?;
    let runs = s.args.runs(DEFAULT_THROUGHPUT_RUNS);
    let mut mismatches = 0;
    let flood = scenario(s, Role::Stream)?;
    s.report.section(&format!(
        "event throughput ({}: sent as fast as the connection takes it)",
        flood.name
    ));
    for subscribers in [1usize, 10] {
        let f = fanout(s, &flood, subscribers, runs).await?;
        let (tag, who) = tags(subscribers);
        let r = &mut s.report;
        let chunks = chunk_ends(&flood).len();
        if let Some(x) = Summary::of(&f.deltas_per_s) {
            r.put_median(
                &format!("deltas_per_s_{tag}"),
                &format!("{who}: model deltas relayed per second (all subscribers)"),
                &x,
            );
        }
        if subscribers > 1
            && let Some(x) = Summary::of(&f.slowest_deltas_per_s)
        {
            r.put_median(
                &format!("deltas_per_s_{tag}_slowest"),
                &format!("{who}: model deltas per second, slowest subscriber"),
                &x,
            );
        }
        if let Some(x) = Summary::of(&f.events_per_s) {
            r.put_median(
                &format!("events_per_s_{tag}"),
                &format!("{who}: message_delta events per second (all subscribers)"),
                &x,
            );
        }
        if let Some(x) = Summary::of(&f.events) {
            r.put_median(
                &format!("delta_events_count_{tag}"),
                &format!(
                    "{who}: message_delta events per subscriber ({chunks} chunks, after coalescing)"
                ),
                &x,
            );
        }
        if let Some(x) = Summary::of(&f.latency) {
            r.put_summary(
                &format!("event_relay_saturated_ms_{tag}"),
                &format!("{who}: per-chunk latency endpoint → client under saturation (queueing)"),
                &x,
            );
        }
        if let Some(x) = Summary::of(&f.total) {
            r.put_median(
                &format!("stream_20k_{tag}_ms"),
                &format!("{who}: prompt → turn_completed"),
                &x,
            );
        }
        mismatches += f.mismatches;
    }
    if let Ok(paced) = scenario(s, Role::Paced) {
        s.report.section(&format!(
            "per-event relay latency ({}: a steady stream the daemon keeps up with)",
            paced.name
        ));
        for subscribers in [1usize, 10] {
            let f = fanout(s, &paced, subscribers, runs).await?;
            let (tag, who) = tags(subscribers);
            if let Some(x) = Summary::of(&f.latency) {
                s.report.put_summary(&format!("event_relay_ms_{tag}"), &format!("{who}: per-chunk latency endpoint hands a chunk over → client has its delta"), &x);
            }
            if let Some(x) = Summary::of(&f.events) {
                s.report.put_median(
                    &format!("paced_delta_events_count_{tag}"),
                    &format!("{who}: message_delta events per subscriber"),
                    &x,
                );
            }
            mismatches += f.mismatches;
        }
    }
    s.report.put(
        "text_mismatches_count",
        "subscribers whose text was lost, duplicated or reordered (both streams)",
        mismatches as f64,
    );
    Ok(())
}

/// Key fragment and label of a subscriber count.
fn tags(subscribers: usize) -> (String, String) {
    if subscribers == 1 {
        ("1_subscriber".into(), "1 subscriber".into())
    } else {
        (
            format!("{subscribers}_subscribers"),
            format!("{subscribers} subscribers"),
        )
    }
}

async fn fanout(
    s: &mut Suite,
    scenario: &Scenario,
    subscribers: usize,
    runs: usize,
) -> Result<Fanout, BenchError> {
    let client = s.client()?.clone();
    let mut subs = Vec::with_capacity(subscribers);
    for _ in 0..subscribers {
        subs.push(Client::connect(task::connect_options(&s.socket)).await?);
    }
    let expected = scenario.final_text();
    let ends = chunk_ends(scenario);
    let mut f = Fanout::default();
    for i in 0..runs {
        let mark = s.endpoint()?.request_count();
        let cwd = task::workspace(
            scenario,
            s.scratch.path(),
            None,
            &format!("fanout-{subscribers}-{i}"),
        )?;
        let run = task::run(&client, &subs, scenario, cwd).await?;
        let records = s.endpoint()?.recorded_since(mark);
        let sent = records
            .iter()
            .map(|r| &r.content_times)
            .find(|t| t.len() == ends.len())
            .ok_or_else(|| {
                BenchError::Failed("throughput: the endpoint did not finish the stream".into())
            })?;
        let Some(first_sent) = sent.first().copied() else {
            continue;
        };
        let (mut events, mut last, mut rates) = (0usize, first_sent, Vec::new());
        for seen in &run.observed {
            let text: String = seen.streamed.values().map(String::as_str).collect();
            if !seen.ok() || seen.mismatches() > 0 || text != expected {
                f.mismatches += 1;
            }
            let Some((got_last, _)) = seen.deltas.last() else {
                continue;
            };
            let span = got_last.saturating_duration_since(first_sent).as_secs_f64();
            if span > 0.0 {
                rates.push(ends.len() as f64 / span);
            }
            events += seen.deltas.len();
            f.events.push(seen.deltas.len() as f64);
            last = last.max(*got_last);
            f.latency.extend(chunk_latencies(sent, &ends, &seen.deltas));
        }
        if let Some(min) = rates.into_iter().reduce(f64::min) {
            f.slowest_deltas_per_s.push(min);
        }
        let span = last.saturating_duration_since(first_sent).as_secs_f64();
        if span > 0.0 {
            f.deltas_per_s
                .push((ends.len() * run.observed.len()) as f64 / span);
            f.events_per_s.push(events as f64 / span);
        }
        f.total.push(ms(run.total));
    }
    Ok(f)
}

pub(crate) async fn cli_vs_direct(s: &mut Suite) -> Result<(), BenchError> {
    let addr = s.endpoint()?.addr();
    let scenario = scenario(s, Role::Stream)?;
    let amber_cli = s.amber_cli()?;
    let runs = s.args.runs(DEFAULT_STREAM_RUNS);
    let expected = scenario.final_text();
    let cwd = task::workspace(&scenario, s.scratch.path(), None, "cli")?;
    let (mut cli, mut straight, mut mismatches, mut failures) =
        (Vec::new(), Vec::new(), 0usize, 0usize);
    // Where the time goes: amberd's CPU during each run (/proc) and amber-cli's own (rusage).
    let pid = s.client()?.daemon_status().await?.pid;
    let (mut daemon_cpu, mut cli_cpu) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let cpu_before = proc::cpu_time(pid).ok();
        let mut cmd = Command::new(&amber_cli);
        cmd.arg("--socket").arg(&s.socket).arg("--no-autostart");
        cmd.args(["run", "--json", "--cwd", &cwd, &scenario.prompt]);
        let run = tokio::task::spawn_blocking(move || {
            proc::run_measured(&mut cmd, "amber-cli run --json")
        })
        .await
        .map_err(|e| BenchError::Failed(format!("stream: {e}")))??;
        if run.code != 0 {
            failures += 1;
            s.report.note(format!(
                "stream: amber-cli exited {}: {}",
                run.code,
                run.stderr.trim()
            ));
            continue;
        }
        if direct::deltas_of_json_lines(&run.stdout) != expected {
            mismatches += 1;
        }
        cli.push(ms(run.wall));
        cli_cpu.push(ms(run.cpu));
        if let (Some(before), Ok(after)) = (cpu_before, proc::cpu_time(pid)) {
            daemon_cpu.push(ms(after.saturating_sub(before)));
        }
        let prompt = scenario.prompt.clone();
        let model = s.args.model.clone();
        let (took, text) =
            tokio::task::spawn_blocking(move || direct::read_stream(addr, &model, &prompt))
                .await
                .map_err(|e| BenchError::Failed(format!("stream: {e}")))??;
        if text != expected {
            mismatches += 1;
        }
        straight.push(ms(took));
    }
    let r = &mut s.report;
    r.section(&format!(
        "relaying {} to amber-cli run --json",
        scenario.name
    ));
    let (Some(c), Some(d)) = (Summary::of(&cli), Summary::of(&straight)) else {
        return Err(BenchError::Failed("stream: no successful run".into()));
    };
    r.put_summary(
        "stream_20k_cli_ms",
        "exec `amber-cli run --json` → exit, all lines read",
        &c,
    );
    r.put_summary(
        "stream_20k_direct_ms",
        "the same stream read straight from the endpoint (HTTP + SSE + JSON)",
        &d,
    );
    r.put(
        "stream_20k_relay_ratio",
        "amber-cli run --json / straight (medians)",
        c.median / d.median,
    );
    if let Some(x) = Summary::of(&cli_cpu) {
        r.put_median(
            "stream_20k_cli_cpu_ms",
            "amber-cli's CPU time (user + system) per run",
            &x,
        );
    }
    if let Some(x) = Summary::of(&daemon_cpu) {
        r.put_median(
            "stream_20k_amberd_cpu_ms",
            "amberd's CPU time during each run (10 ms ticks)",
            &x,
        );
    }
    r.put(
        "stream_20k_text_mismatches_count",
        "outputs whose text ≠ the reply",
        mismatches as f64,
    );
    r.put(
        "stream_20k_cli_failures_count",
        "amber-cli runs that failed",
        failures as f64,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn coalesced_deltas_count_every_chunk() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let sent = [at(0), at(1), at(2)];
        let ends = [2, 4, 6];
        // The first delta carries chunks 0 and 1, the second chunk 2.
        let deltas = [(at(5), 4), (at(6), 6)];
        assert_eq!(chunk_latencies(&sent, &ends, &deltas), [5.0, 4.0, 4.0]);
        // A missing tail yields no latency for the chunks never covered.
        assert_eq!(chunk_latencies(&sent, &ends, &deltas[..1]).len(), 2);
    }
}
