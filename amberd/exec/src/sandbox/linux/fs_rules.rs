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

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
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

fn err(e: landlock::RulesetError) -> SandboxError {
    SandboxError::Landlock(e.to_string())
}

/// The ruleset of ABI `version`: every file system right handled, the scopes, and TCP when
/// the network is off; no rule yet.
fn ruleset(spec: &SandboxSpec, version: u32) -> Result<RulesetCreated, SandboxError> {
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
    ruleset.create().map_err(err)
}

/// Restricts the calling process with the rules of Landlock ABI `version` (at least 1).
pub(super) fn restrict(spec: &SandboxSpec, plan: &Plan, version: u32) -> Result<(), SandboxError> {
    let abi = crate_abi(version);
    let mut created = ruleset(spec, version)?;
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
    created = with_devices(created, abi)?;
    created = with_proxy_port(spec, created, version)?;
    enforce(created, version)
}

/// In an allowlist sandbox: TCP may connect to the proxy's port, and to nothing else (its
/// namespace has nothing else to reach; this is the second wall).
fn with_proxy_port(
    spec: &SandboxSpec,
    created: RulesetCreated,
    version: u32,
) -> Result<RulesetCreated, SandboxError> {
    match &spec.egress {
        Some(egress) if has(version, LandlockFeature::NetTcp) => created
            .add_rule(NetPort::new(egress.port, AccessNet::ConnectTcp))
            .map_err(err),
        _ => Ok(created),
    }
}

/// `created` with the rules that let the device nodes of [`WRITABLE_DEVICES`] be written.
fn with_devices(mut created: RulesetCreated, abi: ABI) -> Result<RulesetCreated, SandboxError> {
    for device in WRITABLE_DEVICES {
        let device = Path::new(device);
        if device.exists() {
            created = created
                .add_rule(beneath(device, AccessFs::from_file(abi))?)
                .map_err(err)?;
        }
    }
    Ok(created)
}

fn enforce(created: RulesetCreated, version: u32) -> Result<(), SandboxError> {
    let status = created.restrict_self().map_err(err)?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(()),
        RulesetStatus::NotEnforced => Err(SandboxError::NoLandlock),
        _ => Err(SandboxError::Landlock(format!(
            "the kernel enforced only part of the rules of ABI {version}"
        ))),
    }
}

fn beneath(path: &Path, access: BitFlags<AccessFs>) -> Result<PathBeneath<PathFd>, SandboxError> {
    let fd = PathFd::new(path).map_err(|e| SandboxError::Landlock(e.to_string()))?;
    Ok(PathBeneath::new(fd, access))
}

/// [`restrict`] for a command that shares the host's mounts (no namespace could be made):
/// Landlock alone keeps what the mounts would have. Reads everywhere but the hidden and
/// masked paths; writes beneath the writable directories but their protected paths. Landlock
/// rules only allow, each for a whole hierarchy, so a path kept out is carved around: every
/// directory on the way to it gets rules for its other children, none for itself. So a
/// command cannot create, remove or rename entries *directly* in such a directory (the
/// workspace's top, its `.git`), while everything below their other children is as usual.
/// The names in a hidden directory can be listed (not read). `/dev/shm` and `/dev/pts` are
/// the host's here: not writable.
pub(super) fn restrict_in_place(
    spec: &SandboxSpec,
    plan: &Plan,
    version: u32,
) -> Result<(), SandboxError> {
    let abi = crate_abi(version);
    let mut created = ruleset(spec, version)?;
    let unreadable: Vec<&Path> = plan
        .hidden
        .iter()
        .chain(&plan.hidden_sockets)
        .chain(&plan.masked_files)
        .map(PathBuf::as_path)
        .collect();
    let read = AccessFs::from_read(abi);
    for (path, access) in carve(Path::new("/"), &unreadable, read) {
        // Gone since it was listed (another process's temp file): nothing to grant.
        if let Ok(rule) = beneath(&path, access) {
            created = created.add_rule(rule).map_err(err)?;
        }
    }
    // Listing a directory on the way to a hidden one (its names, not its files).
    for dir in ancestors_within(Path::new("/"), &unreadable) {
        created = created
            .add_rule(beneath(&dir, AccessFs::ReadDir.into())?)
            .map_err(err)?;
    }
    let protected: Vec<&Path> = plan.protected.iter().map(PathBuf::as_path).collect();
    for root in &plan.writable {
        for (path, access) in carve(root, &protected, AccessFs::from_all(abi)) {
            if let Ok(rule) = beneath(&path, access) {
                created = created.add_rule(rule).map_err(err)?;
            }
        }
    }
    created = with_devices(created, abi)?;
    enforce(created, version)
}

