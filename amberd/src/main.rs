//! `amberd`: the amber daemon. Serves PROTOCOL.md on a Unix socket in the foreground, or on
//! the socket systemd passes (socket activation); notifies systemd when ready and stopping.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use amber_exec::reaper;
use amberd::config::Config;
use amberd::daemon::Daemon;
use amberd::dirs::{config_path, data_dir};
use amberd::rpc::{self, socket};
use amberd::service::logfile::{self, RotatingFile};
use amberd::service::notify::Notifier;
use amberd::service::{self, idle};
use amberd::session::services::Services;
use clap::Parser;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// The amber daemon: sessions, tools and the LLM loop behind a Unix socket.
#[derive(Debug, Parser)]
#[command(name = "amberd", version, about)]
struct Args {
    /// Socket path (default: $AMBER_SOCKET, $XDG_RUNTIME_DIR/amber/amberd.sock, /tmp/amber-$UID/amberd.sock).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Config file (default: $AMBER_CONFIG, $XDG_CONFIG_HOME/amber/config.toml).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Data directory (default: $AMBER_DATA_DIR, $XDG_DATA_HOME/amber).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Log file when stderr is not the journal (default: $XDG_STATE_HOME/amber/amberd.log).
    #[arg(long, value_name = "FILE")]
    log_file: Option<PathBuf>,
    /// Started by a client's autostart: it may restart this daemon, when idle, to follow
    /// the client's provider settings (`daemon/status.autostarted`).
    #[arg(long, hide = true)]
    autostarted: bool,
}

fn main() -> ExitCode {
    // First: as the tool-exec helper this process only forks the watcher and execs the tool.
    if let Some(code) = amber_exec::lifeline::run_if_requested() {
        return code;
    }
    // As `amberd sandbox-exec`, it applies a sandbox and execs a program (an extension).
    if let Some(code) = amber_exec::sandbox_exec::run_if_requested() {
        return code;
    }
    // The loader's relocation table served its purpose before `main`.
    amberd::service::startup_pages::release_relocation_table();
    let args = Args::parse();
    // Before any secret is read: no core of the daemon, and no same-uid process may read its
    // memory or environment through /proc or ptrace.
    if let Err(err) = amberd::service::harden::no_core_dumps() {
        eprintln!("amberd: cannot turn off core dumps: {err}");
        return ExitCode::FAILURE;
    }
    // Before any thread exists (the runtime's, the log writer's): reading what systemd
    // passed also removes it from the environment, which is only sound single-threaded.
    // SAFETY: nothing has spawned a thread yet.
    let (activated, ignored_fds) = match unsafe { socket::from_systemd() } {
        Ok(Some(a)) => (Some(a.listener), a.ignored_fds),
        Ok(None) => (None, 0),
        Err(err) => {
            eprintln!("amberd: {err}");
            return ExitCode::FAILURE;
        }
    };
    // SAFETY: still single-threaded, as above.
    let notifier = Arc::new(unsafe { Notifier::from_env() });
    let env = |key: &str| std::env::var_os(key);
    let log_file = if service::logs_to_journal(activated.is_some(), &env) {
        None
    } else {
        args.log_file
            .clone()
            .or_else(|| service::log_file_path(env))
    };
    init_logging(log_file.as_deref());
    if ignored_fds > 0 {
        tracing::warn!(
            extra = ignored_fds,
            "systemd passed more than one socket; serving only the first"
        );
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("amberd: cannot start the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args, activated, notifier)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // Once: the log's stderr layer already prints errors, unless the filter hides them.
            if tracing::enabled!(tracing::Level::ERROR) {
                tracing::error!("{err}");
            } else {
                eprintln!("amberd: {err}");
            }
            ExitCode::FAILURE
        }
    }
}

