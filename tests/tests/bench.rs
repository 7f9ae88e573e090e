//! Smoke tests of `amber-bench`, each a quick end-to-end run (its own scripted endpoint, its
//! own `amberd` next to it, `--runs 1` or 2): the selected KPIs come out as one JSON object of
//! finite numbers whose keys name their unit, or as the human Markdown tables; every KPI
//! group runs cheaply (`--sessions 3 --tree-files 200 --compare true`); a custom `--scenario`
//! replaces the built-in tasks; `--delay-ms` leaves the goals unjudged; `--base-url` skips
//! what needs the embedded endpoint without failing. Timings are never compared with
//! thresholds here: that is the benchmark's job (docs/benchmarks.md).

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::bin_path;
use serde_json::{Map, Value};

/// A full run is ~10 s in a debug build on an idle machine; leave room for a loaded one.
const BENCH_TIMEOUT: Duration = Duration::from_secs(150);

/// The key rule of report.rs: a key names its unit as one of its `_`-separated parts.
const UNITS: &[&str] = &["ms", "us", "mib", "kib", "per_s", "ratio", "pct", "count"];

fn names_unit(key: &str) -> bool {
    UNITS
        .iter()
        .any(|u| key.ends_with(&format!("_{u}")) || key.contains(&format!("_{u}_")))
}

/// `amber-bench ARGS` with this build's amberd and amber-cli, in an isolated HOME: exit code,
/// stdout, stderr. SIGKILLed and a panic after [`BENCH_TIMEOUT`].
fn bench(args: &[&str]) -> (Option<i32>, String, String) {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(bin_path("amber-bench"));
    cmd.args(args)
        .arg("--amberd")
        .arg(bin_path("amberd"))
        .arg("--amber-cli")
        .arg(bin_path("amber-cli"))
        .env("AMBER_LOG", "off")
        .env("HOME", home.path())
        .env_remove("AMBER_SOCKET")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let Ok(output) = rx.recv_timeout(BENCH_TIMEOUT) else {
        // SAFETY: kill(2) on our own un-reaped child; no memory-safety preconditions.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
        panic!("amber-bench {args:?} did not finish within {BENCH_TIMEOUT:?}");
    };
    let output = output.unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The `--json` object: every value a finite number, every key naming its unit.
fn json_report(stdout: &str) -> Map<String, Value> {
    let report: Value = serde_json::from_str(stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}):\n{stdout}"));
    let object = report.as_object().expect("a JSON object").clone();
    for (key, value) in &object {
        assert!(
            value.as_f64().is_some_and(f64::is_finite),
            "{key} is not a finite number: {value}"
        );
        assert!(names_unit(key), "{key} names no unit ({UNITS:?})");
    }
    object
}

/// The figure rows of the human tables (`| label | value unit | `key` |`): key → value.
fn table_figures(stdout: &str) -> BTreeMap<String, f64> {
    stdout
        .lines()
        .filter(|l| l.starts_with("| ") && l.ends_with("` |"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").collect();
            assert_eq!(cells.len(), 3, "{l}");
            let key = cells[2].trim().trim_matches('`').to_owned();
            let number = cells[1].split_whitespace().next().unwrap();
            let value = number
                .parse()
                .unwrap_or_else(|e| panic!("{key}: {number:?} is not a number ({e})"));
            (key, value)
        })
        .collect()
}

fn number(object: &Map<String, Value>, key: &str, stdout: &str) -> f64 {
    object
        .get(key)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("missing {key} in {stdout}"))
}

