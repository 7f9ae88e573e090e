//! The Unix sockets bound by path on this host, as the kernel lists them
//! (`/proc/net/unix`): with the network on and `[sandbox] allow_unix_sockets` naming some,
//! every other one is covered inside the sandbox, since Landlock (ABI 7) cannot tell one
//! socket path from another and seccomp cannot read a `connect` address.

use std::path::PathBuf;

/// More than this many sockets is not a host the sandbox can cover one by one.
pub(super) const MAX_SOCKETS: usize = 4096;

/// Every absolute socket path in `/proc/net/unix` (abstract names, which start with `@`,
/// and paths bound relative to a directory are not files to cover), deduplicated.
pub(super) fn bound_paths() -> std::io::Result<Vec<PathBuf>> {
    Ok(parse(&std::fs::read_to_string("/proc/net/unix")?))
}

/// `Num RefCount Protocol Flags Type St Inode Path`, one socket per line.
fn parse(table: &str) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = table
        .lines()
        .skip(1)
        .filter_map(|line| {
            // The path is the eighth column and may itself hold spaces.
            let mut rest = line.trim_start();
            for _ in 0..7 {
                let (_, tail) = rest.split_once(char::is_whitespace)?;
                rest = tail.trim_start();
            }
            rest.starts_with('/').then(|| PathBuf::from(rest))
        })
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_absolute_paths_of_the_table_are_kept() {
        let table = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 21334 /run/user/1000/bus\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 21335 @/tmp/.X11-unix/X0\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 21336\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 21337 /tmp/a dir/s.sock\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 21338 relative.sock\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 21339 /run/user/1000/bus\n";
        assert_eq!(
            parse(table),
            vec![
                PathBuf::from("/run/user/1000/bus"),
                PathBuf::from("/tmp/a dir/s.sock")
            ]
        );
    }

    #[test]
    fn a_socket_bound_here_is_listed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().canonicalize().unwrap().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        assert!(bound_paths().unwrap().contains(&path));
    }
}
