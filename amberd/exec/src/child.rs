//! [`ChildSpec`]: the one way amber makes a child process. Program, arguments, working
//! directory, the exact environment (always cleared first: a child sees only what it is
//! given, so provider keys stay with amberd), stdin, process group, the lifeline, the
//! private temp directory and the sandbox are all decided here, so "how is this child
//! contained?" has one answer and clippy's `disallowed-methods` keeps every other crate
//! from building a `Command` by hand.
//!
//! A child is sandboxed unless the caller hands over an [`Unsandboxed`]: a value, never a
//! `bool`, minted only where a person decided it — the approval gate (a person's answer,
//! or a `sandbox = false` rule they stored) or the user's own configuration (`[sandbox]
//! mode = "off"`, an extension or hook table without `sandbox`). A test of the daemon checks
//! that nothing else mints one.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::containment::SpawnSandbox;
pub use crate::containment::Unsandboxed;
use crate::egress::ChildEnd;
use crate::lifeline;
use crate::sandbox_exec;

/// What the child reads on its stdin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildInput {
    /// Nothing: /dev/null. The child runs under the lifeline (its group dies with amberd).
    Null,
    /// This file, opened before the sandbox applies (a hook's input), under the lifeline.
    File(PathBuf),
    /// A pipe from amberd (a JSON-RPC peer: MCP server, external plugin). The lifeline needs
    /// stdin, so such a child is amberd's direct child and ends with its pipes instead.
    Piped,
}

/// Everything about one child before it starts. Build it, then turn it into a
/// [`std::process::Command`] or a [`tokio::process::Command`] (stdout, stderr and waiting
/// stay the caller's).
#[derive(Debug)]
#[must_use]
pub struct ChildSpec<'a> {
    program: OsString,
    args: Vec<OsString>,
    sandbox: SpawnSandbox<'a>,
    stdin: ChildInput,
    cwd: Option<PathBuf>,
    env: Vec<(OsString, OsString)>,
    egress: Option<ChildEnd>,
}

impl<'a> ChildSpec<'a> {
    /// `program` contained as `sandbox` says, stdin from /dev/null, an empty environment, in
    /// a process group of its own.
    pub fn new(program: impl AsRef<OsStr>, sandbox: SpawnSandbox<'a>) -> Self {
        Self {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            sandbox,
            stdin: ChildInput::Null,
            cwd: None,
            env: Vec::new(),
            egress: None,
        }
    }

