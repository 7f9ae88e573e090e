//! Shared by the checkpoint suites (`checkpoints.rs`, `checkpoints_store.rs`,
//! `checkpoints_cli.rs`): a workspace tree read byte for byte, the rows and messages of a
//! session, and what the checkpoint store holds.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use amber_tests::TestDaemon;
use serde_json::{Value, json};

/// Every file under `root` (relative path → bytes, symlinks as their target), skipping
/// `.git` unless `with_git`, and any path `skip` accepts.
pub(crate) fn tree(
    root: &Path,
    with_git: bool,
    skip: &dyn Fn(&str) -> bool,
) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if (!with_git && rel == ".git") || skip(&rel) {
                continue;
            }
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                out.insert(format!("{rel}/"), Vec::new());
                stack.push(path);
            } else if kind.is_symlink() {
                out.insert(
                    rel,
                    fs::read_link(&path)
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                );
            } else {
                out.insert(rel, fs::read(&path).unwrap());
            }
        }
    }
    out
}

pub(crate) fn changed(row: &Value) -> Vec<(String, String)> {
    row["changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap().to_owned(),
                c["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

pub(crate) fn list(daemon: &TestDaemon, sid: &str) -> Vec<Value> {
    daemon.rpc_ok("checkpoint/list", json!({"sessionId": sid}))["checkpoints"]
        .as_array()
        .unwrap()
        .clone()
}

pub(crate) fn messages(daemon: &TestDaemon, sid: &str) -> Vec<Value> {
    daemon.rpc_ok("session/get", json!({"sessionId": sid}))["messages"]
        .as_array()
        .unwrap()
        .clone()
}

pub(crate) fn user_texts(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

pub(crate) fn error_code(response: &Value) -> i64 {
    response["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {response}"))
}

/// `checkpoint/list {all: true}`: every turn of the session's history.
pub(crate) fn list_all(daemon: &TestDaemon, sid: &str) -> Vec<Value> {
    daemon.rpc_ok("checkpoint/list", json!({"sessionId": sid, "all": true}))["checkpoints"]
        .as_array()
        .unwrap()
        .clone()
}

/// How many blob files of the daemon's checkpoint store hold `marker` (a file's content
/// this small is stored raw, so it is there as it was written).
pub(crate) fn blobs_holding(daemon: &TestDaemon, marker: &str) -> usize {
    let objects = daemon.dir.path().join("data/checkpoints/objects");
    let Ok(shards) = fs::read_dir(&objects) else {
        return 0;
    };
    let needle = marker.as_bytes();
    shards
        .flatten()
        .filter(|s| s.file_name().len() == 2)
        .flat_map(|s| fs::read_dir(s.path()).unwrap().flatten())
        .filter(|blob| {
            fs::read(blob.path())
                .is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
        })
        .count()
}
