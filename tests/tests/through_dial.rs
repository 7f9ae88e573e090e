//! A representative subset of the tool suites run again with every session's tools on an
//! executor that dials in to amberd over TLS with a bearer token (`amber-exec --connect`,
//! `amber_tests::dial`), as `executor:far` (`amber_tests::daemon::through_dial`).

// Each suite's file is compiled more than once on purpose.
#![allow(clippy::duplicate_mod)]

#[path = "editing.rs"]
mod editing;
#[path = "tools.rs"]
mod tools;
