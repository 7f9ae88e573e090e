//! Command-line arguments of `amber-cli` (clap derive). Parsing only; no I/O.

use std::path::PathBuf;

use amber_proto::{Mode, NetworkMode, SandboxMode, SandboxRequest};

fn parse_network(s: &str) -> Result<NetworkMode, String> {
    s.parse()
}
use clap::{Args, Parser, Subcommand, ValueEnum};

/// Headless amber client: run prompts, manage sessions, bridge JSON-RPC over stdio.
#[derive(Debug, Parser)]
#[command(name = "amber-cli", version, about, propagate_version = true)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub conn: ConnectArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// How to reach amberd; accepted on every subcommand.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct ConnectArgs {
    /// Socket of amberd (default: $AMBER_SOCKET, $XDG_RUNTIME_DIR/amber/amberd.sock, /tmp/amber-$UID/amberd.sock)
    #[arg(long, global = true, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Fail instead of starting amberd when nothing answers at the socket
    #[arg(long, global = true)]
    pub no_autostart: bool,
    /// Use the amberd of HOST: speak to it through `ssh -T HOST amber-cli rpc` (the command:
    /// $AMBER_REMOTE_COMMAND, `{host}` replaced); `rpc` itself always bridges the local socket
    #[arg(long, global = true, value_name = "HOST", env = "AMBER_REMOTE")]
    pub remote: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run one prompt and follow its turn to the end
    // Boxed: the largest variant by far, and this enum is built once.
    Run(Box<RunArgs>),
    /// List sessions (or `sessions show ID`, `sessions verify ID`, `sessions rename ID NAME`, `sessions prune`)
    Sessions {
        #[command(subcommand)]
        action: Option<SessionsAction>,
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
        /// Only fleet sessions, with where each stands and the runner holding it
        #[arg(long)]
        fleet: bool,
        /// Background sub-agents beneath the session that started them, with their task's
        /// state and their spend (a parent's also with its children's); with `--json`,
        /// nested under `children`
        #[arg(long, conflicts_with = "fleet")]
        tree: bool,
    },
    /// Show a session: info, messages, pending approvals, todos, its network connections
    Show {
        /// Session: its id, a unique prefix of it, or its name
        id: String,
        /// Print the daemon's answer as JSON
        #[arg(long)]
        json: bool,
    },
    /// Delete a session (and, if asked, its worktree)
    ///
    /// A session with a worktree of its own (`run --worktree`): with neither flag, a terminal
    /// is asked whether to remove it; without one it is kept and its path printed. A worktree
    /// with uncommitted changes is removed only after a second question on a terminal; off a
    /// terminal `--remove-worktree` then fails (exit 1) and nothing is deleted. The branch
    /// is always kept.
    #[command(visible_alias = "delete")]
    Rm {
        /// Session: its id, a unique prefix of it, or its name
        id: String,
        /// Keep the session's worktree (and its branch)
        #[arg(long, conflicts_with = "remove_worktree")]
        keep_worktree: bool,
        /// Remove the session's worktree too (the branch stays)
        #[arg(long)]
        remove_worktree: bool,
    },
    /// Print a session's events live; Ctrl-C detaches and leaves it running
    Attach {
        /// Session: its id, a unique prefix of it, or its name
        id: String,
        /// One JSON event per line, exactly as received
        #[arg(long)]
        json: bool,
        /// Replay the session's whole history first
        #[arg(long)]
        replay: bool,
    },
    /// Wait until a session is idle, then print its last turn's result
    ///
    /// Idle: no turn running and no prompt queued. The exit status is `run`'s for how that
    /// turn ended (0 end_turn, 1 error, 3 stopped by a guard or the iteration cap, 130
    /// cancelled), 124 when --timeout ran out first, 1 when the session does not exist or
    /// is deleted while waiting. A session that never had a turn is idle: exit 0.
    Wait(WaitArgs),
    /// Cancel a session's running turn
    Cancel {
        /// Session: its id, a unique prefix of it, or its name
        id: String,
    },
    /// List a session's checkpoints: one row per turn that changed files
    ///
    /// Columns: the turn number (the TURN of `diff`, `rewind` and `fork`), when the
    /// checkpoint was taken, the paths the turn added, modified and deleted, those it changed
    /// but that are not recorded (ignored or too large: a rewind leaves them as they are), and
    /// the prompt; `incomplete` marks a checkpoint a files rewind would refuse.
    Checkpoints {
        /// Session: its id, a unique prefix of it, or its name
        id: String,
        /// Print the daemon's answer (`checkpoint/list`) as JSON
        #[arg(long)]
        json: bool,
    },
    /// Print the unified diff of what one turn changed (commands' changes included)
    #[command(after_help = TURN_HELP)]
    Diff {
        /// Session: its id, a unique prefix of it, or its name
        id: String,
        /// The turn (default: the last one with a checkpoint)
        turn: Option<String>,
        /// Only this path (relative to the workspace)
        #[arg(last = true, value_name = "PATH")]
        path: Option<String>,
        /// Print the daemon's answer (`checkpoint/diff`) as JSON
        #[arg(long)]
        json: bool,
    },
    /// Undo TURN and every later turn: the files and the conversation go back to before it
    ///
    /// The files are restored to their state before TURN (files the turns created are removed,
    /// deleted ones come back), and TURN and every later turn leave the conversation. A file
    /// changed outside amber since a turn touched it is a conflict: it is left alone and
    /// listed, unless --force (then it is put back too, and still listed). Only an idle
    /// session can be rewound.
    ///
    /// Exit status: 0 when everything was restored, 1 when conflicts were left alone (the rest
    /// was rewound) or the rewind failed, 2 on a usage error.
    #[command(after_help = TURN_HELP)]
    Rewind {
        /// Session: its id, a unique prefix of it, or its name
        id: String,
        /// The turn to go back to (it is undone too)
        turn: String,
        /// Restore the files only; the conversation keeps every turn
        #[arg(long, conflicts_with = "conversation_only")]
        files_only: bool,
        /// Drop the turns from the conversation only; the files stay as they are
        #[arg(long)]
        conversation_only: bool,
        /// Overwrite files changed outside amber since the turns touched them
        #[arg(long)]
        force: bool,
        /// Print the daemon's answer (`session/rewind`) as JSON
        #[arg(long)]
        json: bool,
    },
    /// Start a new session from a session's conversation before TURN (default: all of it)
    ///
    /// The fork has the same workspace and settings and a log of its own; the original is
    /// untouched, and so are the files (the two share the workspace). Prints the new session's
    /// id (`amber --session ID` attaches to it).
    #[command(after_help = TURN_HELP)]
    Fork {
        /// Session: its id, a unique prefix of it, or its name
        id: String,
        /// The fork's conversation ends before this turn (default: the whole history)
        turn: Option<String>,
        /// Print the new session (`session/fork`'s SessionInfo) as JSON
        #[arg(long)]
        json: bool,
    },
    /// Run a slash command in the daemon (`help`, `plugins enable hello`, `mcp list`, …)
    ///
    /// `amber-cli command help` lists them. Commands that act on a session need --session.
    #[command(name = "command")]
    Slash {
        /// Command name, with or without the leading `/`
        name: String,
        /// The command's arguments
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
        /// Session the command acts on
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// Print the daemon's answer as JSON
        #[arg(long)]
        json: bool,
    },
    /// Executors: put this machine's amber-exec on a host (docs/executors.md)
    Exec {
        #[command(subcommand)]
        action: ExecAction,
    },
    /// Start, stop or inspect the daemon
    Daemon {
        #[command(subcommand)]
        action: DaemonAction,
    },
    /// Sign in to a configured HTTP MCP server that requires OAuth: login, logout
    Mcp {
        #[command(subcommand)]
        action: McpAction,
    },
    /// Prompts amberd runs on a cron schedule: add, list, rm, run, tick
    Routine {
        #[command(subcommand)]
        action: RoutineAction,
    },
    /// Check the setup: versions, socket, provider reachability, the OS sandbox and its self-test
    ///
    /// Exits 0 when the sandbox is available and every self-test check passed, 1 otherwise
    /// (and when amberd cannot be reached). The provider is reported, never its key.
    Doctor {
        /// Print one JSON object
        #[arg(long)]
        json: bool,
        /// The workspace whose configuration (.amber/) is shown (default: the current directory)
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
    },
    /// List a workspace's configuration files (.amber/rules.toml, hooks.toml, agents/) and
    /// their trust, or trust (or `--deny`) the current version of one
    ///
    /// A workspace's allow rules, hooks and agents count only once you trusted that version
    /// of the file (its blake3 hash); a changed file is untrusted again. Review the file
    /// before trusting it: it is code.
    Trust {
        /// The file to decide on, workspace-relative (as the listing names it)
        path: Option<String>,
        /// The workspace (default: the current directory)
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// Only this version (refused when the file's hash differs)
        #[arg(long, requires = "path")]
        hash: Option<String>,
        /// Deny this version: it stays ignored, and turns no longer ask about it
        #[arg(long, requires = "path")]
        deny: bool,
        /// Print the daemon's answer as JSON
        #[arg(long)]
        json: bool,
    },
    /// Bridge stdin/stdout to the daemon: one JSON-RPC message per line each way
    ///
    /// Send `initialize` first; lines behind it wait until it is answered, so they can all be
    /// written at once. Exits once stdin has ended and every request has been answered; keep
    /// stdin open to go on receiving notifications.
    Rpc,
    /// Serve amber to other agents as an MCP server over stdio (tools `amber_run`, `amber_reply`)
    ///
    /// stdout carries only the MCP protocol; notes go to stderr. A headless client: approval
    /// requests of its turns are denied unless `--yes` is given. With `--http` it serves
    /// Streamable HTTP instead, and prints the URL to use on stdout.
    McpServer {
        /// Answer approval requests of the turns it runs with allow_once (as `run --yes`:
        /// running a command without the OS sandbox is still denied)
        #[arg(long)]
        yes: bool,
        /// Serve Streamable HTTP at /mcp on ADDR instead of stdio: a loopback HOST:PORT
        /// (127.0.0.1:0 picks a port) or unix:PATH. Every request needs the token
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
        /// The token HTTP requests must carry (`Authorization: Bearer TOKEN` or `?token=`),
        /// read from this file; else $AMBER_MCP_TOKEN; else a new random one (in the URL printed)
        #[arg(long, value_name = "FILE", requires = "http")]
        token_file: Option<std::path::PathBuf>,
    },
    /// Be an Agent Client Protocol (ACP v1) agent on stdin/stdout, for editors (Zed, Neovim, …)
    ///
    /// One JSON-RPC message per line each way; logs go to stderr. Sessions are amberd's: a
    /// session the editor loads is the same one the TUI and amber-cli see.
    Acp,
    /// Print shell completions
    Completions {
        /// Target shell
        shell: clap_complete::Shell,
    },
    /// Write man pages (amber-cli.1 and one per subcommand) into DIR
    #[command(hide = true)]
    Man {
        /// Where the pages go (created if missing)
        dir: PathBuf,
    },
}

