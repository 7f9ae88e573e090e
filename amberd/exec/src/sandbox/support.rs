//! What the running kernel offers the sandbox, read without changing anything (no fork, no
//! namespace): the Landlock ABI and whether seccomp filters are available. Whether
//! namespaces work is known only by trying, which amberd does by running its helper once
//! (`amberd`'s sandbox probe); this is the part a multi-threaded daemon can ask directly.

use serde::{Deserialize, Serialize};

/// The kernel's sandbox features.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KernelSupport {
    /// The Landlock ABI version (`None`: no Landlock, or disabled at boot).
    pub landlock_abi: Option<u32>,
    /// seccomp BPF filters can be installed.
    pub seccomp: bool,
}

/// Reads the kernel's sandbox features.
pub fn kernel_support() -> KernelSupport {
    #[cfg(target_os = "linux")]
    {
        KernelSupport {
            landlock_abi: landlock_abi(),
            seccomp: seccomp_available(),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        KernelSupport::default()
    }
}

#[cfg(target_os = "linux")]
fn landlock_abi() -> Option<u32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the version query takes a null attribute pointer and size 0 by contract.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(version).ok().filter(|v| *v > 0)
}

#[cfg(target_os = "linux")]
fn seccomp_available() -> bool {
    // PR_GET_SECCOMP answers 0 (none) or 2 (filter) where seccomp exists; EINVAL without it.
    // SAFETY: PR_GET_SECCOMP reads the calling thread's mode and takes no pointers.
    let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    mode >= 0
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn kernel_support_reads_without_failing() {
        let support = kernel_support();
        // Whatever the machine has, a reported ABI is a real version.
        if let Some(abi) = support.landlock_abi {
            assert!(abi >= 1);
        }
    }
}