async fn run(
    args: Args,
    activated: Option<std::os::unix::net::UnixListener>,
    notifier: Arc<Notifier>,
) -> anyhow::Result<()> {
    // Caught from the start: a SIGTERM right after READY=1 (or during start-up) must take
    // the graceful path, not the default action that kills without persisting.
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let env = |key: &str| std::env::var_os(key);
    let (config_file, explicit) = config_path(args.config, &env);
    let mut config = Config::load(config_file.as_deref(), explicit)?;
    let config_source = amberd::reload::ConfigSource {
        path: config_file.clone(),
        explicit,
    };
    config.apply_env(&env)?;
    let data = data_dir(args.data_dir, &env);
    // Reading amber's own files, like ~/.ssh, asks in every mode (amber-policy's secrets).
    let home = env("HOME").map(PathBuf::from);
    amber_policy::SecretLocations::from_env(
        &env,
        std::iter::once(data.clone())
            .chain(config_file.clone())
            .chain(config.sandbox.secret_paths_under(home.as_deref())),
    )
    .install();
    std::fs::create_dir_all(&data)
        .map_err(|e| anyhow::anyhow!("cannot create data dir {}: {e}", data.display()))?;
    make_private(&data)?;
    // Before the socket: a second daemon on this store must not get as far as serving.
    let mut instance = amberd::service::harden::InstanceLock::acquire(&data)?;

    let socket_path = amber_proto::paths::socket_path(args.socket, env, socket::current_uid());
    let owns_socket_file = activated.is_none();
    let (std_listener, socket_path) = match activated {
        Some(listener) => {
            // Name what systemd actually listens on, not what --socket would have been.
            let path = listener
                .local_addr()
                .ok()
                .and_then(|a| a.as_pathname().map(PathBuf::from))
                .unwrap_or(socket_path);
            tracing::info!(socket = %path.display(), "serving the socket passed by systemd (LISTEN_FDS)");
            (listener, path)
        }
        None => {
            let listener = socket::bind(&socket_path)?;
            listener.set_nonblocking(true)?;
            (listener, socket_path)
        }
    };
    let listener = tokio::net::UnixListener::from_std(std_listener)?;
    let inode = socket::inode_of(&socket_path);
    if let Err(err) = instance.announce(&socket_path) {
        tracing::warn!(%err, "cannot name the socket in the data dir's lock: clients without this daemon's XDG_RUNTIME_DIR will not find it");
    }

    // Bound: no other daemon serves this socket. Before any tool can run.
    reap_orphaned_tools(&env);
    match amber_exec::cgroup::install(&data) {
        Ok(base) => {
            let killed = amber_exec::cgroup::reap(&base);
            tracing::debug!(base = %base.display(), killed, "tool process trees get cgroups");
        }
        Err(err) => tracing::warn!(
            "no cgroup for tool processes ({err}): a command that leaves its process group \
             (setsid) outlives its call"
        ),
    }
    if let Err(err) = amber_exec::lifeline::install() {
        tracing::warn!(
            "tool processes are not watched, so a crash leaves them running until the next start: {err}"
        );
    }

    let store = amber_store::Store::open(&data)?;
    let mut services = Services::new(config, &env, data.clone())?;
    services.store = Some(store);
    hide_socket_dir(&mut services, &socket_path);
    let daemon = Daemon::new(services);
    // Before any session is made or loaded: each one's spans go to the exporter.
    {
        let services = daemon.sessions.services();
        let telemetry = services.live().config.telemetry.clone();
        if let Some(endpoint) = &telemetry.otlp_endpoint {
            let service = telemetry
                .service_name
                .clone()
                .unwrap_or_else(|| "amberd".to_owned());
            let _ = services
                .telemetry
                .set(amberd::telemetry::Exporter::start(endpoint, service));
            tracing::info!(%endpoint, "exporting traces of turns and tool calls");
        }
    }
    if args.autostarted {
        daemon.mark_autostarted();
    }
    // The sandbox probe starts on first need (`Services::start_sandbox_probe`): an idle daemon
    // spawns nothing.
    daemon.start().await;
    // Off unless `[executors] listen` says where; a listener that cannot start stops the daemon
    // (its config asked for it).
    amberd::environment::listen_for_executors(
        &daemon.sessions.services_handle(),
        daemon.shutdown.clone(),
    )
    .await?;
    // `[fleet] budget_usd` is read against what every fleet session has cost.
    let spending = Arc::downgrade(&daemon);
    daemon
        .sessions
        .services()
        .fleet
        .set_spent(Arc::new(move || {
            spending
                .upgrade()
                .map_or(amber_proto::CostUsd::ZERO, |daemon| {
                    daemon.sessions.cost_of(|info| {
                        info.environment.as_ref().is_some_and(|e| e.fleet.is_some())
                    })
                })
        }));
    serve_metrics(&daemon).await?;
    tracing::info!(socket = %socket_path.display(), pid = std::process::id(), "amberd ready");
    // Sessions are listable since Daemon::new and plugins are up: clients may come.
    notifier.ready(&format!(
        "serving {} ({} sessions)",
        socket_path.display(),
        daemon.sessions.count()
    ));
    notifier.spawn_stopping_on(daemon.shutdown.clone());
    let watchdog_stop = CancellationToken::new();
    notifier.spawn_watchdog(watchdog_stop.clone());
    arm_idle_exit(&daemon, owns_socket_file);

    spawn_idle_unloader(&daemon);
    spawn_retention(&daemon);
    spawn_resume_busy(&daemon);
    amberd::routines::spawn(&daemon);
    amberd::reload::spawn(daemon.clone(), config_source, daemon.shutdown.clone());
    let shutdown = daemon.shutdown.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received"),
            _ = int.recv() => tracing::info!("SIGINT received"),
            () = shutdown.cancelled() => return,
        }
        shutdown.cancel();
    });

    let served = rpc::serve(listener, daemon).await;
    amber_exec::cgroup::remove_base();
    if owns_socket_file {
        // A socket systemd owns stays for the next activation.
        socket::remove_if_ours(&socket_path, inode);
    }
    // Normally sent when shutdown began; this covers serve failing on its own.
    notifier.stopping("stopping");
    // Pings go on through the wind-down above: a slow stop is not a hung daemon.
    watchdog_stop.cancel();
    served?;
    tracing::info!("amberd stopped");
    Ok(())
}

