//! No tool process outlives the daemon: each tool process group carries a watcher that
//! kills the group the moment the daemon is gone, however it died.
//!
//! Invariant: **while a tool shell's group exists, it holds a watcher process whose only
//! input is the read end of the daemon's lifeline pipe; the write end exists in the daemon
//! alone (close-on-exec, never inherited). When the daemon dies (SIGKILL, crash, exit) the
//! kernel closes the write end, the watcher reads EOF and SIGKILLs its whole group.**
//!
//! The shape: the daemon spawns itself (`/proc/self/exe`, so an upgraded binary on disk
//! does not matter) as `amberd __tool-exec PROGRAM ARGS…`, with the lifeline as stdin, in
//! the tool's new process group. That helper ([`run_if_requested`], decided in `main`
//! before anything else) double-forks the watcher, so the watcher is nobody's visible child
//! and stays in the group (it pins the group id: a pgid is not reused while a member
//! lives), then execs `PROGRAM` with stdin from /dev/null. The tool's exit status, output
//! pipe, group and signals are the program's own, as without the helper; its pid and `$$`
//! too, unless the daemon has a cgroup base (`cgroup`): then the helper starts the
//! program in the group's cgroup (`clone3`) and stays as a proxy that ends as it ends, so
//! `$$` is the program's and the group's leader is the helper. The
//! watcher ignores the terminating signals a `process kill` sends the group first, so it
//! goes only with the daemon's SIGKILL of the group, or with its own.
//!
//! Why not `PR_SET_PDEATHSIG`: it fires when the forking *thread* exits (tokio's blocking
//! threads come and go) and reaches only the direct child, never the group. Why not a fork
//! in `pre_exec`: the watcher would pin a copy of the daemon's whole memory for as long as a
//! background process runs. The helper is also where the OS sandbox will be applied.
//!
//! Without an installed lifeline (unit tests of this library, whose executable is the test
//! runner, or a failed install) tools spawn `PROGRAM` directly and only the reaper
//! (`reaper`) cleans up after a crash.

// The helper itself: `ChildSpec` builds on these commands, and the helper `exec`s the
// program after the sandbox applies.
#![allow(clippy::disallowed_methods)]

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::OnceLock;

use crate::sandbox::SandboxSpec;

/// The first argument that makes `amberd` the tool-exec helper.
pub const HELPER_ARG: &str = "__tool-exec";

/// First in the helper's arguments: the next argument is the daemon's cgroup base; the
/// helper moves itself into a cgroup of its own there (`cgroup`).
const CGROUP_ARG: &str = "--cgroup";
/// Before the program, in the helper's arguments: the next argument is a `SandboxSpec`.
const SANDBOX_ARG: &str = "--sandbox";
/// Before the program, after any sandbox: the next argument is a file the program gets as
/// its stdin instead of /dev/null (a hook's input; opened before the sandbox applies).
const STDIN_ARG: &str = "--stdin-file";
/// Exit status of the helper when it could not set up the sandbox (nothing ran).
pub const SANDBOX_FAILED: u8 = 125;
/// What the helper prints (before the reason) when the sandbox could not be set up.
pub const SANDBOX_FAILED_PREFIX: &str = "amberd: sandbox setup failed:";

/// Exit status of the helper when it could not run the program (as a shell's "not found").
const EXEC_FAILED: u8 = 127;
/// Exit status of the helper when it could not start the watcher (nothing ran).
const WATCH_FAILED: u8 = 126;

static INSTALLED: OnceLock<Lifeline> = OnceLock::new();

/// The daemon's end of the lifeline and the helper to spawn tools through.
#[derive(Debug)]
struct Lifeline {
    helper: PathBuf,
    read: OwnedFd,
    /// Never written; its closing at the daemon's death is the signal.
    _write: OwnedFd,
}

/// Makes this process (`amberd`) spawn tool processes through its helper mode. Call once, in
/// the daemon binary only: the helper is this very executable.
pub fn install() -> io::Result<()> {
    let helper = if std::path::Path::new("/proc/self/exe").exists() {
        PathBuf::from("/proc/self/exe")
    } else {
        std::env::current_exe()?
    };
    // std's pipe is close-on-exec on both ends: no child inherits the write end.
    let (read, write) = io::pipe()?;
    let lifeline = Lifeline {
        helper,
        read: read.into(),
        _write: write.into(),
    };
    INSTALLED
        .set(lifeline)
        .map_err(|_| io::Error::other("the tool lifeline is already installed"))
}

