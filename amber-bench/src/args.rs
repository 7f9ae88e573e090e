//! Command-line arguments of `amber-bench` (clap derive). Parsing only.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, ValueEnum};

/// amber's KPI harness: scenarios against a scripted (or real) OpenAI-compatible endpoint,
/// through a real amberd, measured from the client side.
#[derive(Debug, Parser)]
#[command(name = "amber-bench", version)]
pub(crate) struct Args {
    /// KPIs to measure, comma-separated (default: all but `fleet`, which only runs when
    /// named; `compare` needs --compare)
    #[arg(long, value_enum, value_delimiter = ',', value_name = "KPI,...")]
    pub only: Vec<Kpi>,
    /// Runs of each KPI (default: per KPI, so the whole suite takes under two minutes)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: Option<u32>,
    /// A scenario file (repeatable). The files given for a role (task, stream, paced,
    /// search, sandbox) replace every built-in scenario of that role; roles no file names keep their
    /// built-ins. The first task scenario is the one relay, cli, memory and compare use
    #[arg(long, value_name = "FILE")]
    pub scenario: Vec<PathBuf>,
    /// Model latency (ms) before every scripted answer, unless a turn sets `delay_ms` (the
    /// goals are then not judged)
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub delay_ms: u64,
    /// A real OpenAI-compatible endpoint instead of the embedded scripted one. The KPIs
    /// that need the embedded endpoint's timestamps or scripted streams (throughput,
    /// stream, relay, the daemon's share) are skipped with a note; goals are not judged
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Model name sent to the endpoint
    #[arg(long, value_name = "M", default_value = "amber-bench")]
    pub model: String,
    /// Address of the embedded endpoint (a fixed port lets a `--socket` daemon point at it)
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Use the amberd running at this socket instead of starting one
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// The amberd binary (default: next to amber-bench)
    #[arg(long, value_name = "PATH")]
    pub amberd: Option<PathBuf>,
    /// The amber-cli binary (default: next to amber-bench)
    #[arg(long, value_name = "PATH")]
    pub amber_cli: Option<PathBuf>,
    /// Keep amberd's silent confirm turn (`[agent] confirm_finish = true`, one more request)
    #[arg(long)]
    pub confirm_finish: bool,
    /// Files in the generated tree (the search and checkpoint KPIs)
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub tree_files: usize,
    /// Sessions of the memory KPI (idle, then all running a turn at once)
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub sessions: usize,
    /// Another agent CLI run on the same scenario, beside `amber-cli run`. `{prompt}` and
    /// `{base_url}` are substituted; $OPENAI_BASE_URL is set to the endpoint. Peak RSS is
    /// the largest ru_maxrss of the command and the descendants it waited for (a max, not
    /// a sum)
    #[arg(long, value_name = "CMD")]
    pub compare: Option<String>,
    /// One JSON object of numbers on stdout (notes go to stderr)
    #[arg(long)]
    pub json: bool,
}

