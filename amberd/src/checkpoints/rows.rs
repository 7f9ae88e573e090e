//! A session's checkpoint rows, kept beside its log as `<session dir>/checkpoints`: one
//! JSON record per line, appended as things happen and replayed on load.
//!
//! ```text
//! {"k":"turn","turnId":…,"seq":…,"time":…,"prompt":…,"contextLen":…,"contextHead":…,
//!  "noSnapshots":true?}                    a turn began (`noSnapshots`: checkpoints were off)
//! {"k":"before","turnId":…,"time":…,"snapshot":"<hash>"|null,"incomplete":…}      its checkpoint
//! {"k":"after","turnId":…,"snapshot":…,"changed":[…],"skipped":[…],"outside":[…]?} it ended
//! {"k":"rewound","turnId":…}              that turn and every later one were rewound away
//! {"k":"expired","turnId":…}              retention dropped that turn's snapshots
//! ```
//!
//! **Invariants:** rows are in turn order; a `rewound` removes rows, it never edits one;
//! a line that does not parse (a torn last write) is skipped with a warning, so a damaged
//! file costs at most the rows it held, never the session.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::path::{Path, PathBuf};

use amber_proto::ChangedPath;
use amber_store::RelPath;
use serde::{Deserialize, Serialize};

/// The file name in the session's directory.
pub(crate) const ROWS_FILE: &str = "checkpoints";

/// One line of the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "lowercase", rename_all_fields = "camelCase")]
pub(crate) enum Record {
    Turn {
        turn_id: String,
        seq: u64,
        time: String,
        prompt: String,
        /// Messages in the context before the turn's prompt was pushed.
        context_len: usize,
        /// The chain hash of the last of them (16 hex digits): tells whether the context
        /// still starts with that prefix (a compaction or `/clear` rebuilds it).
        context_head: String,
        /// The turn ran with `[checkpoints] enabled = false`: whatever it changed is
        /// unknown, so no files rewind can reach across it.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        no_snapshots: bool,
    },
    Before {
        turn_id: String,
        time: String,
        /// The snapshot's hash; `None` when none could be taken at all.
        snapshot: Option<String>,
        /// Why a rewind to it is refused (files that could not be recorded).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        incomplete: Option<String>,
    },
    After {
        turn_id: String,
        snapshot: Option<String>,
        changed: Vec<ChangedPath>,
        skipped: Vec<String>,
        /// Changed paths whose last change was made while none of the turn's file-changing
        /// calls ran: by someone else (a hand edit, a background process) during the turn.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        outside: Vec<RelPath>,
    },
    Rewound {
        turn_id: String,
    },
    Expired {
        turn_id: String,
    },
}

/// What a turn's checkpoint recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Before {
    pub(crate) time: String,
    pub(crate) snapshot: Option<String>,
    pub(crate) incomplete: Option<String>,
}

/// What the turn changed, recorded when it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct After {
    pub(crate) snapshot: Option<String>,
    pub(crate) changed: Vec<ChangedPath>,
    pub(crate) skipped: Vec<String>,
    /// See [`Record::After`]: a rewind leaves these alone unless `force`.
    pub(crate) outside: Vec<RelPath>,
}

/// One turn of the session's live history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TurnRow {
    pub(crate) turn_id: String,
    pub(crate) seq: u64,
    pub(crate) time: String,
    pub(crate) prompt: String,
    pub(crate) context_len: usize,
    pub(crate) context_head: String,
    pub(crate) before: Option<Before>,
    pub(crate) after: Option<After>,
    /// Retention dropped its snapshots: listed no more, not a rewind target for files.
    pub(crate) expired: bool,
    /// It ran without snapshots (`[checkpoints] enabled = false`): what it changed is
    /// unknown.
    pub(crate) no_snapshots: bool,
}

impl TurnRow {
    /// Whether `checkpoint/list` shows it.
    pub(crate) fn has_checkpoint(&self) -> bool {
        self.before.is_some() && !self.expired
    }

    /// Why the files this turn changed cannot be put back, if they cannot: its checkpoint
    /// expired, was never taken while checkpoints were off, could not be taken (in full).
    /// `None` also for a turn that called no file-changing tool: it changed nothing to
    /// put back. `number` is its 1-based place in the history.
    pub(crate) fn unrestorable(&self, number: usize) -> Option<String> {
        let turn = format!("turn {number} ({})", self.turn_id);
        if self.expired {
            return Some(format!(
                "the checkpoint of {turn} expired ([checkpoints.retention]), so the files it \
                 changed can no longer be restored"
            ));
        }
        if self.no_snapshots {
            return Some(format!(
                "{turn} ran with checkpoints disabled ([checkpoints] enabled = false), so \
                 what it changed is unknown and cannot be restored"
            ));
        }
        let before = self.before.as_ref()?;
        if let Some(reason) = &before.incomplete {
            return Some(format!(
                "the checkpoint of {turn} is incomplete, so a rewind could not restore \
                 everything: {reason}"
            ));
        }
        if before.snapshot.is_none() {
            return Some(format!("the checkpoint of {turn} could not be taken"));
        }
        None
    }
}