/// One key of each KPI group a full run measures.
const ONE_PER_GROUP: &[&str] = &[
    "daemon_ready_ms_median",                       // ready
    "egress_added_ms_per_connection_median",        // egress
    "rss_idle_mib",                                 // memory
    "rss_concurrent_peak_mib",                      // memory, concurrent
    "e2e_two_request_ms_median",                    // e2e
    "e2e_multi_tool_model_requests_count_median",   // e2e
    "first_token_relay_ms_median",                  // relay
    "deltas_per_s_1_subscriber_median",             // throughput
    "delta_events_count_10_subscribers_median",     // throughput
    "event_relay_ms_1_subscriber_p99",              // throughput, paced
    "paced_delta_events_count_1_subscriber_median", // throughput, paced
    "stream_20k_relay_ratio",                       // stream
    "cli_run_ms_median",                            // cli
    "cli_run_model_requests_count_median",          // cli
    "compare_wall_ratio",                           // compare
    "compare_model_requests_count_median",          // compare
    "grep_tool_ms_median",                          // search
    "semantic_cold_ms_median",                      // search
    "tool_success_pct",                             // tools
    "sandbox_added_ms_median",                      // sandbox, spawn
    "sandbox_bash_added_wall_ms_median",            // sandbox, through amberd
    "checkpoint_incremental_ms_median",             // checkpoint
    "checkpoint_growth_kib_median",                 // checkpoint, store growth
    "hooks_added_true_wall_ms_median",              // hooks
    "worktree_new_added_ms_median",                 // worktree
    "dialect_anthropic_vs_chat_ratio",              // dialects
    "executor_stdio_ratio",                         // executor, round trip
    "executor_output_stdio_mb_per_s_median",        // executor, throughput
];

const CHEAP_FULL_RUN: &[&str] = &[
    "--runs",
    "1",
    "--sessions",
    "3",
    "--tree-files",
    "200",
    "--compare",
    "true",
];

#[test]
fn amber_bench_reports_the_selected_kpis_as_numbers() {
    let (code, stdout, stderr) = bench(&["--runs", "1", "--only", "ready,e2e,relay", "--json"]);
    assert_eq!(code, Some(0), "amber-bench failed:\n{stderr}\n{stdout}");
    let object = json_report(&stdout);
    let positive = [
        "daemon_ready_ms_median",
        "daemon_ready_ms_p99",
        "e2e_two_request_ms_median",
        "e2e_two_request_ms_p99",
        "e2e_two_request_endpoint_ms_median",
        "e2e_two_request_daemon_ms_median",
        "e2e_two_request_daemon_ms_per_request_median",
        "e2e_multi_tool_ms_median",
        "first_token_relay_ms_median",
        "first_token_relay_ms_p99",
    ];
    for key in positive {
        let value = number(&object, key, &stdout);
        assert!(value > 0.0, "{key} = {value}");
    }
    // The two-request task is exactly two model requests (the harness turns the confirm turn
    // off unless --confirm-finish), every tool call succeeded, and no text was lost.
    assert_eq!(
        object["e2e_two_request_model_requests_count_median"], 2.0,
        "{stdout}"
    );
    assert_eq!(object["e2e_two_request_errors_count"], 0.0, "{stdout}");
    assert_eq!(object["e2e_multi_tool_errors_count"], 0.0, "{stdout}");
    assert_eq!(
        object["e2e_two_request_text_mismatches_count"], 0.0,
        "{stdout}"
    );
    assert_eq!(object["tool_success_pct"], 100.0, "{stdout}");
    // Not selected: not measured.
    assert!(object.get("rss_idle_mib").is_none(), "{stdout}");
}

#[test]
fn the_sandbox_kpi_measures_the_helper_and_the_daemon() {
    let (code, stdout, stderr) = bench(&["--runs", "2", "--only", "sandbox", "--json"]);
    assert_eq!(code, Some(0), "amber-bench failed:\n{stderr}\n{stdout}");
    let object = json_report(&stdout);
    for key in [
        "sandbox_spawn_plain_ms_median",
        "sandbox_spawn_ms_median",
        "sandbox_spawn_ms_p99",
        "sandbox_spawn_network_ms_median",
        "sandbox_spawn_cpu_ms_median",
        "sandbox_bash_off_wall_ms_median",
        "sandbox_bash_wall_ms_median",
        "sandbox_bash_wall_ms_p99",
    ] {
        let value = number(&object, key, &stdout);
        assert!(value > 0.0, "{key} = {value}");
    }
    // The added costs are differences: measured, of either sign.
    for key in [
        "sandbox_added_ms_median",
        "sandbox_added_ms_p99",
        "sandbox_added_network_ms_median",
        "sandbox_bash_added_wall_ms_median",
    ] {
        number(&object, key, &stdout);
    }
    assert_eq!(object["sandbox_spawn_runs_count"], 2.0, "{stdout}");
    // Two tasks per setting, twenty `bash true` calls each, every one ok.
    assert_eq!(object["sandbox_bash_calls_count"], 80.0, "{stdout}");
    assert_eq!(object["sandbox_bash_failures_count"], 0.0, "{stdout}");
    assert_eq!(object["tool_success_pct"], 100.0, "{stdout}");
    // Nothing else measured, and no session got another sandbox than it asked for.
    assert!(object.get("daemon_ready_ms_median").is_none(), "{stdout}");
    assert!(!stderr.contains("another sandbox"), "{stderr}");
    assert!(!stderr.contains("FAILED"), "{stderr}");
}

