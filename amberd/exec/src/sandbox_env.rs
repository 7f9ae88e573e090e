//! What the daemon as a whole knows about the OS sandbox, shared by every session and every
//! sandboxed extension (MCP stdio server, external plugin): the directories sandboxed
//! processes must not see, the test-only switch, whether the kernel can sandbox at all,
//! and where their private temp directories go. A [`SandboxSpec`] is built from it here,
//! and the sandbox of an extension ([`SandboxEnv::extension_spec`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::sandbox::{EgressSpec, NetworkMode, SandboxInfo, SandboxMode, SandboxSpec};

use crate::env_policy::ToolEnv;
use crate::tmp_dirs::TmpDirs;

/// The environment variable that makes every spec simulate a kernel without Landlock
/// (`simulate_landlock_abi: Some(0)`; tests of the fail-closed path): set to a non-empty
/// value in amberd's environment at start.
pub const SIMULATE_NO_LANDLOCK_VAR: &str = "AMBER_TEST_SANDBOX_NO_LANDLOCK";
/// The environment variable that makes every spec simulate a kernel whose Landlock ABI is at
/// most this number (tests of the per-ABI degradation); ignored when not a number, and
/// under `AMBER_TEST_SANDBOX_NO_LANDLOCK`.
pub const SIMULATE_LANDLOCK_ABI_VAR: &str = "AMBER_TEST_SANDBOX_LANDLOCK_ABI";

/// The daemon-wide part of every sandbox.
#[derive(Debug, Clone)]
pub struct SandboxEnv {
    /// Hidden inside every sandbox: the directory of amberd's own socket (a sandboxed
    /// process that could reach amberd could approve its own requests). Set by `main`.
    pub hidden: Vec<PathBuf>,
    /// The Landlock ABI to simulate (`0`: none), from `AMBER_TEST_SANDBOX_NO_LANDLOCK` or
    /// `AMBER_TEST_SANDBOX_LANDLOCK_ABI` when the daemon started; `None`: the kernel's.
    pub simulate_landlock_abi: Option<u32>,
    /// Why the kernel cannot sandbox here: set once by the daemon's start-up probe
    /// (`probe`) when it fails; unset while it runs or when it passed. While set, no
    /// command runs sandboxed: each needs an approval to run without it, and sandboxed
    /// extensions do not start. (A command started before the verdict fails closed in the
    /// helper all the same: it never runs unsandboxed.)
    pub unavailable: Arc<OnceLock<String>>,
    /// The private temp directories (`<temp>/amber-tmp-UID/NAME`).
    pub tmp: TmpDirs,
    /// Masked inside every sandbox: the secret locations (`amber_policy::SecretLocations`).
    pub masked: Vec<PathBuf>,
    /// `[sandbox] allow_unix_sockets`.
    pub allow_unix_sockets: Vec<PathBuf>,
    /// The environment MCP stdio servers and external plugins start with, sandboxed or
    /// not: the tool processes' (`[tools.env]`, provider keys removed); their own `env`
    /// table adds to it.
    pub extension_env: Arc<ToolEnv>,
    /// Where no namespace can be made, sandbox with Landlock and seccomp alone
    /// (`SandboxSpec::in_place`) rather than refuse.
    pub in_place: bool,
}

impl SandboxEnv {
    /// From the daemon's environment; nothing hidden yet (`main` adds the socket's
    /// directory once it knows it).
    pub fn from_env(env: &impl Fn(&str) -> Option<OsString>) -> Self {
        Self {
            hidden: Vec::new(),
            simulate_landlock_abi: simulated_landlock_abi(env),
            unavailable: Arc::new(OnceLock::new()),
            tmp: TmpDirs::for_current_user(),
            masked: Vec::new(),
            allow_unix_sockets: Vec::new(),
            extension_env: ToolEnv::process_default(),
            in_place: false,
        }
    }

    /// Why the kernel cannot sandbox here, once the probe said so.
    pub fn unavailable(&self) -> Option<&str> {
        self.unavailable.get().map(String::as_str)
    }

