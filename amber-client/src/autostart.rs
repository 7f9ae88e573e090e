//! Starting `amberd` in the background when nothing answers at the socket.
//!
//! **Two clients racing never start two daemons**: the start happens under an exclusive
//! `flock` on `<socket>.lock`, the socket is re-checked once the lock is held, and the lock
//! is kept until the new daemon answers (or the attempt failed).

use std::ffi::OsString;
use std::fs::{DirBuilder, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::ClientError;
use crate::transport::{check_socket_dir, socket_dir};

/// How long a freshly started daemon may take to answer.
pub const START_TIMEOUT: Duration = Duration::from_secs(5);

/// Name of the daemon's log file, next to the socket.
pub const LOG_FILE: &str = "amberd.log";

/// Makes sure a daemon answers at `socket`, starting one if needed.
pub(crate) async fn ensure_running(socket: &Path) -> Result<(), ClientError> {
    let owned = socket.to_owned();
    tokio::task::spawn_blocking(move || ensure_running_blocking(&owned))
        .await
        .map_err(|e| ClientError::Autostart {
            socket: socket.to_owned(),
            log: log_path(socket),
            reason: format!("autostart task failed: {e}"),
        })?
}

/// Where the autostarted daemon's stderr goes: only what it prints before its own rotating
/// file log under the state dir takes over (start-up errors), so it is truncated at each
/// autostart rather than left to grow on the runtime dir's tmpfs.
pub fn log_path(socket: &Path) -> PathBuf {
    socket_dir(socket).join(LOG_FILE)
}

/// `<socket>.lock`.
pub fn lock_path(socket: &Path) -> PathBuf {
    let mut name = OsString::from(socket.as_os_str());
    name.push(".lock");
    PathBuf::from(name)
}

fn answers(socket: &Path) -> bool {
    UnixStream::connect(socket).is_ok()
}

fn ensure_running_blocking(socket: &Path) -> Result<(), ClientError> {
    let log = log_path(socket);
    let fail = |reason: String| ClientError::Autostart {
        socket: socket.to_owned(),
        log: log.clone(),
        reason,
    };

    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(socket_dir(socket))
        .map_err(|e| {
            fail(format!(
                "cannot create {}: {e}",
                socket_dir(socket).display()
            ))
        })?;

    // It may have been there already: the lock and the log go in only if it is ours alone.
    check_socket_dir(socket)?;

    let lock_file = lock_path(socket);
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        .open(&lock_file)
        .map_err(|e| fail(format!("cannot open {}: {e}", lock_file.display())))?;
    lock.lock()
        .map_err(|e| fail(format!("cannot lock {}: {e}", lock_file.display())))?;

    // Someone else may have started it while we waited for the lock.
    if answers(socket) {
        return Ok(());
    }

    let mut child = spawn_daemon(socket, &log).map_err(fail)?;
    let result =
        wait_until_answering(socket, &mut child).map_err(|reason| fail(log_tail(reason, &log)));
    reap_in_background(child);
    drop(lock);
    result
}

/// `$AMBER_DAEMON_BIN`, else `amberd` next to the current executable, else `amberd` on PATH.
pub fn daemon_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("AMBER_DAEMON_BIN").filter(|v| !v.is_empty()) {
        return PathBuf::from(bin);
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_owned))
    {
        let beside = dir.join("amberd");
        if beside.is_file() {
            return beside;
        }
        // Test executables live in target/<profile>/deps, the binaries one level up.
        if dir.file_name().is_some_and(|n| n == "deps")
            && let Some(above) = dir.parent().map(|d| d.join("amberd"))
            && above.is_file()
        {
            return above;
        }
    }
    PathBuf::from("amberd")
}

/// Opens the start-up log for a new daemon, emptied of the previous start's lines.
fn open_startup_log(log: &Path) -> io::Result<std::fs::File> {
    OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(log)
}

fn spawn_daemon(socket: &Path, log: &Path) -> Result<Child, String> {
    let stderr =
        open_startup_log(log).map_err(|e| format!("cannot open {}: {e}", log.display()))?;
    let bin = daemon_binary();
    // A client starts amberd as the user, on the user's command; no model output reaches it.
    #[allow(clippy::disallowed_methods)]
    let mut cmd = Command::new(&bin);
    cmd.arg("--socket")
        .arg(socket)
        .arg("--autostarted")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr));
    // SAFETY: the closure runs in the forked child before exec and calls only setsid,
    // which is async-signal-safe; it touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().map_err(|e| spawn_failure(&bin, &e))
}

