//! Every process a tool call, background process or hook starts dies with it: each one's
//! process tree lives in a cgroup (v2) of its own, which `setsid`, double forks and
//! daemons cannot leave (the sandbox mounts the cgroup file system read-only).
//!
//! ```text
//! <cgroup2 mount>/<amberd's cgroup>/amber-<data dir hash>/   the daemon's base (one per
//!                                                            data dir: one daemon each)
//!     <pgid>/                                                one per tool process group
//! ```
//!
//! The tool-exec helper (`lifeline`) makes `<base>/<its pid>` (its pid is the group
//! id), forks the lifeline watcher, then starts the program's process *inside* that cgroup
//! with `clone3(CLONE_INTO_CGROUP)` and stays as its proxy, ending as it ends: the program and
//! all it starts are inside (moving a running process in costs an RCU grace period, several
//! milliseconds per call; a kernel without `CLONE_INTO_CGROUP` gets that move instead). Killing a group
//! (`GroupGuard::kill`: the call's end, `process kill`, the session's end, a hook's
//! timeout) writes `cgroup.kill` as well as signalling the group; the watcher does the
//! same when amberd dies; the next daemon kills what a crash left ([`reap`]). An empty
//! cgroup is removed.
//!
//! Where there is no cgroup2 file system amberd may write (a daemon of a user whose
//! session cgroup is not delegated), tools run in process groups alone, as before: a
//! command that calls `setsid` then survives its call (but not the daemon's death only
//! if its watcher lives). `daemon/status` does not claim otherwise.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// The base once discovered and made ([`install`]).
static BASE: OnceLock<PathBuf> = OnceLock::new();

/// How long a killed cgroup may take to empty before its directory is left for [`reap`].
const EMPTY_WAIT: Duration = Duration::from_secs(2);

/// Finds the cgroup2 file system and amberd's cgroup in it, and makes the daemon's base
/// for `data_dir` there. `Err`: no cgroup to use (the caller logs it; tools run in process
/// groups alone).
pub fn install(data_dir: &Path) -> io::Result<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
    let own = std::fs::read_to_string("/proc/self/cgroup")?;
    let base = base_dir(&mountinfo, &own, data_dir)
        .ok_or_else(|| io::Error::other("no cgroup2 file system holds amberd's cgroup"))?;
    std::fs::create_dir_all(&base)?;
    // Proves a group can be made here (creating one needs write access to the parent).
    let probe = base.join("probe");
    match std::fs::create_dir(&probe) {
        Ok(()) => std::fs::remove_dir(&probe)?,
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(err),
    }
    let _ = BASE.set(base.clone());
    Ok(base)
}

/// The daemon's base, once installed.
pub(crate) fn base() -> Option<&'static Path> {
    BASE.get().map(PathBuf::as_path)
}

/// `<mount>/<own cgroup>/amber-<hash of data_dir>`, from `/proc/self/mountinfo` and
/// `/proc/self/cgroup` (pure, for tests).
pub(crate) fn base_dir(mountinfo: &str, own_cgroup: &str, data_dir: &Path) -> Option<PathBuf> {
    let own = amber_proto::paths::own_cgroup2_dir(mountinfo, own_cgroup)?;
    let hash = blake3::hash(data_dir.as_os_str().as_encoded_bytes()).to_hex();
    Some(own.join(format!("amber-{}", hash.get(..16).unwrap_or_default())))
}

/// The cgroup of the group `pgid`.
fn group_dir(base: &Path, pgid: libc::pid_t) -> PathBuf {
    base.join(pgid.to_string())
}

/// A tool group's cgroup, made by the helper (`<base>/<its pid>`: its pid is the group id).
#[derive(Debug)]
pub(crate) struct Group {
    pub(crate) dir: PathBuf,
    fd: std::os::fd::OwnedFd,
}

/// In the helper, before the watcher: makes `<base>/<own pid>`.
pub(crate) fn make_group(base: &Path) -> io::Result<Group> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = group_dir(base, std::process::id() as libc::pid_t);
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(err),
    }
    let fd = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(&dir)?;
    Ok(Group { dir, fd: fd.into() })
}

/// Where a fork into a group left the caller.
pub(crate) enum Forked {
    /// The new process, already in the group's cgroup.
    Child,
    /// The caller, with the new process's pid.
    Parent(libc::pid_t),
}

/// `clone3(CLONE_INTO_CGROUP)`: a fork whose child starts inside `group`. Cheap where moving
/// a running process is not (a migration takes a lock that waits for an RCU grace period,
/// milliseconds on an idle machine). Call only single-threaded (the helper).
pub(crate) fn fork_into(group: &Group) -> io::Result<Forked> {
    use std::os::fd::AsRawFd;
    #[repr(C)]
    struct CloneArgs {
        flags: u64,
        pidfd: u64,
        child_tid: u64,
        parent_tid: u64,
        exit_signal: u64,
        stack: u64,
        stack_size: u64,
        tls: u64,
        set_tid: u64,
        set_tid_size: u64,
        cgroup: u64,
    }
    const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
    let args = CloneArgs {
        flags: CLONE_INTO_CGROUP,
        pidfd: 0,
        child_tid: 0,
        parent_tid: 0,
        exit_signal: libc::SIGCHLD as u64,
        stack: 0,
        stack_size: 0,
        tls: 0,
        set_tid: 0,
        set_tid_size: 0,
        cgroup: group.fd.as_raw_fd() as u64,
    };
    // SAFETY: a clone_args of the size passed, alive for the call; no stack and no shared
    // memory, so the child is a fork of this single-threaded process and may go on running
    // its code.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    match rc {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Forked::Child),
        pid => Ok(Forked::Parent(pid as libc::pid_t)),
    }
}

