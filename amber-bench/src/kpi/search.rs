//! The `search` tool as the model calls it (scenario `search`, on a generated tree): grep mode
//! timed by the tool's own `durationMs`, beside `rg` exec'd on the same tree with the same
//! pattern (wall time, output piped and read); semantic mode's first query on a fresh tree
//! (the BM25 index build) and its warm queries.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use amber_proto::ToolStatus;

use crate::error::BenchError;
use crate::scenario::{Role, Scenario};
use crate::stats::{Summary, ms};
use crate::suite::Suite;
use crate::{proc, task, tree};

const DEFAULT_RUNS: usize = 10;
/// Fresh trees for cold semantic builds (the first also serves the warm runs).
const DEFAULT_COLD_TREES: usize = 3;

#[derive(Default)]
struct Samples {
    grep: Vec<f64>,
    cold: Vec<f64>,
    warm: Vec<f64>,
    failures: usize,
}

/// The `pattern` of the scenario's first grep-mode call.
fn grep_pattern(scenario: &Scenario) -> Option<String> {
    scenario
        .turns
        .iter()
        .flat_map(|t| &t.tool_calls)
        .find_map(|c| {
            let args: serde_json::Value = serde_json::from_str(&c.arguments).ok()?;
            (c.name == "search" && args["mode"] != "semantic")
                .then(|| args["pattern"].as_str().map(str::to_owned))?
        })
}

pub(crate) async fn measure(s: &mut Suite) -> Result<(), BenchError> {
    let scenario = s
        .of_role(Role::Search)
        .into_iter()
        .next()
        .ok_or_else(|| BenchError::Usage("no search scenario".into()))?;
    let runs = s.args.runs(DEFAULT_RUNS);
    let trees = s.args.runs(DEFAULT_COLD_TREES).min(runs);
    let files = s.args.tree_files;
    let client = s.client()?.clone();
    let mut m = Samples::default();
    let (mut tools_ok, mut tools_total) = (0, 0);
    let mut generate_ms = Vec::new();
    let mut info = None;
    for t in 0..trees {
        let root = s.scratch.path().join(format!("tree-{t}"));
        let started = Instant::now();
        let generated = {
            let root = root.clone();
            tokio::task::spawn_blocking(move || tree::generate(&root, files, 0x5eed + t as u64))
                .await
                .map_err(|e| BenchError::Failed(format!("search: {e}")))??
        };
        generate_ms.push(ms(started.elapsed()));
        info.get_or_insert(generated);
        // The first tree gets every run; the others one each (their cold build).
        let tree_runs = if t == 0 { runs } else { 1 };
        for i in 0..tree_runs {
            let cwd = task::workspace(&scenario, s.scratch.path(), Some(&root), "")?;
            let run = task::run(&client, &[], &scenario, cwd).await?;
            let Some(seen) = run.observed.first() else {
                continue;
            };
            tools_total += seen.tools.len();
            tools_ok += seen.tools_ok();
            match seen.tools.as_slice() {
                [(ToolStatus::Ok, grep), (ToolStatus::Ok, semantic), ..] => {
                    m.grep.push(*grep as f64);
                    if i == 0 {
                        m.cold.push(*semantic as f64)
                    } else {
                        m.warm.push(*semantic as f64)
                    }
                }
                other => {
                    m.failures += 1;
                    s.report.note(format!(
                        "search: unexpected tool results {other:?} ({})",
                        seen.outcome()
                    ));
                }
            }
        }
    }
    s.count_tools(tools_ok, tools_total);
    let root0 = s.scratch.path().join("tree-0");
    let rg = match grep_pattern(&scenario) {
        Some(pattern) if proc::on_path("rg") => Some(time_rg(&pattern, &root0, runs).await?),
        Some(_) => {
            s.report
                .note("search: `rg` is not on PATH: grep vs rg skipped (apt-get install ripgrep)");
            None
        }
        None => None,
    };

    let r = &mut s.report;
    r.section(&format!("search tool on a generated tree ({files} files)"));
    if let Some(i) = info {
        r.put(
            "search_tree_files_count",
            "files in the tree",
            i.files as f64,
        );
        r.put(
            "search_tree_mib",
            "tree size",
            i.bytes as f64 / (1024.0 * 1024.0),
        );
        r.put(
            "grep_expected_matches_count",
            "lines with a needle",
            i.needles as f64,
        );
    }
    if let Some(x) = Summary::of(&generate_ms) {
        r.put_median(
            "search_tree_generate_ms",
            "writing one tree (not a KPI)",
            &x,
        );
    }
    if let Some(x) = Summary::of(&m.grep) {
        r.put_summary("grep_tool_ms", "grep mode, tool durationMs", &x);
    }
    if let Some((rg, lines)) = &rg {
        r.put_summary(
            "rg_ms",
            "`rg -n --no-require-git` on the same tree, exec → exit",
            rg,
        );
        r.put("rg_matches_count", "lines rg printed", *lines as f64);
        if let Some(g) = Summary::of(&m.grep) {
            r.put(
                "grep_vs_rg_ratio",
                "grep tool / rg (medians)",
                g.median / rg.median,
            );
        }
    }
    if let Some(x) = Summary::of(&m.cold) {
        r.put_summary(
            "semantic_cold_ms",
            "semantic mode, first query on a fresh tree (index build)",
            &x,
        );
    }
    if let Some(x) = Summary::of(&m.warm) {
        r.put_summary("semantic_warm_ms", "semantic mode, warm query", &x);
    }
    r.put(
        "search_failures_count",
        "runs whose tool calls did not both succeed",
        m.failures as f64,
    );
    Ok(())
}

/// `rg` on the tree, `runs` times after one warm-up; the wall times and the lines printed.
async fn time_rg(pattern: &str, root: &Path, runs: usize) -> Result<(Summary, usize), BenchError> {
    let (pattern, root) = (pattern.to_owned(), root.to_owned());
    tokio::task::spawn_blocking(move || {
        let mut times = Vec::with_capacity(runs);
        let mut lines = 0;
        for i in 0..=runs {
            let mut cmd = Command::new("rg");
            cmd.args(["-n", "--no-require-git", &pattern]).arg(&root);
            let run = proc::run_measured(&mut cmd, "rg")?;
            lines = run.stdout.iter().filter(|b| **b == b'\n').count();
            if i > 0 {
                times.push(ms(run.wall));
            }
        }
        Summary::of(&times)
            .map(|s| (s, lines))
            .ok_or_else(|| BenchError::Failed("rg: no runs".into()))
    })
    .await
    .map_err(|e| BenchError::Failed(format!("rg: {e}")))?
}
