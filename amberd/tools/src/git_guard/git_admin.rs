//! Where a workspace's nested checkouts are: the submodules a user's own `git status`
//! descends into and whose `.git` (a directory, or a `gitdir: …` file) it then reads.
//! Pure parsers of what git itself reads: `.gitmodules` (`path = …` of each submodule) and
//! the index's gitlinks (entries of mode `160000`, which git follows with or without a
//! `.gitmodules` entry). Both are bounded by their input; anything unreadable yields
//! nothing rather than an error, since these only widen what is protected.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// The mode of a gitlink (a submodule's commit) in the index.
const GITLINK: u32 = 0o160000;
const MODE_TYPE: u32 = 0o170000;
/// The flag of an index entry with a second flags word (index v3 and later).
const EXTENDED: u16 = 0x4000;
/// The name length a flags word holds at most; longer names say `0xFFF`.
const NAME_MASK: u16 = 0x0FFF;

/// The `path` of every `[submodule "…"]` section of a `.gitmodules` text, relative and
/// within the checkout (an absolute path or one with `..` is not a checkout of this one).
pub(super) fn submodule_paths(gitmodules: &str) -> Vec<PathBuf> {
    let mut in_submodule = false;
    let mut paths = Vec::new();
    for line in gitmodules.lines() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[') {
            let name = header
                .split([']', ' ', '\t', '"', '.'])
                .next()
                .unwrap_or("");
            in_submodule = name.eq_ignore_ascii_case("submodule");
            continue;
        }
        if !in_submodule {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if key.trim().eq_ignore_ascii_case("path") {
            let value = value.trim().trim_matches('"');
            if let Some(path) = relative_inside(value.as_bytes()) {
                paths.push(path);
            }
        }
    }
    paths
}

/// The path of every gitlink in an index file's bytes (versions 2, 3 and 4, SHA-1 or
/// SHA-256 object names); `None` when the bytes are not an index this reads.
pub(super) fn gitlinks(index: &[u8]) -> Option<Vec<PathBuf>> {
    let header = index.get(..12)?;
    if &header[..4] != b"DIRC" {
        return None;
    }
    let version = be32(&header[4..8])?;
    let count = be32(&header[8..12])?;
    if !(2..=4).contains(&version) {
        return None;
    }
    // The object name's length is not in the index; only the right one makes every
    // entry's name length agree with its flags.
    [20, 32]
        .into_iter()
        .find_map(|hash_len| parse_entries(index, version, count, hash_len))
}

fn parse_entries(index: &[u8], version: u32, count: u32, hash_len: usize) -> Option<Vec<PathBuf>> {
    // ctime, mtime (seconds and nanoseconds), dev, ino, mode, uid, gid, size.
    const STAT: usize = 40;
    let mut pos = 12usize;
    // Index v4 names each path by what it keeps of the previous one.
    let mut previous: Vec<u8> = Vec::new();
    let mut links = Vec::new();
    for _ in 0..count {
        let start = pos;
        let fixed = index.get(pos..pos.checked_add(STAT + hash_len + 2)?)?;
        let mode = be32(&fixed[24..28])?;
        let flags = u16::from_be_bytes([fixed[STAT + hash_len], fixed[STAT + hash_len + 1]]);
        pos += fixed.len();
        if flags & EXTENDED != 0 {
            if version < 3 {
                return None;
            }
            pos = pos.checked_add(2)?;
        }
        let declared = usize::from(flags & NAME_MASK);
        let rest = index.get(pos..)?;
        let gitlink = mode & MODE_TYPE == GITLINK;
        if version == 4 {
            let (strip, used) = varint(rest)?;
            let tail = rest.get(used..)?;
            let nul = tail.iter().position(|b| *b == 0)?;
            let keep = previous.len().checked_sub(strip)?;
            previous.truncate(keep);
            previous.extend_from_slice(&tail[..nul]);
            pos += used + nul + 1;
            if declared < usize::from(NAME_MASK) && declared != previous.len() {
                return None;
            }
            if gitlink {
                links.extend(relative_inside(&previous));
            }
        } else {
            // The flags give the name's length (the NUL after it confirms the object
            // name's length); only a longer name is searched for its end.
            let len = if declared < usize::from(NAME_MASK) {
                (rest.get(declared) == Some(&0)).then_some(declared)?
            } else {
                rest.iter().position(|b| *b == 0)?
            };
            if gitlink {
                links.extend(relative_inside(&rest[..len]));
            }
            // 1 to 8 NULs pad the entry to a multiple of eight bytes.
            let unpadded = pos - start + len;
            pos = start.checked_add((unpadded + 8) & !7)?;
        }
    }
    Some(links)
}

