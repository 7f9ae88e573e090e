//! One remote job's output as the session sees it: each chunk once and in order, then the
//! outcome — whatever order live notifications and the read-back after a reconnect arrive
//! in. Pure.

use std::collections::BTreeMap;

use amber_executor::wire::JobDone;

/// What the stream hands on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Delivery {
    Chunk(String),
    Done(JobDone),
}

/// The delivered prefix of a job's output, and what arrived ahead of it.
#[derive(Debug, Default)]
pub(crate) struct JobStream {
    /// The number of the last chunk handed on.
    delivered: u64,
    ahead: BTreeMap<u64, String>,
    done: Option<JobDone>,
    finished: bool,
}

impl JobStream {
    /// The number of the last chunk handed on: what a read-back starts after.
    pub(crate) fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Chunk `seq` arrived (perhaps again, perhaps early).
    pub(crate) fn chunk(&mut self, seq: u64, text: String) -> Vec<Delivery> {
        if seq > self.delivered && !self.finished {
            self.ahead.entry(seq).or_insert(text);
        }
        self.drain()
    }

    /// The outcome arrived: handed on once every chunk before it is.
    pub(crate) fn done(&mut self, done: JobDone) -> Vec<Delivery> {
        if !self.finished {
            self.done = Some(done);
        }
        self.drain()
    }

    /// The executor no longer keeps the chunks before `first_kept`: a marker takes their
    /// place, and the stream goes on from there.
    pub(crate) fn lost_before(&mut self, first_kept: u64) -> Vec<Delivery> {
        let mut out = Vec::new();
        if first_kept > self.delivered + 1 && !self.finished {
            let missing = first_kept - self.delivered - 1;
            out.push(Delivery::Chunk(format!(
                "\n[… {missing} chunks of output were lost while the executor was out of reach]\n"
            )));
            self.delivered = first_kept - 1;
            self.ahead.retain(|seq, _| *seq > self.delivered);
        }
        out.extend(self.drain());
        out
    }

    fn drain(&mut self) -> Vec<Delivery> {
        let mut out = Vec::new();
        while let Some(text) = self.ahead.remove(&(self.delivered + 1)) {
            self.delivered += 1;
            out.push(Delivery::Chunk(text));
        }
        if let Some(done) = self.done.take_if(|d| d.seq <= self.delivered) {
            self.finished = true;
            self.ahead.clear();
            out.push(Delivery::Done(done));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_proto::ToolStatus;

    fn done(seq: u64) -> JobDone {
        JobDone {
            job: "j".to_owned(),
            seq,
            status: ToolStatus::Ok,
            output: "out".to_owned(),
            diff: None,
            exit: None,
            running_processes: None,
        }
    }

    fn texts(deliveries: &[Delivery]) -> Vec<String> {
        deliveries
            .iter()
            .map(|d| match d {
                Delivery::Chunk(text) => text.clone(),
                Delivery::Done(done) => format!("done@{}", done.seq),
            })
            .collect()
    }

    #[test]
    fn chunks_are_handed_on_once_in_order_and_the_outcome_last() {
        // (case, arrivals: a chunk's number and text or the outcome's number, handed on)
        type Arrivals<'a> = &'a [(u64, Option<&'a str>)];
        let cases: &[(&str, Arrivals<'_>, &[&str])] = &[
            (
                "in order",
                &[(1, Some("a")), (2, Some("b")), (2, None)],
                &["a", "b", "done@2"],
            ),
            (
                "a live chunk ahead of the read-back",
                &[
                    (1, Some("a")),
                    (3, Some("c")),
                    (2, Some("b")),
                    (3, Some("c")),
                ],
                &["a", "b", "c"],
            ),
            (
                "the outcome ahead of its last chunk",
                &[(1, Some("a")), (2, None), (2, Some("b"))],
                &["a", "b", "done@2"],
            ),
            (
                "duplicates after a resume",
                &[
                    (1, Some("a")),
                    (1, Some("a")),
                    (2, Some("b")),
                    (1, Some("a")),
                ],
                &["a", "b"],
            ),
            (
                "nothing after the outcome",
                &[(0, None), (1, Some("late"))],
                &["done@0"],
            ),
        ];
        for (name, arrivals, expected) in cases {
            let mut stream = JobStream::default();
            let mut got = Vec::new();
            for (seq, text) in *arrivals {
                got.extend(match text {
                    Some(text) => stream.chunk(*seq, (*text).to_owned()),
                    None => stream.done(done(*seq)),
                });
            }
            assert_eq!(texts(&got), *expected, "{name}");
        }
    }

    #[test]
    fn output_the_executor_dropped_is_marked_and_skipped() {
        let mut stream = JobStream::default();
        stream.chunk(1, "a".to_owned());
        stream.chunk(5, "e".to_owned());
        let got = texts(&stream.lost_before(4));
        assert_eq!(got.len(), 1);
        assert!(got[0].contains("2 chunks of output were lost"), "{got:?}");
        let got = texts(&stream.chunk(4, "d".to_owned()));
        assert_eq!(got, ["d", "e"]);
        assert_eq!(stream.delivered(), 5);
    }
}
