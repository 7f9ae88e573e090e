//! The measurements, one module per KPI group, and the goals they are judged against
//! (DESIGN.md "Performance targets", issue 7 "Goals").

pub(crate) mod budgets;
pub(crate) mod checkpoint;
pub(crate) mod cli;
pub(crate) mod dialects;
pub(crate) mod e2e;
pub(crate) mod egress;
pub(crate) mod executor;
pub(crate) mod fleet;
pub(crate) mod hooks;
pub(crate) mod memory;
pub(crate) mod ready;
pub(crate) mod sandbox;
pub(crate) mod search;
pub(crate) mod stream;
pub(crate) mod tool_search;
pub(crate) mod worktree;

use crate::args::Args;
use crate::report::Report;

/// 1 MiB in MB (the goals are in MB, RSS is read in KiB).
const MB_PER_MIB: f64 = 1.048_576;

/// Why this run's configuration is not the one the goals are stated for (the embedded
/// zero-latency endpoint, the built-in scenarios and the bench's own daemon), if it is not.
pub(crate) fn unjudged_reason(args: &Args) -> Option<String> {
    let mut why = Vec::new();
    if args.base_url.is_some() {
        why.push("--base-url: a real endpoint's latency".to_owned());
    }
    if args.socket.is_some() {
        why.push("--socket: not the bench's own daemon".to_owned());
    }
    if args.delay_ms > 0 {
        why.push(format!("--delay-ms {}: model latency", args.delay_ms));
    }
    if !args.scenario.is_empty() {
        why.push("--scenario: not the built-in scenarios".to_owned());
    }
    (!why.is_empty()).then(|| {
        format!(
            "{}; the goals are stated against the embedded zero-latency endpoint and the bench's own daemon",
            why.join(", ")
        )
    })
}

/// Judges every goal whose figure was measured (or marks it not judged: see
/// [`unjudged_reason`]).
pub(crate) fn goals(r: &mut Report, args: &Args) {
    if let Some(why) = unjudged_reason(args) {
        r.judge_no_goal(why);
    }
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
        "≥ 3× faster than a codex app-server turn (~0.2 s): `amber-cli run` ≤ 66.7 ms",
        "cli_run_ms_median",
        |v| v <= 200.0 / 3.0,
    );
    r.goal(
        "≥ 10× faster than `codex exec` (0.5–1.3 s): `amber-cli run` ≤ 50 ms",
        "cli_run_ms_median",
        |v| v <= 50.0,
    );
    r.goal(
        "≥ 10× faster than the --compare command, side by side",
        "compare_wall_ratio",
        |v| v >= 10.0,
    );
    r.goal(
        "a `bash` call on a local executor over stdio ≤ 1.3× in amberd (median round trip)",
        "executor_stdio_ratio",
        |v| v <= 1.3,
    );
    r.goal(
        "a `bash` call on an executor behind two pipe hops ≤ 1.3× in amberd (median)",
        "executor_piped_ratio",
        |v| v <= 1.3,
    );
    r.goal(
        "a process's output through amber-exec ≥ 200 MB/s (median)",
        "executor_output_stdio_mb_per_s_median",
        |v| v >= 200.0,
    );
    r.goal(
        "fleet assignment on an idle runner < 50 ms (median)",
        "fleet_assign_ms_median",
        |v| v < 50.0,
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
    let sessions = "100 concurrent sessions with no error";
    let sessions_rss = "RSS < 115 MB under 100 concurrent sessions (peak)";
    if args.sessions >= 100 {
        r.goal(sessions, "concurrent_errors_count", |v| v == 0.0);
        r.goal(sessions_rss, "rss_concurrent_peak_mib", |v| {
            v * MB_PER_MIB < 115.0
        });
    } else {
        let why = format!("--sessions {}: stated for 100", args.sessions);
        r.goal_not_judged(sessions, "concurrent_errors_count", &why);
        r.goal_not_judged(sessions_rss, "rss_concurrent_peak_mib", &why);
    }
    r.goal(
        "grep mode within 1.5× of `rg` (median wall)",
        "grep_vs_rg_ratio",
        |v| v <= 1.5,
    );
    let index = "semantic index of 10k files < 3 s (first query, median)";
    if args.tree_files >= 10_000 {
        r.goal(index, "semantic_cold_ms_median", |v| v < 3000.0);
    } else {
        let why = format!("--tree-files {}: stated for 10000", args.tree_files);
        r.goal_not_judged(index, "semantic_cold_ms_median", &why);
    }
    r.goal(
        "semantic query < 20 ms warm (median)",
        "semantic_warm_ms_median",
        |v| v < 20.0,
    );
    sandbox_goals(r);
    checkpoint_goals(r, args);
    dialect_goals(r);
}