/// How a TURN argument is read (the help of `diff`, `rewind` and `fork`).
const TURN_HELP: &str = "\
TURN is a turn number as `amber-cli checkpoints ID` prints it, or a turn id (`turn_…`).
Every turn of the session's history has a number (1 is its first turn), one that changed no
files too: `checkpoints` lists only the turns with a checkpoint, so its numbers may skip one.";

#[derive(Debug, Subcommand)]
pub(crate) enum SessionsAction {
    /// Show a session: info, messages, pending approvals, todos, its network connections
    /// (the same as `amber-cli show`)
    Show {
        /// Session: its id, a unique prefix of it, or its name
        id: String,
        /// Print the daemon's answer as JSON
        #[arg(long)]
        json: bool,
    },
    /// Re-walk a session's persisted hash chain and report the first broken link
    Verify {
        id: String,
        /// Print the report as JSON
        #[arg(long)]
        json: bool,
    },
    /// Name a session, or rename it (`--clear` or an empty NAME: no name); its name then
    /// stands for its id in every command
    Rename {
        /// The session: its id, a unique prefix of it, or its current name
        session: String,
        /// The new name (1-64 characters, no whitespace, not only hex digits and `-`)
        #[arg(required_unless_present = "clear", conflicts_with = "clear")]
        name: Option<String>,
        /// Remove the session's name
        #[arg(long)]
        clear: bool,
        /// Print the session's info as JSON
        #[arg(long)]
        json: bool,
    },
    /// Delete idle sessions not updated for a while (a session with a worktree is kept:
    /// `amber-cli rm` decides about its checkout)
    Prune {
        /// How old, as `7d`, `12h`, `30m`
        #[arg(long, value_name = "AGE", value_parser = age)]
        older_than: std::time::Duration,
        /// List what would go, delete nothing
        #[arg(long)]
        dry_run: bool,
        /// Print the sessions (deleted, or that would be) as JSON
        #[arg(long)]
        json: bool,
    },
}

