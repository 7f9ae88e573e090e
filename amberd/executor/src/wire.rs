//! The executor protocol's wire types (docs/executors.md): JSON-RPC 2.0, one JSON object per
//! line, amberd the client and the executor the server. Serde only.
//!
//! A tool call is a *job*: its live output arrives as `job/output` notifications numbered
//! from 1 within the job, its end as `job/done` carrying the last number. A client that lost
//! the connection attaches again and asks `job/read {afterSeq}` for what it missed; nothing
//! an executor produced is lost while the job is kept (until `job/release`).

use std::path::PathBuf;

use amber_proto::{SandboxInfo, ToolStatus};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The version of this protocol; `initialize` refuses a client that speaks another.
pub const PROTOCOL_VERSION: u32 = 1;

/// Method names, requests from the client.
pub mod method {
    pub const INITIALIZE: &str = "initialize";
    pub const SESSION_OPEN: &str = "session/open";
    pub const SESSION_SANDBOX: &str = "session/sandbox";
    pub const SESSION_CLOSE: &str = "session/close";
    pub const TOOL_CALL: &str = "tool/call";
    pub const JOB_READ: &str = "job/read";
    pub const JOB_CANCEL: &str = "job/cancel";
    pub const JOB_RELEASE: &str = "job/release";
    pub const PROCESS_SPAWN: &str = "process/spawn";
    pub const PROCESS_WRITE: &str = "process/write";
    pub const CHECKPOINT_TAKE: &str = "checkpoint/take";
    pub const CHECKPOINT_REST: &str = "checkpoint/rest";
    pub const CHECKPOINT_READ: &str = "checkpoint/read";
    pub const CHECKPOINT_STAGE: &str = "checkpoint/stage";
    pub const CHECKPOINT_RESTORE: &str = "checkpoint/restore";
    /// A fleet runner's session only: commit the workspace and push it as a branch.
    pub const WORKSPACE_PUSH: &str = "workspace/push";
    /// The workspace's configuration files (instructions, rules, agents, skills).
    pub const WORKSPACE_CONFIG: &str = "workspace/config";
    /// amberd's own rewrite of the workspace's rules file (an `allow_always` answer).
    pub const WORKSPACE_RULES: &str = "workspace/rules";
    pub const PING: &str = "ping";
}

/// Notification names, from the executor.
pub mod notification {
    pub const JOB_OUTPUT: &str = "job/output";
    pub const JOB_DONE: &str = "job/done";
    /// One connection through the egress proxy of a session's command (its network is an
    /// allowlist): the client keeps it as the session's `network_connection` event.
    pub const NETWORK_CONNECTION: &str = "network/connection";
}

/// Error codes besides JSON-RPC's own.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    /// `initialize` first, and once; or a wrong attach token.
    pub const NOT_INITIALIZED: i64 = -32002;
    /// The session is not open here, or was closed: its work is refused.
    pub const SESSION_GONE: i64 = -32010;
    /// No such job (never started, or released).
    pub const UNKNOWN_JOB: i64 = -32011;
    /// A job id already in use.
    pub const JOB_EXISTS: i64 = -32012;
    /// The workspace is not a directory this executor can use.
    pub const INVALID_WORKSPACE: i64 = -32013;
    /// A checkpoint could not be taken or restored here.
    pub const CHECKPOINT_FAILED: i64 = -32014;
    /// The workspace could not be pushed (or this executor pushes nothing).
    pub const PUSH_FAILED: i64 = -32015;
}

/// One line of the protocol: a request, a response or a notification. Liberal on input:
/// fields a kind does not use are ignored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Frame {
    #[serde(default)]
    pub jsonrpc: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcError>,
}

impl Frame {
    pub fn request(id: u64, method: &str, params: Value) -> Self {
        Self {
            jsonrpc: "2.0".to_owned(),
            id: Some(Value::from(id)),
            method: Some(method.to_owned()),
            params: Some(params),
            ..Self::default()
        }
    }

    pub fn notification(method: &str, params: Value) -> Self {
        Self {
            jsonrpc: "2.0".to_owned(),
            method: Some(method.to_owned()),
            params: Some(params),
            ..Self::default()
        }
    }

