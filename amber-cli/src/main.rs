//! amber-cli: the headless amber client. Parses arguments, runs one subcommand on a
//! tokio runtime, prints `amber-cli: <message>` for errors, and exits with the codes of
//! `turn::exit` (0 ok, 1 error, 2 usage, 3 stopped by a guard, 124 timed out, 130
//! cancelled).

// A client (and its tests) starts amberd, git and its own binaries as the user, on the
// user's command: the daemon's rule that children start through amber-exec is not theirs.
#![allow(clippy::disallowed_methods)]

mod args;
mod ask;
mod checkpoints;
mod daemon;
mod doctor;
mod exec_install;
mod gap;
mod logs;
mod mcp;
mod output;
mod reconnect;
mod render;
mod routine;
mod rpc;
mod run;
mod run_input;
mod sessions;
mod sessions_tree;
mod systemd;
mod trust;
mod turn;
mod wait;
mod worktree_rm;

use std::io::Write;

use clap::{CommandFactory, Parser};

use crate::args::{
    Cli, Command, DaemonAction, ExecAction, McpAction, RoutineAction, SessionsAction,
};
use crate::turn::exit;

/// A usage error found after parsing (exit code 2).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A run that failed before its turn began: no daemon, no such session, a refused prompt
/// (exit code 5, so a script tells "never ran" from "ran and failed").
#[derive(Debug)]
pub struct NotStarted(pub anyhow::Error);

impl std::fmt::Display for NotStarted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for NotStarted {}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // Prints help/version (exit 0) or the usage error (exit 2).
        Err(e) => e.exit(),
    };
    init_logging();
    let code = match dispatch(cli) {
        Ok(code) => code,
        // Whoever read our output went away (`| head`): nothing to say, as ripgrep does.
        Err(e) if is_broken_pipe(&e) => exit::OK,
        Err(e) => {
            let _ = std::io::stdout().flush();
            if e.downcast_ref::<UsageError>().is_some() {
                output::note(&format!("{e}"));
                exit::USAGE
            } else if e.downcast_ref::<NotStarted>().is_some() {
                output::note(&format!("{e}"));
                exit::NOT_STARTED
            } else {
                output::note(&format!("{e:#}"));
                exit::ERROR
            }
        }
    };
    let _ = std::io::stdout().flush();
    // Exit without dropping the runtime: a pending stdin read would hold it up.
    std::process::exit(i32::from(code));
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn init_logging() {
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
}