/// The native dialects are not slower than chat completions (daemon's share per
/// model request, median, same scenario and endpoint).
pub(crate) fn dialect_goals(r: &mut Report) {
    for flavor in &dialects::FLAVORS[1..] {
        let key = flavor.replace('-', "_");
        r.goal(
            &format!(
                "the {flavor} dialect ≤ 1.25× chat completions' daemon time per request (median)"
            ),
            &format!("dialect_{key}_vs_chat_ratio"),
            |v| v <= dialects::GOAL_RATIO,
        );
    }
}

/// The OS sandbox adds < 3 ms to starting a `bash` (median), measured at the
/// helper's spawn and per `bash` call through the daemon.
pub(crate) fn sandbox_goals(r: &mut Report) {
    let limit = sandbox::GOAL_ADDED_MS;
    r.goal(
        "the OS sandbox adds < 3 ms to a `bash` spawn (`amberd __tool-exec /bin/true`, median)",
        "sandbox_added_ms_median",
        |v| v < limit,
    );
    r.goal(
        "the OS sandbox adds < 3 ms per `bash true` call through amberd (wall, median)",
        "sandbox_bash_added_wall_ms_median",
        |v| v < limit,
    );
    r.goal(
        "the egress proxy keeps ≥ 80% of a download's speed on loopback (median)",
        "egress_throughput_ratio",
        |v| v >= egress::GOAL_THROUGHPUT_SHARE,
    );
    r.goal(
        "the egress proxy adds < 2 ms per connection on loopback (median)",
        "egress_added_ms_per_connection_median",
        |v| v < egress::GOAL_ADDED_MS,
    );
}

/// A checkpoint of a 10,000-file workspace with 10 files changed < 50 ms p50, the
/// first one < 2 s, store growth the changed bytes (compressed), not the tree; a turn with
/// no file-changing call costs nothing. The first three are stated for the 10k-file tree.
pub(crate) fn checkpoint_goals(r: &mut Report, args: &Args) {
    let first = "first checkpoint of the 10k-file tree < 2 s (first file-changing turn, checkpoints on − off, median)";
    let incremental = "a checkpoint with 10 files changed < 50 ms p50 (half the time checkpoints add to such a turn: it takes two)";
    let growth = "store growth per 10-file turn ≤ the changed files' size (their content compressed, not the tree)";
    if args.tree_files >= checkpoint::GOAL_TREE_FILES {
        r.goal(first, "checkpoint_first_ms_median", |v| {
            v < checkpoint::GOAL_FIRST_MS
        });
        r.goal(incremental, "checkpoint_incremental_ms_median", |v| {
            v < checkpoint::GOAL_INCREMENTAL_MS
        });
        r.goal(growth, "checkpoint_growth_ratio_median", |v| v <= 1.0);
    } else {
        let why = format!(
            "--tree-files {}: stated for {}",
            args.tree_files,
            checkpoint::GOAL_TREE_FILES
        );
        r.goal_not_judged(first, "checkpoint_first_ms_median", &why);
        r.goal_not_judged(incremental, "checkpoint_incremental_ms_median", &why);
        r.goal_not_judged(growth, "checkpoint_growth_ratio_median", &why);
    }
    r.goal(
        "a turn with no file-changing call takes no checkpoint: no store growth",
        "checkpoint_read_growth_kib_max",
        |v| v == 0.0,
    );
    for scope in ["subagent", "session", "parent"] {
        r.goal(
            &format!("a {scope} cap is passed by at most one in-flight request per session"),
            &format!("budgets_{scope}_worst_overshoot_per_session_ratio"),
            |v| v <= 1.0,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(extra: &[&str]) -> Args {
        Args::try_parse_from([&["amber-bench"][..], extra].concat()).unwrap()
    }

    #[test]
    fn goals_are_judged_only_against_the_zero_latency_mock_and_own_daemon() {
        assert_eq!(unjudged_reason(&args(&[])), None);
        for (flags, word) in [
            (&["--delay-ms", "20"][..], "--delay-ms 20"),
            (&["--socket", "/tmp/x.sock"][..], "--socket"),
            (&["--base-url", "http://h/v1"][..], "--base-url"),
            (&["--scenario", "x.toml"][..], "--scenario"),
        ] {
            let why = unjudged_reason(&args(flags)).unwrap();
            assert!(why.contains(word), "{why}");
            let mut r = Report::default();
            r.put("daemon_ready_ms_median", "ready", 500.0);
            goals(&mut r, &args(flags));
            let text = r.human();
            assert!(
                text.contains("not judged (") && !text.contains("NOT met"),
                "{text}"
            );
        }
        let mut r = Report::default();
        r.put("daemon_ready_ms_median", "ready", 500.0);
        goals(&mut r, &args(&[]));
        assert!(r.human().contains("| NOT met |"));
    }
}
