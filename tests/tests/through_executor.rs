//! Suites that drive the workspace tools, run a second time with every session's tools on a
//! local executor (`amber-exec` over stdio): under this module the kit gives the sessions it
//! creates the environment `executor:test-executor` and configures it
//! (`amber_tests::daemon::through_executor`). The same assertions must hold.

// Each suite's file is compiled twice on purpose: once as itself, once here.
#![allow(clippy::duplicate_mod)]

#[path = "editing.rs"]
mod editing;
#[path = "sandbox_escapes.rs"]
mod sandbox_escapes;
