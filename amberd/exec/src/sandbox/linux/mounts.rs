//! The command's view of the file system, laid out in its own mount namespace: every mount
//! read-only (and `nodev`, `nosuid`), the writable directories bound read-write over
//! themselves, the protected paths inside the workspace bound read-only over those (and
//! `.git` pinned by a mount of its own, so it cannot be renamed away and replaced), a
//! minimal `/dev` (null, zero, full, random, urandom, tty, a private pts and shm), amberd's
//! runtime directory covered by an empty read-only tmpfs, and the secret locations masked
//! (a directory by such a tmpfs, a file by `/dev/null`). A secret directory that holds a
//! path the command uses is *enclosed*: covered whole by a tmpfs on which only the used
//! paths are mounted back, so whatever appears in it later (another session's clone made
//! while a process runs) is not there for the command either.
//!
//! [`Plan::new`] resolves every path before the namespace exists (creating the empty
//! `.amber/` and `.git/hooks` a protected mount needs as its mount point); [`Plan::apply`]
//! runs inside it.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::sandbox::{SandboxError, SandboxMode, SandboxSpec};

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
/// Device nodes a command may use; everything else under `/dev` is gone.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];
/// What a git dir holds that decides what git runs or where it reads its configuration;
/// each one that exists is read-only (`hooks` is created when missing: a new hook would run
/// at the user's next commit).
const GIT_CONTROL: &[&str] = &[
    "config",
    "config.worktree",
    "commondir",
    "info",
    "objects/info/alternates",
    "objects/info/http-alternates",
];
/// The same for a linked worktree's admin directory (`.git/worktrees/NAME`).
const WORKTREE_CONTROL: &[&str] = &["config.worktree", "commondir", "gitdir"];
/// How deep `.git/modules` (submodules of submodules…) is searched for git directories.
const MODULES_DEPTH: usize = 6;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Every path the mounts need, resolved.
#[derive(Debug)]
pub(super) struct Plan {
    /// Bound read-write (canonical, existing directories).
    pub(super) writable: Vec<PathBuf>,
    /// Bound over themselves so they cannot be renamed or removed (`.git`).
    pinned: Vec<PathBuf>,
    /// Bound read-only over the writable ones.
    pub(super) protected: Vec<PathBuf>,
    /// Covered by an empty read-only tmpfs.
    pub(super) hidden: Vec<PathBuf>,
    /// Sockets covered by `/dev/null` (a hidden directory that holds a writable one cannot
    /// be covered as a whole: its sockets are).
    pub(super) hidden_sockets: Vec<PathBuf>,
    /// The user's other sockets covered by `/dev/null` when `allow_unix_sockets` lets Unix
    /// sockets be created: one that is gone by then is skipped.
    other_sockets: Vec<PathBuf>,
    /// Secret files covered by `/dev/null` (read as empty).
    pub(super) masked_files: Vec<PathBuf>,
    /// Secret directories that hold used paths: covered whole, the used paths mounted back.
    pub(super) enclosed: Vec<Enclosure>,
    /// The working directory to enter again once the mounts exist.
    cwd: Option<PathBuf>,
}

