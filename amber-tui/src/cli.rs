//! Command-line arguments of `amber`.

use std::path::PathBuf;

use amber_proto::{Mode, NetworkMode, SandboxMode, SandboxRequest};
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "amber",
    version,
    about = "amber: a coding agent in your terminal (attaches to amberd)"
)]
pub struct Args {
    /// Workspace of a new session (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Mode of a new session.
    #[arg(long, value_parser = parse_mode)]
    pub mode: Option<Mode>,
    /// Model of a new session.
    #[arg(long)]
    pub model: Option<String>,
    /// Custom agent of a new session (`plan`, `review`, or `.amber/agents/NAME.md`).
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// OS sandbox of a new session's commands: workspace-write, read-only or off
    /// (default: amberd's `[sandbox] mode`; read mode is always read-only).
    #[arg(long, value_name = "MODE", value_parser = parse_sandbox)]
    pub sandbox: Option<SandboxMode>,
    /// What a new session's sandboxed commands may reach: off, allowlist (the hosts
    /// `[sandbox] allow_domains` and `--allow-domain` name, through amber's egress proxy) or
    /// on; `--network` alone is on (default: `[sandbox] network`).
    #[arg(long, value_name = "MODE", num_args = 0..=1, default_missing_value = "on",
          value_parser = parse_network)]
    pub network: Option<NetworkMode>,
    /// A host a new session's allowlist lets through, besides the configured ones; repeatable.
    #[arg(long = "allow-domain", value_name = "PATTERN")]
    pub allow_domains: Vec<String>,
    /// A host a new session never reaches (deny wins); repeatable.
    #[arg(long = "deny-domain", value_name = "PATTERN")]
    pub deny_domains: Vec<String>,
    /// Work in a new git worktree of the repository (branch `amber/<short id>`, or
    /// `--worktree BRANCH`) under amberd's data dir, so parallel sessions never edit the
    /// same files.
    #[arg(long, value_name = "BRANCH", num_args = 0..=1, default_missing_value = "")]
    pub worktree: Option<String>,
    /// Stop a new session's turns once its cost reaches USD dollars (`budget_exceeded`);
    /// refused when the model has no known price.
    #[arg(long, value_name = "USD", value_parser = parse_budget)]
    pub max_budget_usd: Option<amber_proto::CostUsd>,
    /// Stop a new session's turns once it has used N tokens in all (`budget_exceeded`).
    #[arg(long, value_name = "N")]
    pub max_tokens_total: Option<u64>,
    /// Attach to this session instead of starting one.
    #[arg(long, value_name = "ID", conflicts_with = "resume")]
    pub session: Option<String>,
    /// Attach to the newest session of this directory.
    #[arg(long = "continue", id = "resume")]
    pub resume: bool,
    /// The daemon's socket (default: $AMBER_SOCKET, else the standard path).
    #[arg(long, value_name = "PATH", global = true)]
    pub socket: Option<PathBuf>,
    /// Fail instead of starting amberd when it is not running.
    #[arg(long, global = true)]
    pub no_autostart: bool,
    /// Use the amberd of HOST through `ssh -T HOST amber-cli rpc` (the command:
    /// $AMBER_REMOTE_COMMAND, `{host}` replaced). `--cwd` then names a directory there.
    #[arg(long, value_name = "HOST", global = true, env = "AMBER_REMOTE")]
    pub remote: Option<String>,
    /// Print amber's man page (roff) and exit (the installer writes it to amber.1).
    #[arg(long, hide = true)]
    pub man: bool,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Attach to a session (same as --session ID).
    Attach { id: String },
    /// Pick a session to attach to, start one, or delete one.
    Sessions,
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    s.parse()
}

fn parse_budget(s: &str) -> Result<amber_proto::CostUsd, String> {
    s.parse::<f64>()
        .ok()
        .and_then(amber_proto::CostUsd::from_usd)
        .ok_or_else(|| format!("`{s}` is not an amount of dollars >= 0"))
}