#[test]
fn the_hooks_kpi_measures_bash_calls_with_and_without_hooks() {
    let (code, stdout, stderr) = bench(&["--runs", "1", "--only", "hooks", "--json"]);
    assert_eq!(code, Some(0), "amber-bench failed:\n{stderr}\n{stdout}");
    let object = json_report(&stdout);
    for variant in ["none", "true", "allow"] {
        for stat in ["wall_ms_median", "wall_ms_p99", "task_ms_median"] {
            let key = format!("hooks_bash_{variant}_{stat}");
            let value = number(&object, &key, &stdout);
            assert!(value > 0.0, "{key} = {value}");
        }
    }
    // The added costs are differences: measured, of either sign.
    for key in [
        "hooks_added_true_wall_ms_median",
        "hooks_added_true_wall_ms_p99",
        "hooks_added_allow_wall_ms_median",
        "hooks_added_allow_task_ms_median",
    ] {
        number(&object, key, &stdout);
    }
    // One task per variant, twenty `bash true` calls each, every one ok: the hooks let
    // every call through (a failed pre_tool_use hook would deny it).
    assert_eq!(object["hooks_bash_calls_count"], 60.0, "{stdout}");
    assert_eq!(object["hooks_bash_failures_count"], 0.0, "{stdout}");
    assert!(
        object.get("sandbox_bash_wall_ms_median").is_none(),
        "{stdout}"
    );
    assert!(!stderr.contains("FAILED"), "{stderr}");
}

#[test]
fn the_worktree_kpi_makes_and_removes_worktrees() {
    let (code, stdout, stderr) = bench(&["--runs", "2", "--only", "worktree", "--json"]);
    assert_eq!(code, Some(0), "amber-bench failed:\n{stderr}\n{stdout}");
    let object = json_report(&stdout);
    for key in [
        "worktree_plain_new_ms_median",
        "worktree_plain_delete_ms_median",
        "worktree_new_ms_median",
        "worktree_new_ms_p99",
        "worktree_delete_ms_median",
        "worktree_repo_kib",
    ] {
        let value = number(&object, key, &stdout);
        assert!(value > 0.0, "{key} = {value}");
    }
    for key in [
        "worktree_new_added_ms_median",
        "worktree_new_added_ms_p99",
        "worktree_delete_added_ms_median",
    ] {
        number(&object, key, &stdout);
    }
    assert_eq!(object["worktree_repo_files_count"], 300.0, "{stdout}");
    assert_eq!(object["worktree_sessions_count"], 2.0, "{stdout}");
    assert!(object.get("daemon_ready_ms_median").is_none(), "{stdout}");
    assert!(!stderr.contains("FAILED"), "{stderr}");
}