    pub fn response(id: Value, result: Result<Value, RpcError>) -> Self {
        let (result, error) = match result {
            Ok(value) => (Some(value), None),
            Err(err) => (None, Some(err)),
        };
        Self {
            jsonrpc: "2.0".to_owned(),
            id: Some(id),
            result,
            error,
            ..Self::default()
        }
    }
}

/// One line of the protocol as sent: a frame serialized, its newline included.
pub type Line = Vec<u8>;

/// `frame` as a line.
pub fn line_of(frame: &Frame) -> Line {
    let mut line = serde_json::to_vec(frame).unwrap_or_default();
    line.push(b'\n');
    line
}

/// The notification `method` with `params` as a line, serialized once from the borrowed
/// value (the hot path: a job's output chunks).
pub fn notification_line<T: Serialize>(method: &str, params: &T) -> Line {
    #[derive(Serialize)]
    struct Notification<'a, T> {
        jsonrpc: &'static str,
        method: &'a str,
        params: &'a T,
    }
    let mut line = serde_json::to_vec(&Notification {
        jsonrpc: "2.0",
        method,
        params,
    })
    .unwrap_or_default();
    line.push(b'\n');
    line
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message} ({code})")]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// `initialize` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    pub protocol_version: u32,
    /// Who connects (`amberd 0.1.0`), for the executor's log.
    #[serde(default)]
    pub client: String,
    /// The attach token `initialize` returned on the first connection; required on every
    /// connection that is not the executor's own stdio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// `initialize` result: who the executor is and what its machine offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    pub protocol_version: u32,
    /// Stable for the executor process's life: what `amber-exec --attach` names.
    pub executor_id: String,
    /// The secret a later connection presents to attach.
    pub token: String,
    /// The executor's version (`amber-exec --version`).
    pub version: String,
    pub pid: u32,
    pub machine: MachineFacts,
    /// Whether this connection resumed an executor that had lost its previous one.
    #[serde(default)]
    pub resumed: bool,
}

/// The executor's machine, as the environment block and `session/get` show it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineFacts {
    pub hostname: String,
    pub os: String,
    pub arch: String,
    /// `$SHELL`, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
    /// Why the OS sandbox is unavailable on this machine; absent when it works (or is not
    /// probed yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_unavailable: Option<String>,
}

/// `session/open` params: the session's workspace and sandbox on this executor.
/// Opening an open session again updates it (a client that attached again).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionOpenParams {
    pub session: String,
    /// An absolute directory on the executor's machine.
    pub workspace: PathBuf,
    pub sandbox: SandboxInfo,
    /// Writable in `workspace-write` besides the workspace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable_roots: Vec<PathBuf>,
    /// `[tools.env]` of amberd's config, applied to the executor's own environment.
    #[serde(default)]
    pub tool_env: ToolEnvSettings,
    /// Further paths to hide from sandboxed commands (the client's own socket directory,
    /// should it be on this machine): only ever more hidden, never less.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden: Vec<PathBuf>,
    /// Further paths to mask (the client's data directory and config, its secret
    /// locations), likewise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub masked: Vec<PathBuf>,
    /// Further processes sandboxed commands may not signal (the client itself, should it
    /// be on this machine), likewise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guarded_pids: Vec<u32>,
    /// The network allowlist's entries (host patterns, as `[sandbox] allow_domains` and
    /// `deny_domains` take them): what the executor's egress proxy lets its commands reach
    /// when the session's network is an allowlist. Absent: nothing is allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkEntries>,
}

/// The network allowlist of a session, as entries.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkEntries {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
}

/// `network/connection` params: one connection of a session's command through the
/// executor's egress proxy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkConnectionNote {
    pub session: String,
    pub connection: amber_proto::NetworkConnection,
}

/// The environment policy of tool processes, as data (`amber_exec::env_policy`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolEnvSettings {
    /// `[tools.env]` as amberd's config has it (its TOML shape, as JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// The names of provider keys: removed whatever the config says (names, never values).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_names: Vec<String>,
}

/// `session/open` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionOpenResult {
    /// The workspace with its symlinks resolved: the root every path is confined to.
    pub workspace: PathBuf,
}

