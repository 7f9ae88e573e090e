//! The remote transport (`--remote HOST`, `AMBER_REMOTE`): the protocol spoken over the
//! stdin/stdout of a child process — by default `ssh -T HOST amber-cli rpc`, whose far end
//! bridges them to the daemon's socket on that host (and starts that daemon if needed).
//!
//! One JSON-RPC message per line each way, as `amber-cli rpc` reads and writes them. The
//! command is `AMBER_REMOTE_COMMAND` when set (default [`DEFAULT_COMMAND`]), split into
//! words as a POSIX shell would (quotes and backslashes), no shell run; `{host}` is
//! replaced inside the words after splitting, so a host name never becomes more than one
//! word, and a host starting with `-` is refused (it would be an ssh option).
//!
//! **Invariants:** the child dies with the connection (killed on drop); what it prints on
//! stderr never reaches the terminal (a TUI draws there): the last lines are kept and
//! named in the error when it ends. A connection that ends is not resumed here: clients
//! connect again ([`crate::Client::connect`]) and resubscribe with `afterSeq`.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use jsonrpsee::core::client::{ReceivedMessage, TransportReceiverT, TransportSenderT};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::ClientError;

/// The command run when `AMBER_REMOTE_COMMAND` is not set.
pub const DEFAULT_COMMAND: &str = "ssh -T {host} amber-cli rpc";
/// The environment variable naming the host (as `--remote` does).
pub const REMOTE_ENV: &str = "AMBER_REMOTE";
/// The environment variable holding the command template.
pub const COMMAND_ENV: &str = "AMBER_REMOTE_COMMAND";
/// How many of the child's last stderr lines an error names.
const STDERR_LINES: usize = 8;

/// A daemon reached through a command: the host and the command template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remote {
    pub host: String,
    /// The command with `{host}` in it (or not), before splitting.
    pub command: String,
}

impl Remote {
    /// `host` with the command of `AMBER_REMOTE_COMMAND`, else [`DEFAULT_COMMAND`].
    pub fn from_env(host: impl Into<String>) -> Self {
        let command = std::env::var(COMMAND_ENV)
            .ok()
            .filter(|c| !c.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_COMMAND.to_owned());
        Self {
            host: host.into(),
            command,
        }
    }

    /// The argv to run: the command split into words, `{host}` replaced in each.
    pub fn argv(&self) -> Result<Vec<String>, ClientError> {
        let refuse = |reason: String| ClientError::Remote {
            command: self.command.clone(),
            reason,
        };
        if self.host.trim().is_empty() {
            return Err(refuse("the remote host is empty".into()));
        }
        if self.host.starts_with('-') {
            return Err(refuse(format!(
                "the remote host `{}` starts with `-` and would be read as an option",
                self.host
            )));
        }
        let words = shlex::split(&self.command)
            .ok_or_else(|| refuse("unbalanced quotes in the command".into()))?;
        if words.is_empty() {
            return Err(refuse("the command is empty".into()));
        }
        Ok(words
            .into_iter()
            .map(|w| w.replace("{host}", &self.host))
            .collect())
    }

    /// The command as it is run, for messages.
    pub fn display(&self) -> String {
        match self.argv() {
            Ok(argv) => argv.join(" "),
            Err(_) => self.command.clone(),
        }
    }
}

/// The child's last lines of stderr.
#[derive(Debug, Clone, Default)]
pub(crate) struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, line: String) {
        if let Ok(mut lines) = self.0.lock() {
            if lines.len() == STDERR_LINES {
                lines.pop_front();
            }
            lines.push_back(line);
        }
    }

    /// The kept lines, joined; empty when there were none.
    pub(crate) fn text(&self) -> String {
        self.0
            .lock()
            .map(|l| l.iter().cloned().collect::<Vec<_>>().join(" / "))
            .unwrap_or_default()
    }
}

/// The writing half: one message per line to the child's stdin.
pub(crate) struct ChildSender {
    stdin: ChildStdin,
}

/// The reading half: one message per line from the child's stdout. Owns the child, which
/// is killed when the connection drops it.
pub(crate) struct ChildReceiver {
    stdout: BufReader<ChildStdout>,
    line: String,
    child: Child,
    stderr: StderrTail,
}

/// Why the remote transport failed.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("the remote command's pipe failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("the remote command ended{0}")]
    Ended(String),
}

