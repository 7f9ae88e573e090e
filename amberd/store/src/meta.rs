//! `meta.json`: a session's metadata, small and rewritten whole.
//!
//! **Invariant:** `meta.json` is only ever replaced atomically (write a temp file in the
//! same directory, fsync it, rename it over, fsync the directory), so a reader sees the
//! old or the new version, never a mix, also after a crash. A new session's first one is
//! written the same way without the fsyncs, which its log owes (`deferred.rs`). The file
//! carries a format `version`; unknown fields are ignored so older daemons can read newer
//! files.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use amber_proto::SessionInfo;
use serde::{Deserialize, Serialize};

use super::log::sync_path;
use super::{StoreError, io_err};

pub(crate) const META_FILE: &str = "meta.json";
const VERSION: u32 = 1;

/// What a session needs besides its log to come back after a restart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMeta {
    pub info: SessionInfo,
    pub system_prompt: String,
    /// What the session's custom agent set beyond `info` and `system_prompt` (absent when
    /// it has none, and in files written before agents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<SessionAgent>,
    /// What `session/new {sandbox}` asked for explicitly; an unset field (and a file
    /// written before the sandbox) takes the daemon's `[sandbox]` configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<amber_proto::SandboxRequest>,
    /// The session's own MCP servers (`session/new {mcpServers}`, `mcp/add {sessionId}`),
    /// reconnected whenever the session is loaded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<amber_proto::SessionMcpServer>,
    /// The session's model is the configured default's, whatever that becomes: nobody chose
    /// one (no `model` or `provider` in `session/new`, no agent's, no `session/setModel`). A
    /// file written before this is pinned to its model.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub model_follows_config: bool,
    /// The executor the session's tools last ran on (`SessionInfo.environment`), so that a
    /// daemon started again attaches to it while it still runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<ExecutorAttach>,
}

/// How to attach again to a running executor: its id and its attach token (a secret: kept in
/// the session's metadata in the private data directory, never on the wire).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutorAttach {
    pub id: String,
    pub token: String,
}

/// A custom agent's limits as a session keeps them: fixed when the session is created, so a
/// restored session behaves as it did even if the agent's file changed since.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionAgent {
    pub name: String,
    /// The tool allow-list (names or globs); `None`: every tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Replaces `[agent] max_tool_iterations` for the session's turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
}

#[derive(Serialize)]
struct MetaOut<'a> {
    version: u32,
    #[serde(flatten)]
    meta: &'a SessionMeta,
}

#[derive(Deserialize)]
struct MetaIn {
    version: u32,
    #[serde(flatten)]
    meta: SessionMeta,
}

/// Reads `<dir>/meta.json`; `Ok(None)` when it does not exist.
pub(crate) fn read(dir: &Path) -> Result<Option<SessionMeta>, StoreError> {
    let path = dir.join(META_FILE);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(&path, e)),
    };
    let parsed: MetaIn = serde_json::from_slice(&bytes).map_err(|e| StoreError::BadMeta {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    if parsed.version != VERSION {
        return Err(StoreError::BadMeta {
            path,
            reason: format!("unsupported version {}", parsed.version),
        });
    }
    Ok(Some(parsed.meta))
}

/// Whether `write` waits for the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// fsync the temp file before the rename and the directory after it.
    Synced,
    /// A new session's first metadata: the caller owes the fsyncs (`CreationSync`).
    Deferred,
}

/// Atomically replaces `<dir>/meta.json`. `unique` tells concurrent writers' temp files
/// apart. A missing `dir` is `ErrorKind::NotFound` in the returned error.
pub(crate) fn write(
    dir: &Path,
    meta: &SessionMeta,
    unique: &AtomicU64,
    durability: Durability,
) -> Result<(), StoreError> {
    let mut bytes = serde_json::to_vec_pretty(&MetaOut {
        version: VERSION,
        meta,
    })
    .map_err(StoreError::Encode)?;
    bytes.push(b'\n');
    let n = unique.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".{META_FILE}.{}.{n}.tmp", std::process::id()));
    let synced = durability == Durability::Synced;
    let result = write_new(&tmp, &bytes, synced).and_then(|()| {
        let target = dir.join(META_FILE);
        fs::rename(&tmp, &target).map_err(|e| io_err(&target, e))
    });
    if let Err(err) = result {
        let _ = fs::remove_file(&tmp);
        return Err(err);
    }
    if synced { sync_path(dir) } else { Ok(()) }
}

fn write_new(path: &Path, bytes: &[u8], sync: bool) -> Result<(), StoreError> {
    let mut file: File = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| io_err(path, e))?;
    file.write_all(bytes).map_err(|e| io_err(path, e))?;
    if sync {
        file.sync_all().map_err(|e| io_err(path, e))?;
    }
    Ok(())
}
