//! Running as a service: hardening the daemon process and one daemon per data dir
//! ([`harden`]), systemd notifications and the watchdog ([`notify`]), exiting when
//! idle under socket activation ([`idle`]), the size-rotated log file used when no journal
//! collects stderr ([`logfile`]), giving memory back after a burst ([`memory`]) and what
//! only the start needed ([`startup_pages`]), and the rules deciding which applies.

pub mod harden;
pub mod idle;
pub mod logfile;
pub mod memory;
pub mod notify;
pub mod startup_pages;

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;

/// Whether stderr already reaches the journal, so a log file would only duplicate it:
/// the daemon was socket-activated, or `JOURNAL_STREAM` (`DEV:INODE`, set by systemd for a
/// unit whose stderr is the journal) names the very stream stderr is.
///
/// `INVOCATION_ID` alone is not trusted: a terminal emulator started as a systemd unit
/// passes it on to every shell, and an amberd started from there logs nowhere near the
/// journal. Comparing `JOURNAL_STREAM` with stderr is what systemd's own tools do.
pub fn logs_to_journal(activated: bool, env: &impl Fn(&str) -> Option<OsString>) -> bool {
    if activated {
        return true;
    }
    let Some(stream) = env("JOURNAL_STREAM").and_then(|v| v.into_string().ok()) else {
        return false;
    };
    stderr_identity().is_some_and(|(dev, ino)| journal_stream_matches(&stream, dev, ino))
}

/// `JOURNAL_STREAM` is `DEV:INODE` in decimal.
pub fn journal_stream_matches(value: &str, dev: u64, ino: u64) -> bool {
    let Some((d, i)) = value.trim().split_once(':') else {
        return false;
    };
    d.parse::<u64>().ok() == Some(dev) && i.parse::<u64>().ok() == Some(ino)
}

fn stderr_identity() -> Option<(u64, u64)> {
    let fd = std::io::stderr().as_fd().try_clone_to_owned().ok()?;
    let meta = std::fs::File::from(fd).metadata().ok()?;
    Some((meta.dev(), meta.ino()))
}

/// The log file's path (the rule lives in amber-proto: `amber-cli daemon logs` shares it).
pub use amber_proto::paths::log_file_path;

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::tests::env;

    #[test]
    fn journal_detection() {
        assert!(logs_to_journal(true, &env(&[])));
        assert!(!logs_to_journal(false, &env(&[("INVOCATION_ID", "abc")])));
        // A JOURNAL_STREAM inherited from elsewhere does not match this test's stderr.
        assert!(!logs_to_journal(false, &env(&[("JOURNAL_STREAM", "1:1")])));
        assert!(journal_stream_matches("8:12345", 8, 12345));
        assert!(!journal_stream_matches("8:12345", 8, 1));
        assert!(!journal_stream_matches("garbage", 8, 12345));
    }
}
