//! amberd's footprint, `VmRSS` from /proc: idle, after N `session/new` (per idle session), and
//! while the N sessions each run the primary task at once, each over its own connection
//! (peak sampled every 5 ms; every turn must end with `end_turn`). A daemon of its own, so
//! the other KPIs' sessions are not counted; with `--socket`, that daemon (no idle figure).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use amber_client::Client;
use amber_proto::SessionNewParams;

use crate::daemon::{DaemonProc, rss_kib};
use crate::error::BenchError;
use crate::stats::{Summary, ms};
use crate::suite::Suite;
use crate::task;

/// Time for allocations to settle before RSS is read.
const SETTLE: Duration = Duration::from_millis(300);
/// How often the peak sampler reads RSS.
const SAMPLE_EVERY: Duration = Duration::from_millis(5);
/// Connections used for the concurrent phase at most (amberd's default limit is 128).
const MAX_CONNECTIONS: usize = 100;

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

pub(crate) async fn measure(s: &mut Suite) -> Result<(), BenchError> {
    let scenario = s.primary()?;
    let n = s.args.sessions.max(1);
    let own = match &s.args.socket {
        Some(_) => None,
        None => Some(DaemonProc::start(&s.spec, "memory").await?),
    };
    let socket = own
        .as_ref()
        .map(|d| d.socket.clone())
        .or_else(|| s.args.socket.clone())
        .ok_or_else(|| BenchError::Failed("memory: no socket".into()))?;
    let client = Client::connect(task::connect_options(&socket)).await?;
    let pid = client.daemon_status().await?.pid;
    s.report.section(&format!("amberd memory ({n} sessions)"));

    tokio::time::sleep(SETTLE).await;
    let idle = rss_kib(pid)?;
    if own.is_some() {
        s.report.put(
            "rss_idle_mib",
            "amberd RSS idle (fresh daemon, one client connected)",
            mib(idle),
        );
    } else {
        s.report.note(
            "memory: a running daemon (--socket): no idle figure, deltas from its current RSS",
        );
    }

    let cwd = task::workspace(&scenario, s.scratch.path(), None, "memory")?;
    let params = SessionNewParams {
        cwd,
        ..SessionNewParams::default()
    };
    let created = Instant::now();
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        ids.push(client.session_new(&params).await?.session_id);
    }
    let create_ms = ms(created.elapsed()) / n as f64;
    tokio::time::sleep(SETTLE).await;
    let with_sessions = rss_kib(pid)?;
    let per_session = with_sessions.saturating_sub(idle) as f64 / n as f64;
    s.report.put(
        "session_new_ms_mean",
        "session/new, mean over the sessions",
        create_ms,
    );
    s.report.put(
        "rss_idle_sessions_mib",
        &format!("amberd RSS with {n} idle sessions"),
        mib(with_sessions),
    );
    s.report.put(
        "rss_per_idle_session_kib",
        "RSS per idle session",
        per_session,
    );

    let mut clients = Vec::with_capacity(n.min(MAX_CONNECTIONS));
    for _ in 0..n.min(MAX_CONNECTIONS) {
        clients.push(Client::connect(task::connect_options(&socket)).await?);
    }
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        tokio::spawn(async move {
            let mut peak = 0;
            while !done.load(Ordering::Relaxed) {
                peak = peak.max(rss_kib(pid).unwrap_or(0));
                tokio::time::sleep(SAMPLE_EVERY).await;
            }
            peak.max(rss_kib(pid).unwrap_or(0))
        })
    };
    let started = Instant::now();
    let runs = futures::future::join_all(ids.iter().enumerate().map(|(i, id)| {
        let client = &clients[i % clients.len()];
        task::run_in(client, &[], &scenario, id)
    }))
    .await;
    let wall = started.elapsed();
    done.store(true, Ordering::Relaxed);
    let peak = sampler.await.unwrap_or(0);
    tokio::time::sleep(SETTLE).await;
    let after = rss_kib(pid)?;

    let (mut errors, mut first_error, mut turns) = (0usize, None, Vec::new());
    let (mut tools_ok, mut tools_total) = (0, 0);
    for run in &runs {
        match run {
            Ok(run) => {
                let Some(seen) = run.observed.first() else {
                    continue;
                };
                tools_total += seen.tools.len();
                tools_ok += seen.tools_ok();
                if seen.ok() {
                    turns.push(ms(run.total));
                } else {
                    errors += 1;
                    first_error.get_or_insert(seen.outcome());
                }
            }
            Err(e) => {
                errors += 1;
                first_error.get_or_insert(e.to_string());
            }
        }
    }
    s.count_tools(tools_ok, tools_total);
    let r = &mut s.report;
    r.put(
        "concurrent_sessions_count",
        "sessions running a turn at once",
        n as f64,
    );
    r.put(
        "concurrent_connections_count",
        "client connections they used",
        clients.len() as f64,
    );
    r.put(
        "concurrent_wall_ms",
        &format!(
            "all {n} turns ({}), first prompt → last turn_completed",
            scenario.name
        ),
        ms(wall),
    );
    if let Some(t) = Summary::of(&turns) {
        r.put_summary("concurrent_turn_ms", "one turn under that load", &t);
    }
    r.put(
        "concurrent_errors_count",
        "turns that failed or did not end with end_turn",
        errors as f64,
    );
    r.put(
        "rss_concurrent_peak_mib",
        "amberd RSS, peak while they ran",
        mib(peak),
    );
    r.put(
        "rss_concurrent_after_mib",
        "amberd RSS after they ended",
        mib(after),
    );
    if let Some(e) = first_error {
        r.note(format!(
            "memory: first error of the concurrent sessions: {e}"
        ));
    }
    drop(clients);
    drop(client);
    if let Some(d) = own {
        tokio::task::spawn_blocking(move || d.stop()).await.ok();
    }
    Ok(())
}
