//! Workspace paths for `@` completion: a gitignore-aware walk (the `ignore` crate), done by
//! the client since it runs on the same machine as the daemon's workspace.

use std::path::Path;

/// Paths collected at most, so a huge tree never stalls the first completion.
pub const MAX_FILES: usize = 20_000;

/// Files under `root`, relative and `/`-separated, sorted; hidden and ignored files skipped.
pub fn walk(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in ignore::WalkBuilder::new(root).build().flatten() {
        if out.len() >= MAX_FILES {
            break;
        }
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        if let Ok(rel) = entry.path().strip_prefix(root) {
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn respects_gitignore() {
        let dir = std::env::temp_dir().join(format!("amber-tui-files-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        std::fs::write(dir.join(".gitignore"), "target/\n").unwrap();
        std::fs::create_dir_all(dir.join("target")).unwrap();
        std::fs::write(dir.join("target/x"), "").unwrap();
        std::fs::write(dir.join("src/lib.rs"), "").unwrap();
        let files = walk(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(files, ["src/lib.rs"]);
    }
}
