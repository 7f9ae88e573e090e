//! The throwaway directories a probe or self-test runs in: one private (0700) temp directory
//! `<temp>/amber-<what>-<daemon pid>-XXXXXX` holding a `workspace/`, a `tmp/` (the sandbox's
//! `TMPDIR`) and an `outside/` that the sandbox must not write; all removed when the
//! [`Scratch`] is dropped. A daemon killed mid-run (SIGKILL) cannot remove its own, so each
//! new scratch first removes those of daemons that no longer exist ([`sweep`]).

use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::sandbox::{SandboxMode, SandboxSpec};

use super::ProbeSettings;

/// The kinds of scratch directories (`amber-<what>-…`); [`sweep`] knows only these.
pub(crate) const KINDS: &[&str] = &["probe", "selftest"];

/// A fresh temp directory and its three parts (canonical paths).
pub(crate) struct Scratch {
    /// Removes everything on drop.
    _root: tempfile::TempDir,
    pub workspace: PathBuf,
    pub tmp: PathBuf,
    pub outside: PathBuf,
}

impl Scratch {
    /// Creates `<temp>/amber-<what>-<pid>-XXXXXX/{workspace,tmp,outside}`.
    pub(crate) fn new(what: &str) -> io::Result<Scratch> {
        let temp = std::env::temp_dir();
        sweep(&temp, current_uid(), &pid_alive);
        let root = tempfile::Builder::new()
            .prefix(&format!("amber-{what}-{}-", std::process::id()))
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(&temp)?;
        // The sandbox names real paths (Landlock and bind mounts resolve symlinks).
        let base = root.path().canonicalize()?;
        let make = |name: &str| -> io::Result<PathBuf> {
            let dir = base.join(name);
            std::fs::create_dir(&dir)?;
            Ok(dir)
        };
        Ok(Scratch {
            workspace: make("workspace")?,
            tmp: make("tmp")?,
            outside: make("outside")?,
            _root: root,
        })
    }

    /// The sandbox sessions get by default, over this scratch workspace: `workspace-write`,
    /// no network, nothing else writable.
    pub(crate) fn spec(&self, settings: &ProbeSettings) -> SandboxSpec {
        SandboxSpec {
            egress: None,
            mode: SandboxMode::WorkspaceWrite,
            network: false,
            workspace: self.workspace.clone(),
            tmp_dir: self.tmp.clone(),
            writable_roots: Vec::new(),
            hidden: settings.hidden.clone(),
            masked: Vec::new(),
            allow_unix_sockets: Vec::new(),
            nested_checkouts: Vec::new(),
            daemon_pid: Some(std::process::id()),
            guarded_pids: Vec::new(),
            simulate_landlock_abi: settings.simulate_landlock_abi,
            in_place: settings.in_place,
        }
    }
}

/// Removes the scratch directories in `temp` that are `uid`'s and were made by a daemon
/// that is gone (`alive(pid)` false). Best effort: errors are ignored.
pub(crate) fn sweep(temp: &Path, uid: u32, alive: &dyn Fn(u32) -> bool) {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(owner_pid) else {
            continue;
        };
        // Never followed: a symlink of that name is not ours to clean through.
        let ours =
            std::fs::symlink_metadata(entry.path()).is_ok_and(|m| m.is_dir() && m.uid() == uid);
        if ours && !alive(pid) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The daemon pid in a scratch directory's name (`amber-probe-4242-Ab3xYz`).
pub(crate) fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("amber-")?;
    let (kind, rest) = rest.split_once('-')?;
    if !KINDS.contains(&kind) {
        return None;
    }
    let (pid, random) = rest.split_once('-')?;
    if random.is_empty() {
        return None;
    }
    pid.parse().ok().filter(|p| *p > 0)
}

fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

fn current_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scratch_dirs_exist_apart_and_go_with_it() {
        let scratch = Scratch::new("probe").unwrap();
        let root = scratch.workspace.parent().unwrap().to_owned();
        let mode = std::fs::metadata(&root).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "private");
        let name = root.file_name().unwrap().to_str().unwrap().to_owned();
        assert_eq!(owner_pid(&name), Some(std::process::id()), "{name}");
        for dir in [&scratch.workspace, &scratch.tmp, &scratch.outside] {
            assert!(dir.is_dir());
            assert_eq!(dir.parent(), Some(root.as_path()));
        }
        let settings = ProbeSettings {
            hidden: vec!["/run/amber".into()],
            simulate_landlock_abi: Some(0),
            in_place: false,
        };
        let spec = scratch.spec(&settings);
        assert!(!spec.writable().contains(&scratch.outside));
        assert_eq!(spec.simulate_landlock_abi, Some(0));
        assert_eq!(spec.hidden, settings.hidden);
        drop(scratch);
        assert!(!root.exists());
    }

    #[test]
    fn only_scratch_names_carry_an_owner() {
        assert_eq!(owner_pid("amber-probe-4242-Ab3xYz"), Some(4242));
        assert_eq!(owner_pid("amber-selftest-7-x"), Some(7));
        assert_eq!(owner_pid("amber-tmp-1000"), None);
        assert_eq!(owner_pid("amber-probe-4242-"), None);
        assert_eq!(owner_pid("amber-probe-abc-x"), None);
        assert_eq!(owner_pid("amber-test-4242-x"), None);
    }

    #[test]
    fn a_sweep_removes_only_a_gone_daemons_scratch() {
        let temp = tempfile::tempdir().unwrap();
        let uid = current_uid();
        let gone = temp.path().join("amber-probe-11-aaaaaa");
        let live = temp.path().join("amber-selftest-22-bbbbbb");
        let other = temp.path().join("amber-tmp-11");
        for dir in [&gone, &live, &other] {
            std::fs::create_dir_all(dir.join("workspace")).unwrap();
        }
        sweep(temp.path(), uid, &|pid| pid == 22);
        assert!(!gone.exists());
        assert!(live.exists() && other.exists());
        // Someone else's directory is left alone.
        std::fs::create_dir(&gone).unwrap();
        sweep(temp.path(), uid.wrapping_add(1), &|_| false);
        assert!(gone.exists());
    }
}
