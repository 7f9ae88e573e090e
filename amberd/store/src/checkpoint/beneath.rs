//! [`Tree`]: every change a restore makes to a workspace — write, create, delete, mkdir —
//! confined to the directory tree it was opened on, by construction.
//!
//! The workspace root is opened once as a directory fd. Every other directory is reached
//! from it without following a symlink at any step: `openat2` with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS` where the kernel has it, else `openat` with
//! `O_NOFOLLOW | O_DIRECTORY` one component at a time. The change itself is made relative
//! to the parent's fd (`renameat` of a temp file written in the same directory, `unlinkat`,
//! `mkdirat`), so a directory swapped for a symlink after it was opened cannot redirect it:
//! the fd names the directory, not the path. A parent that is a symlink or not a directory
//! is [`Refusal::Symlink`] / [`Refusal::NotADirectory`], naming that component; nothing is
//! followed. Paths are checked before any call: no empty, `.` or `..` component, no NUL,
//! nothing absolute; and [`protected`] paths (`.git`, `.amber`) are refused outright.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::path::RelPath;

/// Names no restore writes, creates or deletes at any depth, whatever a checkpoint holds:
/// git's directory (its hooks and config run code) and amber's own workspace config.
/// Compared without case, as a case-insensitive filesystem would.
const PROTECTED: [&[u8]; 2] = [b".git", b".amber"];

/// Whether `path` is or lies inside a protected directory (see [`PROTECTED`]).
pub fn protected(path: &RelPath) -> bool {
    path.as_bytes()
        .split(|&b| b == b'/')
        .any(|c| PROTECTED.iter().any(|p| c.eq_ignore_ascii_case(p)))
}

/// Why a path was not changed: nothing outside the tree, and nothing through a link.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{at} is a symlink; a restore does not follow it")]
    Symlink { at: RelPath },
    #[error("{at} is not a directory")]
    NotADirectory { at: RelPath },
    #[error("inside a protected directory (.git, .amber): a restore never changes it")]
    Protected,
    #[error("not a plain path inside the workspace")]
    Invalid,
    /// Refused where the workspace is (an executor), for the reason it gave.
    #[error("{0}")]
    Reported(String),
}

/// A failure to change one path: refused by the rules above, or an I/O error.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BeneathError {
    #[error("{0}")]
    Refused(Refusal),
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// How directories below the root are opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resolver {
    /// One `openat2` call resolving the whole path beneath the root, no symlinks.
    Openat2,
    /// `openat` with `O_NOFOLLOW`, one component at a time, for kernels without `openat2`.
    PerComponent,
}

impl Resolver {
    /// `openat2` when this kernel (and any seccomp filter in force) allows it.
    fn detect() -> Self {
        static DETECTED: OnceLock<Resolver> = OnceLock::new();
        *DETECTED.get_or_init(|| {
            let Ok(root) = open_dir_at(libc::AT_FDCWD, c"/") else {
                return Self::PerComponent;
            };
            match openat2_dir(root.as_raw_fd(), c".") {
                Ok(_) => Self::Openat2,
                Err(_) => Self::PerComponent,
            }
        })
    }
}

/// The workspace root as a directory fd, and the only way a restore changes anything
/// beneath it.
#[derive(Debug)]
pub(crate) struct Tree {
    root: OwnedFd,
    resolver: Resolver,
}

/// A directory beneath the tree's root, pinned by its fd.
#[derive(Debug)]
pub(crate) struct Dir {
    fd: OwnedFd,
}

impl Tree {
    /// Opens `root` (the workspace itself may be reached through a symlink: the user chose it).
    pub(crate) fn open(root: &Path) -> io::Result<Self> {
        Self::open_with(root, Resolver::detect())
    }

    pub(crate) fn open_with(root: &Path, resolver: Resolver) -> io::Result<Self> {
        let path = cstring(root.as_os_str().as_bytes())?;
        // SAFETY: a valid C string; the result is checked.
        let fd = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        Ok(Self {
            root: owned(fd)?,
            resolver,
        })
    }

