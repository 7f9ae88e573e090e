//! The throwaway directories a probe or self-test runs in: one private (0700) temp directory
//! holding a `workspace/`, a `tmp/` (the sandbox's `TMPDIR`) and an `outside/` that the
//! sandbox must not write; all removed when the [`Scratch`] is dropped.

use std::io;
use std::path::PathBuf;

use amber_policy::sandbox::{SandboxMode, SandboxSpec};

use super::ProbeSettings;

/// A fresh temp directory and its three parts (canonical paths).
pub(crate) struct Scratch {
    /// Removes everything on drop.
    _root: tempfile::TempDir,
    pub workspace: PathBuf,
    pub tmp: PathBuf,
    pub outside: PathBuf,
}

impl Scratch {
    /// Creates `<temp>/amber-<what>-XXXXXX/{workspace,tmp,outside}`.
    pub(crate) fn new(what: &str) -> io::Result<Scratch> {
        let root = tempfile::Builder::new()
            .prefix(&format!("amber-{what}-"))
            .tempdir()?;
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
            mode: SandboxMode::WorkspaceWrite,
            network: false,
            workspace: self.workspace.clone(),
            tmp_dir: self.tmp.clone(),
            writable_roots: Vec::new(),
            hidden: settings.hidden.clone(),
            simulate_no_landlock: settings.simulate_no_landlock,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_scratch_dirs_exist_apart_and_go_with_it() {
        let scratch = Scratch::new("test").unwrap();
        let root = scratch.workspace.parent().unwrap().to_owned();
        for dir in [&scratch.workspace, &scratch.tmp, &scratch.outside] {
            assert!(dir.is_dir());
            assert_eq!(dir.parent(), Some(root.as_path()));
        }
        let settings = ProbeSettings {
            hidden: vec!["/run/amber".into()],
            simulate_no_landlock: true,
        };
        let spec = scratch.spec(&settings);
        assert!(!spec.writable().contains(&scratch.outside));
        assert!(spec.simulate_no_landlock);
        assert_eq!(spec.hidden, settings.hidden);
        drop(scratch);
        assert!(!root.exists());
    }
}
