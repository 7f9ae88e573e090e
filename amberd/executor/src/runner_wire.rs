//! The runner protocol: what a runner (`amber-exec runner`) and amberd say on the runner's
//! control connection (docs/fleet.md). Here the runner is the client: it introduces itself,
//! asks for work when it has room, and beats its heart; amberd answers. Each session it is
//! given then gets a connection of its own on which amberd speaks the executor protocol
//! ([`crate::wire`]), exactly as to any executor that dials in.
//!
//! The upgrade of every runner connection carries the pool's token
//! (`Authorization: Bearer`), [`POOL_HEADER`] and [`RUNNER_HEADER`]; a session's connection
//! also carries [`SESSION_HEADER`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The runner's pool: its token must be the pool's.
pub const POOL_HEADER: &str = "x-amber-pool";
/// The runner's id, stable for the runner process's life.
pub const RUNNER_HEADER: &str = "x-amber-runner";
/// On a session's connection: the session it serves (one amberd assigned to this runner).
pub const SESSION_HEADER: &str = "x-amber-session";

pub mod method {
    pub const HELLO: &str = "runner/hello";
    pub const POLL: &str = "runner/poll";
    pub const HEARTBEAT: &str = "runner/heartbeat";
}

pub mod code {
    /// The pool, labels or version are refused.
    pub const REFUSED: i64 = -32020;
    /// A request before `runner/hello`.
    pub const NO_HELLO: i64 = -32021;
}

/// A label's key or value, a pool's name or a runner's id: a simple word (letters, digits,
/// `-`, `_`, `.`; at most 63 bytes), as both ends check it.
pub fn is_word(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 63
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

/// The longest a `runner/poll` waits for work, in seconds, unless amberd says less.
pub const POLL_WAIT_SECS: u64 = 25;

/// `runner/hello`: who the runner is and what it offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HelloParams {
    /// The executor protocol version its sessions speak.
    pub protocol_version: u32,
    pub runner: String,
    pub pool: String,
    /// `os`, `arch`, `pool` and the `--label`s it was given.
    pub labels: BTreeMap<String, String>,
    /// How many sessions it runs at once.
    pub capacity: u32,
    pub version: String,
    pub hostname: String,
    /// The sessions it still holds (a runner dialling again after amberd restarted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub running: Vec<String>,
}

/// `runner/hello` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HelloResult {
    /// How often amberd expects `runner/heartbeat`, in seconds.
    pub heartbeat_secs: u64,
    /// Sessions it holds that amberd gave to someone else (or that ended): drop them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub release: Vec<String>,
}

/// `runner/poll`: the runner has room for `free` more sessions and waits for them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PollParams {
    pub free: u32,
}

/// One session given to a runner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Assignment {
    pub session: String,
    /// Where the workspace goes: a fresh clone of `repo` at `git_ref`.
    pub workspace: std::path::PathBuf,
    pub repo: String,
    #[serde(rename = "ref")]
    pub git_ref: String,
    /// The session's result is to be pushed as a branch: the runner keeps a pristine copy
    /// of the clone to push from (`workspace/push`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub push: bool,
}

/// `runner/poll` result: at most `free` sessions, perhaps none (the wait ran out).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PollResult {
    #[serde(default)]
    pub assign: Vec<Assignment>,
}

/// `runner/heartbeat`: the runner lives, holds these sessions, and may be draining.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatParams {
    #[serde(default)]
    pub running: Vec<String>,
    /// It takes no more work (SIGTERM): amberd assigns it nothing.
    #[serde(default)]
    pub draining: bool,
    /// Draining past its grace: these sessions should move at their next tool boundary.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub park: Vec<String>,
    /// Sessions whose workspace could not be made (the clone failed), until acknowledged
    /// by an answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<Failure>,
}

/// `runner/heartbeat` result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatResult {
    /// Sessions to drop: amberd no longer has them on this runner.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub release: Vec<String>,
}

/// A session's workspace that could not be made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    pub session: String,
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_assignment_names_its_ref_as_the_protocol_does() {
        let assignment = Assignment {
            session: "s".to_owned(),
            workspace: "/work/s".into(),
            repo: "file:///r.git".to_owned(),
            git_ref: "main".to_owned(),
            push: false,
        };
        let value = serde_json::to_value(&assignment).unwrap();
        assert_eq!(value["ref"], "main");
        assert_eq!(
            serde_json::from_value::<Assignment>(value).unwrap(),
            assignment
        );
    }
}