/// The helper executable (amberd itself) once the lifeline is installed.
pub(crate) fn helper_path() -> Option<&'static std::path::Path> {
    INSTALLED.get().map(|l| l.helper.as_path())
}

/// A command that runs `program` in a tool process group guarded by the lifeline, or
/// `program` itself when no lifeline is installed. Stdin is /dev/null for the program
/// either way; the caller sets the rest (args, env, cwd, stdout, process group).
pub(crate) fn command(program: &str) -> io::Result<Command> {
    helper_command(program, None)
}

/// [`command`] inside the OS sandbox `spec`: the helper applies it after starting the
/// watcher and before it `exec`s `program`. Without an installed lifeline there is no
/// helper to apply it, so nothing is spawned (fail closed).
pub(crate) fn sandboxed_command(program: &str, spec: &SandboxSpec) -> io::Result<Command> {
    helper_command(program, Some(spec))
}

/// [`command`] (or [`sandboxed_command`] with `spec`) whose program reads `stdin_file` as
/// its stdin rather than /dev/null: how hooks get their input (`hooks::process`). The
/// helper opens the file before the sandbox applies, so it may lie outside what the
/// sandbox lets the program read.
pub(crate) fn command_with_stdin(
    program: &str,
    spec: Option<&SandboxSpec>,
    stdin_file: &std::path::Path,
) -> io::Result<Command> {
    if INSTALLED.get().is_none() && spec.is_none() {
        let mut cmd = Command::new(program);
        cmd.stdin(Stdio::from(std::fs::File::open(stdin_file)?));
        return Ok(cmd);
    }
    let mut cmd = helper_prefix(spec)?;
    cmd.arg(STDIN_ARG).arg(stdin_file).arg(program);
    Ok(cmd)
}

fn helper_command(program: &str, spec: Option<&SandboxSpec>) -> io::Result<Command> {
    if INSTALLED.get().is_none() && spec.is_none() {
        let mut cmd = Command::new(program);
        cmd.stdin(Stdio::null());
        return Ok(cmd);
    }
    let mut cmd = helper_prefix(spec)?;
    cmd.arg(program);
    Ok(cmd)
}

/// `amberd __tool-exec [--sandbox SPEC]`, with the lifeline as stdin; the caller adds the
/// rest. Without an installed lifeline a sandboxed command cannot be made (fail closed).
fn helper_prefix(spec: Option<&SandboxSpec>) -> io::Result<Command> {
    let Some(lifeline) = INSTALLED.get() else {
        return Err(io::Error::other(
            "cannot sandbox the command: amberd's tool-exec helper is not installed",
        ));
    };
    let mut cmd = Command::new(&lifeline.helper);
    cmd.arg0("amberd").arg(HELPER_ARG);
    if let Some(base) = crate::cgroup::base() {
        cmd.arg(CGROUP_ARG).arg(base);
    }
    if let Some(spec) = spec {
        cmd.arg(SANDBOX_ARG).arg(spec.to_arg());
    }
    cmd.stdin(Stdio::from(lifeline.read.try_clone()?));
    Ok(cmd)
}

/// In `main`, before anything else: when the arguments ask for the helper, runs it and
/// returns its exit code (it only returns on failure; on success it has become the
/// program). `None`: this is not the helper, carry on as the daemon.
pub fn run_if_requested() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(std::ffi::OsStr::new(HELPER_ARG)) {
        return None;
    }
    let rest: Vec<OsString> = args.collect();
    Some(run_helper(rest))
}