/// The data dir holds sessions, checkpoint blobs (copies of workspace files, `.env` among
/// them) and the log: only its owner may enter it. A directory of another owner is left
/// alone (its owner chose its mode).
fn make_private(data: &std::path::Path) -> anyhow::Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = std::fs::metadata(data)
        .map_err(|e| anyhow::anyhow!("cannot read data dir {}: {e}", data.display()))?;
    if meta.uid() == socket::current_uid() && meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(data, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| anyhow::anyhow!("cannot make data dir {} private: {e}", data.display()))?;
    }
    Ok(())
}

/// No sandboxed process may see the directory of amberd's socket: one that could connect
/// could approve its own requests.
fn hide_socket_dir(services: &mut Services, socket_path: &std::path::Path) {
    if let Some(dir) = socket_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
        Arc::make_mut(&mut services.sandbox).hidden.push(dir);
    }
}

/// Kills the tool process groups a daemon that died without cleaning up left running, then
/// records this daemon's own (`amber_exec::reaper`). Never fatal: without `/proc` or the
/// directory, tools just run unrecorded.
fn reap_orphaned_tools(env: &impl Fn(&str) -> Option<std::ffi::OsString>) {
    let dir = reaper::registry_dir(env, socket::current_uid());
    match reaper::ChildRegistry::open(&dir) {
        Ok(registry) => {
            registry.reap_orphans();
            reaper::install(registry);
        }
        Err(err) => tracing::warn!(
            dir = %dir.display(),
            "tool process groups are not recorded, so a crash may leave them running: {err}"
        ),
    }
}

/// `[server] idle_exit_secs`, honoured only under socket activation (see `service::idle`).
fn arm_idle_exit(daemon: &Arc<Daemon>, owns_socket_file: bool) {
    let secs = daemon
        .sessions
        .services()
        .live()
        .config
        .server
        .idle_exit_secs;
    if secs == 0 {
        return;
    }
    if owns_socket_file {
        tracing::info!(
            idle_exit_secs = secs,
            "idle exit ignored: this daemon bound its socket itself, so nothing would start it again"
        );
        return;
    }
    idle::spawn(daemon.clone(), Duration::from_secs(secs));
}

/// Loads, in the background after the ready notification, the sessions that had work when
/// the daemon stopped, so their queued prompts run without a client attaching.
fn spawn_resume_busy(daemon: &Arc<Daemon>) {
    let daemon = daemon.clone();
    tokio::task::spawn_blocking(move || {
        daemon.sessions.resume_busy();
    });
}

