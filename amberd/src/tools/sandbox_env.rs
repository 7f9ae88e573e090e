//! What the daemon as a whole knows about the OS sandbox, shared by every session and every
//! sandboxed extension (MCP stdio server, external plugin): the directories sandboxed
//! processes must not see, the test-only switch, whether the kernel can sandbox at all,
//! and where their private temp directories go. A [`SandboxSpec`] is built from it here.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use amber_policy::sandbox::{SandboxInfo, SandboxSpec};

use super::tmp_dirs::TmpDirs;

/// The environment variable that makes every spec say `simulate_no_landlock` (tests of the
/// fail-closed path): set to a non-empty value in amberd's environment at start.
pub const SIMULATE_NO_LANDLOCK_VAR: &str = "AMBER_TEST_SANDBOX_NO_LANDLOCK";

/// The daemon-wide part of every sandbox.
#[derive(Debug, Clone)]
pub struct SandboxEnv {
    /// Hidden inside every sandbox: the directory of amberd's own socket (a sandboxed
    /// process that could reach amberd could approve its own requests). Set by `main`.
    pub hidden: Vec<PathBuf>,
    /// `AMBER_TEST_SANDBOX_NO_LANDLOCK` was set when the daemon started.
    pub simulate_no_landlock: bool,
    /// Why the kernel cannot sandbox here (`None`: it can, or nobody asked yet). While
    /// `Some`, no command runs sandboxed: each needs an approval to run without it, and
    /// sandboxed extensions do not start. The daemon's kernel probe fills it at start
    /// (wired by the lead: `crate::sandbox_probe::availability()`); until then `None`.
    pub unavailable: Option<String>,
    /// The private temp directories (`<temp>/amber-tmp-UID/NAME`).
    pub tmp: TmpDirs,
}

impl SandboxEnv {
    /// From the daemon's environment; nothing hidden yet (`main` adds the socket's
    /// directory once it knows it).
    pub fn from_env(env: &impl Fn(&str) -> Option<OsString>) -> Self {
        Self {
            hidden: Vec::new(),
            simulate_no_landlock: env(SIMULATE_NO_LANDLOCK_VAR).is_some_and(|v| !v.is_empty()),
            unavailable: None,
            tmp: TmpDirs::for_current_user(),
        }
    }

    /// The spec of a sandbox `info` (not `off`) over `workspace`, with `tmp_dir` as its
    /// temp directory and `writable_roots` writable too in `workspace-write`.
    pub fn spec(
        &self,
        info: SandboxInfo,
        workspace: &Path,
        tmp_dir: PathBuf,
        writable_roots: &[PathBuf],
    ) -> SandboxSpec {
        SandboxSpec {
            mode: info.mode,
            network: info.network,
            workspace: workspace.to_owned(),
            tmp_dir,
            // Written only in `workspace-write` (`SandboxSpec::writable`).
            writable_roots: writable_roots.to_vec(),
            hidden: self.hidden.clone(),
            simulate_no_landlock: self.simulate_no_landlock,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use amber_policy::sandbox::SandboxMode;

    #[test]
    fn the_test_switch_needs_a_non_empty_value() {
        let set = SandboxEnv::from_env(&|k| (k == SIMULATE_NO_LANDLOCK_VAR).then(|| "1".into()));
        assert!(set.simulate_no_landlock);
        let empty = SandboxEnv::from_env(&|k| (k == SIMULATE_NO_LANDLOCK_VAR).then(|| "".into()));
        assert!(!empty.simulate_no_landlock);
        assert!(!SandboxEnv::from_env(&|_| None).simulate_no_landlock);
    }

    #[test]
    fn writable_roots_are_written_only_in_workspace_write() {
        let mut env = SandboxEnv::from_env(&|_| None);
        env.hidden = vec!["/run/user/1/amber".into()];
        let roots = [PathBuf::from("/cache")];
        let info = |mode| SandboxInfo {
            mode,
            network: false,
        };
        let spec = env.spec(
            info(SandboxMode::WorkspaceWrite),
            Path::new("/ws"),
            "/t".into(),
            &roots,
        );
        assert_eq!(spec.writable(), ["/t", "/ws", "/cache"].map(PathBuf::from));
        assert_eq!(spec.hidden, env.hidden);
        let spec = env.spec(
            info(SandboxMode::ReadOnly),
            Path::new("/ws"),
            "/t".into(),
            &roots,
        );
        assert_eq!(spec.writable(), [PathBuf::from("/t")]);
    }
}
