//! amber-bench: amber's KPI harness (DESIGN.md "Performance targets", docs/benchmarks.md).
//!
//! Runs the scenarios of `amber-bench/bench/` against an embedded scripted OpenAI-compatible
//! endpoint (or `--base-url`) through a real `amberd` (started for the run, or `--socket`),
//! and prints the KPIs as Markdown tables or, with `--json`, as one object of numbers.
//! Exit code 0, or 1 when a KPI could not be measured (the others are still reported).
//!
//! Like amber-cli it talks to the daemon only through amber-client and the protocol types,
//! and it measures `amber-cli` by running the binary: it shares no code with amber-cli.

// The bench starts amberd, amber-cli, git and shells as the user, on the user's command.
#![allow(clippy::disallowed_methods)]

mod args;
mod daemon;
mod direct;
mod endpoint;
mod error;
mod kpi;
mod proc;
mod report;
mod scenario;
mod stats;
mod suite;
mod task;
mod tree;

use std::io::Write;

use clap::Parser;

fn main() -> anyhow::Result<()> {
    // The trampoline mode (proc.rs) runs before anything else allocates.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|a| a == proc::TRAMPOLINE) {
        std::process::exit(proc::trampoline(&argv[2..]));
    }
    if argv.get(1).is_some_and(|a| a == kpi::tool_search::FIXTURE) {
        std::process::exit(kpi::tool_search::fixture_server(&argv[2..]));
    }
    drop(argv);
    let args = args::Args::parse();
    let json = args.json;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    // `AMBER_LOG` as target=level pairs; unset or unreadable: nothing is logged.
    let filter: tracing_subscriber::filter::Targets = std::env::var("AMBER_LOG")
        .ok()
        .and_then(|spec| spec.parse().ok())
        .unwrap_or_default();
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .try_init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (report, failed) = runtime.block_on(suite::run(args))?;
    // The harness's background tasks (unsubscribes, the endpoint) need not finish.
    runtime.shutdown_background();
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", report.json())?;
        for note in report.notes() {
            eprintln!("amber-bench: {note}");
        }
    } else {
        write!(out, "{}", report.human())?;
    }
    out.flush()?;
    if failed {
        std::process::exit(1);
    }
    Ok(())
}
