//! What amberd does to itself at start so that nothing it runs can reach into it: no core
//! dump and no same-uid ptrace or `/proc/PID/{mem,environ}` of the daemon (it holds the
//! provider keys), and one daemon per data directory.
//!
//! - [`no_core_dumps`]: `PR_SET_DUMPABLE` 0 (the kernel writes no core of the process and
//!   hands its `/proc` files to root) and a soft `RLIMIT_CORE` of 0 as the second wall. Both
//!   leave the hard limit alone: a program amberd starts is dumpable again after `execve`
//!   and may raise its own soft limit (`ulimit -c`) — only its own: the sandbox refuses
//!   `prlimit` on any other process.
//! - [`InstanceLock`]: an exclusive `flock` on `<data dir>/amberd.lock` holding the pid
//!   of the daemon that serves it, taken before the socket is bound, and then the socket it
//!   serves ([`InstanceLock::announce`]: clients whose environment would put the socket
//!   elsewhere find it there). A second daemon on the same data dir (another socket,
//!   another terminal) refuses to start and names the first: two writers of one store
//!   would corrupt it, and a second daemon's `mcp/add` is a way around the first one's
//!   policy.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The lock file's name in the data dir.
pub const LOCK_FILE: &str = amber_proto::paths::INSTANCE_LOCK_FILE;

pub use amber_exec::harden::no_core_dumps;

/// Why the data dir cannot be served by this daemon.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "another amberd (pid {pid}) is serving the data dir {dir}{}: stop it first \
         (`amber-cli daemon stop`, or kill {pid}), or give this one another --data-dir",
        on_socket(.socket)
    )]
    Held {
        pid: String,
        dir: PathBuf,
        socket: Option<PathBuf>,
    },
    #[error("cannot lock {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// How long a second daemon waits for a stopping one to let go of the data dir.
const HANDOVER: std::time::Duration = std::time::Duration::from_secs(2);

fn on_socket(socket: &Option<PathBuf>) -> String {
    socket
        .as_ref()
        .map(|s| format!(" on {}", s.display()))
        .unwrap_or_default()
}

/// The refusal, naming the pid (and the socket) the holder wrote.
fn held(file: &mut File, data_dir: &Path) -> LockError {
    let mut text = String::new();
    let _ = file.read_to_string(&mut text);
    let pid = text.lines().next().unwrap_or("").trim();
    LockError::Held {
        pid: if pid.is_empty() { "unknown" } else { pid }.to_owned(),
        dir: data_dir.to_path_buf(),
        socket: amber_proto::paths::socket_in_instance_lock(&text),
    }
}

/// Held for the daemon's life: the kernel drops the `flock` when the process ends, however
/// it ends, so a crashed daemon never blocks the next.
#[derive(Debug)]
pub struct InstanceLock {
    file: File,
}

impl InstanceLock {
    /// Takes `<data_dir>/amberd.lock` or says who holds it.
    pub fn acquire(data_dir: &Path) -> Result<Self, LockError> {
        let path = data_dir.join(LOCK_FILE);
        let io = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .map_err(io)?;
        // A daemon that is stopping holds the lock until its last session is written: give
        // it a moment, so a restart does not race its predecessor's exit.
        let deadline = std::time::Instant::now() + HANDOVER;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(25));
                }
                Err(std::fs::TryLockError::WouldBlock) => return Err(held(&mut file, data_dir)),
                Err(std::fs::TryLockError::Error(err)) => return Err(io(err)),
            }
        }
        file.set_len(0).map_err(io)?;
        file.rewind().map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        Ok(Self { file })
    }

    /// Names the socket this daemon serves, after the pid (PROTOCOL.md "Transport").
    pub fn announce(&mut self, socket: &Path) -> std::io::Result<()> {
        let text = amber_proto::paths::instance_lock_text(std::process::id(), socket);
        self.file.set_len(0)?;
        self.file.rewind()?;
        self.file.write_all(text.as_bytes())?;
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn the_daemon_process_is_not_dumpable_and_dumps_no_core() {
        // In a child: the test runner must stay dumpable. The child only makes system calls.
        // SAFETY: fork in a test; the child calls async-signal-safe functions and _exits.
        let child = unsafe { libc::fork() };
        if child == 0 {
            let ok = no_core_dumps().is_ok()
                // SAFETY: PR_GET_DUMPABLE takes no pointer.
                && unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) } == 0;
            let mut limit = libc::rlimit {
                rlim_cur: 1,
                rlim_max: 1,
            };
            // SAFETY: a valid rlimit out pointer.
            let core_off = unsafe { libc::getrlimit(libc::RLIMIT_CORE, &mut limit) } == 0
                && limit.rlim_cur == 0;
            // SAFETY: ends the forked child at once.
            unsafe { libc::_exit(if ok && core_off { 0 } else { 1 }) }
        }
        let mut status = 0;
        // SAFETY: waits for our own child.
        assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    }

    #[test]
    fn a_second_lock_on_the_data_dir_is_refused_and_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let first = InstanceLock::acquire(dir.path()).unwrap();
        let err = InstanceLock::acquire(dir.path()).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(&format!("pid {}", std::process::id())),
            "{text}"
        );
        assert!(text.contains(&dir.path().display().to_string()), "{text}");
        let mut first = first;
        first.announce(Path::new("/run/x/amberd.sock")).unwrap();
        let written = std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap();
        assert_eq!(
            amber_proto::paths::socket_in_instance_lock(&written),
            Some(PathBuf::from("/run/x/amberd.sock"))
        );
        assert!(written.starts_with(&format!("{}\n", std::process::id())));
        drop(first);
        let _again = InstanceLock::acquire(dir.path()).unwrap();
    }

    #[test]
    fn a_symlinked_lock_file_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "keep").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join(LOCK_FILE)).unwrap();
        assert!(matches!(
            InstanceLock::acquire(dir.path()),
            Err(LockError::Io { .. })
        ));
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    }
}