#[test]
fn the_dialects_kpi_runs_the_scenario_through_each_dialect() {
    let (code, stdout, stderr) = bench(&["--runs", "2", "--only", "dialects", "--json"]);
    assert_eq!(code, Some(0), "amber-bench failed:\n{stderr}\n{stdout}");
    let object = json_report(&stdout);
    for flavor in ["openai", "anthropic", "openai_responses"] {
        let value = number(&object, &format!("dialect_{flavor}_e2e_ms_median"), &stdout);
        assert!(value > 0.0, "{flavor}: {value}");
        number(
            &object,
            &format!("dialect_{flavor}_daemon_ms_per_request_median"),
            &stdout,
        );
        assert!(
            object
                .get(&format!("dialect_{flavor}_errors_count"))
                .is_none(),
            "{flavor} failed runs: {stdout}"
        );
    }
    for flavor in ["anthropic", "openai_responses"] {
        number(&object, &format!("dialect_{flavor}_vs_chat_ratio"), &stdout);
    }
    assert!(!stderr.contains("FAILED"), "{stderr}");
}

#[test]
fn the_tool_search_kpi_measures_what_deferring_200_mcp_tools_saves() {
    let (code, stdout, stderr) = bench(&["--only", "tool-search", "--json"]);
    assert_eq!(code, Some(0), "amber-bench failed:\n{stderr}\n{stdout}");
    let object = json_report(&stdout);
    let off = number(
        &object,
        "tool_search_off_first_request_tokens_count",
        &stdout,
    );
    let on = number(
        &object,
        "tool_search_on_first_request_tokens_count",
        &stdout,
    );
    assert!(on < off / 2.0, "deferring saves most of it: {on} vs {off}");
    // 200 MCP tools and the built-ins, vs the built-ins and `tool_search`.
    let offered_off = number(&object, "tool_search_off_offered_tools_count", &stdout);
    let offered_on = number(&object, "tool_search_on_offered_tools_count", &stdout);
    assert!(offered_off >= 200.0, "{stdout}");
    assert!(offered_on < 40.0, "{stdout}");
    assert!(!stderr.contains("FAILED"), "{stderr}");
}

#[test]
fn the_checkpoint_kpi_measures_checkpoints_that_were_taken() {
    let (code, stdout, stderr) = bench(&[
        "--runs",
        "2",
        "--only",
        "checkpoint",
        "--tree-files",
        "200",
        "--json",
    ]);
    assert_eq!(code, Some(0), "amber-bench failed:\n{stderr}\n{stdout}");
    let object = json_report(&stdout);
    for key in [
        "checkpoint_first_turn_on_ms_median",
        "checkpoint_first_turn_off_ms_median",
        "checkpoint_edit_turn_on_ms_median",
        "checkpoint_edit_turn_off_ms_p99",
        "checkpoint_read_turn_on_ms_median",
        "checkpoint_first_store_mib_median",
        "checkpoint_changed_kib_median",
        "checkpoint_growth_kib_median",
        "checkpoint_growth_manifest_kib_median",
        "checkpoint_growth_ratio_median",
    ] {
        let value = number(&object, key, &stdout);
        assert!(value > 0.0, "{key} = {value}");
    }
    // Differences of two daemons' times: measured, of either sign.
    for key in [
        "checkpoint_first_ms_median",
        "checkpoint_first_before_ms_median",
        "checkpoint_edit_added_ms_median",
        "checkpoint_incremental_ms_median",
        "checkpoint_incremental_before_ms_median",
        "checkpoint_incremental_after_ms_median",
        "checkpoint_read_added_ms_median",
        "checkpoint_growth_content_kib_median",
    ] {
        number(&object, key, &stdout);
    }
    assert_eq!(object["checkpoint_tree_files_count"], 200.0, "{stdout}");
    assert_eq!(object["checkpoint_first_runs_count"], 2.0, "{stdout}");
    assert_eq!(object["checkpoint_edit_runs_count"], 2.0, "{stdout}");
    assert_eq!(object["checkpoint_read_runs_count"], 2.0, "{stdout}");
    // One row per file-changing turn with checkpoints on (two fresh sessions, one of them
    // with two more turns), none with them off; read-only turns add nothing to the store.
    assert_eq!(object["checkpoint_rows_count"], 4.0, "{stdout}");
    assert_eq!(object["checkpoint_rows_expected_count"], 4.0, "{stdout}");
    assert_eq!(object["checkpoint_off_rows_count"], 0.0, "{stdout}");
    assert_eq!(object["checkpoint_off_store_kib"], 0.0, "{stdout}");
    assert_eq!(object["checkpoint_read_growth_kib_max"], 0.0, "{stdout}");
    assert_eq!(object["checkpoint_failures_count"], 0.0, "{stdout}");
    assert!(object.get("daemon_ready_ms_median").is_none(), "{stdout}");
    assert!(!stderr.contains("FAILED"), "{stderr}");
}

