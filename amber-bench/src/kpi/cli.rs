//! `amber-cli` as a user runs it, exec'd against the warm daemon: `run` on the primary task
//! (wall time exec → exit, peak RSS) and `daemon status`; and `--compare CMD`, another agent
//! CLI on the same scenario and endpoint, run alternately with `amber-cli run` and reported
//! as ratios.

use std::process::Command;

use crate::error::BenchError;
use crate::proc::{self, ChildRun, shell_quote};
use crate::stats::{Summary, ms};
use crate::suite::Suite;
use crate::task;

const DEFAULT_RUNS: usize = 30;
const DEFAULT_COMPARE_RUNS: usize = 10;

async fn exec(mut cmd: Command, what: &'static str) -> Result<ChildRun, BenchError> {
    tokio::task::spawn_blocking(move || proc::run_measured(&mut cmd, what))
        .await
        .map_err(|e| BenchError::Failed(format!("{what}: {e}")))?
}

/// `amber-cli --socket S --no-autostart ARGS…`.
fn amber_cli(s: &Suite, args: &[&str]) -> Result<Command, BenchError> {
    let mut cmd = Command::new(s.amber_cli()?);
    cmd.arg("--socket")
        .arg(&s.socket)
        .arg("--no-autostart")
        .args(args);
    Ok(cmd)
}

#[derive(Default)]
struct Runs {
    wall: Vec<f64>,
    rss: Vec<f64>,
    failures: usize,
    requests: Vec<f64>,
}

impl Runs {
    fn add(&mut self, run: &ChildRun, requests: Option<usize>) -> Option<String> {
        if run.code != 0 {
            self.failures += 1;
            return Some(format!("exit {}: {}", run.code, run.stderr.trim()));
        }
        self.wall.push(ms(run.wall));
        self.rss.push(run.max_rss_kib as f64 / 1024.0);
        if let Some(n) = requests {
            self.requests.push(n as f64);
        }
        None
    }
}

pub(crate) async fn measure(s: &mut Suite) -> Result<(), BenchError> {
    let scenario = s.primary()?;
    let cwd = task::workspace(&scenario, s.scratch.path(), None, "cli")?;
    let mark = |s: &Suite| s.endpoint.as_ref().map(|e| e.request_count());
    let seen = |s: &Suite, m: Option<usize>| {
        m.and_then(|m| s.endpoint.as_ref().map(|e| e.recorded_since(m).len()))
    };

    let mut amber = Runs::default();
    {
        let runs = s.args.runs(DEFAULT_RUNS);
        let mut status = Runs::default();
        for _ in 0..runs {
            let m = mark(s);
            let run = exec(
                amber_cli(s, &["run", "--cwd", &cwd, &scenario.prompt])?,
                "amber-cli run",
            )
            .await?;
            if let Some(e) = amber.add(&run, seen(s, m)) {
                s.report.note(format!("cli: amber-cli run failed: {e}"));
            }
            let run = exec(
                amber_cli(s, &["daemon", "status"])?,
                "amber-cli daemon status",
            )
            .await?;
            if let Some(e) = status.add(&run, None) {
                s.report
                    .note(format!("cli: amber-cli daemon status failed: {e}"));
            }
        }
        let r = &mut s.report;
        r.section("amber-cli on a warm daemon (exec → exit)");
        if let Some(x) = Summary::of(&amber.wall) {
            r.put_summary(
                "cli_run_ms",
                &format!("`amber-cli run` ({})", scenario.name),
                &x,
            );
        }
        if let Some(x) = Summary::of(&amber.rss) {
            r.put_median("cli_run_peak_rss_mib", "`amber-cli run` peak RSS", &x);
        }
        if let Some(x) = Summary::of(&amber.requests) {
            r.put_median(
                "cli_run_model_requests_count",
                "`amber-cli run` model requests",
                &x,
            );
        }
        r.put(
            "cli_run_failures_count",
            "`amber-cli run` non-zero exits",
            amber.failures as f64,
        );
        if let Some(x) = Summary::of(&status.wall) {
            r.put_summary("cli_status_ms", "`amber-cli daemon status`", &x);
        }
        r.put(
            "cli_status_failures_count",
            "`amber-cli daemon status` non-zero exits",
            status.failures as f64,
        );
    }
    Ok(())
}

