//! The daemon's clock as its records write it. A leaf: it imports nothing of the daemon.

/// Current time as RFC 3339 with millisecond precision, UTC.
pub(crate) fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}
