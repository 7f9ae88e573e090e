//! amber-cli's integration tests, one module per subject, linked as one test binary.

// A panic with a clear message is how a test reports a failure, helpers included.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// The suites start the real binaries and git as the user.
#![allow(clippy::disallowed_methods)]

mod checkpoints_fake;
mod run_fake;
mod support;
