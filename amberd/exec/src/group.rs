//! [`GroupGuard`]: a child's process group dies with the guard. A tool call, a background
//! process, a hook and the sandbox probe each hold one for the group they started; while
//! it lives the group is recorded for the next daemon to kill should this one die first
//! (`reaper`), and what left the group (`setsid`, daemons) is still in its cgroup.

/// Kills the shell's process group when the call ends, including when the
/// call's future is dropped mid-run. While it lives, the group is recorded for
/// the next daemon to kill should this one die first (`reaper`).
pub struct GroupGuard {
    pgid: libc::pid_t,
    armed: std::sync::atomic::AtomicBool,
    /// Dropped after `Drop::drop` has killed the group: the record goes last.
    _record: Option<crate::reaper::Registration>,
}

impl GroupGuard {
    /// Guards the group `pgid` just spawned (its leader not yet reaped) for `session`.
    pub fn new(pgid: libc::pid_t, session: &str) -> Self {
        Self {
            pgid,
            armed: std::sync::atomic::AtomicBool::new(true),
            _record: crate::reaper::register(pgid, session),
        }
    }

    /// The group's id (its leader's pid).
    pub fn pgid(&self) -> libc::pid_t {
        self.pgid
    }

    pub fn kill(&self) {
        if self.armed.load(std::sync::atomic::Ordering::Relaxed) && self.pgid > 0 {
            // SAFETY: killpg only sends a signal. `pgid` is the group this call
            // created for its shell (process_group(0)); it is positive, so it
            // never targets our own group or every process, and the guard is
            // disarmed once the call is over.
            unsafe {
                libc::killpg(self.pgid, libc::SIGKILL);
            }
            // What left the group (`setsid`, daemons) is still in its cgroup.
            crate::cgroup::kill_group(self.pgid);
        }
    }

    pub fn disarm(&self) {
        self.armed
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
        // Everything in it was killed (here or when the call ended): its cgroup goes once
        // empty.
        crate::cgroup::remove_group(self.pgid);
    }
}