    /// Nothing hidden, no switch, the kernel taken as able (unit tests).
    #[cfg(any(test, feature = "test-support"))]
    pub fn for_tests() -> Arc<Self> {
        Arc::new(Self::from_env(&|_| None))
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
            // An allowlist's commands reach the proxy in a namespace of their own.
            egress: (info.network_mode == NetworkMode::Allowlist).then_some(EgressSpec {
                port: crate::egress::PROXY_PORT,
            }),
            workspace: workspace.to_owned(),
            tmp_dir,
            // Written only in `workspace-write` (`SandboxSpec::writable`).
            writable_roots: writable_roots.to_vec(),
            hidden: self.hidden.clone(),
            masked: self.masked.clone(),
            allow_unix_sockets: self.allow_unix_sockets.clone(),
            nested_checkouts: Vec::new(),
            daemon_pid: Some(std::process::id()),
            guarded_pids: Vec::new(),
            simulate_landlock_abi: self.simulate_landlock_abi,
            in_place: self.in_place,
        }
    }
}

impl SandboxEnv {
    /// An extension's environment: [`SandboxEnv::extension_env`], then its `env` table,
    /// where a value that is exactly `${NAME}` is amberd's own variable `NAME` (how a
    /// config names a key an extension needs without writing it down), empty if unset.
    pub fn extension_vars(
        &self,
        own: &std::collections::BTreeMap<String, String>,
    ) -> Vec<(OsString, OsString)> {
        let mut vars: Vec<(OsString, OsString)> = self.extension_env.vars().to_vec();
        for (name, value) in own {
            let value = match value.strip_prefix("${").and_then(|v| v.strip_suffix('}')) {
                Some(from) => std::env::var_os(from).unwrap_or_default(),
                None => OsString::from(value),
            };
            vars.retain(|(k, _)| k.as_os_str() != std::ffi::OsStr::new(name));
            vars.push((OsString::from(name), value));
        }
        vars
    }
}

/// The test switches' Landlock ABI: `Some(0)` under `AMBER_TEST_SANDBOX_NO_LANDLOCK`, else
/// `AMBER_TEST_SANDBOX_LANDLOCK_ABI`'s number, else `None` (the kernel's).
/// Always `None` in a build without the test switches (`test_switches`).
fn simulated_landlock_abi(env: &impl Fn(&str) -> Option<OsString>) -> Option<u32> {
    if !crate::test_switches::ENABLED {
        return None;
    }
    if env(SIMULATE_NO_LANDLOCK_VAR).is_some_and(|v| !v.is_empty()) {
        return Some(0);
    }
    env(SIMULATE_LANDLOCK_ABI_VAR)?
        .to_str()?
        .trim()
        .parse()
        .ok()
}

/// An extension table's `sandbox = "…"` and `network = …` (MCP stdio server, external
/// plugin): `None` runs it unsandboxed (no `sandbox`, or `off`); the network stays on
/// unless `network = false`, since extensions usually need it.
pub fn extension_sandbox(
    mode: Option<SandboxMode>,
    network: Option<bool>,
) -> Result<Option<SandboxInfo>, String> {
    match mode {
        None if network.is_some() => Err(
            "`network` only applies with `sandbox = \"workspace-write\"` or \"read-only\"".into(),
        ),
        None | Some(SandboxMode::Off) => Ok(None),
        Some(mode) => Ok(Some(SandboxInfo::new(
            mode,
            NetworkMode::from_bool(network.unwrap_or(true)),
        ))),
    }
}

