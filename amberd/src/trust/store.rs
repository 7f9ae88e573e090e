//! What the user decided about workspace configuration files, across restarts: path →
//! the hash of the version decided on, and whether it was trusted or denied, in
//! `<data_dir>/workspace-trust.json` (replaced atomically). One entry per path: a
//! new decision replaces the old one, and a file whose hash differs from its entry's is
//! undecided again. Trust remembered by earlier versions for hooks files
//! (`trusted-hooks.json`, path → hash) still counts.

use amber_proto::sync::Locked;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// The store's file in the data dir.
const FILE: &str = "workspace-trust.json";
/// The hooks-only file of earlier versions: path → trusted hash.
const LEGACY_HOOKS_FILE: &str = "trusted-hooks.json";

/// What is remembered about one version of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// Nothing about this version (a new file, or changed since the decision).
    Undecided,
    Trusted,
    /// Denied through `trust/respond`: turns do not ask about this version again.
    Denied,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    hash: String,
    trusted: bool,
}

/// The remembered decisions, one JSON file in the data dir.
#[derive(Debug)]
pub struct TrustStore {
    file: PathBuf,
    legacy: PathBuf,
    /// Serializes read-modify-write of the file.
    lock: Mutex<()>,
}

impl TrustStore {
    pub fn new(data_dir: &Path) -> TrustStore {
        TrustStore {
            file: data_dir.join(FILE),
            legacy: data_dir.join(LEGACY_HOOKS_FILE),
            lock: Mutex::new(()),
        }
    }

    fn load(&self) -> BTreeMap<String, Entry> {
        let mut entries: BTreeMap<String, Entry> = BTreeMap::new();
        if let Ok(bytes) = std::fs::read(&self.legacy) {
            let legacy: BTreeMap<String, String> = serde_json::from_slice(&bytes)
                .unwrap_or_else(|err| {
                    tracing::warn!(path = %self.legacy.display(), %err, "ignoring an unreadable trust file");
                    BTreeMap::new()
                });
            for (path, hash) in legacy {
                entries.insert(
                    path,
                    Entry {
                        hash,
                        trusted: true,
                    },
                );
            }
        }
        if let Ok(bytes) = std::fs::read(&self.file) {
            let current: BTreeMap<String, Entry> = serde_json::from_slice(&bytes)
                .unwrap_or_else(|err| {
                    tracing::warn!(path = %self.file.display(), %err, "ignoring an unreadable trust file");
                    BTreeMap::new()
                });
            entries.extend(current);
        }
        entries
    }

    /// What is remembered about the file at `path` with content hash `hash`.
    pub fn stored(&self, path: &Path, hash: &str) -> Stored {
        let _guard = self.lock.locked();
        match self.load().get(&key(path)) {
            Some(entry) if entry.hash == hash && entry.trusted => Stored::Trusted,
            Some(entry) if entry.hash == hash => Stored::Denied,
            _ => Stored::Undecided,
        }
    }

    /// Whether the file at `path` with content hash `hash` was trusted.
    pub fn is_trusted(&self, path: &Path, hash: &str) -> bool {
        self.stored(path, hash) == Stored::Trusted
    }

    /// Remembers `path` at `hash` as trusted (replacing what was decided there before).
    pub fn remember(&self, path: &Path, hash: &str) -> std::io::Result<()> {
        self.decide(path, hash, true)
    }

    /// Remembers `path` at `hash` as denied.
    pub fn deny(&self, path: &Path, hash: &str) -> std::io::Result<()> {
        self.decide(path, hash, false)
    }

    fn decide(&self, path: &Path, hash: &str, trusted: bool) -> std::io::Result<()> {
        let _guard = self.lock.locked();
        let mut map = self.load();
        map.insert(
            key(path),
            Entry {
                hash: hash.to_owned(),
                trusted,
            },
        );
        let bytes = serde_json::to_vec_pretty(&map).map_err(std::io::Error::other)?;
        if let Some(dir) = self.file.parent() {
            std::fs::create_dir_all(dir)?;
        }
        amber_tools::atomic_write::replace_file_sync(&self.file, &bytes)?;
        // The legacy file's entries now live in the new one; a stale legacy entry must not
        // outlive a denial of the same path.
        if self.legacy.exists() {
            std::fs::remove_file(&self.legacy)?;
        }
        Ok(())
    }
}

fn key(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_are_per_version_and_replace_each_other() {
        let data = tempfile::tempdir().unwrap();
        let store = TrustStore::new(data.path());
        let file = Path::new("/ws/.amber/rules.toml");
        assert_eq!(store.stored(file, "h1"), Stored::Undecided);
        store.remember(file, "h1").unwrap();
        assert_eq!(store.stored(file, "h1"), Stored::Trusted);
        assert_eq!(
            store.stored(file, "h2"),
            Stored::Undecided,
            "a changed file"
        );
        store.deny(file, "h2").unwrap();
        assert_eq!(store.stored(file, "h2"), Stored::Denied);
        assert_eq!(store.stored(file, "h1"), Stored::Undecided, "replaced");
        // Another daemon on the same data dir sees the same.
        assert_eq!(
            TrustStore::new(data.path()).stored(file, "h2"),
            Stored::Denied
        );
    }

    #[test]
    fn trust_remembered_for_hooks_by_earlier_versions_still_counts() {
        let data = tempfile::tempdir().unwrap();
        let hooks = Path::new("/ws/.amber/hooks.toml");
        std::fs::write(
            data.path().join(LEGACY_HOOKS_FILE),
            serde_json::to_vec(&BTreeMap::from([(key(hooks), "h".to_owned())])).unwrap(),
        )
        .unwrap();
        let store = TrustStore::new(data.path());
        assert!(store.is_trusted(hooks, "h"));
        store.deny(hooks, "h").unwrap();
        assert_eq!(
            store.stored(hooks, "h"),
            Stored::Denied,
            "the new decision wins"
        );
        assert!(!data.path().join(LEGACY_HOOKS_FILE).exists());
    }
}
