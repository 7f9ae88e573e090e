//! Suites that drive the workspace tools, run a second time with every session's tools on a
//! local executor (`amber-exec` over stdio): under this module the kit gives the sessions it
//! creates the environment `executor:test-executor` and configures it
//! (`amber_tests::daemon::through_executor`). The same assertions must hold.
//!
//! Not here: `processes` and `detached_processes`, whose subject is that tool processes die
//! with a killed amberd — on an executor they outlive it by design, and a daemon started
//! again attaches to them (`executors::a_killed_daemon_attaches_again_…`).

// Each suite's file is compiled twice on purpose: once as itself, once here.
#![allow(clippy::duplicate_mod)]

#[path = "checkpoints.rs"]
mod checkpoints;
#[path = "confinement.rs"]
mod confinement;
#[path = "editing.rs"]
mod editing;
#[path = "policy_bypasses.rs"]
mod policy_bypasses;
#[path = "prompt.rs"]
mod prompt;
#[path = "sandbox_escalation.rs"]
mod sandbox_escalation;
#[path = "sandbox_escapes.rs"]
mod sandbox_escapes;
#[path = "security_commands.rs"]
mod security_commands;
#[path = "security_env.rs"]
mod security_env;
#[path = "subagents.rs"]
mod subagents;
#[path = "tools.rs"]
mod tools;
#[path = "turns.rs"]
mod turns;