#[test]
fn every_kpi_group_as_json() {
    let (code, stdout, stderr) = bench(&[CHEAP_FULL_RUN, &["--json"]].concat());
    assert_eq!(code, Some(0), "amber-bench failed:\n{stderr}\n{stdout}");
    let object = json_report(&stdout);
    for key in ONE_PER_GROUP {
        number(&object, key, &stdout);
    }
    assert_eq!(object["concurrent_sessions_count"], 3.0, "{stdout}");
    assert_eq!(object["concurrent_errors_count"], 0.0, "{stdout}");
    assert_eq!(object["search_tree_files_count"], 200.0, "{stdout}");
    assert_eq!(object["text_mismatches_count"], 0.0, "{stdout}");
    assert_eq!(object["stream_20k_text_mismatches_count"], 0.0, "{stdout}");
    assert_eq!(
        object["cli_run_model_requests_count_median"], 2.0,
        "{stdout}"
    );
    assert_eq!(object["cli_run_failures_count"], 0.0, "{stdout}");
    // `true` asks no model anything: measured, and warned about on stderr.
    assert_eq!(
        object["compare_model_requests_count_median"], 0.0,
        "{stdout}"
    );
    assert!(
        stderr.contains("compare: WARNING: the --compare command made no model request"),
        "{stderr}"
    );
    assert!(!stderr.contains("FAILED"), "{stderr}");
}

#[test]
fn every_kpi_group_in_the_human_table() {
    let (code, stdout, stderr) = bench(CHEAP_FULL_RUN);
    assert_eq!(code, Some(0), "amber-bench failed:\n{stderr}\n{stdout}");
    for heading in [
        "### daemon start",
        "### amberd memory (3 sessions)",
        "### end to end, warm daemon, through amber-client",
        "### first-token relay",
        "### event throughput (stream_20k",
        "### per-event relay latency (stream_paced",
        "### relaying stream_20k to amber-cli run --json",
        "### amber-cli on a warm daemon (exec → exit)",
        "### --compare on two_request",
        "### search tool on a generated tree (200 files)",
        "### tool calls (every task run of the suite)",
        "### OS sandbox: spawn cost",
        "### OS sandbox through amberd",
        "### checkpoints through amberd (200-file tree",
        "### egress proxy (network allowlist)",
        "### goals",
        "### notes",
    ] {
        assert!(stdout.contains(heading), "no {heading:?} in\n{stdout}");
    }
    let figures = table_figures(&stdout);
    for key in ONE_PER_GROUP {
        assert!(figures.contains_key(*key), "no row {key} in\n{stdout}");
    }
    for key in figures.keys() {
        assert!(names_unit(key), "{key} names no unit");
    }
    assert_eq!(figures["e2e_two_request_model_requests_count_median"], 2.0);
    assert!(
        stdout.contains("| `amber-cli daemon status`, median | "),
        "{stdout}"
    );
    // The bench's own daemon and the zero-latency mock: goals are judged, except those
    // stated for 100 sessions and 10k files.
    let verdicts: Vec<&str> = stdout
        .split("### goals")
        .nth(1)
        .unwrap()
        .split("### notes")
        .next()
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| goal |"))
        .map(|l| l.trim_end_matches(" |").rsplit(" | ").next().unwrap())
        .collect();
    assert!(verdicts.len() > 10, "{stdout}");
    for v in &verdicts {
        assert!(
            ["met", "NOT met"].contains(v) || v.starts_with("not judged (--"),
            "verdict {v:?}"
        );
    }
    assert!(
        stdout.contains("| not judged (--sessions 3: stated for 100) |"),
        "{stdout}"
    );
    assert!(
        stdout.contains("- compare: WARNING: the --compare command made no model request"),
        "{stdout}"
    );
}