fn dispatch(cli: Cli) -> anyhow::Result<u8> {
    let Cli { conn, command } = cli;
    if let Command::Completions { shell } = command {
        return completions(shell);
    }
    if let Command::Man { dir } = &command {
        std::fs::create_dir_all(dir)?;
        clap_mangen::generate_to(Cli::command(), dir)?;
        return Ok(exit::OK);
    }
    if conn.remote.as_deref().is_some_and(|h| !h.trim().is_empty())
        && let Some(what) = local_only(&command)
    {
        return Err(UsageError(format!(
            "`{what}` acts on this machine's amberd and does not take --remote (or AMBER_REMOTE); \
             run it on the remote host"
        ))
        .into());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(async move {
        match command {
            Command::Run(args) => run::run(*args, &conn).await,
            Command::Sessions {
                action: Some(SessionsAction::Verify { id, json }),
                ..
            } => sessions::verify(&conn, &id, json).await,
            Command::Sessions {
                action: Some(SessionsAction::Show { id, json }),
                ..
            } => sessions::show(&conn, &id, json).await,
            Command::Sessions {
                action:
                    Some(SessionsAction::Prune {
                        older_than,
                        dry_run,
                        json,
                    }),
                ..
            } => sessions::prune(&conn, older_than, dry_run, json).await,
            Command::Sessions {
                action:
                    Some(SessionsAction::Rename {
                        session,
                        name,
                        clear: _,
                        json,
                    }),
                ..
            } => sessions::rename(&conn, &session, name, json).await,
            Command::Sessions {
                action: None,
                json,
                fleet,
                tree,
            } => sessions::list(&conn, json, fleet, tree).await,
            Command::Show { id, json } => sessions::show(&conn, &id, json).await,
            Command::Rm {
                id,
                keep_worktree,
                remove_worktree,
            } => {
                let choice =
                    worktree_rm::WorktreeChoice::from_flags(keep_worktree, remove_worktree);
                sessions::remove(&conn, &id, choice).await
            }
            Command::Attach { id, json, replay } => {
                sessions::attach(&conn, &id, json, replay).await
            }
            Command::Wait(args) => wait::wait(args, &conn).await,
            Command::Cancel { id } => sessions::cancel(&conn, &id).await,
            Command::Checkpoints { id, json } => checkpoints::checkpoints(&conn, &id, json).await,
            Command::Diff {
                id,
                turn,
                path,
                json,
            } => checkpoints::diff(&conn, &id, turn.as_deref(), path.as_deref(), json).await,
            Command::Rewind {
                id,
                turn,
                files_only,
                conversation_only,
                force,
                json,
            } => {
                let what = checkpoints::RewindWhat {
                    files: !conversation_only,
                    conversation: !files_only,
                    force,
                };
                checkpoints::rewind(&conn, &id, &turn, what, json).await
            }
            Command::Fork { id, turn, json } => {
                checkpoints::fork(&conn, &id, turn.as_deref(), json).await
            }
            Command::Slash {
                name,
                args,
                session,
                json,
            } => sessions::command(&conn, &name, &args, session.as_deref(), json).await,
            Command::Daemon { action } => match action {
                DaemonAction::Start => daemon::start(&conn).await,
                DaemonAction::Stop => daemon::stop(&conn).await,
                DaemonAction::Restart => daemon::restart(&conn).await,
                DaemonAction::Status { json } => daemon::status(&conn, json).await,
                DaemonAction::InstallSystemd { dir, amberd, force } => {
                    daemon::install_systemd(&conn, dir, amberd, force).await
                }
                DaemonAction::Logs { lines, follow } => logs::logs(lines, follow),
            },
            Command::Mcp { action } => match action {
                McpAction::Login {
                    name,
                    no_browser,
                    client_id,
                    client_secret_env,
                } => {
                    let client = mcp::PreRegistered {
                        client_id,
                        client_secret_env,
                    };
                    mcp::login(&conn, &name, no_browser, client).await
                }
                McpAction::Logout { name } => mcp::logout(&conn, &name).await,
            },
            Command::Routine { action } => match action {
                RoutineAction::Add {
                    cron,
                    cwd,
                    session,
                    worktree,
                    max_usd,
                    missed,
                    name,
                    json,
                    prompt,
                } => {
                    let add = routine::Add {
                        cron,
                        cwd,
                        session,
                        worktree,
                        max_usd,
                        missed,
                        name,
                        prompt,
                        json,
                    };
                    routine::add(&conn, add).await
                }
                RoutineAction::List { json } => routine::list(&conn, json).await,
                RoutineAction::Rm { name } => routine::remove(&conn, &name).await,
                RoutineAction::Run { name, json } => routine::run(&conn, &name, json).await,
                RoutineAction::Tick { json } => routine::tick(&conn, json).await,
            },
            Command::Exec {
                action:
                    ExecAction::Install {
                        host,
                        port,
                        program,
                        force,
                    },
            } => exec_install::install(exec_install::Install {
                host,
                port,
                program,
                force,
            }),
            Command::Doctor { json, cwd } => doctor::doctor(&conn, json, cwd.as_deref()).await,
            Command::Trust {
                path,
                cwd,
                hash,
                deny,
                json,
            } => {
                trust::trust(
                    &conn,
                    cwd.as_deref(),
                    path.as_deref(),
                    hash.as_deref(),
                    deny,
                    json,
                )
                .await
            }
            Command::Rpc => rpc::rpc(&conn).await,
            Command::McpServer {
                yes, http: None, ..
            } => {
                amber_mcp_server::serve(output::connect_options(&conn, yes), yes).await;
                Ok(exit::OK)
            }
            Command::McpServer {
                yes,
                http: Some(addr),
                token_file,
            } => {
                let listen = amber_mcp_server::http::Listen::parse(&addr)?;
                let token = mcp_token(token_file.as_deref())?;
                amber_mcp_server::serve_http(
                    output::connect_options(&conn, yes),
                    yes,
                    listen,
                    token,
                )
                .await?;
                Ok(exit::OK)
            }
            Command::Acp => {
                amber_acp::serve(output::connect_options(&conn, true)).await?;
                Ok(exit::OK)
            }
            Command::Completions { .. } | Command::Man { .. } => Ok(exit::OK),
        }
    });
    // Dropping the runtime would wait for its blocking tasks, and an inline approval prompt
    // still reading the terminal (answered elsewhere) never finishes.
    runtime.shutdown_background();
    result
}

/// The subcommands that act on this machine's daemon and files, never a remote one's.
/// (`rpc` is the far end of `--remote`: it always bridges the local socket.)
fn local_only(command: &Command) -> Option<&'static str> {
    match command {
        Command::Daemon { action } => match action {
            DaemonAction::Start => Some("daemon start"),
            DaemonAction::Stop => Some("daemon stop"),
            DaemonAction::Restart => Some("daemon restart"),
            DaemonAction::InstallSystemd { .. } => Some("daemon install-systemd"),
            DaemonAction::Logs { .. } => Some("daemon logs"),
            DaemonAction::Status { .. } => None,
        },
        Command::Doctor { .. } => Some("doctor"),
        Command::Exec { .. } => Some("exec install"),
        _ => None,
    }
}

/// `completions SHELL`: the script is generated into memory (clap_complete panics on a
/// failed write), then written; a closed pipe (`| head -1`) ends quietly.
fn completions(shell: clap_complete::Shell) -> anyhow::Result<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "amber-cli", &mut script);
    Ok(write_quietly(&mut std::io::stdout().lock(), &script)?)
}

/// Writes and flushes `bytes`; a reader that went away (EPIPE) is not an error.
fn write_quietly(out: &mut impl Write, bytes: &[u8]) -> std::io::Result<u8> {
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(exit::OK),
        other => other.map(|()| exit::OK),
    }
}

/// The token of `mcp-server --http`: `--token-file` (trimmed), else `$AMBER_MCP_TOKEN`,
/// else a new random one.
fn mcp_token(file: Option<&std::path::Path>) -> anyhow::Result<String> {
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read the token file {}: {e}", path.display()))?;
        let token = text.trim();
        anyhow::ensure!(
            !token.is_empty(),
            "the token file {} is empty",
            path.display()
        );
        return Ok(token.to_owned());
    }
    if let Some(token) = std::env::var("AMBER_MCP_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
    {
        return Ok(token.trim().to_owned());
    }
    Ok(amber_mcp_server::http::new_token()?)
}

#[cfg(test)]
mod tests {

    use super::*;

    /// A writer whose reader has gone.
    struct Closed;

    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_pipe_is_a_quiet_success() {
        assert_eq!(
            write_quietly(&mut Closed, b"complete -F x\n").unwrap(),
            exit::OK
        );
        let mut buf = Vec::new();
        write_quietly(&mut buf, b"abc").unwrap();
        assert_eq!(buf, b"abc");
    }
}
