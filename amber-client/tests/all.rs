//! amber-client's integration tests, one module per subject, linked as one test binary.

// A panic with a clear message is how a test reports a failure, helpers included.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod autostart;
mod bridge;
mod client;
mod common;