/// git's offset varint (index v4's prefix length).
fn varint(bytes: &[u8]) -> Option<(usize, usize)> {
    let mut used = 0usize;
    let mut byte = *bytes.first()?;
    used += 1;
    let mut value = usize::from(byte & 0x7f);
    while byte & 0x80 != 0 {
        byte = *bytes.get(used)?;
        used += 1;
        value = value
            .checked_add(1)?
            .checked_mul(128)?
            .checked_add(usize::from(byte & 0x7f))?;
    }
    Some((value, used))
}

fn be32(bytes: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.try_into().ok()?))
}

/// `raw` as a relative path of normal components only.
fn relative_inside(raw: &[u8]) -> Option<PathBuf> {
    let path = Path::new(OsStr::from_bytes(raw));
    let normal = !raw.is_empty()
        && path
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    normal.then(|| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    // The index is read from a repository real git made.
    #![allow(clippy::disallowed_methods)]

    use super::*;

    #[test]
    fn submodule_paths_are_read_from_their_sections_only() {
        let text = "[submodule \"lib\"]\n\tpath = vendor/lib\n\turl = ../lib\n\
                    [core]\n\tpath = not/this\n\
                    [submodule \"x\"]\n\tpath = \"quoted dir\"\n\
                    [submodule \"evil\"]\n\tpath = ../outside\n\
                    [Submodule \"abs\"]\n\tPath = /etc\n";
        assert_eq!(
            submodule_paths(text),
            vec![PathBuf::from("vendor/lib"), PathBuf::from("quoted dir")]
        );
    }

    /// An index as git writes it, with the entries (path, mode) given.
    fn index(version: u32, hash_len: usize, entries: &[(&str, u32)]) -> Vec<u8> {
        let mut out = b"DIRC".to_vec();
        out.extend(version.to_be_bytes());
        out.extend(u32::try_from(entries.len()).unwrap().to_be_bytes());
        let mut previous = String::new();
        for (path, mode) in entries {
            let start = out.len();
            out.extend([0u8; 24]);
            out.extend(mode.to_be_bytes());
            out.extend([0u8; 12]);
            out.extend(vec![7u8; hash_len]);
            let len = u16::try_from(path.len().min(0xFFF)).unwrap();
            out.extend(len.to_be_bytes());
            if version == 4 {
                let common = previous
                    .bytes()
                    .zip(path.bytes())
                    .take_while(|(a, b)| a == b)
                    .count();
                let strip = u8::try_from(previous.len() - common).unwrap();
                assert!(strip < 0x80, "the test writes one-byte varints");
                out.push(strip);
                out.extend(&path.as_bytes()[common..]);
                out.push(0);
            } else {
                out.extend(path.as_bytes());
                let unpadded = out.len() - start;
                let padded = (unpadded + 8) & !7;
                out.resize(start + padded, 0);
            }
            previous = (*path).to_owned();
        }
        out.extend(vec![0u8; hash_len]);
        out
    }

    #[test]
    fn gitlinks_are_found_in_every_index_version_and_hash() {
        let entries = [
            ("Makefile", 0o100644),
            ("sub", GITLINK),
            ("sub2/deep", GITLINK),
            ("sub2/deeper/file", 0o100755),
            ("zlink", 0o120000),
        ];
        for version in [2, 3, 4] {
            for hash_len in [20, 32] {
                let bytes = index(version, hash_len, &entries);
                assert_eq!(
                    gitlinks(&bytes),
                    Some(vec![PathBuf::from("sub"), PathBuf::from("sub2/deep")]),
                    "v{version}, {hash_len}-byte names"
                );
            }
        }
    }

    #[test]
    fn a_damaged_or_foreign_index_yields_nothing() {
        let good = index(2, 20, &[("sub", GITLINK)]);
        for bad in [b"DIRX".to_vec(), Vec::new(), good[..30].to_vec(), {
            let mut v = good.clone();
            v[7] = 9;
            v
        }] {
            assert_eq!(gitlinks(&bad), None);
        }
        // A path that leaves the checkout is no checkout of it.
        assert_eq!(
            gitlinks(&index(2, 20, &[("../x", GITLINK)])),
            Some(Vec::new())
        );
    }

    #[test]
    fn a_real_git_index_is_read() {
        let dir = std::env::temp_dir().join(format!("amber-gitadmin-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let git = |args: &[&str]| {
            let ok = std::process::Command::new("git")
                .args(["-c", "core.hooksPath=/dev/null"])
                .args(args)
                .current_dir(&dir)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .output()
                .unwrap()
                .status
                .success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q"]);
        std::fs::write(dir.join("file"), "x").unwrap();
        git(&["add", "file"]);
        let sha = "1234567890123456789012345678901234567890";
        git(&[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{sha},a/sub"),
        ]);
        for version in ["2", "3", "4"] {
            git(&["update-index", "--index-version", version]);
            let bytes = std::fs::read(dir.join(".git/index")).unwrap();
            assert_eq!(
                gitlinks(&bytes),
                Some(vec![PathBuf::from("a/sub")]),
                "v{version}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
