//! Which Landlock rules the sandbox applies on which kernel, decided explicitly per ABI
//! rather than left to the `landlock` crate's best effort: the sandbox asks for the rights
//! and scopes of `min(kernel ABI, LANDLOCK_TARGET_ABI)` exactly (and nothing the kernel
//! cannot enforce), and [`missing_features`] names what an older ABI lacks, for
//! `daemon/status`, `amber-cli doctor` and the helper's own fallbacks.
//!
//! Landlock is the second wall: the mount namespace, the network namespace and seccomp are
//! the first, so a missing feature weakens the defence in depth, not the policy — except
//! the signal scope, which nothing else gives; without it the seccomp filter refuses
//! signals to amberd itself (see `linux/syscalls.rs`), and processes of the same user
//! outside the sandbox stay reachable by signals (docs/security.md).

use amber_proto::{LandlockEnforcement, LandlockGap};

/// The newest Landlock ABI whose features the sandbox uses; a newer kernel is used at this
/// ABI.
pub const LANDLOCK_TARGET_ABI: u32 = 7;

/// A Landlock feature the sandbox uses beyond ABI 1's file-system rights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LandlockFeature {
    /// `LANDLOCK_ACCESS_FS_REFER` (ABI 2): links and renames across directories.
    Refer,
    /// `LANDLOCK_ACCESS_FS_TRUNCATE` (ABI 3).
    Truncate,
    /// `LANDLOCK_ACCESS_NET_{BIND,CONNECT}_TCP` (ABI 4).
    NetTcp,
    /// `LANDLOCK_ACCESS_FS_IOCTL_DEV` (ABI 5).
    IoctlDev,
    /// `LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET` (ABI 6).
    ScopeAbstractUnixSocket,
    /// `LANDLOCK_SCOPE_SIGNAL` (ABI 6).
    ScopeSignal,
}

impl LandlockFeature {
    pub const ALL: [LandlockFeature; 6] = [
        LandlockFeature::Refer,
        LandlockFeature::Truncate,
        LandlockFeature::NetTcp,
        LandlockFeature::IoctlDev,
        LandlockFeature::ScopeAbstractUnixSocket,
        LandlockFeature::ScopeSignal,
    ];

    /// The ABI that brought it.
    pub fn since(self) -> u32 {
        match self {
            LandlockFeature::Refer => 2,
            LandlockFeature::Truncate => 3,
            LandlockFeature::NetTcp => 4,
            LandlockFeature::IoctlDev => 5,
            LandlockFeature::ScopeAbstractUnixSocket | LandlockFeature::ScopeSignal => 6,
        }
    }

    /// Its stable name in `daemon/status.sandbox.landlockMissing`.
    pub fn name(self) -> &'static str {
        match self {
            LandlockFeature::Refer => "refer",
            LandlockFeature::Truncate => "truncate",
            LandlockFeature::NetTcp => "net_tcp",
            LandlockFeature::IoctlDev => "ioctl_dev",
            LandlockFeature::ScopeAbstractUnixSocket => "scope_abstract_unix_socket",
            LandlockFeature::ScopeSignal => "scope_signal",
        }
    }

    /// What holds without it.
    pub fn fallback(self) -> &'static str {
        match self {
            LandlockFeature::Refer => {
                "Landlock refuses every link or rename across directories, inside the workspace too (ABI 1 cannot allow them)"
            }
            LandlockFeature::Truncate => {
                "the read-only mounts refuse truncating files outside the writable directories"
            }
            LandlockFeature::NetTcp => {
                "with the network off, the network namespace and the seccomp filter refuse every socket"
            }
            LandlockFeature::IoctlDev => {
                "only the minimal /dev is there, and seccomp refuses terminal input injection"
            }
            LandlockFeature::ScopeAbstractUnixSocket => {
                "with the network off, seccomp refuses every Unix socket; with it on, abstract Unix sockets of the host's network namespace are reachable"
            }
            LandlockFeature::ScopeSignal => {
                "seccomp refuses signals to amberd (its pid, its process group, and kill(-1)); other processes of the same user outside the sandbox can be signalled"
            }
        }
    }

    /// As `daemon/status` reports it.
    pub fn gap(self) -> LandlockGap {
        LandlockGap {
            feature: self.name().to_owned(),
            abi: self.since(),
            fallback: self.fallback().to_owned(),
        }
    }
}

