//! Daemon ready time: exec of `amberd` → its first answered `daemon/status` (plain HTTP on
//! the socket, polled in a tight loop), a fresh daemon with fresh temp dirs each run.

use std::time::Duration;

use crate::daemon::DaemonProc;
use crate::error::BenchError;
use crate::stats::{Summary, ms};
use crate::suite::Suite;

const DEFAULT_RUNS: usize = 30;

pub(crate) async fn measure(s: &mut Suite) -> Result<(), BenchError> {
    let runs = s.args.runs(DEFAULT_RUNS);
    let spec = s.spec.clone();
    let times = tokio::task::spawn_blocking(move || {
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let mut daemon = DaemonProc::spawn(&spec)?;
            let ready: Duration = daemon.wait_ready()?;
            times.push(ms(ready));
            daemon.stop();
        }
        Ok::<_, BenchError>(times)
    })
    .await
    .map_err(|e| BenchError::Failed(format!("ready: {e}")))??;
    let summary = Summary::of(&times).ok_or_else(|| BenchError::Failed("ready: no runs".into()))?;
    s.report.section("daemon start");
    s.report.put_summary(
        "daemon_ready_ms",
        "amberd exec → first answered daemon/status",
        &summary,
    );
    s.report
        .put("daemon_ready_ms_min", "amberd ready, min", summary.min);
    s.report.put(
        "daemon_ready_runs_count",
        "amberd ready, runs",
        summary.n as f64,
    );
    Ok(())
}