/// `--compare CMD` and `amber-cli run` alternately on the primary task.
pub(crate) async fn compare(s: &mut Suite) -> Result<(), BenchError> {
    let Some(template) = s.args.compare.clone() else {
        return Ok(());
    };
    let scenario = s.primary()?;
    let cwd = &task::workspace(&scenario, s.scratch.path(), None, "compare-amber")?;
    let base_url = s.spec.base_url.clone();
    let line = template
        .replace("{base_url}", &shell_quote(&base_url))
        .replace("{prompt}", &shell_quote(&scenario.prompt));
    let runs = s.args.runs(DEFAULT_COMPARE_RUNS);
    let daemon_rss = s
        .daemon
        .as_ref()
        .and_then(|d| crate::daemon::rss_kib(d.pid).ok());
    let (mut amber, mut other, mut unmatched) = (Runs::default(), Runs::default(), 0usize);
    for i in 0..runs {
        let m = s.endpoint.as_ref().map(|e| e.request_count());
        let run = exec(
            amber_cli(s, &["run", "--cwd", cwd, &scenario.prompt])?,
            "amber-cli run",
        )
        .await?;
        let requests = m.and_then(|m| s.endpoint.as_ref().map(|e| e.recorded_since(m).len()));
        if let Some(e) = amber.add(&run, requests) {
            s.report.note(format!("compare: amber-cli run failed: {e}"));
        }
        let dir = task::workspace(&scenario, s.scratch.path(), None, &format!("compare-{i}"))?;
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &line])
            .current_dir(&dir)
            .env("OPENAI_BASE_URL", &base_url);
        if std::env::var_os("OPENAI_API_KEY").is_none() {
            cmd.env("OPENAI_API_KEY", "amber-bench");
        }
        let m = s.endpoint.as_ref().map(|e| e.request_count());
        let run = exec(cmd, "the --compare command").await?;
        let records = m.and_then(|m| s.endpoint.as_ref().map(|e| e.recorded_since(m)));
        let requests = records.as_ref().map(Vec::len);
        // Requests in which the endpoint found no scenario prompt got a generic reply.
        unmatched += records
            .iter()
            .flatten()
            .filter(|r| r.conversation.is_none())
            .count();
        if let Some(e) = other.add(&run, requests) {
            s.report.note(format!("compare: `{line}` failed: {e}"));
        }
    }
    let r = &mut s.report;
    r.section(&format!(
        "--compare on {} (alternating with amber-cli run)",
        scenario.name
    ));
    r.note(format!(
        "compare: ran `sh -c {}` with OPENAI_BASE_URL={base_url}",
        shell_quote(&line)
    ));
    let (Some(a), Some(o)) = (Summary::of(&amber.wall), Summary::of(&other.wall)) else {
        r.put(
            "compare_failures_count",
            "--compare runs that failed",
            other.failures as f64,
        );
        return Err(BenchError::Failed(
            "compare: no successful run on one side".into(),
        ));
    };
    r.put_summary("compare_wall_ms", "--compare command, exec → exit", &o);
    r.put_median("compare_amber_wall_ms", "amber-cli run, same runs", &a);
    r.put(
        "compare_wall_ratio",
        "--compare wall / amber-cli run wall (medians)",
        o.median / a.median,
    );
    if let (Some(ar), Some(or)) = (Summary::of(&amber.rss), Summary::of(&other.rss)) {
        r.put_median(
            "compare_peak_rss_mib",
            "--compare command peak RSS (max ru_maxrss of it and its descendants)",
            &or,
        );
        r.put_median(
            "compare_amber_peak_rss_mib",
            "amber-cli run peak RSS, same runs",
            &ar,
        );
        r.put(
            "compare_peak_rss_ratio",
            "--compare peak RSS / amber-cli run peak RSS",
            or.median / ar.median,
        );
        if let Some(d) = daemon_rss {
            let with = ar.median + d as f64 / 1024.0;
            r.put(
                "compare_peak_rss_ratio_with_daemon",
                "--compare peak RSS / (amber-cli + amberd RSS)",
                or.median / with,
            );
        }
    }
    if !other.requests.is_empty() && other.requests.iter().all(|n| *n == 0.0) {
        r.note(
            "compare: WARNING: the --compare command made no model request to the endpoint \
             (does it use $OPENAI_BASE_URL or {base_url}?): its times are not comparable",
        );
    }
    if let Some(x) = Summary::of(&other.requests) {
        r.put_median(
            "compare_model_requests_count",
            "--compare command's model requests per run",
            &x,
        );
    }
    r.put(
        "compare_failures_count",
        "--compare runs that failed",
        other.failures as f64,
    );
    r.put(
        "compare_unmatched_requests_count",
        "--compare requests without the scenario's prompt",
        unmatched as f64,
    );
    Ok(())
}
