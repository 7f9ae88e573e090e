//! Landlock, the second wall for the file system: read and execute everywhere, write only
//! beneath the writable directories and to the device nodes of the minimal `/dev`. It holds
//! where the mounts do not reach: a path through `/proc/PID/root` of a process outside the
//! namespace, a mount the kernel would not let us make read-only. With the network off it
//! also refuses TCP bind and connect, and it always keeps the command from signalling
//! processes outside its sandbox (amberd, the user's shell) and from connecting to their
//! abstract Unix sockets.
//!
//! The rules are those of one ABI, chosen by the caller (`min(kernel, 7)`,
//! `sandbox::landlock_abi`): every access right and scope of that ABI and none newer, as a
//! hard requirement — nothing is silently dropped, and what an older ABI lacks is known
//! in advance (`missing_features`, reported by `daemon/status`). A ruleset the kernel does
//! not enforce in full is refused.

use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::mounts::Plan;
use crate::sandbox::landlock_abi::{LandlockFeature, has};
use crate::sandbox::{SandboxError, SandboxSpec};

/// Device nodes of the minimal `/dev` that may be written.
const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
];

/// The `landlock` crate's name of ABI `version` (1 to 7; newer is used as 7).
fn crate_abi(version: u32) -> ABI {
    match version {
        0 | 1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        5 => ABI::V5,
        6 => ABI::V6,
        _ => ABI::V7,
    }
}

/// Restricts the calling process with the rules of Landlock ABI `version` (at least 1).
pub(super) fn restrict(spec: &SandboxSpec, plan: &Plan, version: u32) -> Result<(), SandboxError> {
    let err = |e: landlock::RulesetError| SandboxError::Landlock(e.to_string());
    let abi = crate_abi(version);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(err)?;
    if has(version, LandlockFeature::ScopeSignal) {
        ruleset = ruleset.scope(Scope::Signal).map_err(err)?;
    }
    // Network on or off: abstract sockets of processes outside the sandbox (another amberd,
    // a desktop bus) are not the network a command was given.
    if has(version, LandlockFeature::ScopeAbstractUnixSocket) {
        ruleset = ruleset.scope(Scope::AbstractUnixSocket).map_err(err)?;
    }
    if !spec.network && has(version, LandlockFeature::NetTcp) {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(err)?;
    }
    let mut created = ruleset.create().map_err(err)?;
    created = created
        .add_rule(beneath(Path::new("/"), AccessFs::from_read(abi))?)
        .map_err(err)?;
    let writable = plan
        .writable
        .iter()
        .map(|p| p.as_path())
        .chain([Path::new("/dev/shm"), Path::new("/dev/pts")]);
    for dir in writable {
        if dir.exists() {
            created = created
                .add_rule(beneath(dir, AccessFs::from_all(abi))?)
                .map_err(err)?;
        }
    }
    for device in WRITABLE_DEVICES {
        let device = Path::new(device);
        if device.exists() {
            created = created
                .add_rule(beneath(device, AccessFs::from_file(abi))?)
                .map_err(err)?;
        }
    }
    let status = created.restrict_self().map_err(err)?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(()),
        RulesetStatus::NotEnforced => Err(SandboxError::NoLandlock),
        _ => Err(SandboxError::Landlock(format!(
            "the kernel enforced only part of the rules of ABI {version}"
        ))),
    }
}

fn beneath(
    path: &Path,
    access: landlock::BitFlags<AccessFs>,
) -> Result<PathBeneath<PathFd>, SandboxError> {
    let fd = PathFd::new(path).map_err(|e| SandboxError::Landlock(e.to_string()))?;
    Ok(PathBeneath::new(fd, access))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_abi_asks_for_exactly_its_own_rights() {
        assert_eq!(crate_abi(1), ABI::V1);
        assert_eq!(crate_abi(5), ABI::V5);
        assert_eq!(crate_abi(7), ABI::V7);
        assert_eq!(
            crate_abi(9),
            ABI::V7,
            "newer kernels are used at the target"
        );
        // The per-ABI table and the crate agree on what each ABI brings.
        assert!(!AccessFs::from_all(crate_abi(2)).contains(AccessFs::Truncate));
        assert!(AccessFs::from_all(crate_abi(3)).contains(AccessFs::Truncate));
        assert!(!AccessFs::from_all(crate_abi(4)).contains(AccessFs::IoctlDev));
        assert!(AccessFs::from_all(crate_abi(5)).contains(AccessFs::IoctlDev));
        assert!(AccessNet::from_all(crate_abi(3)).is_empty());
        assert!(!AccessNet::from_all(crate_abi(4)).is_empty());
        assert!(!AccessFs::from_all(crate_abi(1)).contains(AccessFs::Refer));
        for feature in LandlockFeature::ALL {
            let (before, at) = (feature.since() - 1, feature.since());
            let present = |v: u32| match feature {
                LandlockFeature::Refer => {
                    AccessFs::from_all(crate_abi(v)).contains(AccessFs::Refer)
                }
                LandlockFeature::Truncate => {
                    AccessFs::from_all(crate_abi(v)).contains(AccessFs::Truncate)
                }
                LandlockFeature::NetTcp => !AccessNet::from_all(crate_abi(v)).is_empty(),
                LandlockFeature::IoctlDev => {
                    AccessFs::from_all(crate_abi(v)).contains(AccessFs::IoctlDev)
                }
                LandlockFeature::ScopeAbstractUnixSocket | LandlockFeature::ScopeSignal => {
                    !Scope::from_all(crate_abi(v)).is_empty()
                }
            };
            assert!(!present(before), "{feature:?} before ABI {at}");
            assert!(present(at), "{feature:?} at ABI {at}");
        }
    }
}
