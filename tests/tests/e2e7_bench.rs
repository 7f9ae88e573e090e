//! Smoke test of `amber-bench`: one quick end-to-end run (its own scripted endpoint, its own
//! `amberd` next to it, `--runs 1 --only ready,e2e,relay --json`) must print one JSON object
//! of numbers with the expected keys, each finite and > 0 where it is a time. Timings are
//! never compared with thresholds here: that is the benchmark's job (docs/benchmarks.md).

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use amber_tests::bin_path;
use amber_tests::e2e::run_bounded;
use serde_json::Value;

#[test]
fn amber_bench_reports_the_selected_kpis_as_numbers() {
    let mut cmd = std::process::Command::new(bin_path("amber-bench"));
    cmd.args(["--runs", "1", "--only", "ready,e2e,relay", "--json"])
        .arg("--amberd")
        .arg(bin_path("amberd"))
        .arg("--amber-cli")
        .arg(bin_path("amber-cli"))
        .env("AMBER_LOG", "off")
        .env_remove("AMBER_SOCKET");
    let (code, stdout, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(0), "amber-bench failed:\n{stderr}\n{stdout}");
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}):\n{stdout}"));
    let object = report.as_object().expect("a JSON object");
    for (key, value) in object {
        assert!(
            value.as_f64().is_some_and(f64::is_finite),
            "{key} is not a finite number: {value}"
        );
    }
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
        let value = object
            .get(key)
            .and_then(Value::as_f64)
            .unwrap_or_else(|| panic!("missing {key} in {stdout}"));
        assert!(value > 0.0, "{key} = {value}");
    }
    // The two-request task is exactly two model requests (the harness turns the confirm turn
    // off unless --confirm-finish), every tool call succeeded, and no text was lost.
    assert_eq!(
        object["e2e_two_request_model_requests_median"], 2.0,
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