/// The ABI the sandbox uses on a kernel of ABI `kernel`: the kernel's, capped at
/// [`LANDLOCK_TARGET_ABI`]. `None` without Landlock (`kernel` 0).
pub fn effective_abi(kernel: u32) -> Option<u32> {
    (kernel > 0).then(|| kernel.min(LANDLOCK_TARGET_ABI))
}

/// The features an ABI-`abi` kernel lacks, oldest first (all of them without Landlock).
pub fn missing_features(abi: u32) -> Vec<LandlockFeature> {
    LandlockFeature::ALL
        .into_iter()
        .filter(|f| f.since() > abi)
        .collect()
}

/// Whether an ABI-`abi` kernel has `feature`.
pub(super) fn has(abi: u32, feature: LandlockFeature) -> bool {
    abi >= feature.since()
}

/// `daemon/status`'s `landlockEnforcement` and `landlockMissing` for a kernel of ABI `abi`
/// (`None`: no Landlock, reported as neither).
pub fn enforcement(abi: Option<u32>) -> (Option<LandlockEnforcement>, Vec<LandlockGap>) {
    let Some(abi) = abi.filter(|a| *a > 0) else {
        return (None, Vec::new());
    };
    let missing: Vec<LandlockGap> = missing_features(abi)
        .into_iter()
        .map(LandlockFeature::gap)
        .collect();
    let level = if missing.is_empty() {
        LandlockEnforcement::Full
    } else {
        LandlockEnforcement::Partial
    };
    (Some(level), missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(abi: u32) -> Vec<&'static str> {
        missing_features(abi)
            .into_iter()
            .map(|f| f.name())
            .collect()
    }

    #[test]
    fn each_abi_lacks_exactly_the_features_of_the_newer_ones() {
        assert_eq!(
            names(1),
            [
                "refer",
                "truncate",
                "net_tcp",
                "ioctl_dev",
                "scope_abstract_unix_socket",
                "scope_signal"
            ]
        );
        assert_eq!(
            names(2),
            [
                "truncate",
                "net_tcp",
                "ioctl_dev",
                "scope_abstract_unix_socket",
                "scope_signal"
            ]
        );
        assert_eq!(
            names(3),
            [
                "net_tcp",
                "ioctl_dev",
                "scope_abstract_unix_socket",
                "scope_signal"
            ]
        );
        assert_eq!(
            names(4),
            ["ioctl_dev", "scope_abstract_unix_socket", "scope_signal"]
        );
        assert_eq!(names(5), ["scope_abstract_unix_socket", "scope_signal"]);
        assert!(names(6).is_empty());
        assert!(names(7).is_empty());
        assert!(has(6, LandlockFeature::ScopeSignal));
        assert!(!has(5, LandlockFeature::ScopeSignal));
        assert!(has(4, LandlockFeature::NetTcp));
    }

    #[test]
    fn a_newer_kernel_is_used_at_the_target_abi_and_none_means_no_landlock() {
        assert_eq!(effective_abi(0), None);
        assert_eq!(effective_abi(3), Some(3));
        assert_eq!(effective_abi(7), Some(7));
        assert_eq!(effective_abi(9), Some(LANDLOCK_TARGET_ABI));
    }

    #[test]
    fn status_reports_full_partial_or_nothing() {
        assert_eq!(enforcement(None), (None, Vec::new()));
        assert_eq!(enforcement(Some(0)), (None, Vec::new()));
        assert_eq!(
            enforcement(Some(7)),
            (Some(LandlockEnforcement::Full), Vec::new())
        );
        let (level, missing) = enforcement(Some(5));
        assert_eq!(level, Some(LandlockEnforcement::Partial));
        assert_eq!(missing.len(), 2);
        assert_eq!(missing[1].feature, "scope_signal");
        assert_eq!(missing[1].abi, 6);
        assert!(missing[1].fallback.contains("amberd"), "{:?}", missing[1]);
    }
}
