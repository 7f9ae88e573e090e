//! What running a session's tools on an executor costs (docs/executors.md):
//!
//! - **Round trip.** The `sandbox` scenario (role `sandbox`: 20 sequential `bash true N` calls,
//!   the default OS sandbox) through three daemons of this KPI's own that differ only in where
//!   the session's tools run: in amberd (`local`), in a local `amber-exec` over stdio
//!   (`executor:stdio`), and in one behind two more pipe hops (`executor:piped`: `cat |
//!   amber-exec | cat`, the copies an SSH connection adds). Runs alternate between the
//!   daemons. Per call: the client's `tool_call_started` → `tool_call_completed`; the ratios
//!   executor / local at the median. Per task, the turn's time outside its tool calls
//!   (prompt sent → `turn_completed`, less the calls' walls): what a turn's start and end
//!   cost on each side (an executor session's environment facts and the mirror of its
//!   workspace's configuration, taken before each turn, are in it).
//! - **Output throughput.** A process printing 100 MB (`process/spawn`), its whole output
//!   read through `amber-exec --stdio` as the protocol's numbered chunks, by a client that
//!   parses every line as amberd does: MB/s, directly and behind the same pipe hops.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use amber_client::Client;
use amber_proto::{SessionNewParams, ToolStatus};
use serde_json::{Value, json};

use crate::daemon::{DaemonProc, DaemonSpec, sibling};
use crate::error::BenchError;
use crate::report::Report;
use crate::scenario::Role;
use crate::stats::{Summary, ms};
use crate::suite::Suite;
use crate::task;

/// Tasks per variant (20 calls each).
const RUNS: usize = 10;
/// Reads of the 100 MB output per variant.
const THROUGHPUT_RUNS: usize = 3;
/// The output a throughput run reads.
const OUTPUT_BYTES: u64 = 100 * 1_000_000;

/// Where the session's tools run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Local,
    Stdio,
    Piped,
}

const VARIANTS: [Variant; 3] = [Variant::Local, Variant::Stdio, Variant::Piped];

impl Variant {
    fn key(self) -> &'static str {
        match self {
            Variant::Local => "executor_local",
            Variant::Stdio => "executor_stdio",
            Variant::Piped => "executor_piped",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Variant::Local => "in amberd (local)",
            Variant::Stdio => "a local amber-exec over stdio",
            // No `|` here: it would split the report's table cell.
            Variant::Piped => "amber-exec behind two pipe hops (a `cat` on each side)",
        }
    }

    fn environment(self) -> Option<&'static str> {
        match self {
            Variant::Local => None,
            Variant::Stdio => Some("executor:stdio"),
            Variant::Piped => Some("executor:piped"),
        }
    }
}

/// The `[environments.*]` of every daemon of this KPI (all three know both executors; the
/// session picks).
fn environments(amber_exec: &Path, piped: &Path) -> String {
    format!(
        "\n[environments.stdio]\nprogram = {}\nlinger_secs = 30\n\
         \n[environments.piped]\nprogram = {}\nlinger_secs = 30\n",
        toml_string(&amber_exec.display().to_string()),
        toml_string(&piped.display().to_string()),
    )
}

fn toml_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_owned())
}

/// A script that runs `amber-exec` with its arguments behind a `cat` on each side.
fn piped_script(dir: &Path, amber_exec: &Path) -> Result<PathBuf, BenchError> {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("amber-exec-piped");
    let quoted = format!(
        "'{}'",
        amber_exec.display().to_string().replace('\'', r"'\''")
    );
    std::fs::write(
        &path,
        format!("#!/bin/sh\n# Two more pipe hops, as an SSH connection adds.\ncat | {quoted} \"$@\" | cat\n"),
    )
    .map_err(BenchError::io("write the piped executor script"))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .map_err(BenchError::io("make the piped executor script executable"))?;
    Ok(path)
}

#[derive(Debug, Default)]
struct Samples {
    wall: Vec<f64>,
    /// Per task: the turn's time outside its tool calls.
    outside: Vec<f64>,
    calls: usize,
    failures: usize,
    first_failure: Option<String>,
}

/// Both measurements.
pub(crate) async fn measure(s: &mut Suite) -> Result<(), BenchError> {
    let amber_exec = sibling(None, "amber-exec", "amber-exec")?;
    let piped = piped_script(s.scratch.path(), &amber_exec)?;
    round_trip(s, &amber_exec, &piped).await?;
    throughput(s, &amber_exec, &piped)
}