/// Deletes old idle sessions at start and then hourly when `[sessions] retention_days` says
/// so (read each time: a config edit applies from the next check).
fn spawn_retention(daemon: &Arc<Daemon>) {
    const EVERY: std::time::Duration = std::time::Duration::from_secs(3600);
    let daemon = daemon.clone();
    tokio::spawn(async move {
        loop {
            let days = daemon
                .sessions
                .services()
                .live()
                .config
                .sessions
                .retention_days;
            if days > 0 {
                let age = std::time::Duration::from_secs(days.saturating_mul(86_400));
                daemon.sessions.prune(age).await;
            }
            tokio::select! {
                () = tokio::time::sleep(EVERY) => {}
                () = daemon.shutdown.cancelled() => return,
            }
        }
    });
}

/// Unloads idle sessions from memory now and then (they stay in the store); never when
/// `idle_unload_secs` is 0.
fn spawn_idle_unloader(daemon: &Arc<Daemon>) {
    let secs = daemon
        .sessions
        .services()
        .live()
        .config
        .sessions
        .idle_unload_secs;
    if secs == 0 {
        return;
    }
    let idle = std::time::Duration::from_secs(secs);
    let every = (idle / 4).clamp(
        std::time::Duration::from_millis(250),
        std::time::Duration::from_secs(60),
    );
    let daemon = daemon.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                () = daemon.shutdown.cancelled() => return,
            }
            daemon.sessions.unload_idle(idle).await;
        }
    });
}

const DEFAULT_LOG: &str = "info,rmcp=warn,rmcp::transport::worker=off";

/// `AMBER_LOG`, else `RUST_LOG`, else `info` (rmcp at `warn`: it logs every server's
/// instructions at info; its transport worker off: it logs each failed reconnect with the
/// whole type-laden error chain, which the MCP host already reports as the root cause). Always to stderr (under systemd that is the journal); also to
/// `file`, size-rotated, when given (main passes one only when no journal collects stderr).
/// The one filter applies to both.
fn init_logging(file: Option<&std::path::Path>) {
    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    let filter = std::env::var("AMBER_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| DEFAULT_LOG.to_owned());
    // `Targets` (target=level lists) rather than `EnvFilter`, whose parser compiles regexes
    // at every start: resident code and heap the daemon keeps for its whole life.
    let filter: Targets = filter
        .parse()
        .or_else(|_| DEFAULT_LOG.parse())
        .unwrap_or_default();
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let mut file_error = None;
    let file_layer = file.and_then(|path| {
        match RotatingFile::open(path, logfile::DEFAULT_MAX_BYTES, logfile::DEFAULT_KEEP) {
            Ok(writer) => Some(
                tracing_subscriber::fmt::layer()
                    .with_writer(Arc::new(writer))
                    .with_ansi(false),
            ),
            Err(err) => {
                file_error = Some(format!("{}: {err}", path.display()));
                None
            }
        }
    });
    tracing_subscriber::registry()
        .with(filter)
        .with(stderr)
        .with(file_layer)
        .init();
    if let Some(err) = file_error {
        // Not fatal: stderr still has everything.
        tracing::warn!("cannot open the log file {err}; logging to stderr only");
    }
}

/// `[metrics] listen`, when set: the Prometheus listener, its gauges read from the daemon at
/// each scrape; one that cannot start stops the daemon (its config asked for it).
async fn serve_metrics(daemon: &Arc<Daemon>) -> Result<(), amberd::metrics::ServeError> {
    let services = daemon.sessions.services_handle();
    let Some(listen) = services.live().config.metrics.listen.clone() else {
        return Ok(());
    };
    let sessions = Arc::clone(daemon);
    let now: amberd::metrics::Now = Arc::new(move || {
        let busy = i64::try_from(sessions.sessions.busy()).unwrap_or(i64::MAX);
        let all = i64::try_from(sessions.sessions.count()).unwrap_or(i64::MAX);
        amberd::metrics::Snapshot {
            sessions: vec![
                ("running".to_owned(), busy),
                ("idle".to_owned(), (all - busy).max(0)),
            ],
            fleet: sessions.sessions.services().fleet.status(),
        }
    });
    amberd::metrics::serve(
        &listen,
        std::sync::Arc::clone(&services.metrics),
        now,
        daemon.shutdown.clone(),
    )
    .await
    .map(|_| ())
}
