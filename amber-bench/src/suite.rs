//! The run: load the scenarios, start the endpoint and the daemon, measure the selected KPIs
//! in an order that keeps them from disturbing each other (ready, memory, checkpoint and hooks on
//! daemons of their own, first), then judge the goals. A KPI that fails becomes a note and a
//! non-zero exit, and the others still run.

use std::path::PathBuf;

use amber_client::Client;
use amber_mock_llm::MockLlm;
use tempfile::TempDir;

use crate::args::{Args, Kpi};
use crate::daemon::{self, DaemonProc, DaemonSpec};
use crate::endpoint;
use crate::error::BenchError;
use crate::kpi;
use crate::report::Report;
use crate::scenario::{self, Role, Scenario};
use crate::task;

/// Everything the KPIs share.
pub(crate) struct Suite {
    pub args: Args,
    pub scenarios: Vec<Scenario>,
    /// `None` with `--base-url`.
    pub endpoint: Option<MockLlm>,
    pub spec: DaemonSpec,
    pub amber_cli: Option<PathBuf>,
    /// The daemon started for the run (`None` with `--socket`).
    pub daemon: Option<DaemonProc>,
    pub socket: PathBuf,
    pub client: Option<Client>,
    pub scratch: TempDir,
    pub report: Report,
    /// Tool calls seen in every task run: (ok, total).
    pub tools: (usize, usize),
    pub failed: bool,
}

impl Suite {
    /// The scenarios of a role, in file order.
    pub(crate) fn of_role(&self, role: Role) -> Vec<Scenario> {
        self.scenarios
            .iter()
            .filter(|s| s.role == role)
            .cloned()
            .collect()
    }

    /// The task scenario the single-scenario KPIs use (relay, cli, memory, compare).
    pub(crate) fn primary(&self) -> Result<Scenario, BenchError> {
        self.of_role(Role::Task)
            .into_iter()
            .next()
            .ok_or_else(|| BenchError::Usage("no task scenario".into()))
    }

    /// The connected client of the run's daemon.
    pub(crate) fn client(&self) -> Result<&Client, BenchError> {
        self.client
            .as_ref()
            .ok_or_else(|| BenchError::Failed("no daemon connection".into()))
    }

    pub(crate) fn endpoint(&self) -> Result<&MockLlm, BenchError> {
        self.endpoint.as_ref().ok_or_else(|| {
            BenchError::Skipped(
                "needs the embedded endpoint's timestamps and scripted streams (not available with --base-url)"
                    .into(),
            )
        })
    }

    pub(crate) fn amber_cli(&self) -> Result<PathBuf, BenchError> {
        self.amber_cli
            .clone()
            .ok_or_else(|| BenchError::MissingBinary {
                binary: "amber-cli",
                path: PathBuf::from("(next to amber-bench)"),
                flag: "amber-cli",
            })
    }

    /// Records a tool call's outcome for the success rate.
    pub(crate) fn count_tools(&mut self, ok: usize, total: usize) {
        self.tools.0 += ok;
        self.tools.1 += total;
    }

    fn record(&mut self, kpi: &str, result: Result<(), BenchError>) {
        match result {
            Ok(()) => {}
            Err(BenchError::Skipped(why)) => self.report.note(format!("{kpi}: skipped: {why}")),
            Err(e) => {
                self.failed = true;
                self.report.note(format!("{kpi}: FAILED: {e}"));
            }
        }
    }
}

/// The scenarios: the built-in suite, where the `--scenario` files of a role replace every
/// built-in scenario of that role (roles no file has keep their built-ins).
fn scenarios(args: &Args) -> Result<Vec<Scenario>, BenchError> {
    let given = args
        .scenario
        .iter()
        .map(|p| Scenario::load(p))
        .collect::<Result<Vec<_>, _>>()?;
    let mut all: Vec<Scenario> = Scenario::builtin()?
        .into_iter()
        .filter(|b| !given.iter().any(|g| g.role == b.role))
        .collect();
    all.extend(given);
    scenario::check_distinct(&all)?;
    Ok(all)
}

