//! The measurements, one module per KPI group, and the goals they are judged against
//! (DESIGN.md "Performance targets", issue 7 "Goals").

pub mod cli;
pub mod e2e;
pub mod memory;
pub mod ready;
pub mod search;
pub mod stream;

use crate::args::Args;
use crate::report::Report;

/// 1 MiB in MB (the goals are in MB, RSS is read in KiB).
const MB_PER_MIB: f64 = 1.048_576;

/// Judges every goal whose figure was measured.
pub fn goals(r: &mut Report, args: &Args) {
    r.goal(
        "amberd ready < 50 ms (median)",
        "daemon_ready_ms_median",
        |v| v < 50.0,
    );
    r.goal(
        "< 5 ms of daemon time per model request (two_request, median)",
        "e2e_two_request_daemon_ms_per_request_median",
        |v| v < 5.0,
    );
    r.goal(
        "≥ 3× faster than a codex app-server turn (~0.2 s, issue 7): two_request e2e ≤ 66.7 ms",
        "e2e_two_request_ms_median",
        |v| v <= 200.0 / 3.0,
    );
    r.goal(
        "≥ 10× faster than `codex exec` (0.5–1.3 s, issue 7): `amber-cli run` ≤ 50 ms",
        "cli_run_ms_median",
        |v| v <= 50.0,
    );
    r.goal(
        "≥ 10× faster than the --compare command, side by side",
        "compare_wall_ratio",
        |v| v >= 10.0,
    );
    r.goal(
        "`amber-cli daemon status` < 10 ms (median)",
        "cli_status_ms_median",
        |v| v < 10.0,
    );
    r.goal(
        "per-event relay p99 < 2 ms (1 subscriber, paced stream)",
        "event_relay_ms_1_subscriber_p99",
        |v| v < 2.0,
    );
    r.goal(
        "≥ 50k events/s to one subscriber (model deltas relayed per second)",
        "deltas_per_s_1_subscriber_median",
        |v| v >= 50_000.0,
    );
    r.goal(
        "no text lost or reordered (all subscribers)",
        "text_mismatches_count",
        |v| v == 0.0,
    );
    r.goal(
        "20k-chunk stream via `amber-cli run --json` ≤ 1.5× reading it straight",
        "stream_20k_relay_ratio",
        |v| v <= 1.5,
    );
    r.goal("amberd idle RSS < 15 MB", "rss_idle_mib", |v| {
        v * MB_PER_MIB < 15.0
    });
    r.goal(
        "< 1 MB more per idle session",
        "rss_per_idle_session_kib",
        |v| v * 1024.0 < 1_000_000.0,
    );
    // The footprint and index goals are stated for 100 sessions and 10k files.
    if args.sessions >= 100 {
        r.goal(
            "100 concurrent sessions with no error",
            "concurrent_errors_count",
            |v| v == 0.0,
        );
        r.goal(
            "RSS < 115 MB under 100 concurrent sessions (peak)",
            "rss_concurrent_peak_mib",
            |v| v * MB_PER_MIB < 115.0,
        );
    }
    r.goal(
        "grep mode within 1.5× of `rg` (median wall)",
        "grep_vs_rg_ratio",
        |v| v <= 1.5,
    );
    if args.tree_files >= 10_000 {
        r.goal(
            "semantic index of 10k files < 3 s (first query, median)",
            "semantic_cold_ms_median",
            |v| v < 3000.0,
        );
    }
    r.goal(
        "semantic query < 20 ms warm (median)",
        "semantic_warm_ms_median",
        |v| v < 20.0,
    );
}