/// Why `bin` (an amberd) could not be started, with the way out when it is not there.
pub(crate) fn spawn_failure(bin: &Path, e: &io::Error) -> String {
    if e.kind() == io::ErrorKind::NotFound {
        format!(
            "`{}` not found (set $AMBER_DAEMON_BIN, or put amberd on PATH)",
            bin.display()
        )
    } else {
        format!("cannot run `{}`: {e}", bin.display())
    }
}

/// `reason`, followed by the last lines the daemon wrote to `log` before it failed (its
/// own error: a config it refused, a socket it could not bind), so nobody has to go and
/// read the log to learn why.
pub(crate) fn log_tail(reason: String, log: &Path) -> String {
    /// Enough for a few lines of error; the log is the daemon's stderr before its own
    /// log file took over, so it is short anyway.
    const TAIL_BYTES: u64 = 4096;
    const TAIL_LINES: usize = 5;
    let Ok(mut file) = std::fs::File::open(log) else {
        return reason;
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let mut text = Vec::new();
    let read = io::Seek::seek(
        &mut file,
        io::SeekFrom::Start(len.saturating_sub(TAIL_BYTES)),
    )
    .and_then(|_| io::Read::read_to_end(&mut io::Read::take(&mut file, TAIL_BYTES), &mut text));
    if read.is_err() {
        return reason;
    }
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        return reason;
    }
    let tail = &lines[lines.len().saturating_sub(TAIL_LINES)..];
    format!("{reason}; it said: {}", tail.join(" | "))
}

pub(crate) fn wait_until_answering(socket: &Path, child: &mut Child) -> Result<(), String> {
    let deadline = Instant::now() + START_TIMEOUT;
    let mut pause = Duration::from_millis(2);
    loop {
        if answers(socket) {
            return Ok(());
        }
        match child.try_wait() {
            Ok(Some(status)) => {
                if answers(socket) {
                    return Ok(());
                }
                return Err(format!("amberd exited ({status}) before answering"));
            }
            Ok(None) => {}
            Err(e) => return Err(format!("cannot watch amberd: {e}")),
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "amberd (pid {}) did not answer within {} s",
                child.id(),
                START_TIMEOUT.as_secs()
            ));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// The daemon outlives us normally; if it exits first, reap it so no zombie stays.
fn reap_in_background(mut child: Child) {
    let spawned = std::thread::Builder::new()
        .name("amberd-reaper".into())
        .spawn(move || {
            let _ = child.wait();
        });
    if let Err(e) = spawned {
        tracing::debug!("cannot start reaper thread: {e}");
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn each_autostart_starts_the_startup_log_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join(LOG_FILE);
        std::fs::write(&log, "error of an older start\n").unwrap();
        let mut file = open_startup_log(&log).unwrap();
        io::Write::write_all(&mut file, b"new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "new\n");
    }

    #[test]
    fn a_failed_start_quotes_the_end_of_what_the_daemon_said() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join(LOG_FILE);
        let cases: &[(&str, &str)] = &[
            ("", "amberd exited (exit status: 1) before answering"),
            (
                "amberd: invalid config file /c.toml: unknown field `modle`\n",
                "amberd exited (exit status: 1) before answering; it said: amberd: invalid config file /c.toml: unknown field `modle`",
            ),
            (
                "1\n2\n\n3\n4\n5\n6\n",
                "amberd exited (exit status: 1) before answering; it said: 2 | 3 | 4 | 5 | 6",
            ),
        ];
        for (written, expected) in cases {
            std::fs::write(&log, written).unwrap();
            let said = log_tail(
                "amberd exited (exit status: 1) before answering".into(),
                &log,
            );
            assert_eq!(&said, expected, "{written:?}");
        }
        // A long log: only its end is read.
        std::fs::write(&log, format!("{}\nthe error\n", "x".repeat(100_000))).unwrap();
        let said = log_tail("r".into(), &log);
        assert!(said.ends_with(" | the error"), "{said}");
        assert!(said.len() < 4200, "{} bytes", said.len());
        assert_eq!(log_tail("r".into(), &dir.path().join("missing")), "r");
    }

    #[test]
    fn lock_and_log_sit_next_to_the_socket() {
        let socket = Path::new("/run/user/1/amber/amberd.sock");
        assert_eq!(
            lock_path(socket),
            PathBuf::from("/run/user/1/amber/amberd.sock.lock")
        );
        assert_eq!(
            log_path(socket),
            PathBuf::from("/run/user/1/amber/amberd.log")
        );
        assert_eq!(log_path(Path::new("x.sock")), PathBuf::from("./amberd.log"));
    }
}