/// Moves the calling process into `group` (where `clone3` cannot start one there: a kernel
/// before 5.7).
pub(crate) fn migrate(group: &Group) -> io::Result<()> {
    std::fs::write(group.dir.join("cgroup.procs"), "0")
}

/// SIGKILLs every process in the cgroup `dir` (the writer too, when it is inside).
pub(crate) fn kill_dir(dir: &Path) -> io::Result<()> {
    std::fs::write(dir.join("cgroup.kill"), "1")
}

/// Kills the cgroup of group `pgid`, if there is one.
pub fn kill_group(pgid: libc::pid_t) {
    let Some(base) = base() else {
        return;
    };
    let dir = group_dir(base, pgid);
    if let Err(err) = kill_dir(&dir)
        && err.kind() != io::ErrorKind::NotFound
    {
        tracing::warn!(dir = %dir.display(), "cannot kill a tool cgroup: {err}");
    }
}

/// Removes the (killed) cgroup of group `pgid` once it is empty, off the caller's thread.
pub fn remove_group(pgid: libc::pid_t) {
    let Some(base) = base() else {
        return;
    };
    let dir = group_dir(base, pgid);
    if !dir.exists() {
        return;
    }
    let remove = move || {
        let deadline = std::time::Instant::now() + EMPTY_WAIT;
        loop {
            match std::fs::remove_dir(&dir) {
                Ok(()) => return,
                Err(err) if err.kind() == io::ErrorKind::NotFound => return,
                Err(_) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                // Left for the next start's sweep.
                Err(_) => return,
            }
        }
    };
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn_blocking(remove);
        }
        Err(_) => remove(),
    }
}

/// At a graceful stop, after every tool is gone: removes the daemon's base (and any empty
/// group cgroup left in it). Best effort.
pub fn remove_base() {
    let Some(base) = base() else {
        return;
    };
    if let Ok(entries) = std::fs::read_dir(base) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = std::fs::remove_dir(entry.path());
            }
        }
    }
    let _ = std::fs::remove_dir(base);
}

/// At start, before any tool runs: kills and removes every cgroup a previous daemon on this
/// data dir left under `base`. Returns how many held processes.
pub fn reap(base: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(base) else {
        return 0;
    };
    let mut killed = 0;
    for entry in entries.flatten() {
        let dir = entry.path();
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let populated = std::fs::read_to_string(dir.join("cgroup.procs"))
            .is_ok_and(|procs| !procs.trim().is_empty());
        if populated {
            killed += 1;
            let _ = kill_dir(&dir);
            tracing::info!(dir = %dir.display(), "reaper: killed a tool cgroup left by a previous daemon");
        }
        let deadline = std::time::Instant::now() + EMPTY_WAIT;
        while std::fs::remove_dir(&dir).is_err() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    killed
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 0:21 / /sys rw,nosuid - sysfs sysfs rw
35 22 0:30 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw
36 22 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
";

    #[test]
    fn the_base_is_amberds_own_cgroup_in_the_cgroup2_mount_per_data_dir() {
        let data = Path::new("/home/u/.local/share/amber");
        let base = base_dir(
            MOUNTINFO,
            "4:memory:/x\n0::/user.slice/amberd.service\n",
            data,
        )
        .unwrap_or_default();
        assert!(
            base.display()
                .to_string()
                .starts_with("/sys/fs/cgroup/unified/user.slice/amberd.service/amber-"),
            "{}",
            base.display()
        );
        let other = base_dir(
            MOUNTINFO,
            "0::/user.slice/amberd.service\n",
            Path::new("/d2"),
        );
        assert_ne!(Some(base), other, "one base per data dir");
        let cases: &[(&str, &str)] = &[
            // No cgroup2 mount, no unified line.
            (
                "36 22 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw\n",
                "0::/a\n",
            ),
            (MOUNTINFO, "4:memory:/x\n"),
        ];
        for (mountinfo, own) in cases {
            assert_eq!(base_dir(mountinfo, own, data), None, "{mountinfo} {own}");
        }
        // A mount whose root is a sub-cgroup (a container's namespace).
        let nested = "40 1 0:30 /ctr /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let base = base_dir(nested, "0::/ctr/app\n", data).unwrap_or_default();
        assert!(
            base.display()
                .to_string()
                .starts_with("/sys/fs/cgroup/app/amber-"),
            "{}",
            base.display()
        );
        assert_eq!(base_dir(nested, "0::/elsewhere\n", data), None);
    }
}
