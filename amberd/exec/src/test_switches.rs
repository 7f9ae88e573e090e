//! The switches the end-to-end tests flip through amberd's environment (`AMBER_TEST_*`):
//! honoured only in a build with the `test-switches` feature (the test build enables it)
//! and in this crate's own unit tests. A release binary reads none of them.

/// The value of test switch `name` in amberd's environment; `None` in a build without
/// the switches.
#[cfg(any(test, feature = "test-switches"))]
pub fn var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The value of test switch `name` in amberd's environment; `None` in a build without
/// the switches.
#[cfg(not(any(test, feature = "test-switches")))]
pub fn var(_name: &str) -> Option<String> {
    None
}

/// Whether this build honours the test switches.
pub const ENABLED: bool = cfg!(any(test, feature = "test-switches"));
