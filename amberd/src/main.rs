//! `amberd`: the amber daemon. Serves PROTOCOL.md on a Unix socket in the foreground.

use std::path::PathBuf;
use std::process::ExitCode;

use amberd::config::{Config, config_path, data_dir};
use amberd::daemon::Daemon;
use amberd::rpc::{self, socket};
use amberd::session::deps::Deps;
use clap::Parser;
use tokio::signal::unix::{SignalKind, signal};

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
}

fn main() -> ExitCode {
    let args = Args::parse();
    // Before any thread exists: this edits the environment.
    let activated = socket::from_systemd();
    init_logging();
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
    match runtime.block_on(run(args, activated)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err}");
            eprintln!("amberd: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run(
    args: Args,
    activated: Option<std::os::unix::net::UnixListener>,
) -> anyhow::Result<()> {
    let env = |key: &str| std::env::var_os(key);
    let (config_file, explicit) = config_path(args.config, &env);
    let mut config = Config::load(config_file.as_deref(), explicit)?;
    config.apply_env(&env)?;
    let data = data_dir(args.data_dir, &env);
    std::fs::create_dir_all(&data)
        .map_err(|e| anyhow::anyhow!("cannot create data dir {}: {e}", data.display()))?;

    let socket_path = amber_proto::paths::socket_path(args.socket, env, socket::current_uid());
    let owns_socket_file = activated.is_none();
    let std_listener = match activated {
        Some(listener) => {
            tracing::info!("serving the socket passed by systemd (LISTEN_FDS)");
            listener
        }
        None => socket::bind(&socket_path)?,
    };
    std_listener.set_nonblocking(true)?;
    let listener = tokio::net::UnixListener::from_std(std_listener)?;
    let inode = socket::inode_of(&socket_path);

    let store = amberd::store::Store::open(&data)?;
    let mut deps = Deps::new(config, &env, data.clone())?;
    deps.store = Some(store);
    let daemon = Daemon::new(deps);
    daemon.start().await;
    tracing::info!(socket = %socket_path.display(), pid = std::process::id(), "amberd ready");

    spawn_idle_unloader(&daemon);
    let shutdown = daemon.shutdown.clone();
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received"),
            _ = int.recv() => tracing::info!("SIGINT received"),
            () = shutdown.cancelled() => return,
        }
        shutdown.cancel();
    });

    let served = rpc::serve(listener, daemon).await;
    if owns_socket_file {
        // A socket systemd owns stays for the next activation.
        socket::remove_if_ours(&socket_path, inode);
    }
    served?;
    tracing::info!("amberd stopped");
    Ok(())
}

/// Unloads idle sessions from memory now and then (they stay in the store).
fn spawn_idle_unloader(daemon: &std::sync::Arc<Daemon>) {
    let idle = std::time::Duration::from_secs(
        daemon
            .sessions
            .deps()
            .config
            .sessions
            .idle_unload_secs
            .max(1),
    );
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

const DEFAULT_LOG: &str = "info,rmcp=warn";

/// `AMBER_LOG`, else `RUST_LOG`, else `info` (rmcp at `warn`: it logs every server's
/// instructions at info); always to stderr.
fn init_logging() {
    let filter = std::env::var("AMBER_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| DEFAULT_LOG.to_owned());
    let filter = tracing_subscriber::EnvFilter::try_new(&filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}