/// Starts the command: its stdin/stdout carry the protocol.
pub(crate) fn spawn(
    remote: &Remote,
) -> Result<(ChildSender, ChildReceiver, StderrTail), ClientError> {
    let argv = remote.argv()?;
    let (program, args) = argv.split_first().ok_or_else(|| ClientError::Remote {
        command: remote.command.clone(),
        reason: "the command is empty".into(),
    })?;
    // The user's own transport command (ssh, kubectl exec…), started as the user.
    #[allow(clippy::disallowed_methods)]
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // The far end is the daemon's side: a stand-in that runs it here must not go
        // remote again.
        .env_remove(REMOTE_ENV)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| ClientError::Remote {
            command: remote.display(),
            reason: format!("cannot start `{program}`: {e}"),
        })?;
    let broken = |what: &str| ClientError::Remote {
        command: remote.display(),
        reason: format!("no {what} pipe"),
    };
    let stdin = child.stdin.take().ok_or_else(|| broken("stdin"))?;
    let stdout = child.stdout.take().ok_or_else(|| broken("stdout"))?;
    let stderr = child.stderr.take().ok_or_else(|| broken("stderr"))?;
    let tail = StderrTail::default();
    let kept = tail.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!(target: "amber_client::remote", "{line}");
            if !line.trim().is_empty() {
                kept.push(line);
            }
        }
    });
    Ok((
        ChildSender { stdin },
        ChildReceiver {
            stdout: BufReader::new(stdout),
            line: String::new(),
            child,
            stderr: tail.clone(),
        },
        tail,
    ))
}

impl TransportSenderT for ChildSender {
    type Error = RemoteError;

    async fn send(&mut self, mut msg: String) -> Result<(), Self::Error> {
        msg.push('\n');
        self.stdin.write_all(msg.as_bytes()).await?;
        self.stdin.flush().await?;
        Ok(())
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.stdin.shutdown().await?;
        Ok(())
    }
}

impl TransportReceiverT for ChildReceiver {
    type Error = RemoteError;

    async fn receive(&mut self) -> Result<ReceivedMessage, Self::Error> {
        loop {
            self.line.clear();
            if self.stdout.read_line(&mut self.line).await? == 0 {
                return Err(RemoteError::Ended(self.ending().await));
            }
            let text = self.line.trim();
            if !text.is_empty() {
                return Ok(ReceivedMessage::Text(text.to_owned()));
            }
        }
    }
}

impl ChildReceiver {
    /// How the child ended, for the error: its exit status (if it has one yet) and the
    /// last lines of its stderr.
    async fn ending(&mut self) -> String {
        let status = tokio::time::timeout(std::time::Duration::from_millis(200), self.child.wait())
            .await
            .ok()
            .and_then(Result::ok);
        // Let the stderr reader take in the child's last words.
        tokio::task::yield_now().await;
        let mut text = match status {
            Some(status) => format!(" ({status})"),
            None => String::new(),
        };
        let stderr = self.stderr.text();
        if !stderr.is_empty() {
            text.push_str(": ");
            text.push_str(&stderr);
        }
        text
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    fn remote(host: &str, command: &str) -> Remote {
        Remote {
            host: host.into(),
            command: command.into(),
        }
    }

    #[test]
    fn the_default_command_puts_the_host_in_one_word() {
        let argv = remote("build box", DEFAULT_COMMAND).argv().unwrap();
        assert_eq!(argv, ["ssh", "-T", "build box", "amber-cli", "rpc"]);
    }

    #[test]
    fn a_custom_command_is_split_like_a_shell_would() {
        let argv = remote(
            "h1",
            r#"ssh -o 'ProxyJump bastion' {host} "AMBER_SOCKET=/run/a b.sock" amber-cli rpc"#,
        )
        .argv()
        .unwrap();
        assert_eq!(
            argv,
            [
                "ssh",
                "-o",
                "ProxyJump bastion",
                "h1",
                "AMBER_SOCKET=/run/a b.sock",
                "amber-cli",
                "rpc"
            ]
        );
        // `{host}` inside a word is replaced there.
        let argv = remote("h2", "mosh --ssh=ssh user@{host} -- amber-cli rpc")
            .argv()
            .unwrap();
        assert_eq!(argv[2], "user@h2");
    }

    #[test]
    fn hosts_that_would_be_options_and_broken_commands_are_refused() {
        for (host, command, why) in [
            ("-oProxyCommand=x", DEFAULT_COMMAND, "starts with `-`"),
            ("", DEFAULT_COMMAND, "empty"),
            ("h", "ssh 'unbalanced", "unbalanced"),
            ("h", "   ", "empty"),
        ] {
            let err = remote(host, command).argv().unwrap_err().to_string();
            assert!(err.contains(why), "{host} {command}: {err}");
        }
    }

    #[test]
    fn stderr_keeps_only_the_last_lines() {
        let tail = StderrTail::default();
        for i in 0..20 {
            tail.push(format!("line {i}"));
        }
        let text = tail.text();
        assert!(
            text.starts_with("line 12") && text.ends_with("line 19"),
            "{text}"
        );
    }
}
