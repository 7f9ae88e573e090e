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

/// Whether `err` from [`enter`] says this process may not make namespaces at all (no
/// privilege, user namespaces forbidden or exhausted, a seccomp profile refusing them), as
/// opposed to a failure after they were made. Nothing was changed when `unshare` failed.
pub(super) fn refused(err: &SandboxError) -> bool {
    match err {
        SandboxError::Setup { step, source } if step == "unshare" => matches!(
            source.raw_os_error(),
            Some(libc::EPERM | libc::EACCES | libc::ENOSPC | libc::EINVAL | libc::ENOSYS)
        ),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_refused_unshare_means_no_namespaces() {
        let failed = |step: &str, errno: i32| SandboxError::Setup {
            step: step.to_owned(),
            source: std::io::Error::from_raw_os_error(errno),
        };
        for errno in [
            libc::EPERM,
            libc::EACCES,
            libc::ENOSPC,
            libc::EINVAL,
            libc::ENOSYS,
        ] {
            assert!(refused(&failed("unshare", errno)), "errno {errno}");
        }
        // Made, then failed: not a machine without namespaces.
        assert!(!refused(&failed("writing /proc/self/uid_map", libc::EPERM)));
        assert!(!refused(&failed("unshare", libc::ENOMEM)));
        assert!(!refused(&SandboxError::NoLandlock));
    }
}