/// An `--older-than`: a duration as humantime reads it (`7d`, `36h`, `1w 2d`).
fn age(text: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("`{text}` is not a duration like `7d` or `12h`: {e}"))
}

#[derive(Debug, Subcommand)]
pub(crate) enum ExecAction {
    /// Copy amber-exec to HOST's ~/.local/bin over your ssh, and check it runs there
    ///
    /// HOST is a host, `user@host` or `ssh://[user@]host[:port]`, reached with your ssh
    /// config, keys, agent and known_hosts (no prompt). A host that has this version already
    /// is left alone; one of another OS or architecture is refused before anything is copied.
    Install {
        /// The host
        host: String,
        /// SSH port (default: your ssh config's)
        #[arg(long, short = 'p', value_name = "PORT")]
        port: Option<u16>,
        /// The amber-exec to copy (default: the one beside this amber-cli)
        #[arg(long, value_name = "PATH")]
        program: Option<std::path::PathBuf>,
        /// Copy even when the host has this version
        #[arg(long)]
        force: bool,
    },
}

/// `mcp`'s actions.
#[derive(Debug, Subcommand)]
pub(crate) enum McpAction {
    /// Sign in to the server NAME (`[mcp.servers.NAME] url = …`): prints the authorization
    /// URL (and opens a browser when there is one), waits until the server is ready. amberd
    /// keeps the tokens (<data dir>/mcp-auth/NAME.json, 0600) and refreshes them
    Login {
        name: String,
        /// Only print the URL; open it yourself (on another machine, say)
        #[arg(long)]
        no_browser: bool,
        /// A client registered with the server's authorization server beforehand (else the
        /// server's `oauth_client_id`, else amber registers itself)
        #[arg(long, value_name = "ID")]
        client_id: Option<String>,
        /// The environment variable holding that client's secret (never on the command line)
        #[arg(long, value_name = "VAR", requires = "client_id")]
        client_secret_env: Option<String>,
    },
    /// Forget the server NAME's stored tokens
    Logout { name: String },
}

/// `routine`'s actions.
#[derive(Debug, Subcommand)]
pub(crate) enum RoutineAction {
    /// Add a routine: PROMPT runs in a new session (or --session NAME) at each fire time
    ///
    /// EXPR is five cron fields in amberd's local time: minute hour day-of-month month
    /// day-of-week (`0 7 * * 1-5`: weekdays at 07:00), or @hourly, @daily, @weekly,
    /// @monthly, @yearly. The routine is kept by amberd (its data directory) until
    /// `routine rm`; routines of config.toml ([[routines]]) are listed too.
    Add {
        /// The schedule: five cron fields, or @daily and the like
        #[arg(long, value_name = "EXPR")]
        cron: String,
        /// Workspace root of its sessions (default: the current directory)
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// Run in the session of this name each time (made by the first fire), instead
        /// of a new session per fire
        #[arg(long, value_name = "NAME")]
        session: Option<String>,
        /// Each new session works in a git worktree of its own
        #[arg(long, conflicts_with = "session")]
        worktree: bool,
        /// Each run's budget in US dollars (its model needs a price)
        #[arg(long, value_name = "USD")]
        max_usd: Option<f64>,
        /// Fire times missed while amberd was down: skip (none), latest (the newest,
        /// the default) or all (each, at most 10)
        #[arg(long, value_name = "POLICY", value_parser = missed_policy)]
        missed: Option<amber_proto::MissedPolicy>,
        /// The routine's name (default: made from the prompt's first words)
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// Print the routine as amberd keeps it, as JSON
        #[arg(long)]
        json: bool,
        /// The prompt
        #[arg(value_name = "PROMPT", required = true)]
        prompt: Vec<String>,
    },
    /// List the routines: their schedule, next fire and last run
    List {
        /// Print the daemon's answer as JSON
        #[arg(long)]
        json: bool,
    },
    /// Remove a routine added with `routine add` (those of config.toml are removed there)
    #[command(visible_alias = "remove")]
    Rm {
        /// The routine's name
        name: String,
    },
    /// Fire a routine now, whatever its schedule
    Run {
        /// The routine's name
        name: String,
        /// One JSON line for the run
        #[arg(long)]
        json: bool,
    },
    /// Fire every routine that is due now (what amber-routines.timer runs)
    Tick {
        /// One JSON line per run
        #[arg(long)]
        json: bool,
    },
}

