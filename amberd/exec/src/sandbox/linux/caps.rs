//! Dropping every capability once the mounts are laid out, so that a root daemon's
//! commands cannot unmount or remount them (and cannot regain the capabilities by running a
//! setuid or any root-owned program: the bounding set is emptied and `SECBIT_NOROOT` locked).
//! Root keeps its uid, so files it creates in the workspace keep their usual owner.

use super::check;
use crate::sandbox::SandboxError;

const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
const SECBIT_NO_SETUID_FIXUP: libc::c_ulong = 1 << 2;
const SECBIT_NO_SETUID_FIXUP_LOCKED: libc::c_ulong = 1 << 3;
const SECBIT_KEEP_CAPS_LOCKED: libc::c_ulong = 1 << 5;
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `isolated`: the process made its namespaces (as a non-root user, a user namespace whose
/// capabilities are dropped here). Without them a non-root process has no capability to
/// drop and no privilege to set the securebits: it only checks that it holds none.
pub(super) fn drop_all(isolated: bool) -> Result<(), SandboxError> {
    // SAFETY: geteuid has no preconditions.
    if !isolated && unsafe { libc::geteuid() } != 0 {
        return holds_none();
    }
    let bits = SECBIT_NOROOT
        | SECBIT_NOROOT_LOCKED
        | SECBIT_NO_SETUID_FIXUP
        | SECBIT_NO_SETUID_FIXUP_LOCKED
        | SECBIT_KEEP_CAPS_LOCKED;
    // SAFETY: integer arguments only.
    check(
        "securebits",
        unsafe { libc::prctl(libc::PR_SET_SECUREBITS, bits, 0, 0, 0) }.into(),
    )?;
    for cap in 0..64 {
        // SAFETY: integer arguments only; EINVAL past the last capability ends the loop.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
            break;
        }
    }
    // SAFETY: integer arguments only.
    check(
        "ambient capabilities",
        unsafe {
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
                0,
                0,
            )
        }
        .into(),
    )?;
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [CapData::default(); 2];
    // SAFETY: capset reads a v3 header and two data structs, both valid for the call.
    check("capset", unsafe {
        libc::syscall(
            libc::SYS_capset,
            &mut header as *mut CapHeader,
            data.as_ptr(),
        )
    })?;
    Ok(())
}

/// Fails when the calling process holds any capability (effective or permitted).
fn holds_none() -> Result<(), SandboxError> {
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget writes two data structs into the array, valid for the call.
    check("capget", unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut CapHeader,
            data.as_mut_ptr(),
        )
    })?;
    if data.iter().any(|d| d.effective != 0 || d.permitted != 0) {
        return Err(SandboxError::setup(
            "capabilities",
            std::io::Error::other("a non-root process holds capabilities it cannot drop"),
        ));
    }
    Ok(())
}
