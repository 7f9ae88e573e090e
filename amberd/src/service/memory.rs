//! Giving memory back to the system after a burst. glibc's malloc keeps what a burst freed
//! inside its arenas: it returns the top of a heap, not the free pages in its middle, so
//! after a flood of replies, a closed client or a few hundred deleted sessions RSS stays
//! near the peak although the daemon holds almost nothing. What releases a lot (a
//! connection closing, a session deleted or unloaded) calls [`Trim::soon`]; at most once
//! per [`QUIET`], off the async workers, `malloc_trim(0)` returns every whole free page of
//! every arena.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How long after a release the trim runs (releases in a burst share one trim).
pub const QUIET: Duration = Duration::from_millis(500);

/// Requests for a trim; cheap to make from anywhere (an atomic and a wake).
#[derive(Debug, Default)]
pub struct Trim {
    wanted: AtomicBool,
    wake: Notify,
}

impl Trim {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Something released a lot of memory: trim once things are quiet.
    pub fn soon(&self) {
        if !self.wanted.swap(true, Ordering::SeqCst) {
            self.wake.notify_one();
        }
    }

    /// Trims as asked until `stop` fires.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        loop {
            tokio::select! {
                () = self.wake.notified() => {}
                () = stop.cancelled() => return,
            }
            tokio::time::sleep(QUIET).await;
            self.wanted.store(false, Ordering::SeqCst);
            let _ = tokio::task::spawn_blocking(trim_now).await;
        }
    }
}

/// Returns every whole free page of every malloc arena to the system.
pub fn trim_now() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers and may be called from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    /// RSS of this process in bytes.
    fn rss() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let kib: u64 = status
            .lines()
            .find(|l| l.starts_with("VmRSS"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap();
        kib * 1024
    }

    #[test]
    fn a_trim_gives_back_what_a_burst_of_small_blocks_freed() {
        // 64 MB of small blocks, every other one kept: the heap cannot shrink from its
        // top, only a trim of its middle returns the freed half.
        let mut blocks: Vec<Vec<u8>> = (0..64 * 1024).map(|i| vec![i as u8; 1000]).collect();
        let full = rss();
        let mut kept = Vec::new();
        for (i, block) in blocks.drain(..).enumerate() {
            if i % 64 == 0 {
                kept.push(block);
            }
        }
        let freed = rss();
        trim_now();
        let trimmed = rss();
        assert!(
            trimmed + 16 * 1024 * 1024 < freed,
            "full {full}, freed {freed}, trimmed {trimmed}"
        );
        drop(kept);
    }
}
