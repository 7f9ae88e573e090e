//! The executor's jobs: each tool call's numbered output and outcome, kept until the client
//! releases it so that a client that lost its connection reads what it missed
//! (`job/read {afterSeq}`). Bounded: a job keeps its newest [`KEPT_BYTES`] of output, and
//! the table its newest [`KEPT_FINISHED`] finished jobs.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use amber_proto::sync::Locked;
use tokio_util::sync::CancellationToken;

use crate::wire::{JobDone, JobOutput, JobReadResult};

/// Output a job keeps for a late reader; older chunks are dropped (and counted) past it.
pub(crate) const KEPT_BYTES: usize = 8 << 20;
/// Finished jobs kept unreleased; the oldest go first past it.
pub(crate) const KEPT_FINISHED: usize = 256;

/// One job's log.
#[derive(Debug, Default)]
struct Log {
    chunks: VecDeque<JobOutput>,
    bytes: usize,
    last_seq: u64,
    dropped: u64,
    done: Option<JobDone>,
}

/// A running or finished tool call.
#[derive(Debug)]
pub(crate) struct Job {
    id: String,
    /// The session it is one of.
    session: String,
    pub(crate) cancel: CancellationToken,
    log: Mutex<Log>,
}

impl Job {
    /// Appends a chunk; returns it numbered.
    #[cfg(test)]
    pub(crate) fn push(&self, text: String) -> JobOutput {
        self.push_then(text, JobOutput::clone)
    }

    /// Appends a chunk and hands it, numbered, to `then` (which serializes it for the live
    /// connection without another copy).
    pub(crate) fn push_then<R>(&self, text: String, then: impl FnOnce(&JobOutput) -> R) -> R {
        let mut log = self.log.locked();
        log.last_seq += 1;
        let chunk = JobOutput {
            job: self.id.clone(),
            seq: log.last_seq,
            text,
        };
        log.bytes += chunk.text.len();
        let answer = then(&chunk);
        log.chunks.push_back(chunk);
        while log.bytes > KEPT_BYTES {
            let Some(old) = log.chunks.pop_front() else {
                break;
            };
            log.bytes -= old.text.len();
            log.dropped += 1;
        }
        answer
    }

    /// Records the outcome after the last chunk: a tool call's (with its session's running
    /// background processes) or a process's (with its exit).
    pub(crate) fn finish(
        &self,
        status: amber_proto::ToolStatus,
        output: String,
        diff: Option<String>,
        exit: Option<crate::wire::ProcessExit>,
        running_processes: Option<u32>,
    ) -> JobDone {
        let mut log = self.log.locked();
        let done = JobDone {
            job: self.id.clone(),
            seq: log.last_seq,
            status,
            output,
            diff,
            exit,
            running_processes,
        };
        log.done = Some(done.clone());
        done
    }

    /// What came after `after_seq`, and the outcome once there is one.
    pub(crate) fn read(&self, after_seq: u64) -> JobReadResult {
        let log = self.log.locked();
        let first_kept = log.chunks.front().map_or(log.last_seq + 1, |c| c.seq);
        JobReadResult {
            chunks: log
                .chunks
                .iter()
                .filter(|c| c.seq > after_seq)
                .cloned()
                .collect(),
            done: log.done.clone(),
            // Chunks after `after_seq` that are no longer kept.
            dropped: first_kept.saturating_sub(after_seq.saturating_add(1)),
        }
    }
}

/// Every kept job, by id.
#[derive(Debug, Default)]
pub(crate) struct Jobs {
    jobs: Mutex<HashMap<String, Arc<Job>>>,
    /// Finished jobs in the order they finished, for the bound.
    finished: Mutex<VecDeque<String>>,
}

impl Jobs {
    /// A new job `id` of `session`; `None` when one of that id is kept.
    pub(crate) fn start(&self, id: &str, session: &str) -> Option<Arc<Job>> {
        let mut jobs = self.jobs.locked();
        if jobs.contains_key(id) {
            return None;
        }
        let job = Arc::new(Job {
            id: id.to_owned(),
            session: session.to_owned(),
            cancel: CancellationToken::new(),
            log: Mutex::new(Log::default()),
        });
        jobs.insert(id.to_owned(), Arc::clone(&job));
        Some(job)
    }

    pub(crate) fn get(&self, id: &str) -> Option<Arc<Job>> {
        self.jobs.locked().get(id).cloned()
    }

    /// Notes that `id` finished; past the bound, forgets the oldest finished job.
    pub(crate) fn finished(&self, id: &str) {
        let mut finished = self.finished.locked();
        finished.push_back(id.to_owned());
        while finished.len() > KEPT_FINISHED {
            if let Some(old) = finished.pop_front() {
                self.jobs.locked().remove(&old);
            }
        }
    }

    /// Forgets a job (its outcome was received); a running one is cancelled first.
    pub(crate) fn release(&self, id: &str) -> bool {
        let Some(job) = self.jobs.locked().remove(id) else {
            return false;
        };
        job.cancel.cancel();
        self.finished.locked().retain(|f| f != id);
        true
    }

    /// Cancels every job of `session` (it was closed).
    pub(crate) fn cancel_session(&self, session: &str) {
        for job in self.jobs.locked().values() {
            if job.session == session {
                job.cancel.cancel();
            }
        }
    }

    /// Cancels every running job (the executor stops).
    pub(crate) fn cancel_all(&self) {
        for job in self.jobs.locked().values() {
            job.cancel.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_proto::ToolStatus;

    #[test]
    fn a_reader_gets_what_came_after_its_number_and_the_outcome() {
        let jobs = Jobs::default();
        let job = jobs.start("j1", "s").unwrap();
        assert!(jobs.start("j1", "s").is_none(), "ids are unique while kept");
        for text in ["a", "b", "c"] {
            job.push(text.to_owned());
        }
        let read = job.read(1);
        let texts: Vec<_> = read.chunks.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(texts, ["b", "c"]);
        assert_eq!(read.done, None);
        let done = job.finish(ToolStatus::Ok, "abc".to_owned(), None, None, None);
        assert_eq!(done.seq, 3, "the outcome names the last chunk");
        assert_eq!(job.read(3).done, Some(done));
        assert!(job.read(3).chunks.is_empty());
    }

    #[test]
    fn past_its_bound_a_job_drops_its_oldest_output_and_says_how_much() {
        let job = Jobs::default().start("j", "s").unwrap();
        let big = "x".repeat(KEPT_BYTES / 2 + 1);
        for _ in 0..3 {
            job.push(big.clone());
        }
        let read = job.read(0);
        assert_eq!(read.chunks.first().map(|c| c.seq), Some(3));
        assert_eq!(read.dropped, 2);
        assert_eq!(
            job.read(2).dropped,
            0,
            "a reader past the dropped part misses none"
        );
    }

    #[test]
    fn released_and_overflowing_finished_jobs_are_forgotten() {
        let jobs = Jobs::default();
        let running = jobs.start("run", "s").unwrap();
        assert!(jobs.release("run"));
        assert!(
            running.cancel.is_cancelled(),
            "releasing a running job stops it"
        );
        assert!(jobs.get("run").is_none());
        assert!(!jobs.release("run"));
        for n in 0..=KEPT_FINISHED {
            let id = format!("j{n}");
            jobs.start(&id, "s").unwrap();
            jobs.finished(&id);
        }
        assert!(
            jobs.get("j0").is_none(),
            "the oldest finished job went first"
        );
        assert!(jobs.get(&format!("j{KEPT_FINISHED}")).is_some());
    }
}
