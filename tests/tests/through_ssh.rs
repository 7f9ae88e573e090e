//! A representative subset of the tool suites run a third time with every session's tools on
//! an executor reached over SSH: a real `sshd` on loopback started per test, the real `ssh`
//! client with its own config, key and pinned host key (`amber_tests::sshd`), and the
//! environment `ssh://exec-host` (`amber_tests::daemon::through_ssh`).

// Each suite's file is compiled more than once on purpose.
#![allow(clippy::duplicate_mod)]

#[path = "confinement.rs"]
mod confinement;
#[path = "editing.rs"]
mod editing;
#[path = "tools.rs"]
mod tools;