/// Rules granting `access` beneath `top` but nowhere in the `holes` (absolute paths; those
/// outside `top` are ignored): beneath `top` itself when no hole is in it; else beneath each
/// child of every directory on the way to a hole that is not on the way itself (a file with
/// the file rights of `access` alone). Symbolic links get no rule: what they name is
/// decided where it lies.
pub(super) fn carve(
    top: &Path,
    holes: &[&Path],
    access: BitFlags<AccessFs>,
) -> Vec<(PathBuf, BitFlags<AccessFs>)> {
    let inside: Vec<&Path> = holes
        .iter()
        .copied()
        .filter(|h| h.starts_with(top))
        .collect();
    if inside.is_empty() {
        return vec![(top.to_path_buf(), access)];
    }
    if inside.contains(&top) {
        return Vec::new();
    }
    let mut rules = Vec::new();
    let Ok(entries) = std::fs::read_dir(top) else {
        return rules;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            continue;
        }
        if inside.iter().any(|h| h.starts_with(&path)) {
            if kind.is_dir() {
                rules.extend(carve(&path, &inside, access));
            }
            continue;
        }
        let access = if kind.is_dir() {
            access
        } else {
            access & AccessFs::from_file(ABI::V7)
        };
        rules.push((path, access));
    }
    rules
}

/// The directories from `top` down to each hole's parent.
fn ancestors_within(top: &Path, holes: &[&Path]) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = holes
        .iter()
        .filter(|h| h.starts_with(top))
        .flat_map(|h| h.ancestors().skip(1).take_while(|a| a.starts_with(top)))
        .map(Path::to_path_buf)
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rules `carve` makes, as paths relative to `root` with `dir`/`file` rights.
    fn carved(root: &Path, holes: &[&str]) -> Vec<String> {
        let holes: Vec<PathBuf> = holes.iter().map(|h| root.join(h)).collect();
        let holes: Vec<&Path> = holes.iter().map(PathBuf::as_path).collect();
        let all = AccessFs::from_all(ABI::V7);
        let mut rules: Vec<String> = carve(root, &holes, all)
            .into_iter()
            .map(|(path, access)| {
                let rel = path.strip_prefix(root).unwrap().display().to_string();
                let kind = if access == all { "all" } else { "file" };
                format!("{rel} {kind}")
            })
            .collect();
        rules.sort();
        rules
    }

    #[test]
    fn carving_grants_everything_around_the_holes_and_nothing_on_the_way_to_them() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in [".git/hooks", ".git/objects", "src/deep", ".amber"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in [
            "README",
            ".git/config",
            ".git/HEAD",
            "src/a.rs",
            ".amber/hooks.toml",
        ] {
            std::fs::write(root.join(f), "x").unwrap();
        }
        std::os::unix::fs::symlink("/etc", root.join("link")).unwrap();
        let cases: &[(&[&str], &[&str])] = &[
            // No hole: the whole tree.
            (&[], &[" all"]),
            // The root itself is the hole: nothing.
            (&[""], &[]),
            (
                &[".git/hooks", ".git/config", ".amber"],
                &[
                    ".git/HEAD file",
                    ".git/objects all",
                    "README file",
                    "src all",
                ],
            ),
            // A hole that does not exist keeps the way to it closed all the same: nothing
            // can make it.
            (
                &["src/deep/missing"],
                &[".amber all", ".git all", "README file", "src/a.rs file"],
            ),
        ];
        for (holes, want) in cases {
            let want: Vec<String> = want
                .iter()
                .map(|w| w.trim_start().to_owned())
                .map(|w| if w == "all" { " all".to_owned() } else { w })
                .collect();
            assert_eq!(carved(root, holes), want, "holes {holes:?}");
        }
    }

    #[test]
    fn the_way_to_a_hole_can_be_listed() {
        let holes = [Path::new("/home/u/.ssh"), Path::new("/run/amber")];
        assert_eq!(
            ancestors_within(Path::new("/"), &holes),
            [
                PathBuf::from("/"),
                PathBuf::from("/home"),
                PathBuf::from("/home/u"),
                PathBuf::from("/run")
            ]
        );
    }

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
