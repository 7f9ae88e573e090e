//! amber's executor: the `amber-exec` binary, which runs a session's workspace tools next to
//! the files while amberd keeps the conversation, and the protocol amberd speaks to it
//! (docs/executors.md).
//!
//! - [`wire`]: the protocol's types (JSON-RPC over lines), shared with amberd's client.
//! - [`executor`]: sessions, the sandbox of this machine, jobs and their numbered output
//!   (a tool call, or a process whose whole output streams: `processes`).
//! - [`config_files`]: `workspace/config`, the workspace's configuration files amberd
//!   mirrors for a remote session.
//! - [`connection`] / [`server`]: serving one stream / the process (attach socket, linger).
//! - [`relay`]: `amber-exec --stdio`, the pipe a transport (a child, `ssh`) holds.
//! - [`dial`]: `amber-exec --connect wss://…`, an executor that dials out to amberd;
//!   [`ws_lines`]: the protocol's lines over a WebSocket, for both ends.
//! - [`runner`]: `amber-exec runner`, a fleet machine that pulls sessions from amberd
//!   ([`runner_wire`]: what it says), each in a fresh clone ([`provision`]), its result
//!   pushed as a branch from a pristine copy of the clone ([`publish`]); both run the
//!   runner's own git with its pins ([`pinned_git`]);
//!   [`runner_metrics`]: its `--metrics-listen`, over [`metrics_http`] (amberd's too).

mod checkpoints;
pub mod config_files;
pub mod connection;
pub mod dial;
mod egress;
pub mod executor;
mod jobs;
pub mod metrics_http;
pub mod pinned_git;
mod processes;
pub mod provision;
pub mod publish;
pub mod relay;
pub mod runner;
pub mod runner_metrics;
pub mod runner_wire;
pub mod server;
pub mod state_dir;
pub mod watched;
pub mod wire;
pub mod ws_lines;
