//! New namespaces for the command: mount (its own view of the file system), IPC (no
//! System V or POSIX message queues shared with the host), network (no interface but a
//! down loopback) when the network is off, and, for a daemon that is not root, a user
//! namespace mapping the user to itself so the others may be created without privilege.

use super::check;
use crate::sandbox::SandboxError;

pub(super) fn enter(network: bool) -> Result<(), SandboxError> {
    // SAFETY: getters without arguments.
    let (uid, gid, euid) = unsafe { (libc::getuid(), libc::getgid(), libc::geteuid()) };
    let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWIPC;
    if !network {
        flags |= libc::CLONE_NEWNET;
    }
    let user_ns = euid != 0;
    if user_ns {
        flags |= libc::CLONE_NEWUSER;
    }
    // SAFETY: unshare takes a flag set; the helper is single-threaded, as CLONE_NEWUSER needs.
    check("unshare", unsafe { libc::unshare(flags) }.into())?;
    if user_ns {
        write_proc("/proc/self/setgroups", "deny")?;
        write_proc("/proc/self/uid_map", &format!("{uid} {uid} 1"))?;
        write_proc("/proc/self/gid_map", &format!("{gid} {gid} 1"))?;
    }
    Ok(())
}

fn write_proc(path: &str, content: &str) -> Result<(), SandboxError> {
    std::fs::write(path, content).map_err(|err| SandboxError::setup(format!("writing {path}"), err))
}