    /// The directory at `rel` (`None`: the root), reached without following a symlink.
    pub(crate) fn dir(&self, rel: Option<&RelPath>) -> Result<Dir, BeneathError> {
        let Some(rel) = rel else {
            return Ok(Dir {
                fd: self.root.try_clone()?,
            });
        };
        let components = components(rel)?;
        if self.resolver == Resolver::Openat2 {
            let path = cstring(rel.as_bytes())?;
            match openat2_dir(self.root.as_raw_fd(), &path) {
                Ok(fd) => return Ok(Dir { fd }),
                // Which component stopped it: the walk below names it, following nothing.
                Err(e) if blocked_errno(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.walk(&components, false)
    }

    /// Creates the directory at `rel` and its missing parents (`mkdir -p`), never through a
    /// symlink: an existing component must be a real directory.
    pub(crate) fn make_dirs(&self, rel: &RelPath) -> Result<(), BeneathError> {
        self.walk(&components(rel)?, true).map(drop)
    }

    /// The file or symlink at `rel` and the directory holding it, for a change to `rel`.
    pub(crate) fn parent_of(&self, rel: &RelPath) -> Result<(Dir, Vec<u8>), BeneathError> {
        let components = components(rel)?;
        let name = components.last().ok_or(Refusal::Invalid)?.to_vec();
        Ok((self.dir(rel.parent().as_ref())?, name))
    }

    fn walk(&self, components: &[&[u8]], create: bool) -> Result<Dir, BeneathError> {
        let mut at = self.root.try_clone()?;
        for (i, &name) in components.iter().enumerate() {
            let name_c = cstring(name)?;
            if create {
                // SAFETY: a valid fd and C string; the result is checked.
                let made = unsafe { libc::mkdirat(at.as_raw_fd(), name_c.as_ptr(), 0o777) };
                if made != 0 {
                    let err = io::Error::last_os_error();
                    if err.raw_os_error() != Some(libc::EEXIST) {
                        return Err(self.name_block(&at, name, components, i, err));
                    }
                }
            }
            at = match open_dir_at(at.as_raw_fd(), &name_c) {
                Ok(fd) => fd,
                Err(err) => return Err(self.name_block(&at, name, components, i, err)),
            };
        }
        Ok(Dir { fd: at })
    }

    /// Turns the failure to open component `i` into the refusal that names it.
    fn name_block(
        &self,
        parent: &OwnedFd,
        name: &[u8],
        components: &[&[u8]],
        i: usize,
        err: io::Error,
    ) -> BeneathError {
        let at = RelPath::from_bytes(components[..=i].join(&b'/'));
        match lstat_at(parent.as_raw_fd(), name) {
            Ok(Some(mode)) if mode & libc::S_IFMT == libc::S_IFLNK => {
                Refusal::Symlink { at }.into()
            }
            Ok(Some(mode)) if mode & libc::S_IFMT != libc::S_IFDIR => {
                Refusal::NotADirectory { at }.into()
            }
            _ if err.raw_os_error() == Some(libc::ENOTDIR) => Refusal::NotADirectory { at }.into(),
            _ if err.raw_os_error() == Some(libc::ELOOP) => Refusal::Symlink { at }.into(),
            _ => err.into(),
        }
    }
}

impl Dir {
    /// Writes `bytes` as the file `name` with permission bits `mode`: a new temp file in
    /// this directory, synced, renamed over `name` (a symlink there is replaced, never
    /// followed). Set-id and sticky bits are dropped: a restore never makes a set-id file.
    pub(crate) fn write_file(&self, name: &[u8], bytes: &[u8], mode: u32) -> io::Result<()> {
        let tmp = self.fresh_temp(name)?;
        let made = (|| {
            // SAFETY: a valid fd and C string; the result is checked.
            let fd = unsafe {
                libc::openat(
                    self.fd.as_raw_fd(),
                    tmp.as_ptr(),
                    libc::O_WRONLY
                        | libc::O_CREAT
                        | libc::O_EXCL
                        | libc::O_NOFOLLOW
                        | libc::O_CLOEXEC,
                    0o600 as libc::c_uint,
                )
            };
            let mut file = File::from(owned(fd)?);
            file.write_all(bytes)?;
            file.set_permissions(std::fs::Permissions::from_mode(mode & 0o777))?;
            file.sync_all()
        })();
        self.finish_temp(&tmp, name, made)
    }

    /// Makes `name` a symlink to `target` (a temp link renamed over it).
    pub(crate) fn write_symlink(&self, name: &[u8], target: &[u8]) -> io::Result<()> {
        let tmp = self.fresh_temp(name)?;
        let target = cstring(target)?;
        // SAFETY: a valid fd and C strings; the result is checked.
        let made = unsafe { libc::symlinkat(target.as_ptr(), self.fd.as_raw_fd(), tmp.as_ptr()) };
        let made = if made == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        };
        self.finish_temp(&tmp, name, made)
    }

    /// Removes the file or symlink `name` (a directory is refused by the kernel).
    pub(crate) fn remove_file(&self, name: &[u8]) -> io::Result<()> {
        self.unlink(name, 0)
    }

    /// Removes the directory `name` if it is empty.
    pub(crate) fn remove_dir(&self, name: &[u8]) -> io::Result<()> {
        self.unlink(name, libc::AT_REMOVEDIR)
    }

    /// Whether `name` is a real directory (not followed if a symlink).
    pub(crate) fn is_dir(&self, name: &[u8]) -> bool {
        lstat_at(self.fd.as_raw_fd(), name)
            .ok()
            .flatten()
            .is_some_and(|mode| mode & libc::S_IFMT == libc::S_IFDIR)
    }

    /// The names in this directory. Listed through the fd's `/proc/self/fd` link, which
    /// names the directory the fd holds, not a path resolved again.
    pub(crate) fn names(&self) -> io::Result<Vec<Vec<u8>>> {
        let mut names = Vec::new();
        for child in std::fs::read_dir(self.proc_path())? {
            names.push(child?.file_name().as_bytes().to_vec());
        }
        Ok(names)
    }

    fn proc_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }

    fn unlink(&self, name: &[u8], flags: libc::c_int) -> io::Result<()> {
        let name = cstring(name)?;
        // SAFETY: a valid fd and C string; the result is checked.
        let done = unsafe { libc::unlinkat(self.fd.as_raw_fd(), name.as_ptr(), flags) };
        if done == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// The temp name beside `name`, with whatever an earlier crash left there removed.
    fn fresh_temp(&self, name: &[u8]) -> io::Result<CString> {
        let mut tmp = b".".to_vec();
        tmp.extend_from_slice(name);
        tmp.extend_from_slice(TEMP_MARK.as_bytes());
        tmp.extend_from_slice(std::process::id().to_string().as_bytes());
        match self.remove_file(&tmp) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        cstring(&tmp)
    }

    fn finish_temp(&self, tmp: &CString, name: &[u8], made: io::Result<()>) -> io::Result<()> {
        let renamed = made.and_then(|()| {
            let name = cstring(name)?;
            let fd = self.fd.as_raw_fd();
            // SAFETY: a valid fd and C strings; the result is checked.
            let done = unsafe { libc::renameat(fd, tmp.as_ptr(), fd, name.as_ptr()) };
            if done == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        });
        if renamed.is_err() {
            let _ = self.remove_file(tmp.as_bytes());
        }
        renamed
    }
}

/// What a restore temp file's name has between its target's name and the writer's pid.
pub(crate) const TEMP_MARK: &str = ".amber-restore-";

impl From<Refusal> for BeneathError {
    fn from(refusal: Refusal) -> Self {
        Self::Refused(refusal)
    }
}

/// The components of `rel`, refused when one is empty, `.` or `..`, or holds a NUL (an
/// absolute path has an empty first one).
fn components(rel: &RelPath) -> Result<Vec<&[u8]>, Refusal> {
    if protected(rel) {
        return Err(Refusal::Protected);
    }
    let components: Vec<&[u8]> = rel.as_bytes().split(|&b| b == b'/').collect();
    let plain = |c: &&[u8]| !c.is_empty() && *c != b"." && *c != b".." && !c.contains(&0);
    if components.iter().all(plain) {
        Ok(components)
    } else {
        Err(Refusal::Invalid)
    }
}

/// The open errors that mean "a component is a symlink or not a directory" (or, from
/// `openat2`, would leave the tree).
fn blocked_errno(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::ELOOP | libc::ENOTDIR | libc::EXDEV)
    )
}

