//! proto's integration tests, one module per subject, linked as one test binary.

// A panic with a clear message is how a test reports a failure, helpers included.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod docs_drift;
mod docs_shapes;
mod events;
mod methods;
mod names;
mod roundtrip;
