//! Benchmark of the `search` tool on a large real tree (run by hand, never in
//! CI): grep mode against the `rg` binary, and the semantic index's cold build
//! and warm query times.
//!
//! ```sh
//! cargo bench -p amberd --bench search
//! AMBER_BENCH_TREE=/some/tree AMBER_BENCH_RUNS=5 cargo bench -p amberd --bench search
//! ```
//!
//! The tree defaults to `~/.cargo/registry/src` (its single index directory
//! if there is one). Every timing is the median of `AMBER_BENCH_RUNS` runs
//! (default 10) after one warm-up run, so the page cache is warm for both
//! tools. `rg` runs as `rg -n --no-require-git PATTERN TREE` (the tool honours
//! `.gitignore` outside git repositories too), once with stdout on /dev/null
//! and once into a pipe that is read to the end.

// The bench compares with the `rg` binary, started as the user.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use amber_tools::search::SearchTool;
use amber_tools::search::semantic::tokenize::query_terms;
use amber_tools::search::semantic::{Bm25Index, RefreshStats};
use amber_tools::search::walk::{GlobFilter, WalkSpec, threads};
use amber_tools::{Tool, ToolContext};
use anyhow::{Context, bail};
use serde_json::json;

const GREP_PATTERNS: &[&str] = &[
    "fn main",
    "unsafe impl",
    r"fn \w+_test\w*\(",
    "(?i)hashmap",
    "zq_no_such_token_xq",
];

const SEMANTIC_QUERIES: &[&str] = &[
    "parse config file",
    "HashMap insert",
    "read_to_string",
    "utf8 decode error",
    "thread pool spawn",
];