    /// The helper's end of the egress link of a sandbox whose network is an allowlist
    /// (`SandboxSpec::egress`): the child gets it as `egress::CHANNEL_FD`.
    pub fn egress(mut self, end: ChildEnd) -> Self {
        self.egress = Some(end);
        self
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    pub fn cwd(mut self, dir: impl AsRef<Path>) -> Self {
        self.cwd = Some(dir.as_ref().to_owned());
        self
    }

    /// One variable; a later one of the same name wins.
    pub fn env(mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env
            .push((name.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    pub fn envs<I, K, V>(mut self, vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.env.extend(
            vars.into_iter()
                .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned())),
        );
        self
    }

    pub fn stdin(mut self, stdin: ChildInput) -> Self {
        self.stdin = stdin;
        self
    }

    /// The command, ready to spawn. A sandboxed child without amberd's helper to apply the
    /// sandbox (not the amberd binary) is not made: fail closed.
    #[allow(clippy::disallowed_methods)] // the one place a command is built
    pub fn std_command(self) -> io::Result<std::process::Command> {
        let spec = match self.sandbox {
            SpawnSandbox::Sandboxed(spec) => Some(spec),
            SpawnSandbox::Unsandboxed(_) => None,
        };
        let program = self.program.to_string_lossy();
        let mut cmd = match (&self.stdin, spec) {
            (ChildInput::Null, Some(spec)) => lifeline::sandboxed_command(&program, spec)?,
            (ChildInput::Null, None) => lifeline::command(&program)?,
            (ChildInput::File(file), spec) => lifeline::command_with_stdin(&program, spec, file)?,
            (ChildInput::Piped, Some(spec)) => {
                let mut cmd = sandbox_exec::command(&program, spec).map_err(io::Error::other)?;
                cmd.stdin(Stdio::piped());
                cmd
            }
            (ChildInput::Piped, None) => {
                let mut cmd = std::process::Command::new(&self.program);
                cmd.stdin(Stdio::piped());
                cmd
            }
        };
        cmd.args(&self.args).env_clear().envs(self.env);
        if let Some(spec) = spec {
            // The one temp directory a sandboxed child may write outside its workspace.
            cmd.env("TMPDIR", &spec.tmp_dir);
        }
        match (spec.and_then(|spec| spec.egress), self.egress) {
            (Some(proxy), Some(end)) => {
                cmd.envs(crate::egress::proxy_vars(proxy.port));
                pass_channel(&mut cmd, end);
            }
            (Some(_), None) => {
                return Err(io::Error::other(
                    "the sandbox's network is an allowlist, and no egress proxy serves this command",
                ));
            }
            (None, _) => {}
        }
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
        // Always a group of its own, led by the child: killing the group (a timeout, the
        // lifeline's watcher) reaches everything it starts and never its parent's group, and
        // a terminal's Ctrl-C does not reach it.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        Ok(cmd)
    }

    /// [`Self::std_command`] for tokio, killed when its `Child` is dropped.
    pub fn tokio_command(self) -> io::Result<tokio::process::Command> {
        let mut cmd = tokio::process::Command::from(self.std_command()?);
        cmd.kill_on_drop(true);
        Ok(cmd)
    }
}

/// Gives the child `end` as [`crate::egress::CHANNEL_FD`], open across its `exec` (every
/// other copy stays close-on-exec, so no other child inherits it).
fn pass_channel(cmd: &mut std::process::Command, end: ChildEnd) {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let target = crate::egress::CHANNEL_FD;
    let end = end.0;
    // SAFETY: the closure runs in the forked child before `exec` and calls only
    // async-signal-safe functions (dup2, fcntl); `end` stays open in the parent until the
    // command is dropped, so its number is valid in the child.
    unsafe {
        cmd.pre_exec(move || {
            let fd = end.as_raw_fd();
            if fd == target {
                // dup2 onto itself keeps close-on-exec: clear it instead.
                if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                    return Err(io::Error::last_os_error());
                }
            } else if libc::dup2(fd, target) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::{SandboxMode, SandboxSpec};

    fn spec() -> SandboxSpec {
        SandboxSpec {
            mode: SandboxMode::WorkspaceWrite,
            network: false,
            egress: None,
            workspace: "/ws".into(),
            tmp_dir: "/tmp/amber-t".into(),
            writable_roots: Vec::new(),
            hidden: Vec::new(),
            masked: Vec::new(),
            allow_unix_sockets: Vec::new(),
            nested_checkouts: Vec::new(),
            daemon_pid: None,
            guarded_pids: Vec::new(),
            simulate_landlock_abi: None,
            in_place: false,
        }
    }

    fn env_of(cmd: &std::process::Command) -> Vec<(String, Option<String>)> {
        cmd.get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect()
    }

    #[test]
    fn a_sandboxed_child_is_not_made_without_amberds_helper() {
        // The test runner is not amberd: no lifeline, no helper to apply the sandbox.
        let spec = spec();
        for stdin in [
            ChildInput::Null,
            ChildInput::Piped,
            ChildInput::File("/dev/null".into()),
        ] {
            let made = ChildSpec::new("true", SpawnSandbox::Sandboxed(&spec))
                .stdin(stdin.clone())
                .std_command();
            assert!(made.is_err(), "{stdin:?} made a command with no sandbox");
        }
    }

    #[test]
    fn a_child_sees_only_the_environment_it_is_given() {
        // SAFETY: the variable is this test's own; no other test reads it.
        unsafe { std::env::set_var("AMBER_CHILD_SPEC_LEAK", "secret") };
        let out = ChildSpec::new(
            "/bin/sh",
            SpawnSandbox::Unsandboxed(Unsandboxed::configured_by_user()),
        )
        .args(["-c", "env"])
        .env("ONLY", "this")
        .std_command()
        .unwrap()
        .output()
        .unwrap();
        let env = String::from_utf8_lossy(&out.stdout);
        assert!(env.contains("ONLY=this"), "{env}");
        assert!(!env.contains("AMBER_CHILD_SPEC_LEAK"), "{env}");
    }

    #[test]
    fn every_child_leads_a_process_group_of_its_own() {
        // Killing a tool's group (its timeout, the lifeline's watcher) must never reach the
        // group of whoever started it.
        let out = ChildSpec::new(
            "/bin/sh",
            SpawnSandbox::Unsandboxed(Unsandboxed::configured_by_user()),
        )
        .args(["-c", "cat /proc/self/stat"])
        .std_command()
        .unwrap()
        .output()
        .unwrap();
        let stat = String::from_utf8_lossy(&out.stdout).into_owned();
        // pid (comm) state ppid pgrp …: `cat` is the group's leader's child or the leader.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        let pgrp: i32 = fields[2].parse().unwrap();
        // SAFETY: getpgrp has no preconditions.
        let ours = unsafe { libc::getpgrp() };
        assert_ne!(pgrp, ours, "the child shares this process's group: {stat}");
    }

    #[test]
    fn the_built_command_carries_args_cwd_and_env() {
        let cmd = ChildSpec::new(
            "git",
            SpawnSandbox::Unsandboxed(Unsandboxed::configured_by_user()),
        )
        .arg("-C")
        .args(["/r", "status"])
        .cwd("/r")
        .envs([("A", "1")])
        .env("B", "2")
        .std_command()
        .unwrap();
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy()).collect();
        assert_eq!(args, ["-C", "/r", "status"]);
        assert_eq!(cmd.get_current_dir(), Some(Path::new("/r")));
        assert_eq!(
            env_of(&cmd),
            [
                ("A".to_owned(), Some("1".to_owned())),
                ("B".to_owned(), Some("2".to_owned()))
            ]
        );
    }

    #[test]
    fn only_an_approval_says_a_person_let_it_out() {
        assert!(Unsandboxed::approved_by_person().by_approval());
        assert!(!Unsandboxed::configured_by_user().by_approval());
    }
}
