//! End-to-end test kit.
