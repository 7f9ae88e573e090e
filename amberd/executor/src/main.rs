//! `amber-exec`: amber's executor. Runs a session's workspace tools (files, commands,
//! background processes, search) on this machine, in this machine's OS sandbox, for the
//! amberd that connects over its stdin and stdout (docs/executors.md).
//!
//! `amber-exec --stdio` starts a new executor and relays to it; `--attach ID` relays to one
//! that is running (a client that lost its connection). The executor itself is a separate
//! process in its own session: it outlives the relay by up to `--linger` seconds.

use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use amber_executor::executor::{Executor, ExecutorOptions};
use amber_executor::{dial, relay, runner, runner_wire, server, state_dir};
use clap::Parser;

/// amber's executor: runs a session's workspace tools where the files are.
#[derive(Debug, Parser)]
#[command(name = "amber-exec", version, about)]
struct Args {
    #[command(subcommand)]
    mode: Option<Mode>,
    /// Serve the executor protocol on stdin and stdout (how amberd and `ssh` reach it).
    #[arg(long)]
    stdio: bool,
    /// With --stdio: relay to the running executor ID instead of starting one.
    #[arg(long, value_name = "ID", requires = "stdio")]
    attach: Option<String>,
    /// Seconds a started executor keeps running with no client attached.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    linger: u64,
    /// Where executors keep their attach sockets and logs (default:
    /// $XDG_RUNTIME_DIR/amber-exec, /tmp/amber-exec-$UID).
    #[arg(long, value_name = "DIR", global = true)]
    state_dir: Option<PathBuf>,
    /// Where executors keep their checkpoint cache, which spares reading unchanged files
    /// again (default: $XDG_CACHE_HOME/amber-exec, ~/.cache/amber-exec).
    #[arg(long, value_name = "DIR", global = true)]
    cache_dir: Option<PathBuf>,
    /// Where no namespace can be made (an unprivileged container), sandbox commands with
    /// Landlock and seccomp alone instead of refusing them; what that cannot keep is in
    /// docs/security.md ("Without namespaces").
    #[arg(long, global = true)]
    sandbox_in_place: bool,
    /// Dial out to amberd's executor listener (`wss://HOST:PORT/executors`) and serve it
    /// there, dialling again whenever the connection drops; runs in the foreground.
    #[arg(long, value_name = "URL", conflicts_with = "stdio", requires_all = ["name", "token_file"])]
    connect: Option<String>,
    /// With --connect: this executor's name, as amberd's `[environments.NAME]` has it.
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// With --connect: a file holding the bearer token amberd expects of NAME.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// With --connect: the CA certificate (PEM) amberd's certificate must chain to
    /// (default: the system's roots).
    #[arg(long, value_name = "FILE")]
    ca: Option<PathBuf>,
}

#[derive(Debug, clap::Subcommand)]
enum Mode {
    /// Serve as a runner of a fleet: dial out to amberd, pull sessions up to --capacity,
    /// each in a fresh clone of its repository (docs/fleet.md).
    Runner(RunnerArgs),
}

#[derive(Debug, clap::Args)]
struct RunnerArgs {
    /// amberd's executor listener: `wss://HOST:PORT/executors`.
    #[arg(long, value_name = "URL")]
    connect: String,
    /// The runner's pool, as amberd's `[fleet.pools.NAME]` has it.
    #[arg(long, value_name = "NAME")]
    pool: String,
    /// A file holding the pool's bearer token.
    #[arg(long, value_name = "FILE")]
    token_file: PathBuf,
    /// The CA certificate (PEM) amberd's certificate must chain to (default: the system's
    /// roots).
    #[arg(long, value_name = "FILE")]
    ca: Option<PathBuf>,
    /// A label sessions may ask for, `KEY=VALUE` (repeatable); `os`, `arch` and `pool` are
    /// always there.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label)]
    labels: Vec<(String, String)>,
    /// How many sessions it runs at once.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    capacity: u32,
    /// The directory each session's workspace is made in (amberd's `[fleet]
    /// workspace_root`).
    #[arg(long, value_name = "DIR", default_value = "/work")]
    workspaces: PathBuf,
    /// The runner's id (default: the host's name, as a pod's name is).
    #[arg(long, value_name = "ID")]
    id: Option<String>,
    /// After SIGTERM, seconds running sessions may go on before they are moved to
    /// another runner.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    grace: u64,
    /// Serve the runner's metrics (Prometheus text) at `http://ADDR/metrics`.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<String>,
}