impl Plan {
    pub(super) fn new(spec: &SandboxSpec) -> Result<Self, SandboxError> {
        let writable: Vec<PathBuf> = spec
            .writable()
            .iter()
            .filter_map(|dir| std::fs::canonicalize(dir).ok())
            .filter(|dir| dir.is_dir() && dir != Path::new("/"))
            .collect();
        let mut plan = Plan {
            writable,
            pinned: Vec::new(),
            protected: Vec::new(),
            hidden: Vec::new(),
            hidden_sockets: Vec::new(),
            other_sockets: Vec::new(),
            masked_files: Vec::new(),
            enclosed: Vec::new(),
            cwd: std::env::current_dir().ok(),
        };
        let workspace = std::fs::canonicalize(&spec.workspace).ok();
        // Sorted, a directory comes before what lies in it: hidden whole, it hides them too
        // (an inner path does not exist on the empty mount over it).
        let mut hidden: Vec<PathBuf> = spec
            .hidden
            .iter()
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect();
        hidden.sort();
        hidden.dedup();
        for path in hidden {
            plan.hide(&path, workspace.as_deref());
        }
        let mut masked: Vec<PathBuf> = spec
            .masked
            .iter()
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect();
        masked.sort();
        masked.dedup();
        for path in masked {
            plan.mask(&path, workspace.as_deref());
        }
        if spec.network && !spec.allow_unix_sockets.is_empty() {
            plan.cover_other_sockets(&spec.allow_unix_sockets)?;
        }
        if spec.mode == SandboxMode::WorkspaceWrite {
            let workspace = std::fs::canonicalize(&spec.workspace)
                .map_err(|err| SandboxError::setup("resolving the workspace", err))?;
            plan.protect_workspace(&workspace, &spec.nested_checkouts)?;
            // A submodule's git dir is reached from its checkout and from `.git/modules`;
            // sorted, a parent is bound before what lies in it.
            plan.protected.sort();
            plan.protected.dedup();
        }
        Ok(plan)
    }