/// `session/sandbox` params: the sandbox of the session's next commands (a mode change).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSandboxParams {
    pub session: String,
    pub sandbox: SandboxInfo,
}

/// `session/close` params: the session is gone; its processes are killed and its work
/// refused from now on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionParams {
    pub session: String,
}

/// `workspace/push` params: commit the session's workspace on top of the branch (or the
/// clone's commit) and push it to the session's repository as `branch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspacePushParams {
    pub session: String,
    pub branch: String,
    pub message: String,
    /// The commit this session pushed last: the branch may be there, or at the clone's
    /// commit, or absent; anywhere else it moved, and the push is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<String>,
}

/// `workspace/push` result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspacePushResult {
    /// The branch's tip now (`None`: nothing changed and the branch does not exist).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Whether a new commit was pushed.
    pub changed: bool,
}

/// `workspace/config` params: which instruction file names to look for at the workspace's
/// top (`[agent] instruction_files` of amberd's config).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceConfigParams {
    pub session: String,
    #[serde(default)]
    pub instruction_files: Vec<String>,
}

/// `workspace/config` result: the configuration files there are, and those left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceConfigResult {
    #[serde(default)]
    pub files: Vec<ConfigFile>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub omitted: Vec<OmittedFile>,
}

/// `workspace/rules` params: the rules file's new content, base64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceRulesParams {
    pub session: String,
    pub data: String,
}

/// One configuration file: its workspace-relative path and base64 content; or, for a
/// symlink that leads out of the workspace (never followed), its target as `link`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigFile {
    pub path: String,
    #[serde(default)]
    pub data: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
}

/// A configuration file there is but that was not given, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OmittedFile {
    pub path: String,
    pub reason: String,
}

/// `tool/call` params: run one built-in workspace tool as job `job`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallParams {
    pub session: String,
    /// Chosen by the client, unique among the executor's kept jobs.
    pub job: String,
    /// The model's call id (what the tool's own messages name).
    pub call_id: String,
    pub tool: String,
    pub args: Value,
    pub limits: CallLimits,
    /// A person approved running this call without the OS sandbox.
    #[serde(default)]
    pub unsandboxed: bool,
    /// The session's sandbox as it is now (its mode may have changed since
    /// `session/open`): the call and the session's later commands run in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxInfo>,
    /// The session's deny rules that hide paths from tools that reveal files without
    /// naming them (`search`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<amber_policy::Rule>,
}

/// `amber_tools::ToolLimits` on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallLimits {
    pub max_output_bytes: usize,
    pub bash_default_timeout_ms: u64,
}

/// `process/spawn` params: a session's command as job `job`, its whole output streamed
/// (`job/output`), its exit in `job/done.exit`. It runs in the session's sandbox, in its own
/// process group, killed by `job/cancel` and with the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessSpawnParams {
    pub session: String,
    pub job: String,
    /// Run with `/bin/bash -c`.
    pub command: String,
    /// Inside the workspace (default: its root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Keep stdin open for `process/write` (else /dev/null).
    #[serde(default)]
    pub stdin: bool,
    /// A person approved running it without the OS sandbox.
    #[serde(default)]
    pub unsandboxed: bool,
}

/// `process/spawn` result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessSpawnResult {
    pub pid: u32,
}

/// `process/write` params: bytes for a process's stdin (UTF-8 text), then EOF if `close`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessWriteParams {
    pub job: String,
    #[serde(default)]
    pub data: String,
    #[serde(default)]
    pub close: bool,
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessExit {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
}

/// `job/read` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobReadParams {
    pub job: String,
    /// The last sequence number the client has; 0 for everything kept.
    #[serde(default)]
    pub after_seq: u64,
}

/// `job/read` result: what the job produced after `afterSeq`, and its end if it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobReadResult {
    pub chunks: Vec<JobOutput>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done: Option<JobDone>,
    /// Chunks the executor no longer kept (its per-job bound overran): their numbers are
    /// missing from `chunks`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `job/cancel` and `job/release` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobParams {
    pub job: String,
}