fn open_dir_at(dirfd: RawFd, name: &std::ffi::CStr) -> io::Result<OwnedFd> {
    // SAFETY: a valid fd (or AT_FDCWD) and C string; the result is checked.
    let fd = unsafe {
        libc::openat(
            dirfd,
            name.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    owned(fd)
}

/// `struct open_how` of `linux/openat2.h` (libc's is non-exhaustive).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

fn openat2_dir(dirfd: RawFd, path: &std::ffi::CStr) -> io::Result<OwnedFd> {
    let how = OpenHow {
        flags: (libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: `how` is a live `open_how` of the size passed; the result is checked.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dirfd,
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    owned(libc::c_int::try_from(fd).unwrap_or(-1))
}

/// The `st_mode` of `name` in `dirfd`, not following a symlink; `None` when absent.
fn lstat_at(dirfd: RawFd, name: &[u8]) -> io::Result<Option<libc::mode_t>> {
    let name = cstring(name)?;
    let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: a valid fd, C string and out pointer; `stat` is read only on success.
    let done = unsafe {
        libc::fstatat(
            dirfd,
            name.as_ptr(),
            stat.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if done == 0 {
        // SAFETY: fstatat filled it.
        Ok(Some(unsafe { stat.assume_init() }.st_mode))
    } else {
        let err = io::Error::last_os_error();
        match err.kind() {
            io::ErrorKind::NotFound => Ok(None),
            _ => Err(err),
        }
    }
}

fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        // SAFETY: a fresh fd this call owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in a path"))
}
