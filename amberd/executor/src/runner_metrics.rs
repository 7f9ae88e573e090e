//! A runner's own metrics (`amber-exec runner --metrics-listen ADDR`): `GET /metrics` in
//! the Prometheus text format — the sessions it holds against its capacity, whether it
//! drains, and what it was given, failed and released. A handful of lines, written here.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::runner::Runner;

/// Serves `runner`'s metrics on `addr` until the process ends; returns where it listens.
pub async fn serve(
    addr: &str,
    runner: Arc<Runner>,
    pool: String,
    id: String,
) -> std::io::Result<std::net::SocketAddr> {
    let render: crate::metrics_http::Render = Arc::new(move || render(&runner, &pool, &id));
    crate::metrics_http::serve(addr, render, tokio_util::sync::CancellationToken::new()).await
}

/// The metrics as text.
pub fn render(runner: &Runner, pool: &str, id: &str) -> String {
    let labels = format!("runner=\"{}\",pool=\"{}\"", escape(id), escape(pool));
    let counts = &runner.counts;
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, value: u64| {
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{{labels}}} {value}\n"
        ));
    };
    metric(
        "amber_runner_sessions",
        "gauge",
        "Sessions this runner holds now",
        runner.running().len() as u64,
    );
    metric(
        "amber_runner_capacity",
        "gauge",
        "Sessions this runner runs at once (--capacity)",
        u64::from(runner.capacity()),
    );
    metric(
        "amber_runner_draining",
        "gauge",
        "1 while the runner drains (SIGTERM): it takes no more work",
        u64::from(runner.draining()),
    );
    metric(
        "amber_runner_assigned_total",
        "counter",
        "Sessions amberd gave this runner",
        counts.assigned.load(Ordering::Relaxed),
    );
    metric(
        "amber_runner_failed_total",
        "counter",
        "Sessions whose workspace this runner could not make",
        counts.failed.load(Ordering::Relaxed),
    );
    metric(
        "amber_runner_released_total",
        "counter",
        "Sessions this runner let go (closed, released or failed)",
        counts.released.load(Ordering::Relaxed),
    );
    out
}

/// A label value as the text format writes it.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