/// A `--missed` policy.
fn missed_policy(text: &str) -> Result<amber_proto::MissedPolicy, String> {
    text.parse()
}

#[derive(Debug, Subcommand)]
pub(crate) enum DaemonAction {
    /// Start amberd in the background (if it is not running) and print its socket and pid
    Start,
    /// Ask amberd to shut down and wait until it has
    Stop,
    /// Stop amberd, then start it again with this shell's environment (AMBER_BASE_URL,
    /// AMBER_MODEL, keys, …); sessions are persisted and come back
    Restart,
    /// Show version, pid, uptime, sessions and connections
    Status {
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Write systemd user units (amberd.socket, amberd.service) for socket activation
    #[command(name = "install-systemd")]
    InstallSystemd {
        /// Directory to write them to (default: $XDG_CONFIG_HOME/systemd/user)
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// The amberd the service runs (default: the amberd next to amber-cli)
        #[arg(long, value_name = "PATH")]
        amberd: Option<PathBuf>,
        /// Replace units that differ from what would be written
        #[arg(long)]
        force: bool,
    },
    /// Print the end of amberd's log file (under systemd: runs journalctl --user -u amberd)
    Logs {
        /// Lines to print
        #[arg(short = 'n', long, value_name = "N", default_value_t = 50)]
        lines: usize,
        /// Keep printing lines as they are written
        #[arg(short = 'f', long)]
        follow: bool,
    },
}

#[derive(Debug, Clone, Args)]
pub(crate) struct RunArgs {
    /// The prompt; `-`, or nothing with piped stdin, reads it from stdin
    #[arg(value_name = "PROMPT")]
    pub prompt: Vec<String>,
    /// Workspace root of a new session (default: the current directory)
    #[arg(long, value_name = "DIR", conflicts_with = "session")]
    pub cwd: Option<PathBuf>,
    /// What may run without asking
    #[arg(long, value_enum)]
    pub mode: Option<ModeArg>,
    /// Model of a new session
    #[arg(long, value_name = "M", conflicts_with = "session")]
    pub model: Option<String>,
    /// Provider of a new session (a name from `amber-cli command model`; default: the configured one)
    #[arg(long, value_name = "NAME", conflicts_with = "session")]
    pub provider: Option<String>,
    /// Custom agent of a new session (`plan`, `review`, or `.amber/agents/NAME.md`); its
    /// model, provider and mode are defaults the flags above override
    #[arg(long, value_name = "NAME", conflicts_with = "session")]
    pub agent: Option<String>,
    /// OS sandbox of a new session's commands (default: `[sandbox] mode` of amberd's
    /// config; read mode is always read-only)
    #[arg(long, value_enum, value_name = "MODE", conflicts_with = "session")]
    pub sandbox: Option<SandboxArg>,
    /// What a new session's sandboxed commands may reach: off, allowlist (the hosts
    /// `[sandbox] allow_domains` and `--allow-domain` name, through amber's egress proxy)
    /// or on; `--network` alone is on (default: `[sandbox] network`)
    #[arg(long, value_name = "MODE", num_args = 0..=1, default_missing_value = "on",
          value_parser = parse_network, conflicts_with = "session")]
    pub network: Option<NetworkMode>,
    /// A host a new session's allowlist lets through, besides the configured ones
    /// (`example.com`, `*.example.com`, `preset:npm`…); repeatable
    #[arg(
        long = "allow-domain",
        value_name = "PATTERN",
        conflicts_with = "session"
    )]
    pub allow_domains: Vec<String>,
    /// A host a new session never reaches (deny wins over every allow); repeatable
    #[arg(
        long = "deny-domain",
        value_name = "PATTERN",
        conflicts_with = "session"
    )]
    pub deny_domains: Vec<String>,
    /// Answer every approval request with allow_once, except running a command without the OS
    /// sandbox, which it denies
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Print every event as one JSON line (`synced` included), then a result line (always,
    /// with `stopReason: "error"` and the error when the run fails before its turn starts)
    #[arg(long)]
    pub json: bool,
    /// Continue an existing session instead of creating one (its id, a unique prefix of
    /// it, or its name)
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Name the new session (1-64 characters, no whitespace, not only hex digits and `-`;
    /// unique among the daemon's sessions), so `--session NAME` and every other command
    /// can find it by that name
    #[arg(long, value_name = "NAME", conflicts_with = "session")]
    pub name: Option<String>,
    /// Where the new session's tools run: `local` (default), `ssh://HOST/PATH` (an
    /// executor started over SSH, PATH its workspace there) or `executor:NAME`
    /// (`[environments.NAME]` of the daemon's config); `--cwd` is then a path on that machine
    #[arg(long = "env", value_name = "ENV", conflicts_with = "session")]
    pub environment: Option<String>,
    /// Run on the daemon's runner fleet (`--env fleet`): a runner clones --repo at --ref
    /// into a fresh workspace and the session runs there (docs/fleet.md)
    #[arg(long, conflicts_with_all = ["session", "environment", "worktree", "cwd"], requires_all = ["repo", "git_ref"])]
    pub fleet: bool,
    /// With --fleet: the repository the runner clones (https, ssh, git or file URL; the
    /// runner's own credentials)
    #[arg(long, value_name = "URL", requires = "fleet")]
    pub repo: Option<String>,
    /// With --fleet: the branch, tag or commit checked out
    #[arg(long = "ref", value_name = "REF", requires = "fleet")]
    pub git_ref: Option<String>,
    /// With --fleet: a command run in the session's sandbox after the clone (repeatable,
    /// in order)
    #[arg(long, value_name = "CMD", requires = "fleet")]
    pub setup: Vec<String>,
    /// With --fleet: a label the runner must have, KEY=VALUE (repeatable; `pool=NAME`
    /// picks a pool)
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = label, requires = "fleet")]
    pub labels: Vec<(String, String)>,
    /// With --fleet: higher runs first (default 0)
    #[arg(long, value_name = "N", requires = "fleet", allow_hyphen_values = true)]
    pub priority: Option<i32>,
    /// With --fleet: the runner commits the workspace and pushes it to branch BRANCH of
    /// --repo (with its own credentials) when a turn completes; `--push` alone pushes to
    /// `amber/<session id>`. An existing branch must be at --ref or at this session's last
    /// push: amber never forces
    #[arg(
        long,
        value_name = "BRANCH",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "",
        requires = "fleet"
    )]
    pub push: Option<String>,
    /// Return as soon as the prompt is accepted, printing the session's id (`--json`: a
    /// line with it); follow it later with `amber-cli attach ID` or `amber-cli wait ID`
    #[arg(long, conflicts_with_all = ["ephemeral", "standalone", "timeout", "output_schema"])]
    pub detach: bool,
    /// Work in a new git worktree of the repository (branch `amber/<short id>`, or
    /// BRANCH), under amberd's data dir, so parallel sessions never edit the same files. A
    /// word after it is the branch when a prompt follows (`--worktree fix/x "fix it"`), else
    /// the prompt (`--worktree "fix it"`); `--worktree=BRANCH` is always the branch
    #[arg(
        long,
        value_name = "BRANCH",
        num_args = 0..=1,
        default_missing_value = "",
        conflicts_with = "session"
    )]
    pub worktree: Option<String>,
    /// A JSON Schema file: the final answer must be a JSON value valid against it; the
    /// result line carries it parsed as `output` (else stopReason `error`, code
    /// `invalid_output`)
    #[arg(long, value_name = "FILE")]
    pub output_schema: Option<PathBuf>,
    /// Cancel the turn after SECS seconds, print its result and exit 124 (a prompt still
    /// queued behind another turn of the session is left queued)
    #[arg(long, value_name = "SECS", value_parser = positive_secs)]
    pub timeout: Option<f64>,
    /// At most N model requests in this turn (replaces `[agent] max_tool_iterations` for
    /// this run); the turn then stops with `max_iterations` (exit 3)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_iterations: Option<u32>,
    /// Stop the new session's turns once its cost reaches USD dollars (stopReason
    /// `budget_exceeded`, exit 3). Refused when the model has no known price
    #[arg(long, value_name = "USD", value_parser = budget_usd, conflicts_with = "session")]
    pub max_budget_usd: Option<amber_proto::CostUsd>,
    /// Stop the new session's turns once it has used N tokens in all (stopReason
    /// `budget_exceeded`, exit 3), whatever the price
    #[arg(long, value_name = "N", conflicts_with = "session")]
    pub max_tokens_total: Option<u64>,
    /// Run on a private amberd started for this run alone (its own socket and data
    /// directory, this shell's environment), stopped and removed when the run ends: parallel
    /// CI jobs on one machine never share a daemon
    #[arg(long, conflicts_with_all = ["session", "worktree"])]
    pub standalone: bool,
    /// Delete the session when the run ends, however it ends (nothing stays in
    /// `amber-cli sessions`)
    #[arg(long, conflicts_with = "session")]
    pub ephemeral: bool,
}

