//! Suites that attack the sandbox, run again with every session's tools on a local executor
//! started as in an unprivileged container: without `CAP_SYS_ADMIN` (the kit's
//! `through_container`), so no namespace can be made and Landlock and seccomp alone keep
//! its commands in (`amber_exec::sandbox`, "in place"). The same escapes must fail.

// Each suite's file is compiled twice on purpose: once as itself, once here.
#![allow(clippy::duplicate_mod)]

#[path = "sandbox_escalation.rs"]
mod sandbox_escalation;
#[path = "sandbox_escapes.rs"]
mod sandbox_escapes;
#[path = "security_commands.rs"]
mod security_commands;
#[path = "security_env.rs"]
mod security_env;