/// The measurements `--only` selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Kpi {
    /// Daemon ready time: exec → first answered `daemon/status`
    Ready,
    /// End-to-end time of each task scenario and the daemon's share per model request
    E2e,
    /// First-token relay latency: endpoint's first content byte → client's first delta
    Relay,
    /// Event throughput and per-event relay latency to 1 and 10 subscribers
    Throughput,
    /// The 20k-chunk stream via `amber-cli run --json` vs read straight from the endpoint
    Stream,
    /// amberd RSS idle, per idle session, and under concurrent sessions
    Memory,
    /// `amber-cli run` and `amber-cli daemon status` wall time on a warm daemon
    Cli,
    /// grep mode vs `rg`; semantic index build and warm query
    Search,
    /// Tool-call success rate and model requests per task
    Tools,
    /// The OS sandbox's cost: `amberd __tool-exec /bin/true` with and without it, and
    /// `bash true` through the daemon in sessions with the sandbox off and on
    Sandbox,
    /// Checkpoints through amberd on the generated tree: the first checkpoint, incremental
    /// ones (10 files changed per turn), store growth, and a read-only turn's cost; two
    /// daemons, `[checkpoints] enabled` on and off
    Checkpoint,
    /// What `[[hooks]]` add per tool call: `bash true` calls through three daemons of its
    /// own, no hooks vs a `pre_tool_use` + `post_tool_use` hook (`/bin/true`, or a pre hook
    /// answering `{"decision":"allow"}`), all in the default sandbox
    Hooks,
    /// Executors: a `bash true` call's round trip in amberd vs on a local `amber-exec` over
    /// stdio and behind two pipe hops (three daemons of its own); 100 MB of a process's
    /// output read through `amber-exec`
    Executor,
    /// The network allowlist's egress proxy: a sandboxed curl's download speed and a small
    /// request's time through the proxy vs straight, against a server on loopback
    Egress,
    /// `session/new {worktree: true}` vs a plain `session/new` in a scratch git repository,
    /// and `session/delete {removeWorktree: true}` vs a plain delete
    Worktree,
    /// The primary scenario end to end through one daemon per model dialect (`openai`,
    /// `anthropic`, `openai-responses`) against the embedded endpoint, which speaks them all
    Dialects,
    /// `--compare CMD` beside `amber-cli run`
    Compare,
    /// How far caps and budgets are passed under fan-out (a daemon of its own): a
    /// sub-agent's cap, a session's budget with 8 parallel sub-agents, a parent's budget
    /// with 4 background children; the worst overshoot in tokens and in requests
    Budgets,
    /// Lazy MCP tools: the first request's prompt tokens with 10 MCP servers of 20 tools
    /// each, `[mcp] tool_search` off vs on (a daemon of its own per setting)
    ToolSearch,
    /// The runner fleet's control plane (a daemon of its own per part, real `amber-exec
    /// runner`s on loopback): assignment on an idle runner, and one amberd holding 1,000
    /// queued + 200 running sessions across 20 runners. Heavy (21 runners, 1,200 sessions),
    /// so only when named
    Fleet,
}

impl Args {
    /// Whether `kpi` is selected.
    pub(crate) fn wants(&self, kpi: Kpi) -> bool {
        // `fleet` starts 21 runners and 1,200 sessions: not part of the default run.
        let selected = self.only.contains(&kpi) || (self.only.is_empty() && kpi != Kpi::Fleet);
        selected && (kpi != Kpi::Compare || self.compare.is_some())
    }

    /// Runs of a KPI: `--runs`, else its default.
    pub(crate) fn runs(&self, default: usize) -> usize {
        self.runs.map_or(default, |n| n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn definition_is_consistent() {
        Args::command().debug_assert();
    }

    #[test]
    fn only_and_runs() {
        let a = Args::try_parse_from(["amber-bench", "--only", "ready,e2e,relay", "--runs", "1"])
            .unwrap();
        assert!(a.wants(Kpi::Ready) && a.wants(Kpi::Relay));
        assert!(!a.wants(Kpi::Memory) && !a.wants(Kpi::Compare) && !a.wants(Kpi::Sandbox));
        assert!(!a.wants(Kpi::Checkpoint));
        assert_eq!(a.runs(20), 1);
        let all =
            Args::try_parse_from(["amber-bench", "--compare", "codex exec {prompt}"]).unwrap();
        assert!(all.wants(Kpi::Compare) && all.wants(Kpi::Search) && all.wants(Kpi::Sandbox));
        assert!(all.wants(Kpi::Checkpoint));
        let one = Args::try_parse_from(["amber-bench", "--only", "checkpoint"]).unwrap();
        assert!(one.wants(Kpi::Checkpoint) && !one.wants(Kpi::Search));
        assert!(all.wants(Kpi::Hooks) && all.wants(Kpi::Worktree));
        assert!(!a.wants(Kpi::Hooks) && !a.wants(Kpi::Worktree));
        let hooks = Args::try_parse_from(["amber-bench", "--only", "hooks"]).unwrap();
        assert!(hooks.wants(Kpi::Hooks) && !hooks.wants(Kpi::Worktree));
        assert!(!hooks.wants(Kpi::Sandbox));
        let wt = Args::try_parse_from(["amber-bench", "--only", "worktree"]).unwrap();
        assert!(wt.wants(Kpi::Worktree) && !wt.wants(Kpi::Hooks));
        assert_eq!(all.runs(20), 20);
        assert!(!all.wants(Kpi::Fleet) && !a.wants(Kpi::Fleet));
        let fleet = Args::try_parse_from(["amber-bench", "--only", "fleet"]).unwrap();
        assert!(fleet.wants(Kpi::Fleet) && !fleet.wants(Kpi::Executor));
        assert!(Args::try_parse_from(["amber-bench", "--runs", "0"]).is_err());
        assert!(Args::try_parse_from(["amber-bench", "--only", "nope"]).is_err());
    }
}