async fn round_trip(s: &mut Suite, amber_exec: &Path, piped: &Path) -> Result<(), BenchError> {
    let scenario = s.of_role(Role::Sandbox).into_iter().next().ok_or_else(|| {
        BenchError::Usage("no sandbox scenario (the executor KPI runs it)".into())
    })?;
    let runs = s.args.runs(RUNS);
    let spec = DaemonSpec {
        extra_config: environments(amber_exec, piped),
        ..s.spec.clone()
    };
    let mut sides = Vec::with_capacity(VARIANTS.len());
    for _ in VARIANTS {
        let daemon = DaemonProc::start(&spec, "executor").await?;
        let client = Client::connect(task::connect_options(&daemon.socket)).await?;
        sides.push((daemon, client));
    }
    let mut m: [Samples; 3] = Default::default();
    let (mut tools_ok, mut tools_total) = (0, 0);
    for i in 0..runs {
        for k in 0..VARIANTS.len() {
            let v = (i + k) % VARIANTS.len();
            let cwd = task::workspace(
                &scenario,
                s.scratch.path(),
                None,
                &format!("{}-{i}", VARIANTS[v].key()),
            )?;
            let params = SessionNewParams {
                cwd,
                environment: VARIANTS[v].environment().map(str::to_owned),
                ..SessionNewParams::default()
            };
            let (run, _) = task::run_with(&sides[v].1, &[], &scenario, &params).await?;
            let Some(seen) = run.observed.first() else {
                continue;
            };
            tools_total += seen.tools.len();
            tools_ok += seen.tools_ok();
            let in_tools: f64 = seen.tool_walls.iter().map(|(_, wall)| ms(*wall)).sum();
            if seen.ok() {
                m[v].outside.push(ms(run.total) - in_tools);
            }
            for (status, wall) in &seen.tool_walls {
                if *status == ToolStatus::Ok {
                    m[v].calls += 1;
                    m[v].wall.push(ms(*wall));
                } else {
                    m[v].failures += 1;
                }
            }
            if m[v].first_failure.is_none() {
                m[v].first_failure.clone_from(&seen.first_tool_failure);
            }
            if !seen.ok() {
                m[v].failures += 1;
                m[v].first_failure.get_or_insert(seen.outcome());
            }
        }
    }
    s.count_tools(tools_ok, tools_total);
    report_round_trip(&mut s.report, &scenario.name, &m);
    Ok(())
}

fn report_round_trip(r: &mut Report, name: &str, m: &[Samples; 3]) {
    r.section(&format!(
        "Executors: a `bash true` call's round trip ({name}, default sandbox), in amberd vs on an executor"
    ));
    for (v, samples) in VARIANTS.iter().zip(m) {
        if let Some(w) = Summary::of(&samples.wall) {
            r.put_summary(
                &format!("{}_wall_ms", v.key()),
                &format!(
                    "`bash true`, tools {}: tool_call_started → tool_call_completed",
                    v.label()
                ),
                &w,
            );
        }
    }
    for (v, samples) in VARIANTS.iter().zip(m) {
        if let Some(w) = Summary::of(&samples.outside) {
            r.put_summary(
                &format!("{}_turn_outside_tools_ms", v.key()),
                &format!(
                    "a task's turn outside its 20 calls, tools {}: prompt → turn_completed less the calls",
                    v.label()
                ),
                &w,
            );
        }
    }
    let base = Summary::of(&m[0].wall);
    for (v, samples) in VARIANTS.iter().zip(m).skip(1) {
        if let (Some(a), Some(b)) = (&base, Summary::of(&samples.wall)) {
            r.put(
                &format!("{}_ratio", v.key()),
                &format!("round trip on {} / in amberd, median", v.label()),
                b.median / a.median,
            );
        }
    }
    r.put(
        "executor_failures_count",
        "`bash` calls or tasks that did not end ok (all three variants)",
        m.iter().map(|s| s.failures).sum::<usize>() as f64,
    );
    for (v, samples) in VARIANTS.iter().zip(m) {
        if let Some(f) = &samples.first_failure {
            r.note(format!(
                "executor ({}): first failure: {}",
                v.label(),
                f.trim()
            ));
        }
    }
}

