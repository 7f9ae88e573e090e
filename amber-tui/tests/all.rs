//! amber-tui's integration tests, one module per subject, linked as one test binary.

// A panic with a clear message is how a test reports a failure, helpers included.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod attach;
mod checkpoints;
mod common;
mod diffs;
mod events;
mod repeats;
mod sizes;
mod views;