    /// Hides `path`: a directory as a whole when nothing the command may use is inside it,
    /// else the sockets directly in it; a socket itself.
    fn hide(&mut self, path: &Path, workspace: Option<&Path>) {
        use std::os::unix::fs::FileTypeExt;
        if self.covered(path) {
            return;
        }
        let Ok(meta) = std::fs::metadata(path) else {
            return;
        };
        if meta.file_type().is_socket() {
            self.hidden_sockets.push(path.to_path_buf());
            return;
        }
        if !meta.is_dir() {
            return;
        }
        let holds_used = self
            .writable
            .iter()
            .map(PathBuf::as_path)
            .chain(workspace)
            .chain(self.cwd.as_deref())
            .any(|used| used.starts_with(path));
        if !holds_used {
            self.hidden.push(path.to_path_buf());
            return;
        }
        let Ok(entries) = std::fs::read_dir(path) else {
            return;
        };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_socket()) {
                self.hidden_sockets.push(entry.path());
            }
        }
    }

    /// Covers every socket bound on the host but those `allowed` names and those in the
    /// directories the command may write (which it could have bound itself).
    fn cover_other_sockets(&mut self, allowed: &[PathBuf]) -> Result<(), SandboxError> {
        use std::os::unix::fs::FileTypeExt;
        let allowed: Vec<PathBuf> = allowed
            .iter()
            .filter_map(|path| std::fs::canonicalize(path).ok())
            .collect();
        let bound = super::sockets::bound_paths()
            .map_err(|err| SandboxError::setup("listing the host's Unix sockets", err))?;
        for path in bound {
            let Ok(real) = std::fs::canonicalize(&path) else {
                continue;
            };
            let own = self.writable.iter().any(|dir| real.starts_with(dir));
            let is_socket = std::fs::metadata(&real).is_ok_and(|m| m.file_type().is_socket());
            if is_socket && !own && !allowed.contains(&real) && !self.other_sockets.contains(&real)
            {
                self.other_sockets.push(real);
            }
        }
        if self.other_sockets.len() > super::sockets::MAX_SOCKETS {
            return Err(SandboxError::setup(
                "covering the host's other Unix sockets",
                std::io::Error::other(format!(
                    "{} sockets are bound, more than the {} the sandbox covers",
                    self.other_sockets.len(),
                    super::sockets::MAX_SOCKETS
                )),
            ));
        }
        Ok(())
    }

    /// Whether `path` lies in (or is) a directory already hidden whole, or in an enclosed
    /// one outside what is mounted back: it is gone with it, and a mount onto it would fail
    /// (the empty mount over its parent has no such path).
    fn covered(&self, path: &Path) -> bool {
        self.hidden.iter().any(|dir| path.starts_with(dir))
            || self.enclosed.iter().any(|enclosure| {
                path.starts_with(&enclosure.dir)
                    && !enclosure.kept.iter().any(|kept| path.starts_with(kept))
            })
    }

    /// Masks the secret location `path`: a directory by an empty read-only tmpfs, a file by
    /// `/dev/null`. A directory that holds a path the command uses (the workspace inside
    /// amber's data dir, a session's clone among a runner's) is enclosed around it.
    fn mask(&mut self, path: &Path, workspace: Option<&Path>) {
        if self.covered(path) {
            return;
        }
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return;
        };
        if meta.is_file() {
            self.masked_files.push(path.to_path_buf());
            return;
        }
        if !meta.is_dir() {
            return;
        }
        let used: Vec<&Path> = self
            .writable
            .iter()
            .map(PathBuf::as_path)
            .chain(workspace)
            .chain(self.cwd.as_deref())
            .collect();
        if used.iter().any(|u| path.starts_with(u)) {
            // The secret lies inside what the command works on: the user chose to work there.
            return;
        }
        let mut kept: Vec<PathBuf> = used
            .iter()
            .filter(|u| u.starts_with(path))
            .map(|u| u.to_path_buf())
            .collect();
        if kept.is_empty() {
            self.hidden.push(path.to_path_buf());
            return;
        }
        // Only the outermost: one inside another comes back with it.
        kept.sort();
        kept.dedup();
        let outermost: Vec<PathBuf> = kept
            .iter()
            .filter(|k| !kept.iter().any(|other| other != *k && k.starts_with(other)))
            .cloned()
            .collect();
        self.enclosed.push(Enclosure {
            dir: path.to_path_buf(),
            kept: outermost,
        });
    }

    /// `.amber/` when there is one (nothing is created in the workspace for it: workspace
    /// configuration counts only once the user trusted it) and what the workspace
    /// repository's git reads to decide what it runs (and its submodules').
    fn protect_workspace(
        &mut self,
        workspace: &Path,
        nested: &[PathBuf],
    ) -> Result<(), SandboxError> {
        let amber = workspace.join(".amber");
        if std::fs::symlink_metadata(&amber).is_ok_and(|m| m.is_dir()) {
            self.protected.push(amber);
        }
        self.protect_checkout(workspace, workspace)?;
        for rel in nested {
            // Only a real directory inside the workspace: git does not descend through a
            // link, and what lies outside is read-only.
            let path = workspace.join(rel);
            if std::fs::canonicalize(&path).is_ok_and(|real| real == path && real != workspace) {
                self.protect_checkout(&path, workspace)?;
            }
        }
        Ok(())
    }

    /// What git reads in the checkout at `root` to decide what it runs: its `.git` (a
    /// directory, or a `gitdir: …` file) and the git dir that names.
    fn protect_checkout(&mut self, root: &Path, workspace: &Path) -> Result<(), SandboxError> {
        let git = root.join(".git");
        let Ok(meta) = std::fs::symlink_metadata(&git) else {
            return Ok(());
        };
        if meta.is_dir() {
            self.pinned.push(git.clone());
            return self.protect_git_dir(&git);
        }
        if meta.is_file() {
            // A worktree's or submodule's `gitdir: …` file: rewritten, it would send git to
            // a git dir (and config) of the command's making.
            self.protected.push(git.clone());
        }
        // A `.git` file (worktree, submodule) points to a git dir elsewhere, and a symlink
        // resolves elsewhere: outside the workspace both are read-only anyway; inside it,
        // protect what it resolves to.
        let target = if meta.is_file() {
            gitdir_of(&git)
        } else {
            std::fs::canonicalize(&git).ok()
        };
        if let Some(target) = target
            && target.is_dir()
            && target.starts_with(workspace)
        {
            self.protect_git_dir(&target)?;
        }
        Ok(())
    }

    fn protect_git_dir(&mut self, git_dir: &Path) -> Result<(), SandboxError> {
        let mut pending = vec![(git_dir.to_path_buf(), 0usize)];
        while let Some((dir, depth)) = pending.pop() {
            let hooks = dir.join("hooks");
            ensure_dir(&hooks)?;
            self.protected.push(hooks);
            self.protect_existing(&dir, GIT_CONTROL);
            // Linked worktrees' admin directories name their own git dir and config.
            if let Ok(entries) = std::fs::read_dir(dir.join("worktrees")) {
                for entry in entries.flatten() {
                    if entry.file_type().is_ok_and(|t| t.is_dir()) {
                        self.protect_existing(&entry.path(), WORKTREE_CONTROL);
                    }
                }
            }
            if depth >= MODULES_DEPTH {
                continue;
            }
            // Submodules keep their git dirs (hooks and config included) in `modules/`,
            // nested by name, possibly with slashes: every directory holding a `HEAD`.
            let mut stack = vec![dir.join("modules")];
            while let Some(candidate) = stack.pop() {
                let Ok(entries) = std::fs::read_dir(&candidate) else {
                    continue;
                };
                for entry in entries.flatten() {
                    let path = entry.path();
                    if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                        continue;
                    }
                    if path.join("HEAD").is_file() {
                        pending.push((path, depth + 1));
                    } else {
                        stack.push(path);
                    }
                }
            }
        }
        Ok(())
    }

    /// Protects each of `names` under `dir` that exists as a file or directory (not a link:
    /// a bind through it would protect where it points instead).
    fn protect_existing(&mut self, dir: &Path, names: &[&str]) {
        for name in names {
            let path = dir.join(name);
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() || m.is_dir()) {
                self.protected.push(path);
            }
        }
    }

    /// Lays the mounts out; call inside the new mount namespace.
    pub(super) fn apply(&self) -> Result<(), SandboxError> {
        mount(
            None,
            Path::new("/"),
            None,
            libc::MS_REC | libc::MS_SLAVE,
            None,
        )
        .map_err(|err| SandboxError::setup("making / a slave mount", err))?;
        // Clones of the device nodes, taken before everything turns `nodev`.
        let devices: Vec<(&str, OwnedFd)> = DEVICES
            .iter()
            .filter_map(|name| Some((*name, clone_tree(&Path::new("/dev").join(name)).ok()?)))
            .collect();
        for dir in &self.writable {
            bind(dir, "binding a writable directory")?;
        }
        set_attr(
            Path::new("/"),
            true,
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
            0,
        )
        .map_err(|err| SandboxError::setup("making every mount read-only", err))?;
        for dir in &self.writable {
            set_attr(dir, false, 0, MOUNT_ATTR_RDONLY).map_err(|err| {
                SandboxError::setup(format!("making {} writable", dir.display()), err)
            })?;
        }
        for path in &self.pinned {
            bind(path, "pinning .git")?;
        }
        for path in &self.protected {
            bind(path, "binding a protected path")?;
            set_attr(path, true, MOUNT_ATTR_RDONLY, 0).map_err(|err| {
                SandboxError::setup(format!("protecting {}", path.display()), err)
            })?;
        }
        for enclosure in &self.enclosed {
            enclosure.apply()?;
        }
        for path in self.hidden_sockets.iter().chain(&self.masked_files) {
            // Gone since the plan listed it (another session's workspace, removed): nothing
            // is left there to hide.
            match bind_mount(Path::new("/dev/null"), path, libc::MS_BIND) {
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                other => other.map_err(|err| {
                    SandboxError::setup(format!("hiding {}", path.display()), err)
                })?,
            }
        }
        for path in &self.other_sockets {
            match bind_mount(Path::new("/dev/null"), path, libc::MS_BIND) {
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                other => other.map_err(|err| {
                    SandboxError::setup(format!("covering the socket {}", path.display()), err)
                })?,
            }
        }
        minimal_dev(devices)?;
        for dir in &self.hidden {
            let hidden = mount(
                Some("tmpfs"),
                dir,
                Some("tmpfs"),
                libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                Some("mode=000,size=4k"),
            );
            match hidden {
                // Gone since the plan listed it: nothing is left there to hide.
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                other => other
                    .map_err(|err| SandboxError::setup(format!("hiding {}", dir.display()), err))?,
            }
        }
        // The working directory still points into the mount it was entered through (now
        // read-only under the workspace's own bind): enter it again through the new tree.
        if let Some(cwd) = &self.cwd {
            std::env::set_current_dir(cwd)
                .map_err(|err| SandboxError::setup("re-entering the working directory", err))?;
        }
        Ok(())
    }
}