fn run_helper(mut args: Vec<OsString>) -> ExitCode {
    let cgroup_base = if args.first().is_some_and(|a| a == CGROUP_ARG) {
        let Some(base) = args.get(1).map(PathBuf::from) else {
            eprintln!("amberd {HELPER_ARG}: no cgroup given");
            return ExitCode::from(WATCH_FAILED);
        };
        args.drain(..2);
        Some(base)
    } else {
        None
    };
    let spec = if args.first().is_some_and(|a| a == SANDBOX_ARG) {
        let Some(arg) = args.get(1).and_then(|a| a.to_str()) else {
            eprintln!("{SANDBOX_FAILED_PREFIX} no sandbox spec given");
            return ExitCode::from(SANDBOX_FAILED);
        };
        match SandboxSpec::from_arg(arg) {
            Ok(spec) => {
                args.drain(..2);
                Some(spec)
            }
            Err(err) => {
                eprintln!("{SANDBOX_FAILED_PREFIX} {err}");
                return ExitCode::from(SANDBOX_FAILED);
            }
        }
    } else {
        None
    };
    // Opened now, before the sandbox: the file is the daemon's, and may be hidden from the
    // program.
    let stdin = if args.first().is_some_and(|a| a == STDIN_ARG) {
        let Some(path) = args.get(1).cloned() else {
            eprintln!("amberd {HELPER_ARG}: no stdin file given");
            return ExitCode::from(EXEC_FAILED);
        };
        args.drain(..2);
        match std::fs::File::open(&path) {
            Ok(file) => Stdio::from(file),
            Err(err) => {
                eprintln!(
                    "amberd {HELPER_ARG}: cannot open {}: {err}",
                    path.to_string_lossy()
                );
                return ExitCode::from(EXEC_FAILED);
            }
        }
    } else {
        Stdio::null()
    };
    let Some((program, program_args)) = args.split_first() else {
        eprintln!("amberd {HELPER_ARG}: no program given");
        return ExitCode::from(EXEC_FAILED);
    };
    if !stdin_is_fifo() {
        // An interactive `amberd __tool-exec` would watch a terminal and kill its job.
        eprintln!("amberd {HELPER_ARG}: internal to amberd (stdin must be its lifeline)");
        return ExitCode::from(WATCH_FAILED);
    }
    // The group's cgroup, which nothing inside can leave. A tool that could not be put there
    // does not run.
    let group = match cgroup_base
        .as_deref()
        .map(crate::cgroup::make_group)
        .transpose()
    {
        Ok(group) => group,
        Err(err) => {
            eprintln!("amberd: cannot make the tool's cgroup: {err}");
            return ExitCode::from(WATCH_FAILED);
        }
    };
    if let Err(err) = start_watcher(group.as_ref().map(|g| g.dir.as_path())) {
        eprintln!("amberd: cannot start the tool process watcher: {err}");
        return ExitCode::from(WATCH_FAILED);
    }
    // The program starts inside the cgroup, in a process of its own; this one mirrors how
    // it ends.
    if let Some(group) = &group {
        match crate::cgroup::fork_into(group) {
            Ok(crate::cgroup::Forked::Parent(child)) => return proxy(child),
            Ok(crate::cgroup::Forked::Child) => {}
            Err(err) => {
                let moved = crate::cgroup::migrate(group);
                if let Err(moved) = moved {
                    eprintln!("amberd: cannot put the tool in its cgroup: {err}; {moved}");
                    return ExitCode::from(WATCH_FAILED);
                }
            }
        }
    }
    // After the watcher (it stays outside: it only reads the lifeline and kills the group),
    // before the program: the sandbox holds for the program and all it starts.
    if let Some(spec) = &spec
        && let Err(err) = crate::sandbox::enforce(spec)
    {
        eprintln!("{SANDBOX_FAILED_PREFIX} {err}");
        return ExitCode::from(SANDBOX_FAILED);
    }
    let err = Command::new(program).args(program_args).stdin(stdin).exec();
    eprintln!("amberd: cannot run {}: {err}", program.to_string_lossy());
    ExitCode::from(EXEC_FAILED)
}

/// The helper as its program's proxy: waits for `child` and ends the way it ended (the same
/// exit code, or the same signal), so amberd sees the program's status. Signals meant for the
/// tool reach the program through its process group; the proxy ignores the terminating ones
/// and goes with the group's SIGKILL or the program's end.
fn proxy(child: libc::pid_t) -> ExitCode {
    for signal in [
        libc::SIGTERM,
        libc::SIGINT,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGPIPE,
    ] {
        // SAFETY: setting a standard signal to SIG_IGN installs no handler code.
        unsafe {
            libc::signal(signal, libc::SIG_IGN);
        }
    }
    name_self(c"amber-tool");
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child; `status` is a valid out pointer.
        let waited = unsafe { libc::waitpid(child, &mut status, 0) };
        if waited == child {
            break;
        }
        if waited == -1 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return ExitCode::from(EXEC_FAILED);
    }
    if libc::WIFEXITED(status) {
        return ExitCode::from(u8::try_from(libc::WEXITSTATUS(status)).unwrap_or(u8::MAX));
    }
    let signal = libc::WTERMSIG(status);
    // SAFETY: restores the default action of the signal the program died of and sends it to
    // this process, which then dies the same way (no core: the core limit is 0).
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::kill(libc::getpid(), signal);
    }
    ExitCode::from(u8::try_from(128 + signal).unwrap_or(u8::MAX))
}