/// Applies one record to the rows.
pub(crate) fn apply(rows: &mut Vec<TurnRow>, record: Record) {
    match record {
        Record::Turn {
            turn_id,
            seq,
            time,
            prompt,
            context_len,
            context_head,
            no_snapshots,
        } => {
            // A turn id appears once; a repeated record (a retried append) replaces it.
            rows.retain(|r| r.turn_id != turn_id);
            rows.push(TurnRow {
                turn_id,
                seq,
                time,
                prompt,
                context_len,
                context_head,
                before: None,
                after: None,
                expired: false,
                no_snapshots,
            });
        }
        Record::Before {
            turn_id,
            time,
            snapshot,
            incomplete,
        } => {
            if let Some(row) = rows.iter_mut().find(|r| r.turn_id == turn_id) {
                row.before = Some(Before {
                    time,
                    snapshot,
                    incomplete,
                });
            }
        }
        Record::After {
            turn_id,
            snapshot,
            changed,
            skipped,
            outside,
        } => {
            if let Some(row) = rows.iter_mut().find(|r| r.turn_id == turn_id) {
                row.after = Some(After {
                    snapshot,
                    changed,
                    skipped,
                    outside,
                });
            }
        }
        Record::Rewound { turn_id } => {
            if let Some(at) = rows.iter().position(|r| r.turn_id == turn_id) {
                rows.truncate(at);
            }
        }
        Record::Expired { turn_id } => {
            if let Some(row) = rows.iter_mut().find(|r| r.turn_id == turn_id) {
                row.expired = true;
            }
        }
    }
}

/// Reads the rows of the file at `path` (none when it does not exist).
pub(crate) fn load(path: &Path) -> std::io::Result<Vec<TurnRow>> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut rows = Vec::new();
    for (n, line) in BufReader::new(file).split(b'\n').enumerate() {
        let line = line?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Record>(&line) {
            Ok(record) => apply(&mut rows, record),
            Err(err) => tracing::warn!(
                path = %path.display(),
                line = n + 1,
                %err,
                "skipping an unreadable checkpoint record"
            ),
        }
    }
    Ok(rows)
}

/// Appends records to a session's rows file.
#[derive(Debug)]
pub(crate) struct RowsFile {
    path: PathBuf,
}

impl RowsFile {
    pub(crate) fn new(path: PathBuf) -> Self {
        Self { path }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `record` as one line; `sync` makes it durable before returning.
    pub(crate) fn append(&self, record: &Record, sync: bool) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(record).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        // One write of the whole line: a crash leaves it whole or torn at the end, and a
        // torn line is skipped on load.
        file.write_all(&line)?;
        if sync {
            file.sync_data()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(id: &str, len: usize) -> Record {
        Record::Turn {
            turn_id: id.into(),
            seq: len as u64,
            time: "t".into(),
            prompt: format!("prompt {id}"),
            context_len: len,
            context_head: "0".into(),
            no_snapshots: false,
        }
    }

    #[test]
    fn rewound_drops_the_turn_and_every_later_one() {
        let mut rows = Vec::new();
        for (id, len) in [("a", 1), ("b", 3), ("c", 5)] {
            apply(&mut rows, turn(id, len));
        }
        apply(
            &mut rows,
            Record::Rewound {
                turn_id: "b".into(),
            },
        );
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].turn_id, "a");
    }

    #[test]
    fn a_torn_last_line_costs_only_itself() {
        let dir = tempfile::tempdir().unwrap();
        let file = RowsFile::new(dir.path().join(ROWS_FILE));
        file.append(&turn("a", 1), false).unwrap();
        file.append(
            &Record::Before {
                turn_id: "a".into(),
                time: "t".into(),
                snapshot: Some("h".into()),
                incomplete: None,
            },
            true,
        )
        .unwrap();
        let mut f = OpenOptions::new().append(true).open(file.path()).unwrap();
        f.write_all(b"{\"k\":\"turn\",\"turnId\":\"b").unwrap();
        let rows = load(file.path()).unwrap();
        assert_eq!(rows.len(), 1);
        assert!(rows[0].has_checkpoint());
    }
}