/// A secret directory that holds paths the command uses.
#[derive(Debug)]
pub(super) struct Enclosure {
    pub(super) dir: PathBuf,
    /// The used paths in it (none inside another), mounted back as they were.
    pub(super) kept: Vec<PathBuf>,
}

impl Enclosure {
    /// Covers the directory with an empty tmpfs, makes the way to each kept path in it,
    /// mounts each back (with the mounts inside it, as they were), then makes the tmpfs
    /// read-only: only the kept paths are there, whatever the directory holds later.
    fn apply(&self) -> Result<(), SandboxError> {
        let setup =
            |step: &str, err| SandboxError::setup(format!("{step} {}", self.dir.display()), err);
        let mut trees = Vec::new();
        for kept in &self.kept {
            match clone_tree_with(kept, AT_RECURSIVE) {
                Ok(tree) => trees.push((kept, tree)),
                // Gone since the plan listed it: nothing to mount back.
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => return Err(setup("keeping a used path of", err)),
            }
        }
        match mount(
            Some("tmpfs"),
            &self.dir,
            Some("tmpfs"),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            Some("mode=755,size=64k"),
        ) {
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            other => other.map_err(|err| setup("enclosing", err))?,
        }
        for (kept, tree) in &trees {
            std::fs::create_dir_all(kept).map_err(|err| setup("making the way back in", err))?;
            move_tree(tree, kept).map_err(|err| setup("mounting a used path back in", err))?;
        }
        set_attr(&self.dir, false, MOUNT_ATTR_RDONLY, 0)
            .map_err(|err| setup("making read-only the enclosure of", err))
    }
}

