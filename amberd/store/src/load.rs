//! Reading a session log back: the record scan, the replay of events and context
//! operations, and the repair of a torn tail.
//!
//! **Invariant:** only the *last* line of a log may be bad (no newline, CRC mismatch,
//! invalid JSON): that is what a crash in the middle of an append leaves, and it is
//! dropped. A bad line with more lines after it, a seq that does not rise by one, or a pop
//! of an empty context is corruption, reported with its 1-based record number — an error,
//! or `Scan::corrupt` for the lenient readers (verify, salvage) — never a panic and never
//! silently skipped. Readers never truncate; only [`repair`] does, and
//! only while holding the log's writer lock, so an append in flight is never cut off.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::path::Path;

use amber_proto::Message;
use serde_json::value::RawValue;

use super::record::{self, Record};
use super::{StoreError, StoredEvent, io_err};

/// Where a scan ended.
#[derive(Debug)]
pub(crate) struct Scan {
    /// Length of the file up to the end of the last good record.
    pub good_len: u64,
    /// Why the bytes after `good_len` were dropped, when there are any.
    pub torn: Option<String>,
    /// A bad record with more after it (only [`scan_lenient`] returns one; it starts at
    /// `good_len`).
    pub corrupt: Option<Corruption>,
}

/// A damaged record in the middle of a log: where it is and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Corruption {
    /// 1-based number of the record (line).
    pub record: usize,
    /// Byte offset of the record's first byte.
    pub offset: u64,
    pub reason: String,
}

impl Corruption {
    fn into_error(self, path: &Path) -> StoreError {
        StoreError::Corrupt {
            path: path.to_owned(),
            record: self.record,
            offset: self.offset,
            reason: format!("{} (at byte {})", self.reason, self.offset),
        }
    }
}

/// Why a record that passed its CRC check was rejected by the reader.
#[derive(Debug)]
pub(crate) enum Reject {
    /// Its JSON does not parse: dropped like a torn record when it is the last one.
    Unreadable(String),
    /// It contradicts the records before it (seq order, pop of nothing): always corrupt.
    Inconsistent(String),
}

/// Reads every record of `reader`, handing the good ones to `visit`; a damaged record
/// in the middle is an error naming it.
pub(crate) fn scan<R: Read>(
    path: &Path,
    reader: R,
    visit: impl FnMut(Record<'_>) -> Result<(), Reject>,
) -> Result<Scan, StoreError> {
    let scan = scan_lenient(path, reader, visit)?;
    match scan.corrupt {
        Some(corrupt) => Err(corrupt.into_error(path)),
        None => Ok(scan),
    }
}

/// Like [`scan`], but a damaged record in the middle ends the scan in `Scan::corrupt`
/// instead of an error (only I/O fails): what was read up to it is kept.
pub(crate) fn scan_lenient<R: Read>(
    path: &Path,
    reader: R,
    mut visit: impl FnMut(Record<'_>) -> Result<(), Reject>,
) -> Result<Scan, StoreError> {
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let mut line = Vec::with_capacity(4096);
    let mut offset = 0u64;
    let mut record = 0usize;
    let corrupt = |record: usize, offset: u64, reason: String| Scan {
        good_len: offset,
        torn: None,
        corrupt: Some(Corruption {
            record,
            offset,
            reason,
        }),
    };
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| io_err(path, e))?;
        if n == 0 {
            return Ok(Scan {
                good_len: offset,
                torn: None,
                corrupt: None,
            });
        }
        record += 1;
        let at_end = reader.fill_buf().map_err(|e| io_err(path, e))?.is_empty();
        let outcome = match line.split_last() {
            Some((b'\n', body)) => match record::decode(body) {
                Ok(rec) => match visit(rec) {
                    Ok(()) => Ok(()),
                    Err(Reject::Unreadable(reason)) => Err(reason),
                    Err(Reject::Inconsistent(reason)) => {
                        return Ok(corrupt(record, offset, reason));
                    }
                },
                Err(reason) => Err(reason),
            },
            // The read stopped at the end of the file: an append that never finished.
            _ => Err("no trailing newline".to_owned()),
        };
        match outcome {
            Ok(()) => offset += n as u64,
            Err(reason) if at_end => {
                return Ok(Scan {
                    good_len: offset,
                    torn: Some(format!("record {record} at byte {offset}: {reason}")),
                    corrupt: None,
                });
            }
            Err(reason) => return Ok(corrupt(record, offset, reason)),
        }
    }
}

