//! amber's child processes. Every process amberd starts on behalf of a session — a tool's
//! shell, a background process, a hook, an MCP server, an external plugin, git for the
//! environment block — starts through this crate, so "how is this child contained?" has
//! one answer: `sandbox` (the OS sandbox: mount and network namespaces, seccomp, dropped
//! capabilities, Landlock), applied by the `lifeline` helper in a fresh single-threaded
//! process right before it `exec`s the command; `env_policy` (which variables it sees);
//! `tmp_dirs` and `sandbox_env` (its private temp directory and the settings every spec is
//! built from); `group`, `cgroup` and `reaper` (its process group and cgroup die with the
//! call, or with the next daemon if this one dies first); `probe` (what the kernel offers,
//! tried once, and the self-test).

pub mod cgroup;
pub mod child;
pub mod containment;
pub mod egress;
pub mod env_policy;
pub mod group;
pub mod harden;
pub mod lifeline;
pub mod probe;
pub mod reaper;
pub mod sandbox;
pub mod sandbox_env;
pub mod sandbox_exec;
pub mod spawn;
pub mod test_switches;
pub mod tmp_dirs;
