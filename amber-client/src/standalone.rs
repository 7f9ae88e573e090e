//! A private daemon for one client's lifetime (`amber-cli run --standalone`): its own
//! socket, data directory and log in a fresh private directory, started with the client's
//! own environment (so the provider settings of this shell or CI job are the ones used),
//! stopped and removed when the client is done. Parallel CI jobs on one runner then never
//! share a daemon: one job's `daemon stop` or restart cannot end another job's turn.
//!
//! **The daemon never outlives its client**: it is stopped on drop, and the kernel sends it
//! SIGTERM if the client dies first (`PR_SET_PDEATHSIG`, set for the thread that starts it,
//! which must therefore be one that lives as long as the client: its main thread).

use std::fs::{DirBuilder, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::ClientError;
use crate::autostart::{LOG_FILE, daemon_binary, log_tail, spawn_failure, wait_until_answering};
use crate::transport::{check_socket_dir, default_socket, socket_dir};

/// How long a stopping daemon may take before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// A running private daemon; dropping it stops the daemon and removes its directory.
#[derive(Debug)]
pub struct PrivateDaemon {
    dir: PathBuf,
    socket: PathBuf,
    child: Option<Child>,
}

impl PrivateDaemon {
    /// Starts a daemon in a new private directory beside the default socket (under
    /// `$XDG_RUNTIME_DIR/amber` or `/tmp/amber-$UID`) and waits until it answers.
    pub fn start() -> Result<PrivateDaemon, ClientError> {
        let base = socket_dir(&default_socket(None));
        let unique = format!(
            "standalone-{}-{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        );
        let dir = base.join(unique);
        let socket = dir.join("amberd.sock");
        let log = dir.join(LOG_FILE);
        let fail = |reason: String| ClientError::Autostart {
            socket: socket.clone(),
            log: log.clone(),
            reason,
        };
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&base)
            .map_err(|e| fail(format!("cannot create {}: {e}", base.display())))?;
        // The base holds the user's sockets: it must be theirs alone, as for autostart.
        check_socket_dir(&base.join("amberd.sock"))?;
        // Not recursive: a directory already there is not ours.
        DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| fail(format!("cannot create {}: {e}", dir.display())))?;
        let mut daemon = PrivateDaemon {
            dir,
            socket: socket.clone(),
            child: None,
        };
        let mut child = daemon.spawn(&log).map_err(fail)?;
        let answered = wait_until_answering(&daemon.socket, &mut child);
        daemon.child = Some(child);
        if let Err(reason) = answered {
            // Read before the directory (and the log with it) goes.
            let reason = log_tail(reason, &log);
            return Err(fail(reason));
        }
        Ok(daemon)
    }

    /// Where it listens.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Its private directory (socket, `data/`, logs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn spawn(&self, log: &Path) -> Result<Child, String> {
        let stderr = OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(0o600)
            .open(log)
            .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
        let bin = daemon_binary();
        // A client starts amberd as the user, on the user's command; no model output reaches it.
        #[allow(clippy::disallowed_methods)]
        let mut cmd = Command::new(&bin);
        cmd.arg("--socket")
            .arg(&self.socket)
            .arg("--data-dir")
            .arg(self.dir.join("data"))
            .arg("--log-file")
            .arg(self.dir.join("amberd-run.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(stderr));
        let parent = std::process::id();
        // SAFETY: the closure runs in the forked child before exec and calls only setsid,
        // prctl and getppid, which are async-signal-safe; it touches no memory of the parent.
        unsafe {
            cmd.pre_exec(move || {
                // Its own session: a Ctrl-C meant for the client (which cancels the turn)
                // does not reach the daemon too.
                if libc::setsid() == -1 {
                    return Err(io::Error::last_os_error());
                }
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) == -1 {
                    return Err(io::Error::last_os_error());
                }
                // The client died before the request took effect: nobody will stop us.
                if libc::getppid() != parent as libc::pid_t {
                    return Err(io::Error::other("the client is gone"));
                }
                Ok(())
            });
        }
        cmd.spawn().map_err(|e| spawn_failure(&bin, &e))
    }

    /// SIGTERM (the daemon ends its turns and tool processes and exits), SIGKILL after
    /// [`STOP_GRACE`]; then the directory goes.
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Ok(pid) = libc::pid_t::try_from(child.id()) {
                // SAFETY: kill takes no pointers; the pid is our unreaped child's.
                unsafe {
                    libc::kill(pid, libc::SIGTERM);
                }
            }
            let deadline = Instant::now() + STOP_GRACE;
            loop {
                match child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() >= deadline => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for PrivateDaemon {
    fn drop(&mut self) {
        self.stop();
    }
}
