//! Handing memory back after a busy connection closes. glibc's malloc keeps what a burst
//! freed (in the arenas of the worker threads that served it) for reuse, so the daemon's
//! RSS would stay at the burst's peak; `malloc_trim` returns the free pages to the OS.

/// A connection that read more than this trims the heap when it closes.
const TRIM_AFTER_BYTES: u64 = 1024 * 1024;

/// Called when a WebSocket connection's IO is dropped.
pub fn connection_closed(bytes_read: u64) {
    if bytes_read < TRIM_AFTER_BYTES {
        return;
    }
    trim();
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim only walks glibc's own heap bookkeeping under its locks; it takes
    // no pointers from us and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}
