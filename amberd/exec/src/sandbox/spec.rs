//! [`SandboxSpec`]: everything the helper needs to sandbox one command, passed to it as one
//! JSON argument (no secrets in it: paths and switches only).

use std::path::PathBuf;

use amber_proto::{NetworkMode, SandboxMode};
use serde::{Deserialize, Serialize};

/// What one sandboxed command may write and reach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SandboxSpec {
    /// `WorkspaceWrite` or `ReadOnly` (`Off` has no spec: nothing is applied).
    pub mode: SandboxMode,
    /// IP sockets and Unix sockets allowed.
    pub network: bool,
    /// The network by allowlist (with `network: false`): the command's namespace gets its
    /// loopback up and the egress proxy's listener on this port, handed to amberd
    /// (`crate::egress`); IP sockets are allowed, and TCP reaches only that port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<EgressSpec>,
    /// The session's workspace root (writable in `WorkspaceWrite`, minus protected paths).
    pub workspace: PathBuf,
    /// The session's own temp directory (`TMPDIR`), writable in every mode.
    pub tmp_dir: PathBuf,
    /// `[sandbox] writable_roots`: more writable directories (`WorkspaceWrite` only).
    #[serde(default)]
    pub writable_roots: Vec<PathBuf>,
    /// Directories that must be invisible inside: amberd's runtime (socket) directory.
    #[serde(default)]
    pub hidden: Vec<PathBuf>,
    /// Secret locations (`~/.ssh`, `~/.aws`, amber's config and data, `[sandbox]
    /// secret_paths`…): masked inside, a directory by an empty one, a file by an empty file,
    /// so no glob, link, archive or interpreter reads them. One that holds a path the
    /// command uses (its workspace, cwd or a writable directory) is masked around it.
    #[serde(default)]
    pub masked: Vec<PathBuf>,
    /// `[sandbox] allow_unix_sockets`: with the network on, Unix sockets may be created
    /// only when this names at least one (otherwise every socket of the user, another
    /// amberd's among them, would be reachable).
    #[serde(default)]
    pub allow_unix_sockets: Vec<PathBuf>,
    /// Checkouts nested in the workspace (relative to it: its submodules and gitlinks, which
    /// a user's `git status` descends into) whose `.git` is protected as the workspace's
    /// own; amberd names them per command.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nested_checkouts: Vec<PathBuf>,
    /// amberd's pid: what the seccomp filter keeps signals from when Landlock cannot scope
    /// them (the command's parent may be a helper, not amberd). `None`: the parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon_pid: Option<u32>,
    /// Further processes the filter keeps signals from in the same case: the amberd an
    /// executor serves, should it share the executor's machine.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guarded_pids: Vec<u32>,
    /// Test-only: behave as on a kernel whose Landlock ABI is at most this (`0`: no
    /// Landlock). amberd sets it only from `AMBER_TEST_SANDBOX_NO_LANDLOCK` (0) or
    /// `AMBER_TEST_SANDBOX_LANDLOCK_ABI`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulate_landlock_abi: Option<u32>,
    /// Where no namespace can be made (an unprivileged container), run the command under
    /// Landlock and seccomp alone, with the limits docs/security.md names, instead of
    /// refusing it. Set by an executor started with `--sandbox-in-place`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_place: bool,
}

/// Where an allowlist sandbox's proxy listens inside its namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EgressSpec {
    pub port: u16,
}

/// A spec argument that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("invalid sandbox spec: {0}")]
pub struct SpecError(#[from] serde_json::Error);

impl SandboxSpec {
    /// The spec as the helper's argument.
    pub fn to_arg(&self) -> String {
        // A struct of paths, bools and a unit enum always serialises.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads the helper's argument.
    pub fn from_arg(arg: &str) -> Result<Self, SpecError> {
        Ok(serde_json::from_str(arg)?)
    }

    /// The Landlock ABI the sandbox uses on a kernel of ABI `kernel` (`None`: no Landlock):
    /// the kernel's, lowered to the simulated one, capped at the newest the sandbox knows;
    /// `None` when there is no Landlock to use.
    pub fn landlock_abi(&self, kernel: Option<u32>) -> Option<u32> {
        let kernel = kernel.unwrap_or(0);
        let kernel = self
            .simulate_landlock_abi
            .map_or(kernel, |cap| kernel.min(cap));
        super::landlock_abi::effective_abi(kernel)
    }

    /// What the command may reach, as sessions report it.
    pub fn network_mode(&self) -> NetworkMode {
        match (self.network, self.egress) {
            (true, _) => NetworkMode::On,
            (false, Some(_)) => NetworkMode::Allowlist,
            (false, None) => NetworkMode::Off,
        }
    }

    /// The directories a command may write: the temp dir always, the workspace and the
    /// writable roots in `WorkspaceWrite`.
    pub fn writable(&self) -> Vec<PathBuf> {
        let mut dirs = vec![self.tmp_dir.clone()];
        if self.mode == SandboxMode::WorkspaceWrite {
            dirs.push(self.workspace.clone());
            dirs.extend(self.writable_roots.iter().cloned());
        }
        dirs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_round_trips_through_the_helper_argument() {
        let spec = SandboxSpec {
            mode: SandboxMode::WorkspaceWrite,
            network: false,
            egress: None,
            workspace: "/ws".into(),
            tmp_dir: "/tmp/t".into(),
            writable_roots: vec!["/cache".into()],
            hidden: vec!["/run/user/0/amber".into()],
            masked: vec!["/home/u/.ssh".into()],
            allow_unix_sockets: Vec::new(),
            nested_checkouts: Vec::new(),
            daemon_pid: None,
            guarded_pids: Vec::new(),
            simulate_landlock_abi: None,
            in_place: false,
        };
        let arg = spec.to_arg();
        assert!(!arg.contains("simulate"));
        assert_eq!(SandboxSpec::from_arg(&arg).unwrap(), spec);
        assert_eq!(spec.landlock_abi(Some(7)), Some(7));
        assert_eq!(spec.landlock_abi(Some(12)), Some(7), "capped at the target");
        assert_eq!(spec.landlock_abi(None), None);
        let lower = SandboxSpec {
            simulate_landlock_abi: Some(5),
            ..spec.clone()
        };
        assert_eq!(lower.landlock_abi(Some(7)), Some(5));
        assert_eq!(
            lower.landlock_abi(Some(4)),
            Some(4),
            "never above the kernel"
        );
        assert!(lower.to_arg().contains("\"simulateLandlockAbi\":5"));
        let none = SandboxSpec {
            simulate_landlock_abi: Some(0),
            ..spec.clone()
        };
        assert_eq!(none.landlock_abi(Some(7)), None);
        assert_eq!(
            spec.writable(),
            vec![PathBuf::from("/tmp/t"), "/ws".into(), "/cache".into()]
        );
    }

    #[test]
    fn read_only_writes_only_the_temp_dir() {
        let spec = SandboxSpec {
            mode: SandboxMode::ReadOnly,
            network: true,
            egress: None,
            workspace: "/ws".into(),
            tmp_dir: "/tmp/t".into(),
            writable_roots: vec!["/cache".into()],
            hidden: vec![],
            masked: vec![],
            allow_unix_sockets: Vec::new(),
            nested_checkouts: Vec::new(),
            daemon_pid: None,
            guarded_pids: Vec::new(),
            simulate_landlock_abi: None,
            in_place: false,
        };
        assert_eq!(spec.writable(), vec![PathBuf::from("/tmp/t")]);
        assert!(SandboxSpec::from_arg("{\"mode\":\"off\"}").is_err());
    }
}
