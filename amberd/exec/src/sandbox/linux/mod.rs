//! Linux enforcement of a [`SandboxSpec`], in the order that lets each layer be set up by
//! the one before it: resolve the paths, enter new namespaces, lay out the mounts, drop the
//! capabilities that could undo them, set `no_new_privs`, restrict with Landlock, and last
//! install the seccomp filter (it forbids the mount calls the earlier steps needed).
//!
//! Runs only in amberd's tool-exec helper: a process of its own, single-threaded, that
//! `exec`s the command right after. Nothing here is async-signal-unsafe for that reason.

mod caps;
mod egress;
mod fs_rules;
mod mounts;
mod namespaces;
mod sockets;
mod syscalls;

use super::landlock_abi::{LandlockFeature, has};
use super::{SandboxError, SandboxSpec};

pub(super) fn enforce(spec: &SandboxSpec) -> Result<(), SandboxError> {
    // Landlock is a required wall: without it nothing is changed and nothing runs. Its
    // rules are those of this ABI exactly (`landlock_abi`), not the crate's best effort.
    let Some(abi) = spec.landlock_abi(super::kernel_support().landlock_abi) else {
        return Err(SandboxError::NoLandlock);
    };
    // Without Landlock's signal scope, seccomp keeps amberd (our parent) out of reach.
    let guard = (!has(abi, LandlockFeature::ScopeSignal)).then(|| {
        let guard = spec
            .daemon_pid
            .and_then(|pid| libc::pid_t::try_from(pid).ok())
            .map_or_else(syscalls::SignalGuard::of_parent, syscalls::SignalGuard::of);
        spec.guarded_pids
            .iter()
            .filter_map(|pid| libc::pid_t::try_from(*pid).ok())
            .fold(guard, syscalls::SignalGuard::and)
    });
    let plan = mounts::Plan::new(spec)?;
    // Where no namespace can be made (an unprivileged container: no user namespaces, no
    // CAP_SYS_ADMIN), the command shares the host's mounts and network: Landlock and
    // seccomp alone keep it in (`fs_rules::restrict_in_place`, `syscalls::install`).
    let isolated = match namespaces::enter(spec.network) {
        Ok(()) => true,
        Err(err) if spec.in_place && namespaces::refused(&err) => false,
        Err(err) if namespaces::refused(&err) => {
            return Err(SandboxError::Setup {
                step: "unshare".into(),
                source: std::io::Error::other(format!(
                    "{}: no namespace can be made here (an unprivileged container?); an \
                     executor started with --sandbox-in-place sandboxes with Landlock and \
                     seccomp alone, with the limits docs/security.md names",
                    match err {
                        SandboxError::Setup { source, .. } => source.to_string(),
                        other => other.to_string(),
                    }
                )),
            });
        }
        Err(err) => return Err(err),
    };
    if let Some(proxy) = &spec.egress {
        // Without a namespace of its own the command keeps the network off (the seccomp
        // filter below): amberd reads the closed link as "no proxy".
        if isolated {
            egress::open(proxy)?;
        } else {
            egress::decline();
        }
    }
    if isolated {
        plan.apply()?;
    }
    caps::drop_all(isolated)?;
    set_no_new_privs()?;
    if isolated {
        fs_rules::restrict(spec, &plan, abi)?;
    } else {
        fs_rules::restrict_in_place(spec, &plan, abi)?;
    }
    syscalls::install(
        spec.network,
        spec.egress.is_some() && isolated,
        !spec.allow_unix_sockets.is_empty(),
        guard,
        !isolated,
    )?;
    Ok(())
}

fn set_no_new_privs() -> Result<(), SandboxError> {
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integer arguments only.
    let rc = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    if rc != 0 {
        return Err(SandboxError::setup(
            "no_new_privs",
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// `Err(step, errno)` of a libc call that returns -1 on failure.
fn check(step: &str, rc: libc::c_long) -> Result<libc::c_long, SandboxError> {
    if rc < 0 {
        Err(SandboxError::setup(step, std::io::Error::last_os_error()))
    } else {
        Ok(rc)
    }
}