#[test]
fn a_custom_scenario_replaces_the_tasks_and_a_delay_leaves_goals_unjudged() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("echo_twice.toml");
    std::fs::write(
        &file,
        r#"
name = "echo_twice"
role = "task"
prompt = "bench test: run echo twice, then say done."

[[turns]]
tool_calls = [{ name = "bash", arguments = { command = "echo one" } }]

[[turns]]
tool_calls = [{ name = "bash", arguments = { command = "echo two" } }]

[[turns]]
text = "Done twice."
"#,
    )
    .unwrap();
    let (code, stdout, stderr) = bench(&[
        "--runs",
        "1",
        "--only",
        "ready,e2e,cli",
        "--delay-ms",
        "20",
        "--scenario",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "amber-bench failed:\n{stderr}\n{stdout}");
    let figures = table_figures(&stdout);
    // The file's task replaced both built-in tasks.
    assert_eq!(
        figures["e2e_echo_twice_model_requests_count_median"], 3.0,
        "{stdout}"
    );
    assert_eq!(figures["e2e_echo_twice_errors_count"], 0.0, "{stdout}");
    assert!(
        !figures.contains_key("e2e_two_request_ms_median"),
        "{stdout}"
    );
    assert!(
        !figures.contains_key("e2e_multi_tool_ms_median"),
        "{stdout}"
    );
    // Three answers, each 20 ms late.
    let in_endpoint = figures["e2e_echo_twice_endpoint_ms_median"];
    assert!(
        in_endpoint >= 60.0,
        "endpoint time {in_endpoint} ms < 3 × 20 ms"
    );
    assert!(stdout.contains("(model latency 20 ms)"), "{stdout}");
    // Goals measured but not judged: the run is not the configuration they are stated for.
    let goals = stdout.split("### goals").nth(1).unwrap();
    assert!(
        goals.contains("| daemon_ready_ms_median = "),
        "the ready goal is listed: {stdout}"
    );
    assert!(
        goals.contains("not judged (--delay-ms 20: model latency, --scenario"),
        "{stdout}"
    );
    assert!(
        !goals.contains("| met |") && !goals.contains("NOT met"),
        "{stdout}"
    );
}

#[test]
fn base_url_mode_skips_what_needs_the_embedded_endpoint() {
    // A real OpenAI-compatible endpoint, as far as amber-bench can tell.
    let mock = MockLlm::start_blocking(vec![MockTurn::text("Done.")]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("one_reply.toml");
    std::fs::write(
        &file,
        "name = \"one_reply\"\nrole = \"task\"\nprompt = \"bench test: just reply.\"\n\
         [[turns]]\ntext = \"Done.\"\n",
    )
    .unwrap();
    let (code, stdout, stderr) = bench(&[
        "--runs",
        "1",
        "--only",
        "e2e,throughput,stream",
        "--json",
        "--base-url",
        &mock.base_url(),
        "--scenario",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "amber-bench failed:\n{stderr}\n{stdout}");
    let object = json_report(&stdout);
    assert_eq!(
        object["e2e_one_reply_errors_count"], 0.0,
        "{stdout}\n{stderr}"
    );
    number(&object, "e2e_one_reply_ms_median", &stdout);
    assert!(
        !object.contains_key("e2e_one_reply_daemon_ms_median"),
        "{stdout}"
    );
    assert!(
        stderr.contains("throughput: skipped: needs the embedded endpoint"),
        "{stderr}"
    );
    assert!(
        stderr.contains("stream: skipped: needs the embedded endpoint"),
        "{stderr}"
    );
    assert!(
        stderr.contains("e2e one_reply: --base-url: the endpoint's time is unknown"),
        "{stderr}"
    );
    assert!(!stderr.contains("--socket daemon"), "{stderr}");
    assert!(!stderr.contains("FAILED"), "{stderr}");
    assert_eq!(mock.request_count(), 1);
}