fn throughput(s: &mut Suite, amber_exec: &Path, piped: &Path) -> Result<(), BenchError> {
    let runs = s.args.runs(THROUGHPUT_RUNS).min(THROUGHPUT_RUNS);
    s.report.section(
        "Executors: 100 MB of a process's output through amber-exec (`process/spawn`, every chunk parsed)",
    );
    for (key, label, program) in [
        ("executor_output_stdio", "over stdio", amber_exec),
        ("executor_output_piped", "behind two pipe hops", piped),
    ] {
        let mut rates = Vec::with_capacity(runs);
        for _ in 0..runs {
            rates.push(read_output(s.scratch.path(), program)?);
        }
        if let Some(summary) = Summary::of(&rates) {
            s.report.put_median(
                &format!("{key}_mb_per_s"),
                &format!("MB/s of a process's output read through amber-exec {label}"),
                &summary,
            );
        }
    }
    Ok(())
}

/// Starts an executor through `program`, runs a process printing [`OUTPUT_BYTES`] and reads
/// its whole output; MB per second from the spawn to `job/done`.
fn read_output(scratch: &Path, program: &Path) -> Result<f64, BenchError> {
    let state = tempfile::Builder::new()
        .prefix("amber-bench-exec-")
        .tempdir_in(scratch)
        .map_err(BenchError::io("create the executor's state dir"))?;
    let workspace = state.path().join("ws");
    std::fs::create_dir_all(&workspace).map_err(BenchError::io("create the workspace"))?;
    let mut child = Command::new(program)
        .args(["--stdio", "--linger", "5", "--state-dir"])
        .arg(state.path().join("run"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(BenchError::io("start amber-exec"))?;
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(BenchError::Failed("amber-exec has no pipes".into()));
    };
    let mut lines = BufReader::with_capacity(1 << 20, stdout);
    let mut send = |id: u64, method: &str, params: Value| -> Result<(), BenchError> {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{line}").map_err(BenchError::io("write to amber-exec"))
    };
    send(
        1,
        "initialize",
        json!({"protocolVersion": 1, "client": "amber-bench"}),
    )?;
    send(
        2,
        "session/open",
        json!({"session": "bench", "workspace": workspace,
               "sandbox": {"mode": "workspace-write", "network": false}}),
    )?;
    let mut line = String::new();
    // Both answers before the clock starts.
    let mut answered = 0;
    while answered < 2 {
        line.clear();
        if lines
            .read_line(&mut line)
            .map_err(BenchError::io("read amber-exec"))?
            == 0
        {
            return Err(BenchError::Failed("amber-exec ended early".into()));
        }
        let value: Value = serde_json::from_str(&line)
            .map_err(|e| BenchError::Failed(format!("amber-exec sent `{line}`: {e}")))?;
        if let Some(err) = value.get("error") {
            return Err(BenchError::Failed(format!("amber-exec refused: {err}")));
        }
        answered += 1;
    }
    let started = Instant::now();
    send(
        3,
        "process/spawn",
        json!({"session": "bench", "job": "out",
               "command": format!("head -c {OUTPUT_BYTES} /dev/zero | tr '\\0' a")}),
    )?;
    let mut bytes = 0u64;
    loop {
        line.clear();
        if lines
            .read_line(&mut line)
            .map_err(BenchError::io("read amber-exec"))?
            == 0
        {
            return Err(BenchError::Failed("amber-exec ended mid-output".into()));
        }
        let value: Value = serde_json::from_str(&line)
            .map_err(|e| BenchError::Failed(format!("amber-exec sent a bad line: {e}")))?;
        match value["method"].as_str() {
            Some("job/output") => {
                bytes += value["params"]["text"]
                    .as_str()
                    .map_or(0, |t| t.len() as u64);
            }
            Some("job/done") => break,
            _ => {}
        }
    }
    let elapsed = started.elapsed();
    let _ = child.kill();
    let _ = child.wait();
    if bytes != OUTPUT_BYTES {
        return Err(BenchError::Failed(format!(
            "read {bytes} bytes of a process's output, expected {OUTPUT_BYTES}"
        )));
    }
    Ok(bytes as f64 / 1_000_000.0 / elapsed.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environments_are_valid_toml_naming_both_programs() {
        let text = environments(Path::new("/opt/a b/amber-exec"), Path::new("/tmp/piped"));
        let value: toml::Value = toml::from_str(&text).unwrap();
        assert_eq!(
            value["environments"]["stdio"]["program"].as_str(),
            Some("/opt/a b/amber-exec")
        );
        assert_eq!(
            value["environments"]["piped"]["program"].as_str(),
            Some("/tmp/piped")
        );
    }
}
