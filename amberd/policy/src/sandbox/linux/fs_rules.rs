//! Landlock, the second wall for the file system: read and execute everywhere, write only
//! beneath the writable directories and to the device nodes of the minimal `/dev`. It holds
//! where the mounts do not reach: a path through `/proc/PID/root` of a process outside the
//! namespace, a mount the kernel would not let us make read-only. With the network off it
//! also refuses TCP bind and connect, and it always keeps the command from signalling
//! processes outside its sandbox (amberd, the user's shell).
//!
//! The rules target ABI 7 (the newest these machines run); on an older kernel the `landlock`
//! crate drops what the kernel lacks (best effort), but a kernel that enforces none of it
//! is refused.

use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::mounts::Plan;
use crate::sandbox::{SandboxError, SandboxSpec};

const TARGET_ABI: ABI = ABI::V7;
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

pub(super) fn restrict(spec: &SandboxSpec, plan: &Plan) -> Result<(), SandboxError> {
    let err = |e: landlock::RulesetError| SandboxError::Landlock(e.to_string());
    let abi = TARGET_ABI;
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(err)?
        .scope(Scope::Signal)
        .map_err(err)?;
    if !spec.network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(err)?
            .scope(Scope::AbstractUnixSocket)
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
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(SandboxError::NoLandlock);
    }
    Ok(())
}

fn beneath(
    path: &Path,
    access: landlock::BitFlags<AccessFs>,
) -> Result<PathBeneath<PathFd>, SandboxError> {
    let fd = PathFd::new(path).map_err(|e| SandboxError::Landlock(e.to_string()))?;
    Ok(PathBeneath::new(fd, access))
}