/// What replaying a log builds.
#[derive(Debug, Default)]
pub(crate) struct Replay {
    /// Events with `seq > after` are collected.
    pub after: u64,
    /// Build the context, or only count it (enough to validate pops).
    pub want_context: bool,
    pub last_seq: u64,
    pub event_count: usize,
    pub events: Vec<StoredEvent>,
    pub context: Vec<(Message, u64)>,
    pub context_len: usize,
    /// Index in `context` of the newest message pushed as the confirm question, while it
    /// is still there.
    pub confirm_at: Option<usize>,
}

impl Replay {
    pub(crate) fn apply(&mut self, rec: Record<'_>) -> Result<(), Reject> {
        match rec {
            Record::Event { seq, json } => {
                let expected = self.last_seq + 1;
                if seq != expected {
                    return Err(Reject::Inconsistent(format!(
                        "event seq {seq} where {expected} was expected"
                    )));
                }
                if seq > self.after {
                    let json = serde_json::from_slice::<Box<RawValue>>(json)
                        .map_err(|e| Reject::Unreadable(format!("invalid event JSON: {e}")))?;
                    self.events.push(StoredEvent { seq, json });
                }
                self.last_seq = seq;
                self.event_count += 1;
            }
            Record::Push { hash, message, tag } => {
                if tag == Some(record::TAG_CONFIRM) {
                    self.confirm_at = Some(self.context_len);
                }
                if self.want_context {
                    let message = serde_json::from_slice::<Message>(message)
                        .map_err(|e| Reject::Unreadable(format!("invalid message JSON: {e}")))?;
                    self.context.push((message, hash));
                }
                self.context_len += 1;
            }
            Record::Pop => {
                if self.context_len == 0 {
                    return Err(Reject::Inconsistent("pop of an empty context".into()));
                }
                self.context_len -= 1;
                self.context.pop();
                if self.confirm_at >= Some(self.context_len) {
                    self.confirm_at = None;
                }
            }
            Record::Clear => {
                self.context_len = 0;
                self.context.clear();
                self.confirm_at = None;
            }
        }
        Ok(())
    }
}

/// Replays the log at `path`; a missing log is an empty one. A damaged record in the
/// middle is an error.
pub(crate) fn replay(path: &Path, state: Replay) -> Result<(Replay, Scan), StoreError> {
    let (state, scan) = replay_lenient(path, state)?;
    match scan.corrupt {
        Some(corrupt) => Err(corrupt.into_error(path)),
        None => Ok((state, scan)),
    }
}

/// Replays the log at `path` up to its first damaged record (reported in `Scan::corrupt`).
pub(crate) fn replay_lenient(path: &Path, mut state: Replay) -> Result<(Replay, Scan), StoreError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            let empty = Scan {
                good_len: 0,
                torn: None,
                corrupt: None,
            };
            return Ok((state, empty));
        }
        Err(e) => return Err(io_err(path, e)),
    };
    let scan = scan_lenient(path, file, |rec| state.apply(rec))?;
    Ok((state, scan))
}

/// Cuts the log back to `good_len` and syncs it. Returns false (and leaves the file
/// alone) when a writer holds the log: what looked torn may be its append in flight.
pub(crate) fn repair(path: &Path, good_len: u64) -> Result<bool, StoreError> {
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| io_err(path, e))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Ok(false),
        Err(TryLockError::Error(e)) => return Err(io_err(path, e)),
    }
    // A file that shrank meanwhile needs nothing cut.
    let len = file.metadata().map_err(|e| io_err(path, e))?.len();
    if len > good_len {
        file.set_len(good_len).map_err(|e| io_err(path, e))?;
        file.sync_all().map_err(|e| io_err(path, e))?;
    }
    Ok(true)
}