fn parse_sandbox(s: &str) -> Result<SandboxMode, String> {
    s.parse()
}

fn parse_network(s: &str) -> Result<NetworkMode, String> {
    s.parse()
}

/// What `amber` was asked to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    New,
    Attach(String),
    Continue,
    Picker,
}

impl Args {
    /// `session/new {sandbox}` of `--sandbox` / `--network`; `None` when neither is given.
    pub fn sandbox_request(&self) -> Option<SandboxRequest> {
        let request = SandboxRequest {
            mode: self.sandbox,
            network: self.network,
            allow_domains: self.allow_domains.clone(),
            deny_domains: self.deny_domains.clone(),
        };
        (request != SandboxRequest::default()).then_some(request)
    }

    /// `session/new {worktree}` of `--worktree[=BRANCH]`.
    pub fn worktree_request(&self) -> Option<amber_proto::WorktreeRequest> {
        self.worktree.as_ref().map(|branch| match branch.trim() {
            "" => amber_proto::WorktreeRequest::Enabled(true),
            branch => amber_proto::WorktreeRequest::Options(amber_proto::WorktreeOptions {
                branch: Some(branch.to_owned()),
                base: None,
            }),
        })
    }

    /// The remote host (`--remote`, `AMBER_REMOTE`), if one is named.
    pub fn remote_host(&self) -> Option<&str> {
        self.remote.as_deref().filter(|h| !h.trim().is_empty())
    }

    pub fn start(&self) -> Start {
        match (&self.command, &self.session) {
            (Some(Command::Attach { id }), _) => Start::Attach(id.clone()),
            (Some(Command::Sessions), _) => Start::Picker,
            (None, Some(id)) => Start::Attach(id.clone()),
            (None, None) if self.resume => Start::Continue,
            (None, None) => Start::New,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_session_may_name_an_agent() {
        let args = Args::try_parse_from(["amber", "--agent", "review", "--mode", "read"]).unwrap();
        assert_eq!(args.agent.as_deref(), Some("review"));
        assert_eq!(args.mode, Some(Mode::Read));
        assert_eq!(args.start(), Start::New);
        assert_eq!(args.sandbox_request(), None);
    }

    #[test]
    fn a_new_session_may_ask_for_a_worktree_and_a_branch() {
        let args = Args::try_parse_from(["amber", "--worktree"]).unwrap();
        assert_eq!(
            args.worktree_request(),
            Some(amber_proto::WorktreeRequest::Enabled(true))
        );
        let args = Args::try_parse_from(["amber", "--worktree=fix/x"]).unwrap();
        assert_eq!(
            args.worktree_request()
                .and_then(|w| w.options())
                .and_then(|o| o.branch),
            Some("fix/x".to_owned())
        );
        let args = Args::try_parse_from(["amber", "--worktree", "fix/y"]).unwrap();
        assert_eq!(
            args.worktree_request()
                .and_then(|w| w.options())
                .and_then(|o| o.branch),
            Some("fix/y".to_owned())
        );
        let args = Args::try_parse_from(["amber"]).unwrap();
        assert_eq!(args.worktree_request(), None);
    }

    #[test]
    fn a_new_session_may_ask_for_a_sandbox() {
        let args = Args::try_parse_from(["amber", "--sandbox", "read-only", "--network"]).unwrap();
        assert_eq!(
            args.sandbox_request(),
            Some(SandboxRequest {
                mode: Some(SandboxMode::ReadOnly),
                network: Some(NetworkMode::On),
                ..Default::default()
            })
        );
        let args = Args::try_parse_from(["amber", "--sandbox", "off"]).unwrap();
        assert_eq!(
            args.sandbox_request().and_then(|r| r.mode),
            Some(SandboxMode::Off)
        );
        let err = Args::try_parse_from(["amber", "--sandbox", "none"]).unwrap_err();
        assert!(err.to_string().contains("workspace-write"), "{err}");
    }
}