/// Runs the selected KPIs; the report, and whether any KPI failed.
pub(crate) async fn run(args: Args) -> Result<(Report, bool), BenchError> {
    let scenarios = scenarios(&args)?;
    let endpoint = match &args.base_url {
        Some(_) => None,
        None => Some(endpoint::start(
            &scenarios,
            kpi::checkpoint::conversations(&args, &scenarios)?
                .into_iter()
                .chain(kpi::egress::conversations(&args)?)
                .collect(),
            args.listen,
            &args.model,
            args.delay_ms,
        )?),
    };
    let base_url = match (&args.base_url, &endpoint) {
        (Some(url), _) => url.clone(),
        (None, Some(e)) => e.base_url(),
        (None, None) => return Err(BenchError::Failed("no endpoint".into())),
    };
    let needs_amberd = args.socket.is_none()
        || args.wants(Kpi::Ready)
        || args.wants(Kpi::Memory)
        || args.wants(Kpi::Sandbox)
        || args.wants(Kpi::Checkpoint)
        || args.wants(Kpi::Hooks)
        || args.wants(Kpi::Fleet);
    let amberd = if needs_amberd {
        daemon::sibling(args.amberd.clone(), "amberd", "amberd")?
    } else {
        PathBuf::new()
    };
    let spec = DaemonSpec {
        amberd,
        base_url,
        model: args.model.clone(),
        api_key: args.base_url.is_none().then(|| "amber-bench".to_owned()),
        confirm_finish: args.confirm_finish,
        extra_config: String::new(),
    };
    let amber_cli = daemon::sibling(args.amber_cli.clone(), "amber-cli", "amber-cli").ok();
    let scratch = tempfile::Builder::new()
        .prefix("amber-bench-ws-")
        .tempdir()
        .map_err(BenchError::io("create a scratch dir"))?;
    let mut s = Suite {
        scenarios,
        endpoint,
        spec,
        amber_cli,
        daemon: None,
        socket: PathBuf::new(),
        client: None,
        scratch,
        report: Report::default(),
        tools: (0, 0),
        failed: false,
        args,
    };
    if let Some(e) = &s.endpoint {
        s.report.note(format!(
            "scripted endpoint at {} (model latency {} ms)",
            e.base_url(),
            s.args.delay_ms
        ));
    }

    // Daemons of their own first, while the machine is quiet.
    if s.args.wants(Kpi::Ready) {
        let r = kpi::ready::measure(&mut s).await;
        s.record("ready", r);
    }
    if s.args.wants(Kpi::Memory) {
        let r = kpi::memory::measure(&mut s).await;
        s.record("memory", r);
    }
    // The sandbox's spawn cost needs no daemon: amberd's helper is exec'd directly.
    if s.args.wants(Kpi::Sandbox) {
        let r = kpi::sandbox::spawn_cost(&mut s).await;
        s.record("sandbox", r);
    }
    // Two daemons of its own, with checkpoints on and off.
    if s.args.wants(Kpi::Checkpoint) {
        let r = kpi::checkpoint::measure(&mut s).await;
        s.record("checkpoint", r);
    }
    // A daemon of its own per dialect.
    if s.args.wants(Kpi::Dialects) {
        let r = kpi::dialects::measure(&mut s).await;
        s.record("dialects", r);
    }
    // Three daemons of its own, differing only in their hooks.
    if s.args.wants(Kpi::Hooks) {
        let r = kpi::hooks::measure(&mut s).await;
        s.record("hooks", r);
    }

    // Three daemons of its own, differing only in where a session's tools run.
    if s.args.wants(Kpi::Executor) {
        let r = kpi::executor::measure(&mut s).await;
        s.record("executor", r);
    }
    // A daemon of its own, its sub-agents stopped only by their caps.
    if s.args.wants(Kpi::Budgets) {
        let r = kpi::budgets::measure(&mut s).await;
        s.record("budgets", r);
    }
    // A daemon of its own per setting, with 10 fixture MCP servers.
    if s.args.wants(Kpi::ToolSearch) {
        let r = kpi::tool_search::measure(&mut s).await;
        s.record("tool_search", r);
    }
    // A daemon of its own per part, with its runners (opt-in).
    if s.args.wants(Kpi::Fleet) {
        let r = kpi::fleet::measure(&mut s).await;
        s.record("fleet", r);
    }

    let needs_daemon = [
        Kpi::E2e,
        Kpi::Relay,
        Kpi::Tools,
        Kpi::Throughput,
        Kpi::Stream,
        Kpi::Cli,
        Kpi::Search,
        Kpi::Compare,
        Kpi::Sandbox,
        Kpi::Worktree,
        Kpi::Egress,
    ]
    .iter()
    .any(|k| s.args.wants(*k));
    if needs_daemon {
        start_daemon(&mut s).await?;
        if s.args.wants(Kpi::E2e) || s.args.wants(Kpi::Relay) || s.args.wants(Kpi::Tools) {
            let r = kpi::e2e::measure(&mut s).await;
            s.record("e2e", r);
        }
        if s.args.wants(Kpi::Throughput) {
            let r = kpi::stream::throughput(&mut s).await;
            s.record("throughput", r);
        }
        if s.args.wants(Kpi::Stream) {
            let r = kpi::stream::cli_vs_direct(&mut s).await;
            s.record("stream", r);
        }
        if s.args.wants(Kpi::Cli) {
            let r = kpi::cli::measure(&mut s).await;
            s.record("cli", r);
        }
        if s.args.wants(Kpi::Compare) {
            let r = kpi::cli::compare(&mut s).await;
            s.record("compare", r);
        }
        if s.args.wants(Kpi::Search) {
            let r = kpi::search::measure(&mut s).await;
            s.record("search", r);
        }
        if s.args.wants(Kpi::Sandbox) {
            let r = kpi::sandbox::through_daemon(&mut s).await;
            s.record("sandbox (through amberd)", r);
        }
        if s.args.wants(Kpi::Worktree) {
            let r = kpi::worktree::measure(&mut s).await;
            s.record("worktree", r);
        }
        if s.args.wants(Kpi::Egress) {
            let r = kpi::egress::measure(&mut s).await;
            s.record("egress", r);
        }
        kpi::e2e::tool_summary(&mut s);
    }
    if let Some(d) = s.daemon.take() {
        tokio::task::spawn_blocking(move || d.stop()).await.ok();
    }
    kpi::goals(&mut s.report, &s.args);
    Ok((s.report, s.failed))
}

/// Starts the run's daemon (or connects to `--socket`) and connects the harness's client.
async fn start_daemon(s: &mut Suite) -> Result<(), BenchError> {
    if let Some(socket) = &s.args.socket {
        s.socket = socket.clone();
        s.report.note(format!(
            "using the running daemon at {} (its own endpoint and config)",
            socket.display()
        ));
    } else {
        let daemon = DaemonProc::start(&s.spec, "daemon start").await?;
        s.socket = daemon.socket.clone();
        s.daemon = Some(daemon);
    }
    s.client = Some(Client::connect(task::connect_options(&s.socket)).await?);
    Ok(())
}