fn stdin_is_fifo() -> bool {
    use std::os::unix::fs::FileTypeExt;
    let stdin = io::stdin();
    let Ok(fd) = std::os::fd::AsFd::as_fd(&stdin).try_clone_to_owned() else {
        return false;
    };
    std::fs::File::from(fd)
        .metadata()
        .is_ok_and(|m| m.file_type().is_fifo())
}

/// Double-forks the watcher (it becomes a child of init, not of the program) and waits for
/// the intermediate child, so it leaves no zombie.
fn start_watcher(cgroup: Option<&std::path::Path>) -> io::Result<()> {
    // SAFETY: the helper is single-threaded (it runs before any thread is started), so the
    // child may do anything the parent could; fork has no other precondition.
    let middle = unsafe { libc::fork() };
    match middle {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            // SAFETY: as above; the middle child only forks again and exits.
            let watcher = unsafe { libc::fork() };
            if watcher == 0 {
                watch(cgroup);
            }
            let code = if watcher == -1 { 1 } else { 0 };
            // SAFETY: _exit ends this child without running the parent's atexit handlers
            // or flushing its copies of the parent's buffers.
            unsafe { libc::_exit(code) }
        }
        pid => {
            let mut status = 0;
            // SAFETY: waits for our own child `pid`; `status` is a valid out pointer.
            let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
            if waited != pid {
                return Err(io::Error::last_os_error());
            }
            if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
                Ok(())
            } else {
                Err(io::Error::other("could not fork the watcher"))
            }
        }
    }
}

/// The watcher: waits for EOF on stdin (the lifeline), then SIGKILLs its cgroup (what left
/// the group too) and its process group. Any failure to keep watching kills them as well:
/// a tool that cannot be stopped with the daemon does not run on unwatched.
fn watch(cgroup: Option<&std::path::Path>) -> ! {
    for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
        // SAFETY: setting a standard signal to SIG_IGN installs no handler code.
        unsafe {
            libc::signal(signal, libc::SIG_IGN);
        }
    }
    // Not hold the tool's output pipe open: it must reach EOF with the tool.
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        for fd in [libc::STDOUT_FILENO, libc::STDERR_FILENO] {
            // SAFETY: dup2 onto a standard descriptor of this process; `null` is open.
            unsafe {
                libc::dup2(null.as_raw_fd(), fd);
            }
        }
    }
    name_self(c"amber-watch");
    let mut buf = [0u8; 64];
    loop {
        let mut poll = libc::pollfd {
            fd: libc::STDIN_FILENO,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; no timeout.
        let ready = unsafe { libc::poll(&mut poll, 1, -1) };
        if ready < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        if poll.revents & libc::POLLIN != 0 {
            // SAFETY: reads into a local buffer of the given length.
            let n = unsafe { libc::read(libc::STDIN_FILENO, buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 || (n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted) {
                continue;
            }
            break;
        }
        if poll.revents != 0 {
            // POLLHUP, POLLERR or POLLNVAL without data: the daemon is gone.
            break;
        }
    }
    if let Some(dir) = cgroup {
        // This process is inside too: the kill may end it here, the group's kill below
        // covers a cgroup that could not be written.
        let _ = crate::cgroup::kill_dir(dir);
    }
    // SAFETY: kill(0, …) signals this process's own group (the tool's), itself included;
    // _exit is only reached if the signal could not be sent.
    unsafe {
        libc::kill(0, libc::SIGKILL);
        libc::_exit(0)
    }
}

/// Names this process in `ps` / `/proc/PID/comm`.
fn name_self(name: &std::ffi::CStr) {
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, name.as_ptr());
    }
}