/// `KEY=VALUE`, both simple words.
fn parse_label(text: &str) -> Result<(String, String), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}`: a label is KEY=VALUE"))?;
    if !runner_wire::is_word(key) || !runner_wire::is_word(value) {
        return Err(format!(
            "`{text}`: a label's key and value are letters, digits, `-`, `_` and `.`"
        ));
    }
    Ok((key.to_owned(), value.to_owned()))
}

fn main() -> ExitCode {
    // First: as the tool-exec helper this process only forks the watcher and execs the tool.
    if let Some(code) = amber_exec::lifeline::run_if_requested() {
        return code;
    }
    if let Some(code) = amber_exec::sandbox_exec::run_if_requested() {
        return code;
    }
    let args = Args::parse();
    if let Some(Mode::Runner(runner)) = &args.mode {
        return run_runner(&args, runner);
    }
    if let Some(url) = &args.connect {
        return dial_out(&args, url);
    }
    if !args.stdio {
        eprintln!("amber-exec: nothing to do; run it with --stdio or --connect (see --help)");
        return ExitCode::from(2);
    }
    let Some(dir) = state_dir_of(&args) else {
        return ExitCode::FAILURE;
    };
    match &args.attach {
        Some(id) => attach(&dir, id),
        None => start(&dir, options_of(&args), Duration::from_secs(args.linger)),
    }
}

fn attach(dir: &std::path::Path, id: &str) -> ExitCode {
    if !state_dir::valid_id(id) {
        eprintln!("amber-exec: `{id}` is not an executor id");
        return ExitCode::from(2);
    }
    match UnixStream::connect(state_dir::socket_of(dir, id)) {
        Ok(stream) => relay::pump(stream),
        Err(err) => {
            eprintln!("amber-exec: executor {id} is gone ({err})");
            ExitCode::from(3)
        }
    }
}

/// Starts a new executor in its own session and relays to it.
fn start(dir: &std::path::Path, options: ExecutorOptions, linger: Duration) -> ExitCode {
    let id = uuid::Uuid::new_v4().to_string();
    let token = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    let socket = state_dir::socket_of(dir, &id);
    let listener = match UnixListener::bind(&socket) {
        Ok(l) => l,
        Err(err) => {
            eprintln!("amber-exec: cannot listen on {}: {err}", socket.display());
            return ExitCode::FAILURE;
        }
    };
    let (relay_end, executor_end) = match UnixStream::pair() {
        Ok(pair) => pair,
        Err(err) => {
            eprintln!("amber-exec: {err}");
            return ExitCode::FAILURE;
        }
    };
    // SAFETY: no thread exists yet (no runtime, no relay thread): the child may go on.
    match unsafe { libc::fork() } {
        -1 => {
            eprintln!(
                "amber-exec: fork failed: {}",
                std::io::Error::last_os_error()
            );
            ExitCode::FAILURE
        }
        0 => {
            drop(relay_end);
            let code = executor_process(dir, options, id, token, listener, executor_end, linger);
            let _ = std::fs::remove_file(&socket);
            std::process::exit(code);
        }
        _ => {
            drop(executor_end);
            drop(listener);
            relay::pump(relay_end)
        }
    }
}

/// `--connect`: this process is the executor, in the foreground, logging to stderr.
fn dial_out(args: &Args, url: &str) -> ExitCode {
    init_logging();
    let (Some(name), Some(token_file)) = (&args.name, &args.token_file) else {
        eprintln!("amber-exec: --connect needs --name and --token-file");
        return ExitCode::from(2);
    };
    let token = match read_token(token_file) {
        Ok(token) => token,
        Err(err) => {
            eprintln!("amber-exec: {err}");
            return ExitCode::from(2);
        }
    };
    let tls = match dial::Dial::tls(args.ca.as_deref()) {
        Ok(tls) => tls,
        Err(err) => {
            eprintln!("amber-exec: {err}");
            return ExitCode::from(2);
        }
    };
    let Some(dir) = state_dir_of(args) else {
        return ExitCode::FAILURE;
    };
    let Some(runtime) = prepare(&dir) else {
        return ExitCode::FAILURE;
    };
    let dial = dial::Dial {
        url: url.to_owned(),
        headers: vec![(dial::NAME_HEADER, name.clone())],
        token,
        tls,
    };
    let id = uuid::Uuid::new_v4().to_string();
    let attach_token = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    let code = runtime.block_on(async move {
        let executor = Executor::new(id, attach_token, vec![dir.clone()], options_of(args));
        tracing::info!(
            id = executor.id(),
            pid = std::process::id(),
            "executor dialling out"
        );
        let served = dial::run(Arc::clone(&executor), dial);
        tokio::select! {
            result = served => match result {
                Ok(()) => 0,
                Err(err) => {
                    tracing::error!("{err}");
                    2
                }
            },
            () = terminated() => 0,
        }
    });
    amber_exec::cgroup::remove_base();
    ExitCode::from(code)
}

/// `runner`: this process is the runner, in the foreground, logging to stderr.
fn run_runner(args: &Args, runner: &RunnerArgs) -> ExitCode {
    init_logging();
    let token = match read_token(&runner.token_file) {
        Ok(token) => token,
        Err(err) => {
            eprintln!("amber-exec: {err}");
            return ExitCode::from(2);
        }
    };
    let tls = match dial::Dial::tls(runner.ca.as_deref()) {
        Ok(tls) => tls,
        Err(err) => {
            eprintln!("amber-exec: {err}");
            return ExitCode::from(2);
        }
    };
    let workspaces = match std::fs::create_dir_all(&runner.workspaces)
        .and_then(|()| std::fs::canonicalize(&runner.workspaces))
    {
        Ok(dir) => dir,
        Err(err) => {
            eprintln!(
                "amber-exec: cannot use {} for workspaces: {err}",
                runner.workspaces.display()
            );
            return ExitCode::from(2);
        }
    };
    let id = runner
        .id
        .clone()
        .unwrap_or_else(amber_executor::executor::hostname);
    if !runner_wire::is_word(&id) {
        eprintln!("amber-exec: --id `{id}`: letters, digits, `-`, `_` and `.`");
        return ExitCode::from(2);
    }
    let Some(dir) = state_dir_of(args) else {
        return ExitCode::FAILURE;
    };
    let Some(rt) = prepare(&dir) else {
        return ExitCode::FAILURE;
    };
    let options = runner::RunnerOptions {
        dial: dial::Dial {
            url: runner.connect.clone(),
            headers: Vec::new(),
            token,
            tls,
        },
        pool: runner.pool.clone(),
        id,
        labels: runner.labels.iter().cloned().collect(),
        capacity: runner.capacity,
        workspaces,
        state_dir: dir.clone(),
        token_file: runner.token_file.clone(),
        executor: options_of(args),
        grace: Duration::from_secs(runner.grace),
    };
    let (metrics, pool, id) = (
        runner.metrics_listen.clone(),
        options.pool.clone(),
        options.id.clone(),
    );
    let code = rt.block_on(async move {
        let stop = tokio_util::sync::CancellationToken::new();
        let signalled = stop.clone();
        tokio::spawn(async move {
            terminated().await;
            signalled.cancel();
        });
        let runner = runner::Runner::new(options);
        if let Some(addr) = &metrics {
            match amber_executor::runner_metrics::serve(addr, Arc::clone(&runner), pool, id).await {
                Ok(local) => tracing::info!(%local, "serving metrics"),
                Err(err) => {
                    tracing::error!("cannot serve metrics on {addr}: {err}");
                    return 2;
                }
            }
        }
        match runner.run(stop).await {
            Ok(()) => 0,
            Err(err) => {
                tracing::error!("{err}");
                2
            }
        }
    });
    amber_exec::cgroup::remove_base();
    ExitCode::from(code)
}

/// The trimmed, non-empty token in `path`.
fn read_token(path: &std::path::Path) -> Result<String, String> {
    match std::fs::read_to_string(path) {
        Ok(token) if !token.trim().is_empty() => Ok(token.trim().to_owned()),
        Ok(_) => Err(format!("{} is empty", path.display())),
        Err(err) => Err(format!("cannot read {}: {err}", path.display())),
    }
}

/// The executor's options from its flags; the checkpoint cache: `--cache-dir`, else the
/// user's cache directory.
fn options_of(args: &Args) -> ExecutorOptions {
    ExecutorOptions {
        cache: args
            .cache_dir
            .clone()
            .or_else(|| amber_executor::executor::default_cache(|k| std::env::var_os(k))),
        sandbox_in_place: args.sandbox_in_place,
        masked: Vec::new(),
        publisher: None,
    }
}

/// `--state-dir` or the default, made private; `None` (said on stderr) when it cannot be.
fn state_dir_of(args: &Args) -> Option<PathBuf> {
    let dir = args.state_dir.clone().unwrap_or_else(|| {
        state_dir::default_dir(|k| std::env::var_os(k), state_dir::current_uid())
    });
    match state_dir::ensure(&dir) {
        Ok(()) => Some(dir),
        Err(err) => {
            eprintln!("amber-exec: state directory: {err}");
            None
        }
    }
}

/// SIGTERM or SIGINT.
async fn terminated() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// What every executor process does before it serves: no core dumps, the reaper, cgroup and
/// lifeline of its tool processes, its secret locations; then its runtime.
fn prepare(dir: &std::path::Path) -> Option<tokio::runtime::Runtime> {
    if let Err(err) = amber_exec::harden::no_core_dumps() {
        tracing::error!("cannot turn off core dumps: {err}");
        return None;
    }
    let env = |k: &str| std::env::var_os(k);
    let registry_dir = dir.join("children");
    match amber_exec::reaper::ChildRegistry::open(&registry_dir) {
        Ok(registry) => {
            registry.reap_orphans();
            amber_exec::reaper::install(registry);
        }
        Err(err) => tracing::warn!("tool process groups are not recorded: {err}"),
    }
    if let Err(err) = amber_exec::cgroup::install(dir) {
        tracing::warn!("no cgroup for tool processes ({err})");
    }
    if let Err(err) = amber_exec::lifeline::install() {
        tracing::warn!("tool processes are not watched: {err}");
    }
    amber_policy::SecretLocations::from_env(&env, std::iter::once(dir.to_owned())).install();
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => Some(rt),
        Err(err) => {
            tracing::error!("cannot start the runtime: {err}");
            None
        }
    }
}

/// The executor: its own session (the relay's death or a signal to the relay's group leaves
/// it running), its log, the lifeline and reaper of its tool processes, then the server.
fn executor_process(
    dir: &std::path::Path,
    options: ExecutorOptions,
    id: String,
    token: String,
    listener: UnixListener,
    own: UnixStream,
    linger: Duration,
) -> i32 {
    // SAFETY: setsid has no preconditions; a fresh fork child is not a group leader.
    unsafe { libc::setsid() };
    detach_stdio(&state_dir::log_of(dir, &id));
    init_logging();
    let Some(runtime) = prepare(dir) else {
        return 1;
    };
    runtime.block_on(async move {
        let (Ok(()), Ok(())) = (listener.set_nonblocking(true), own.set_nonblocking(true)) else {
            return 1;
        };
        let (Ok(listener), Ok(own)) = (
            tokio::net::UnixListener::from_std(listener),
            tokio::net::UnixStream::from_std(own),
        ) else {
            return 1;
        };
        let executor = Executor::new(id, token, vec![dir.to_owned()], options);
        tracing::info!(
            id = executor.id(),
            pid = std::process::id(),
            "executor ready"
        );
        server::run(Arc::clone(&executor), Some(own), listener, linger).await;
        amber_exec::cgroup::remove_base();
        0
    })
}

/// Stdin and stdout become /dev/null (the relay owns the pipe), stderr the log.
fn detach_stdio(log: &std::path::Path) {
    use std::os::unix::fs::OpenOptionsExt;
    let null = std::fs::File::open("/dev/null");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(log);
    // SAFETY: dup2 onto the standard descriptors of this single-threaded process.
    unsafe {
        if let Ok(null) = &null {
            libc::dup2(null.as_raw_fd(), 0);
            libc::dup2(null.as_raw_fd(), 1);
        }
        if let Ok(log) = &log {
            libc::dup2(log.as_raw_fd(), 2);
        }
    }
}

fn init_logging() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let targets: tracing_subscriber::filter::Targets = std::env::var("AMBER_EXEC_LOG")
        .ok()
        .and_then(|spec| spec.parse().ok())
        .unwrap_or_else(|| {
            tracing_subscriber::filter::Targets::new().with_default(tracing::Level::INFO)
        });
    let _ = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(false),
        )
        .with(targets)
        .try_init();
}