impl SandboxEnv {
    /// The sandbox extension `name` (`kind`: `mcp`, `plugin`) starts in: `info`, with
    /// `cwd` as its workspace and `<temp>/amber-tmp-UID/KIND-NAME` as its temp directory.
    /// Fails closed: when the kernel cannot sandbox, or the spec cannot be made, the
    /// extension does not start.
    pub fn extension_spec(
        &self,
        kind: &str,
        name: &str,
        info: SandboxInfo,
        cwd: &Path,
    ) -> Result<SandboxSpec, String> {
        if let Some(reason) = self.unavailable.get() {
            return Err(format!(
                "the OS sandbox is unavailable ({reason}), so `{name}` (sandbox = \"{}\") does not start",
                info.mode
            ));
        }
        let workspace = std::fs::canonicalize(cwd)
            .map_err(|e| format!("its working directory {}: {e}", cwd.display()))?;
        let tmp = self
            .tmp
            .ensure(&format!("{kind}-{name}"))
            .map_err(|e| e.to_string())?;
        Ok(self.spec(info, &workspace, tmp, &[]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_switch_needs_a_non_empty_value() {
        let set = SandboxEnv::from_env(&|k| (k == SIMULATE_NO_LANDLOCK_VAR).then(|| "1".into()));
        assert_eq!(set.simulate_landlock_abi, Some(0));
        let empty = SandboxEnv::from_env(&|k| (k == SIMULATE_NO_LANDLOCK_VAR).then(|| "".into()));
        assert_eq!(empty.simulate_landlock_abi, None);
        assert_eq!(SandboxEnv::from_env(&|_| None).simulate_landlock_abi, None);
    }

    #[test]
    fn a_lower_landlock_abi_may_be_simulated_and_no_landlock_wins() {
        let abi =
            |v: &'static str| move |k: &str| (k == SIMULATE_LANDLOCK_ABI_VAR).then(|| v.into());
        assert_eq!(
            SandboxEnv::from_env(&abi("5")).simulate_landlock_abi,
            Some(5)
        );
        assert_eq!(
            SandboxEnv::from_env(&abi("five")).simulate_landlock_abi,
            None
        );
        let both = |k: &str| match k {
            SIMULATE_NO_LANDLOCK_VAR => Some("1".into()),
            SIMULATE_LANDLOCK_ABI_VAR => Some("5".into()),
            _ => None,
        };
        assert_eq!(SandboxEnv::from_env(&both).simulate_landlock_abi, Some(0));
    }

    #[test]
    fn writable_roots_are_written_only_in_workspace_write() {
        let mut env = SandboxEnv::from_env(&|_| None);
        env.hidden = vec!["/run/user/1/amber".into()];
        let roots = [PathBuf::from("/cache")];
        let info = |mode| SandboxInfo::new(mode, NetworkMode::Off);
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

#[cfg(test)]
mod extension_tests {
    use super::*;

    #[test]
    fn an_extension_is_unsandboxed_unless_its_table_says_otherwise_and_keeps_the_network() {
        assert_eq!(extension_sandbox(None, None), Ok(None));
        assert_eq!(extension_sandbox(Some(SandboxMode::Off), None), Ok(None));
        assert_eq!(
            extension_sandbox(Some(SandboxMode::WorkspaceWrite), None),
            Ok(Some(SandboxInfo::new(
                SandboxMode::WorkspaceWrite,
                amber_proto::NetworkMode::from_bool(true)
            )))
        );
        assert_eq!(
            extension_sandbox(Some(SandboxMode::ReadOnly), Some(false)),
            Ok(Some(SandboxInfo::new(
                SandboxMode::ReadOnly,
                amber_proto::NetworkMode::from_bool(false)
            )))
        );
        assert!(
            extension_sandbox(None, Some(false))
                .unwrap_err()
                .contains("network")
        );
    }

    #[test]
    fn a_sandboxed_extension_fails_closed_with_the_reason() {
        let unable = SandboxEnv::from_env(&|_| None);
        unable.unavailable.set("no Landlock".into()).unwrap();
        let info = SandboxInfo::default();
        let err = unable
            .extension_spec("mcp", "fs", info, Path::new("/"))
            .unwrap_err();
        assert!(err.contains("no Landlock") && err.contains("`fs`"), "{err}");
        let env = SandboxEnv::from_env(&|_| None);
        let missing = Path::new("/nonexistent-amber-dir");
        let err = env.extension_spec("mcp", "fs", info, missing).unwrap_err();
        assert!(err.contains("nonexistent-amber-dir"), "{err}");
    }
}
