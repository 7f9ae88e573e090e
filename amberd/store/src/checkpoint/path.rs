//! [`RelPath`]: a path relative to the workspace root, kept as its exact bytes (Unix paths
//! need not be UTF-8). Serialised as a string when it is UTF-8, else as an array of bytes,
//! so a round trip is lossless either way.

use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A workspace-relative path: components joined by `/`, no leading `/`, no `.` or `..`.
/// Ordered by its bytes, which is the order of a snapshot's entries.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RelPath(Vec<u8>);

impl RelPath {
    /// `path` relative to `root`, or `None` when it is not below it.
    pub(crate) fn under(root: &Path, path: &Path) -> Option<Self> {
        let rel = path.strip_prefix(root).ok()?;
        let bytes = rel.as_os_str().as_bytes();
        if bytes.is_empty() {
            return None;
        }
        Some(Self(bytes.to_vec()))
    }

    /// A path from its bytes, which the caller made relative and `/`-joined.
    pub(crate) fn from_bytes(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn as_path(&self) -> &Path {
        Path::new(OsStr::from_bytes(&self.0))
    }

    /// `root` joined with this path.
    pub fn join_to(&self, root: &Path) -> PathBuf {
        root.join(self.as_path())
    }

    /// Whether the path is what the type promises (one read off the wire may not be):
    /// non-empty components joined by `/`, none of them `.` or `..`.
    pub fn is_normal(&self) -> bool {
        !self.0.is_empty()
            && self
                .0
                .split(|&b| b == b'/')
                .all(|c| !c.is_empty() && c != b"." && c != b"..")
    }

    /// The parent directory, `None` at the top level.
    pub fn parent(&self) -> Option<Self> {
        let cut = self.0.iter().rposition(|&b| b == b'/')?;
        Some(Self(self.0[..cut].to_vec()))
    }

    /// How many components deep the path is (a top-level name is 1).
    pub(crate) fn depth(&self) -> usize {
        1 + self.0.iter().filter(|&&b| b == b'/').count()
    }
}

impl From<&str> for RelPath {
    fn from(s: &str) -> Self {
        Self(s.trim_matches('/').as_bytes().to_vec())
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", String::from_utf8_lossy(&self.0))
    }
}

impl fmt::Debug for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(&self.0))
    }
}

impl Serialize for RelPath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(&self.0) {
            Ok(text) => s.serialize_str(text),
            Err(_) => self.0.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for RelPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Text(String),
            Bytes(Vec<u8>),
        }
        Ok(match Repr::deserialize(d)? {
            Repr::Text(t) => Self(t.into_bytes()),
            Repr::Bytes(b) => Self(b),
        })
    }
}