/// The git dir a `.git` file (`gitdir: PATH`) names, canonical.
fn gitdir_of(file: &Path) -> Option<PathBuf> {
    let text = read_bounded(file, 4096)?;
    let text = String::from_utf8(text).ok()?;
    let named = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    let base = file.parent()?;
    let target = std::fs::canonicalize(base.join(named)).ok()?;
    target.is_dir().then_some(target)
}

/// A regular file's content when it is at most `max` bytes (not through a link).
fn read_bounded(path: &Path, max: u64) -> Option<Vec<u8>> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    (meta.is_file() && meta.len() <= max)
        .then(|| std::fs::read(path).ok())
        .flatten()
}

/// Creates an empty directory to mount over when nothing is there yet. Commands of one
/// batch start side by side, so another one's helper may create it first: that is fine.
fn ensure_dir(path: &Path) -> Result<(), SandboxError> {
    if std::fs::symlink_metadata(path).is_err() {
        match std::fs::create_dir(path) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(err) => {
                return Err(SandboxError::setup(
                    format!("creating {}", path.display()),
                    err,
                ));
            }
        }
    }
    Ok(())
}

/// A fresh tmpfs `/dev` holding only [`DEVICES`], a private devpts, a private shm and the
/// usual links; read-only itself.
fn minimal_dev(devices: Vec<(&str, OwnedFd)>) -> Result<(), SandboxError> {
    let dev = Path::new("/dev");
    let step = |what: &str| format!("building /dev ({what})");
    mount(
        Some("tmpfs"),
        dev,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("mode=0755,size=64k"),
    )
    .map_err(|err| SandboxError::setup(step("tmpfs"), err))?;
    for (name, tree) in devices {
        let node = dev.join(name);
        std::fs::File::create(&node).map_err(|err| SandboxError::setup(step(name), err))?;
        move_tree(&tree, &node).map_err(|err| SandboxError::setup(step(name), err))?;
    }
    let shm = dev.join("shm");
    std::fs::create_dir(&shm).map_err(|err| SandboxError::setup(step("shm"), err))?;
    mount(
        Some("tmpfs"),
        &shm,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("mode=1777,size=64m"),
    )
    .map_err(|err| SandboxError::setup(step("shm"), err))?;
    let pts = dev.join("pts");
    std::fs::create_dir(&pts).map_err(|err| SandboxError::setup(step("pts"), err))?;
    // A private pts instance for programs that open a pseudo-terminal; optional.
    if mount(
        Some("devpts"),
        &pts,
        Some("devpts"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    )
    .is_ok()
    {
        let _ = std::os::unix::fs::symlink("pts/ptmx", dev.join("ptmx"));
    }
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(target, dev.join(link))
            .map_err(|err| SandboxError::setup(step(link), err))?;
    }
    set_attr(dev, false, MOUNT_ATTR_RDONLY, 0)
        .map_err(|err| SandboxError::setup(step("read-only"), err))?;
    Ok(())
}