/// `job/output` notification: one live chunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobOutput {
    pub job: String,
    pub seq: u64,
    pub text: String,
}

/// `job/done` notification (and `job/read`'s `done`): the call's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobDone {
    pub job: String,
    /// The number of the job's last output chunk (0: none): everything up to it precedes
    /// the outcome.
    pub seq: u64,
    pub status: ToolStatus,
    pub output: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// A `process/spawn` job's exit (absent for tool calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<ProcessExit>,
    /// A tool call's session: how many of its background processes (`process` tool) run
    /// after the call, so the client knows the session still has work here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_processes: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn frames_read_liberally_and_write_only_what_their_kind_uses() {
        let request = Frame::request(7, method::PING, json!({}));
        assert_eq!(
            serde_json::to_value(&request).unwrap(),
            json!({"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {}})
        );
        let error = Frame::response(json!("a"), Err(RpcError::new(code::UNKNOWN_JOB, "no")));
        assert_eq!(
            serde_json::to_value(&error).unwrap(),
            json!({"jsonrpc": "2.0", "id": "a", "error": {"code": -32011, "message": "no"}})
        );
        let lax: Frame = serde_json::from_str(r#"{"method":"ping","extra":1}"#).unwrap();
        assert_eq!(lax.method.as_deref(), Some("ping"));
        assert_eq!(lax.id, None);
    }

    #[test]
    fn a_job_read_without_after_seq_reads_everything() {
        let read: JobReadParams = serde_json::from_value(json!({"job": "j"})).unwrap();
        assert_eq!(read.after_seq, 0);
    }
}

/// `checkpoint/take`: a snapshot of the session's workspace, taken here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointTakeParams {
    pub session: String,
    /// The `take` of an earlier answer the client kept: the answer is the changes since
    /// it (whole when this executor no longer knows it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<u64>,
    /// Larger files are listed as skipped, not recorded.
    pub max_file_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointTakeResult {
    /// Names this snapshot for a later `base`.
    pub take: u64,
    pub snapshot: amber_store::SnapshotDelta,
    /// Entries of `snapshot.changed` still to come, by `checkpoint/rest` (a snapshot too
    /// large for one answer); they follow these in order.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rest: u64,
}

/// `checkpoint/rest`: the next part of a take's entries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointRestParams {
    pub session: String,
    pub take: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointRestResult {
    pub changed: Vec<amber_store::Entry>,
    /// Entries still to come after these.
    #[serde(default)]
    pub rest: u64,
}

/// One file's content wanted by `checkpoint/read`: the entry's path and the hash it had.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WantedBlob {
    pub path: amber_store::RelPath,
    pub hash: amber_store::Hash,
}

/// `checkpoint/read`: the content of files a snapshot named.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointReadParams {
    pub session: String,
    pub blobs: Vec<WantedBlob>,
}

/// Content by hash, base64 (standard, padded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Blob {
    pub hash: amber_store::Hash,
    pub data: String,
}

/// A wanted blob that cannot be given, and why (the file changed or went since).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnreadBlob {
    pub path: amber_store::RelPath,
    pub hash: amber_store::Hash,
    pub reason: String,
}

/// What `checkpoint/read` gave: wanted blobs in neither list did not fit in this answer
/// and are asked for again.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointReadResult {
    #[serde(default)]
    pub blobs: Vec<Blob>,
    #[serde(default)]
    pub unread: Vec<UnreadBlob>,
}

/// `checkpoint/stage`: blobs a restore of the session will write, kept here until it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointStageParams {
    pub session: String,
    pub blobs: Vec<Blob>,
}

/// `checkpoint/restore`: carries out a plan on the session's workspace from staged blobs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointRestoreParams {
    pub session: String,
    pub plan: amber_store::RestorePlan,
}

/// A path a restore left alone, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RefusedPath {
    pub path: amber_store::RelPath,
    pub reason: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointRestoreResult {
    #[serde(default)]
    pub written: Vec<amber_store::RelPath>,
    #[serde(default)]
    pub deleted: Vec<amber_store::RelPath>,
    #[serde(default)]
    pub refused: Vec<RefusedPath>,
}