/// `amber-cli wait`.
#[derive(Debug, Clone, Args)]
pub(crate) struct WaitArgs {
    /// Session: its id, a unique prefix of it, or its name
    pub id: String,
    /// Give up after SECS seconds (exit 124); the session keeps running
    #[arg(long, value_name = "SECS", value_parser = positive_secs)]
    pub timeout: Option<f64>,
    /// Print the last turn's result line (as `run --json` ends with) instead of its text
    #[arg(long)]
    pub json: bool,
}

/// A `--label`: `KEY=VALUE`.
fn label(text: &str) -> Result<(String, String), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}`: a label is KEY=VALUE"))?;
    Ok((key.trim().to_owned(), value.trim().to_owned()))
}

/// A `--timeout`: a positive number of seconds (fractions allowed).
fn positive_secs(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 && secs < 1e9 => Ok(secs),
        _ => Err(format!("`{text}` is not a positive number of seconds")),
    }
}

fn budget_usd(text: &str) -> Result<amber_proto::CostUsd, String> {
    text.parse::<f64>()
        .ok()
        .and_then(amber_proto::CostUsd::from_usd)
        .ok_or_else(|| format!("`{text}` is not an amount of dollars >= 0"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Read,
    Write,
    Yolo,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::Read => Mode::Read,
            ModeArg::Write => Mode::Write,
            ModeArg::Yolo => Mode::Yolo,
        }
    }
}

/// `--sandbox`: the three sandbox modes, as the protocol names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SandboxArg {
    WorkspaceWrite,
    ReadOnly,
    Off,
}

impl From<SandboxArg> for SandboxMode {
    fn from(m: SandboxArg) -> SandboxMode {
        match m {
            SandboxArg::WorkspaceWrite => SandboxMode::WorkspaceWrite,
            SandboxArg::ReadOnly => SandboxMode::ReadOnly,
            SandboxArg::Off => SandboxMode::Off,
        }
    }
}

impl RunArgs {
    /// Gives back to the prompt a word `--worktree` took that cannot be a branch: one with
    /// whitespace (no branch name has any), or the only word when no other prompt word
    /// follows and the prompt is not piped (`run --worktree "fix it"`, `run --worktree fixit`).
    pub(crate) fn settle_worktree(&mut self, stdin_is_terminal: bool) {
        let Some(word) = self.worktree.as_deref().filter(|w| !w.trim().is_empty()) else {
            return;
        };
        let is_prompt =
            word.chars().any(char::is_whitespace) || (self.prompt.is_empty() && stdin_is_terminal);
        if is_prompt {
            self.prompt.insert(0, word.to_owned());
            self.worktree = Some(String::new());
        }
    }

    /// `session/new {worktree}` of `--worktree [BRANCH]`.
    pub(crate) fn worktree_request(&self) -> Option<amber_proto::WorktreeRequest> {
        self.worktree.as_ref().map(|branch| match branch.trim() {
            "" => amber_proto::WorktreeRequest::Enabled(true),
            branch => amber_proto::WorktreeRequest::Options(amber_proto::WorktreeOptions {
                branch: Some(branch.to_owned()),
                base: None,
            }),
        })
    }

    /// `session/new {sandbox}` of `--sandbox` / `--network` / `--allow-domain` /
    /// `--deny-domain`; `None` when none is given.
    pub(crate) fn sandbox_request(&self) -> Option<SandboxRequest> {
        let request = SandboxRequest {
            mode: self.sandbox.map(Into::into),
            network: self.network,
            allow_domains: self.allow_domains.clone(),
            deny_domains: self.deny_domains.clone(),
        };
        (request != SandboxRequest::default()).then_some(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use clap::error::ErrorKind;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("amber-cli").chain(args.iter().copied()))
    }

    fn run_args(args: &[&str]) -> RunArgs {
        let cli = parse(&[&["run"], args].concat()).unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        *run
    }

    #[test]
    fn worktree_takes_a_branch_or_gives_the_prompt_back() {
        let branch_of = |args: &[&str], terminal: bool| {
            let mut run = run_args(args);
            run.settle_worktree(terminal);
            (run.worktree_request(), run.prompt)
        };
        let default = Some(amber_proto::WorktreeRequest::Enabled(true));
        let named = |b: &str| {
            Some(amber_proto::WorktreeRequest::Options(
                amber_proto::WorktreeOptions {
                    branch: Some(b.into()),
                    base: None,
                },
            ))
        };
        assert_eq!(
            branch_of(&["--worktree", "fix/x", "fix it"], true),
            (named("fix/x"), vec!["fix it".to_owned()])
        );
        assert_eq!(
            branch_of(&["--worktree=fix/x", "fix it"], true),
            (named("fix/x"), vec!["fix it".to_owned()])
        );
        assert_eq!(
            branch_of(&["--worktree", "fix it"], true),
            (default.clone(), vec!["fix it".to_owned()])
        );
        assert_eq!(
            branch_of(&["--worktree", "fixit"], true),
            (default.clone(), vec!["fixit".to_owned()])
        );
        // The prompt comes from a pipe: the word is the branch.
        assert_eq!(
            branch_of(&["--worktree", "fix/x"], false),
            (named("fix/x"), vec![])
        );
        assert_eq!(
            branch_of(&["fix it", "--worktree"], true),
            (default, vec!["fix it".to_owned()])
        );
        assert_eq!(branch_of(&["fix it"], true).0, None);
    }

    #[test]
    fn definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_with_everything() {
        let cli = parse(&[
            "run",
            "fix",
            "it",
            "--cwd",
            "/ws",
            "--mode",
            "yolo",
            "--model",
            "m1",
            "--agent",
            "plan",
            "--yes",
            "--json",
            "--socket",
            "/s.sock",
            "--no-autostart",
        ])
        .unwrap();
        assert_eq!(cli.conn.socket, Some(PathBuf::from("/s.sock")));
        assert!(cli.conn.no_autostart);
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        assert_eq!(run.prompt, ["fix", "it"]);
        assert_eq!(run.cwd, Some(PathBuf::from("/ws")));
        assert_eq!(run.mode, Some(ModeArg::Yolo));
        assert_eq!(run.model.as_deref(), Some("m1"));
        assert_eq!(run.agent.as_deref(), Some("plan"));
        assert!(run.yes && run.json);
        assert_eq!(run.sandbox_request(), None);
    }

    #[test]
    fn run_sandbox_takes_the_three_modes_and_network() {
        let request = |args: &[&str]| {
            let cli = parse(&[&["run", "x"], args].concat())?;
            let Command::Run(run) = cli.command else {
                panic!("not run")
            };
            Ok::<_, clap::Error>(run.sandbox_request())
        };
        for (name, mode) in [
            ("workspace-write", SandboxMode::WorkspaceWrite),
            ("read-only", SandboxMode::ReadOnly),
            ("off", SandboxMode::Off),
        ] {
            let got = request(&["--sandbox", name]).unwrap();
            assert_eq!(
                got,
                Some(SandboxRequest {
                    mode: Some(mode),
                    ..Default::default()
                })
            );
        }
        let got = request(&["--sandbox", "read-only", "--network"]).unwrap();
        assert_eq!(got.and_then(|r| r.network), Some(NetworkMode::On));
        let got = request(&["--network"]).unwrap();
        assert_eq!(
            got,
            Some(SandboxRequest {
                network: Some(NetworkMode::On),
                ..Default::default()
            })
        );
        let got = request(&[
            "--network=allowlist",
            "--allow-domain",
            "preset:npm",
            "--deny-domain",
            "evil.example",
        ])
        .unwrap();
        assert_eq!(
            got,
            Some(SandboxRequest {
                network: Some(NetworkMode::Allowlist),
                allow_domains: vec!["preset:npm".into()],
                deny_domains: vec!["evil.example".into()],
                ..Default::default()
            })
        );
        let err = request(&["--network=some"]).unwrap_err();
        assert!(err.to_string().contains("allowlist"), "{err}");
        let err = request(&["--sandbox", "strict"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidValue);
        assert!(err.to_string().contains("workspace-write"), "{err}");
        let err = request(&["--sandbox", "off", "--session", "s"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ArgumentConflict);
    }

    #[test]
    fn doctor_takes_json_and_the_global_flags() {
        let cli = parse(&["doctor", "--json", "--no-autostart", "--socket", "/d"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Doctor {
                json: true,
                cwd: None
            }
        ));
        assert!(cli.conn.no_autostart);
        assert_eq!(cli.conn.socket, Some(PathBuf::from("/d")));
    }

    #[test]
    fn global_flags_before_the_subcommand() {
        let cli = parse(&["--socket", "/x", "daemon", "status", "--json"]).unwrap();
        assert_eq!(cli.conn.socket, Some(PathBuf::from("/x")));
        assert!(matches!(
            cli.command,
            Command::Daemon {
                action: DaemonAction::Status { json: true }
            }
        ));
    }

    #[test]
    fn routine_add_takes_its_schedule_and_options() {
        let cli = parse(&[
            "routine",
            "add",
            "--cron",
            "0 7 * * 1-5",
            "--cwd",
            "/w",
            "--worktree",
            "--max-usd",
            "1.5",
            "--missed",
            "all",
            "--name",
            "triage",
            "triage",
            "issues",
        ])
        .unwrap();
        let Command::Routine {
            action:
                RoutineAction::Add {
                    cron,
                    cwd,
                    worktree,
                    max_usd,
                    missed,
                    name,
                    prompt,
                    session: None,
                    json: false,
                },
        } = cli.command
        else {
            panic!("not routine add")
        };
        assert_eq!(cron, "0 7 * * 1-5");
        assert_eq!(cwd, Some(PathBuf::from("/w")));
        assert!(worktree);
        assert_eq!(max_usd, Some(1.5));
        assert_eq!(missed, Some(amber_proto::MissedPolicy::All));
        assert_eq!(name.as_deref(), Some("triage"));
        assert_eq!(prompt, ["triage", "issues"]);

        let err = parse(&[
            "routine", "add", "--cron", "@daily", "--missed", "some", "p",
        ])
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ValueValidation);
        assert!(err.to_string().contains("skip, latest or all"), "{err}");
        let err = parse(&["routine", "add", "--cron", "@daily"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::MissingRequiredArgument);
        let err = parse(&[
            "routine",
            "add",
            "--cron",
            "@daily",
            "--session",
            "s",
            "--worktree",
            "p",
        ])
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ArgumentConflict);
        assert!(matches!(
            parse(&["routine", "rm", "triage"]).unwrap().command,
            Command::Routine {
                action: RoutineAction::Rm { .. }
            }
        ));
        assert!(matches!(
            parse(&["routine", "tick"]).unwrap().command,
            Command::Routine {
                action: RoutineAction::Tick { json: false }
            }
        ));
    }

    #[test]
    fn daemon_install_systemd_and_logs() {
        let cli = parse(&[
            "daemon",
            "install-systemd",
            "--dir",
            "/u",
            "--amberd",
            "/bin/amberd",
            "--force",
        ])
        .unwrap();
        let Command::Daemon {
            action: DaemonAction::InstallSystemd { dir, amberd, force },
        } = cli.command
        else {
            panic!("not install-systemd")
        };
        assert_eq!(dir, Some(PathBuf::from("/u")));
        assert_eq!(amberd, Some(PathBuf::from("/bin/amberd")));
        assert!(force);
        assert!(matches!(
            parse(&["daemon", "logs"]).unwrap().command,
            Command::Daemon {
                action: DaemonAction::Logs {
                    lines: 50,
                    follow: false
                }
            }
        ));
        assert!(matches!(
            parse(&["daemon", "logs", "-n", "5", "-f"]).unwrap().command,
            Command::Daemon {
                action: DaemonAction::Logs {
                    lines: 5,
                    follow: true
                }
            }
        ));
    }

    #[test]
    fn trust_lists_or_decides_one_file() {
        assert!(matches!(
            parse(&["trust"]).unwrap().command,
            Command::Trust {
                path: None,
                deny: false,
                ..
            }
        ));
        assert!(matches!(
            parse(&["trust", ".amber/rules.toml", "--deny", "--cwd", "/w"]).unwrap().command,
            Command::Trust { path: Some(p), deny: true, cwd: Some(_), hash: None, .. } if p == ".amber/rules.toml"
        ));
        // `--hash` and `--deny` are about one file.
        assert!(parse(&["trust", "--deny"]).is_err());
        assert!(parse(&["trust", "--hash", "h"]).is_err());
        assert!(matches!(
            parse(&["doctor", "--cwd", "/w"]).unwrap().command,
            Command::Doctor {
                cwd: Some(_),
                json: false
            }
        ));
    }

    #[test]
    fn checkpoint_commands_take_a_session_and_a_turn() {
        assert!(matches!(
            parse(&["checkpoints", "s1", "--json"]).unwrap().command,
            Command::Checkpoints { id, json: true } if id == "s1"
        ));
        let diff = |args: &[&str]| match parse(args).unwrap().command {
            Command::Diff {
                id,
                turn,
                path,
                json,
            } => (id, turn, path, json),
            other => panic!("not diff: {other:?}"),
        };
        assert_eq!(diff(&["diff", "s1"]), ("s1".into(), None, None, false));
        assert_eq!(
            diff(&["diff", "s1", "3", "--json"]),
            ("s1".into(), Some("3".into()), None, true)
        );
        // The path comes after `--`, so one that looks like a turn or a flag is a path.
        assert_eq!(
            diff(&["diff", "s1", "--", "--odd-name"]),
            ("s1".into(), None, Some("--odd-name".into()), false)
        );
        assert_eq!(
            diff(&["diff", "s1", "turn_a", "--", "src/lib.rs"]),
            (
                "s1".into(),
                Some("turn_a".into()),
                Some("src/lib.rs".into()),
                false
            )
        );
        assert!(matches!(
            parse(&["fork", "s1"]).unwrap().command,
            Command::Fork {
                turn: None,
                json: false,
                ..
            }
        ));
        assert!(matches!(
            parse(&["fork", "s1", "2", "--json"]).unwrap().command,
            Command::Fork { turn: Some(t), json: true, .. } if t == "2"
        ));
    }

    #[test]
    fn rewind_flags_choose_files_or_conversation_not_both() {
        let Command::Rewind {
            id,
            turn,
            files_only,
            conversation_only,
            force,
            json,
        } = parse(&["rewind", "s1", "2", "--files-only", "--force"])
            .unwrap()
            .command
        else {
            panic!("not rewind")
        };
        assert_eq!((id.as_str(), turn.as_str()), ("s1", "2"));
        assert!(files_only && !conversation_only && force && !json);
        assert!(matches!(
            parse(&["rewind", "s1", "turn_x", "--conversation-only", "--json"])
                .unwrap()
                .command,
            Command::Rewind {
                conversation_only: true,
                files_only: false,
                force: false,
                json: true,
                ..
            }
        ));
        let err = parse(&["rewind", "s1", "2", "--files-only", "--conversation-only"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ArgumentConflict);
        let err = parse(&["rewind", "s1"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::MissingRequiredArgument);
        assert_eq!(err.exit_code(), 2);
    }

    #[test]
    fn run_takes_the_automation_flags_and_wait_its_own() {
        let Command::Run(run) = parse(&[
            "run",
            "x",
            "--output-schema",
            "s.json",
            "--timeout",
            "1.5",
            "--max-iterations",
            "4",
            "--max-budget-usd",
            "0.25",
            "--max-tokens-total",
            "9000",
        ])
        .unwrap()
        .command
        else {
            panic!("not run")
        };
        assert_eq!(run.output_schema, Some(PathBuf::from("s.json")));
        assert_eq!(run.timeout, Some(1.5));
        assert_eq!(run.max_iterations, Some(4));
        assert_eq!(run.max_budget_usd.map(|c| c.usd()), Some(0.25));
        assert_eq!(run.max_tokens_total, Some(9000));
        let Command::Wait(wait) = parse(&["wait", "s1", "--timeout", "3", "--json"])
            .unwrap()
            .command
        else {
            panic!("not wait")
        };
        assert_eq!(
            (wait.id.as_str(), wait.timeout, wait.json),
            ("s1", Some(3.0), true)
        );
        for bad in [
            &["run", "x", "--timeout", "0"][..],
            &["run", "x", "--timeout", "-1"],
            &["run", "x", "--timeout", "soon"],
            &["run", "x", "--max-iterations", "0"],
            &["run", "x", "--max-budget-usd", "-1"],
            &["run", "x", "--max-budget-usd", "lots"],
            &["run", "x", "--session", "s1", "--max-tokens-total", "5"],
            &["wait"],
            &["wait", "s1", "--timeout", "nan"],
        ] {
            assert_eq!(parse(bad).unwrap_err().exit_code(), 2, "{bad:?}");
        }
    }

    #[test]
    fn usage_errors_exit_2() {
        for bad in [
            &["run", "--mode", "sideways", "x"][..],
            &["run", "--session", "s1", "--cwd", "/ws", "x"],
            &["frobnicate"],
            &["show"],
            &["completions", "tcsh"],
            &[],
        ] {
            let err = parse(bad).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{bad:?}: {err}");
        }
        let help = parse(&["--help"]).unwrap_err();
        assert_eq!(help.kind(), ErrorKind::DisplayHelp);
        assert_eq!(help.exit_code(), 0);
    }

    #[test]
    fn sessions_tree_takes_json_but_not_fleet() {
        assert!(matches!(
            parse(&["sessions", "--tree", "--json"]).unwrap().command,
            Command::Sessions {
                action: None,
                json: true,
                fleet: false,
                tree: true,
            }
        ));
        let err = parse(&["sessions", "--tree", "--fleet"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ArgumentConflict);
    }

    #[test]
    fn run_takes_a_name_and_sessions_rename_a_name_or_clear() {
        assert_eq!(
            run_args(&["--name", "fix-auth", "x"]).name.as_deref(),
            Some("fix-auth")
        );
        let rename = |args: &[&str]| {
            let cli = parse(&[&["sessions", "rename"], args].concat())?;
            let Command::Sessions {
                action:
                    Some(SessionsAction::Rename {
                        session,
                        name,
                        clear,
                        ..
                    }),
                ..
            } = cli.command
            else {
                panic!("not rename")
            };
            Ok::<_, clap::Error>((session, name, clear))
        };
        assert_eq!(
            rename(&["3f2a", "login"]).unwrap(),
            ("3f2a".into(), Some("login".into()), false)
        );
        assert_eq!(
            rename(&["login", "--clear"]).unwrap(),
            ("login".into(), None, true)
        );
        assert_eq!(
            rename(&["login", ""]).unwrap(),
            ("login".into(), Some(String::new()), false)
        );
        for bad in [
            &["sessions", "rename", "login"][..],
            &["sessions", "rename", "login", "x", "--clear"],
            &["run", "--session", "s1", "--name", "x", "hi"],
        ] {
            assert_eq!(parse(bad).unwrap_err().exit_code(), 2, "{bad:?}");
        }
    }
}