fn main() -> anyhow::Result<()> {
    let tree = tree()?;
    let runs: usize = std::env::var("AMBER_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
        .max(1);
    let rt = tokio::runtime::Runtime::new()?;
    println!(
        "tree: {} ({runs} runs each, {} threads)",
        tree.display(),
        threads()
    );

    let mut ctx = ToolContext::new(tree.clone(), "bench");
    ctx.limits.max_output_bytes = usize::MAX / 2;
    let tool = SearchTool::new();

    // AMBER_BENCH_ONLY=grep|semantic runs one half.
    let only = std::env::var("AMBER_BENCH_ONLY").unwrap_or_default();
    if only.is_empty() || only == "grep" {
        grep_vs_rg(&rt, &tool, &ctx, &tree, runs);
    }
    if only != "grep" {
        // (`cold` stops after the cold builds, for profiling.)
        semantic(&rt, &tool, &ctx, &tree, runs)?;
    }
    Ok(())
}

/// grep mode against `rg`, pattern by pattern.
fn grep_vs_rg(
    rt: &tokio::runtime::Runtime,
    tool: &SearchTool,
    ctx: &ToolContext,
    tree: &Path,
    runs: usize,
) {
    println!("\n## grep mode vs rg\n");
    println!(
        "| pattern | matches | amber | rg > /dev/null | rg \\| pipe | amber / rg (pipe) | CPU per run: amber / rg (pipe) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for pattern in GREP_PATTERNS {
        let args = json!({"pattern": pattern, "limit": 100_000_000});
        let mut matches = 0;
        let amber = median(runs, || {
            let out = rt.block_on(tool.call(args.clone(), ctx));
            matches = out
                .output
                .lines()
                .filter(|l| !l.starts_with("no matches"))
                .count();
        });
        let devnull = median(runs, || rg(pattern, tree, false));
        let before = cpu();
        let piped = median(runs, || rg(pattern, tree, true));
        let rg_cpu = cpu().children.saturating_sub(before.children) / (runs as u32 + 1);
        let before = cpu();
        median(runs, || {
            rt.block_on(tool.call(args.clone(), ctx));
        });
        let amber_cpu = cpu().own.saturating_sub(before.own) / (runs as u32 + 1);
        println!(
            "| `{pattern}` | {matches} | {} | {} | {} | {:.2} | {} / {} |",
            ms(amber),
            ms(devnull),
            ms(piped),
            amber.as_secs_f64() / piped.as_secs_f64(),
            ms(amber_cpu),
            ms(rg_cpu),
        );
    }
}

/// Semantic index: cold build, warm refresh, ranking and warm tool calls.
fn semantic(
    rt: &tokio::runtime::Runtime,
    tool: &SearchTool,
    ctx: &ToolContext,
    tree: &Path,
    runs: usize,
) -> anyhow::Result<()> {
    println!("\n## semantic mode\n");
    let spec = WalkSpec {
        workspace: tree.to_path_buf(),
        root: tree.to_path_buf(),
        glob: None,
    };
    let stop = AtomicBool::new(false);
    let cold_runs = runs.min(5);
    let rs_only = WalkSpec {
        glob: Some(GlobFilter::new("*.rs").map_err(anyhow::Error::msg)?),
        ..spec.clone()
    };
    let (wall, cpu_time, refreshed, index) = cold_build(&rs_only, cold_runs)?;
    println!(
        "cold build, glob `*.rs`: {} ({} CPU) — {} files, {} chunks, {} terms, ~{} MiB heap",
        ms(wall),
        ms(cpu_time),
        refreshed.files,
        index.doc_count(),
        index.term_count(),
        index.heap_bytes() / (1 << 20)
    );
    drop(index);
    let (cold, cold_cpu, refreshed, index) = cold_build(&spec, cold_runs)?;
    if std::env::var("AMBER_BENCH_ONLY").is_ok_and(|v| v == "cold") {
        println!("cold build: {} ({} CPU)", ms(cold), ms(cold_cpu));
        return Ok(());
    }
    println!(
        "cold build, every file: {} ({} CPU) — {} files, {} chunks, {} terms, ~{} MiB heap",
        ms(cold),
        ms(cold_cpu),
        refreshed.files,
        index.doc_count(),
        index.term_count(),
        index.heap_bytes() / (1 << 20)
    );
    let mut index = index;
    let refresh = median(runs, || {
        index.refresh(&spec, threads(), &stop);
    });
    println!(
        "warm refresh, nothing changed ({}): {}",
        if index.watching() {
            "inotify"
        } else {
            "stat scan"
        },
        ms(refresh)
    );
    let mut stat_only = Bm25Index::stat_only();
    stat_only.refresh(&spec, threads(), &stop);
    let stat_refresh = median(runs, || {
        stat_only.refresh(&spec, threads(), &stop);
    });
    drop(stat_only);
    println!(
        "warm refresh, nothing changed (stat scan of every file and dir): {}",
        ms(stat_refresh)
    );
    println!("\n| query | rank only | tool call, warm (refresh + rank + snippets) |");
    println!("|---|---|---|");
    // Warm the tool's own cache once.
    rt.block_on(tool.call(json!({"pattern": "warm up", "mode": "semantic"}), ctx));
    for query in SEMANTIC_QUERIES {
        let terms = query_terms(query, 1.5);
        let rank = median(runs, || {
            index.search(&terms, 20, 3);
        });
        let args = json!({"pattern": query, "mode": "semantic"});
        let call = median(runs, || {
            rt.block_on(tool.call(args.clone(), ctx));
        });
        println!("| `{query}` | {} | {} |", ms(rank), ms(call));
    }
    Ok(())
}

/// Build a fresh index `runs` times: median wall time, mean CPU time, and
/// the last index.
fn cold_build(
    spec: &WalkSpec,
    runs: usize,
) -> anyhow::Result<(Duration, Duration, RefreshStats, Bm25Index)> {
    let stop = AtomicBool::new(false);
    let mut last = None;
    let before = cpu();
    let wall = median(runs, || {
        let mut index = Bm25Index::new();
        let refreshed = index.refresh(spec, threads(), &stop);
        last = Some((refreshed, index));
    });
    let cpu_time = cpu().own.saturating_sub(before.own) / (runs as u32 + 1);
    let Some((refreshed, index)) = last else {
        bail!("no index was built");
    };
    Ok((wall, cpu_time, refreshed, index))
}

/// The tree to search: `AMBER_BENCH_TREE`, else the cargo registry sources.
fn tree() -> anyhow::Result<PathBuf> {
    let dir = match std::env::var_os("AMBER_BENCH_TREE") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME").context("HOME is not set")?;
            let src = Path::new(&home).join(".cargo/registry/src");
            let mut entries: Vec<PathBuf> = std::fs::read_dir(&src)
                .with_context(|| format!("cannot list {}", src.display()))?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect();
            if entries.len() == 1 {
                entries.remove(0)
            } else {
                src
            }
        }
    };
    std::fs::canonicalize(&dir).with_context(|| format!("no tree at {}", dir.display()))
}

/// Median wall time of `runs` runs of `f`, after one warm-up.
fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    f();
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort_unstable();
    times[times.len() / 2]
}

/// Run `rg -n` once, stdout to /dev/null or into a pipe read to the end.
fn rg(pattern: &str, tree: &Path, piped: bool) {
    let mut cmd = Command::new("rg");
    cmd.args(["-n", "--no-require-git", "--", pattern])
        .arg(tree)
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    let result = if piped {
        cmd.stdout(Stdio::piped()).output().map(|_| ())
    } else {
        cmd.stdout(Stdio::null()).status().map(|_| ())
    };
    if let Err(err) = result {
        eprintln!("cannot run rg ({err}); install it: apt-get install -y ripgrep");
        std::process::exit(2);
    }
}

/// CPU time (user + system) of this process and of its waited-for children.
#[derive(Debug, Clone, Copy, Default)]
struct Cpu {
    own: Duration,
    children: Duration,
}

/// From /proc/self/stat (clock ticks of 10 ms); zero where unavailable.
fn cpu() -> Cpu {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return Cpu::default();
    };
    let Some((_, rest)) = stat.rsplit_once(") ") else {
        return Cpu::default();
    };
    let fields: Vec<u64> = rest
        .split(' ')
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let ticks = |i: usize| Duration::from_millis(fields.get(i).copied().unwrap_or(0) * 10);
    // After the state: utime is field 14 of the line, stime 15, cutime 16, cstime 17.
    Cpu {
        own: ticks(10) + ticks(11),
        children: ticks(12) + ticks(13),
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}