fn cstr(path: &Path) -> std::io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)
}

fn mount(
    source: Option<&str>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> std::io::Result<()> {
    let source = source
        .map(CString::new)
        .transpose()
        .map_err(std::io::Error::other)?;
    let fstype = fstype
        .map(CString::new)
        .transpose()
        .map_err(std::io::Error::other)?;
    let data = data
        .map(CString::new)
        .transpose()
        .map_err(std::io::Error::other)?;
    let target = cstr(target)?;
    let ptr = |s: &Option<CString>| s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
    // SAFETY: every pointer is a NUL-terminated string alive for the call, or null.
    let rc = unsafe {
        libc::mount(
            ptr(&source),
            target.as_ptr(),
            ptr(&fstype),
            flags,
            ptr(&data).cast(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Binds `path` over itself (recursively), making it a mount of its own.
fn bind(path: &Path, step: &str) -> Result<(), SandboxError> {
    bind_mount(path, path, libc::MS_BIND | libc::MS_REC)
        .map_err(|err| SandboxError::setup(format!("{step} {}", path.display()), err))
}

fn bind_mount(source: &Path, target: &Path, flags: libc::c_ulong) -> std::io::Result<()> {
    let source = cstr(source)?;
    let target = cstr(target)?;
    // SAFETY: valid path strings alive for the call; no type or data for a bind.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    };
    check_io(rc.into())
}

fn set_attr(path: &Path, recursive: bool, set: u64, clear: u64) -> std::io::Result<()> {
    let path = cstr(path)?;
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: a valid path string and a mount_attr of the size passed, alive for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check_io(rc)
}

/// A detached copy of the mount at `path` (`open_tree(OPEN_TREE_CLONE)`).
fn clone_tree(path: &Path) -> std::io::Result<OwnedFd> {
    clone_tree_with(path, 0)
}

/// [`clone_tree`] with `flags` (`AT_RECURSIVE`: the mounts inside it too).
fn clone_tree_with(path: &Path, flags: libc::c_uint) -> std::io::Result<OwnedFd> {
    let path = cstr(path)?;
    // SAFETY: a valid path string; the returned descriptor is owned below.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            path.as_ptr(),
            OPEN_TREE_CLONE | flags | libc::O_CLOEXEC as libc::c_uint,
        )
    };
    check_io(fd)?;
    let fd = libc::c_int::try_from(fd).map_err(std::io::Error::other)?;
    // SAFETY: open_tree returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Attaches a detached mount at `target`.
fn move_tree(tree: &OwnedFd, target: &Path) -> std::io::Result<()> {
    let target = cstr(target)?;
    // SAFETY: a live descriptor, an empty path with F_EMPTY_PATH, a valid target string.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    check_io(rc)
}

fn check_io(rc: libc::c_long) -> std::io::Result<()> {
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}
