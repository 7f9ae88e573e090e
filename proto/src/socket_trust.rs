//! Which socket directories daemon and clients trust: one rule for both, so a daemon never
//! serves where its clients refuse to connect (PROTOCOL.md "Transport", docs/security.md).
//!
//! - **The socket's directory belongs to the user and is private to them (0700 or
//!   tighter).** Nobody else can then create, rename or remove anything in it, so nobody can
//!   put their own socket where the user's clients look, nor take the daemon's away.
//! - **No ancestor lets someone else swap that directory**: each belongs to the user or to
//!   root, and others may write it only with the sticky bit set (`/tmp`), which keeps them
//!   from renaming entries they do not own.
//!
//! Clients check the first rule before they connect (and the peer's uid after); the daemon
//! checks both before it binds. Pure: the caller passes owner, mode and its own uid.

use std::fmt;

/// Group or other write permission.
const WRITABLE_BY_OTHERS: u32 = 0o022;
/// Any group or other permission.
const OPEN_TO_OTHERS: u32 = 0o077;
/// The sticky bit: only an entry's owner may rename or remove it.
const STICKY: u32 = 0o1000;

/// Why a directory on the socket's path is not trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distrust {
    /// It belongs to another user, who could replace what is in it.
    ForeignOwner { owner: u32 },
    /// Others may write in it and it is not sticky, so they could replace what is in it.
    WritableByOthers { mode: u32 },
    /// The user's own, but group or others have access: the socket's directory must be 0700.
    NotPrivate { mode: u32 },
}

impl fmt::Display for Distrust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Distrust::ForeignOwner { owner } => {
                write!(f, "it belongs to uid {owner}, who could replace the socket")
            }
            Distrust::WritableByOthers { mode } => write!(
                f,
                "its mode is {:04o}: others can write in it and it has no sticky bit, so they \
                 could replace the socket",
                mode & 0o7777
            ),
            Distrust::NotPrivate { mode } => write!(
                f,
                "its mode is {:04o}, not private to its owner (0700)",
                mode & 0o7777
            ),
        }
    }
}

/// The socket's own directory: owned by `own`, no access for group or others.
pub fn check_socket_dir(owner: u32, mode: u32, own: u32) -> Result<(), Distrust> {
    if owner != own {
        return Err(Distrust::ForeignOwner { owner });
    }
    if mode & WRITABLE_BY_OTHERS != 0 && mode & STICKY == 0 {
        return Err(Distrust::WritableByOthers { mode });
    }
    if mode & OPEN_TO_OTHERS != 0 {
        return Err(Distrust::NotPrivate { mode });
    }
    Ok(())
}

/// A directory above the socket's: owned by `own` or root, and writable by others only when
/// sticky.
pub fn check_ancestor_dir(owner: u32, mode: u32, own: u32) -> Result<(), Distrust> {
    if owner != own && owner != 0 {
        return Err(Distrust::ForeignOwner { owner });
    }
    if mode & WRITABLE_BY_OTHERS != 0 && mode & STICKY == 0 {
        return Err(Distrust::WritableByOthers { mode });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: u32 = 1000;
    const OTHER: u32 = 1001;

    #[test]
    fn the_socket_dir_must_be_the_users_and_private() {
        use Distrust::*;
        // (owner, mode, verdict)
        let cases: &[(u32, u32, Result<(), Distrust>)] = &[
            (ME, 0o700, Ok(())),
            (ME, 0o500, Ok(())),
            (ME, 0o1700, Ok(())),
            (ME, 0o40700, Ok(())), // file-type bits from st_mode are ignored
            (ME, 0o755, Err(NotPrivate { mode: 0o755 })),
            (ME, 0o750, Err(NotPrivate { mode: 0o750 })),
            (ME, 0o701, Err(NotPrivate { mode: 0o701 })),
            (ME, 0o1777, Err(NotPrivate { mode: 0o1777 })),
            (ME, 0o777, Err(WritableByOthers { mode: 0o777 })),
            (ME, 0o720, Err(WritableByOthers { mode: 0o720 })),
            (OTHER, 0o700, Err(ForeignOwner { owner: OTHER })),
            (OTHER, 0o777, Err(ForeignOwner { owner: OTHER })),
            // Root's /tmp is no socket directory of a user's; root's own is.
            (0, 0o1777, Err(ForeignOwner { owner: 0 })),
        ];
        for &(owner, mode, verdict) in cases {
            assert_eq!(
                check_socket_dir(owner, mode, ME),
                verdict,
                "{owner} {mode:o}"
            );
        }
        assert_eq!(check_socket_dir(0, 0o700, 0), Ok(()));
        assert_eq!(
            check_socket_dir(0, 0o1777, 0),
            Err(NotPrivate { mode: 0o1777 })
        );
    }

    #[test]
    fn ancestors_may_be_roots_and_sticky_but_not_open_for_writing() {
        use Distrust::*;
        let cases: &[(u32, u32, Result<(), Distrust>)] = &[
            (0, 0o755, Ok(())),
            (0, 0o1777, Ok(())), // /tmp
            (ME, 0o755, Ok(())),
            (ME, 0o700, Ok(())),
            (ME, 0o1777, Ok(())),
            (0, 0o777, Err(WritableByOthers { mode: 0o777 })),
            (0, 0o775, Err(WritableByOthers { mode: 0o775 })),
            (ME, 0o757, Err(WritableByOthers { mode: 0o757 })),
            (OTHER, 0o755, Err(ForeignOwner { owner: OTHER })),
        ];
        for &(owner, mode, verdict) in cases {
            assert_eq!(
                check_ancestor_dir(owner, mode, ME),
                verdict,
                "{owner} {mode:o}"
            );
        }
    }

    #[test]
    fn distrust_says_why() {
        assert_eq!(
            Distrust::WritableByOthers { mode: 0o40777 }.to_string(),
            "its mode is 0777: others can write in it and it has no sticky bit, so they could \
             replace the socket"
        );
        assert_eq!(
            Distrust::NotPrivate { mode: 0o755 }.to_string(),
            "its mode is 0755, not private to its owner (0700)"
        );
        assert!(
            Distrust::ForeignOwner { owner: 7 }
                .to_string()
                .contains("uid 7")
        );
    }
}
