//! Checking a session's log (`session/verify`) and salvaging one damaged in the middle.
//!
//! **Invariants:** verify never writes. A salvage never destroys a byte: the damaged log
//! is kept under a new name (`log.corrupt`, then `log.corrupt.1`, …) by a hard link made
//! before the good prefix replaces `log` in one rename, so at every instant `log` is either
//! the old file or the salvaged one; verify keeps reporting a salvaged session as broken
//! for as long as the damaged copy is there.
//!
//! Why keep the prefix rather than skip the bad record: what follows it may depend on it
//! (seqs, pops), and only the prefix is provably consistent. Why not refuse to load: one
//! edited byte would lose the whole session.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::load::{self, Corruption, Replay};
use super::log::sync_path;
use super::{BrokenLink, CorruptRecord, LOG_FILE, Store, StoreError, VerifyReport, io_err};

/// Name prefix of a damaged log put aside by a salvage.
const CORRUPT_PREFIX: &str = "log.corrupt";

impl Store {
    /// Re-walks the persisted hash chain of the replayed context with `context::seal`, up
    /// to the first damaged record (reported in `corrupt`). Read-only: a torn tail is
    /// reported, not repaired.
    pub fn verify(&self, session_id: &str) -> Result<VerifyReport, StoreError> {
        let dir = self.existing_dir(session_id)?;
        let state = Replay {
            after: u64::MAX,
            want_context: true,
            ..Replay::default()
        };
        let (state, scan) = load::replay_lenient(&dir.join(LOG_FILE), state)?;
        let mut prev = crate::context::Context::new().head();
        let mut first_broken = None;
        for (index, (message, stored)) in state.context.iter().enumerate() {
            let computed = crate::context::seal(prev, message);
            if computed != *stored {
                first_broken = Some(BrokenLink {
                    index,
                    stored: *stored,
                    computed,
                });
                break;
            }
            prev = *stored;
        }
        let corrupt = match scan.corrupt {
            Some(c) => Some(described(c, LOG_FILE)),
            None => salvaged_damage(&dir)?,
        };
        Ok(VerifyReport {
            messages: state.context.len(),
            events: state.event_count,
            first_broken,
            corrupt,
            torn_tail: scan.torn.is_some(),
        })
    }

    /// Makes a log damaged in the middle loadable again: the records before the first
    /// damaged one become the log, the whole damaged file is kept aside. Returns the
    /// damage, or `None` when the log has none. Fails with `Locked` while a writer holds
    /// the log.
    pub fn salvage(&self, session_id: &str) -> Result<Option<CorruptRecord>, StoreError> {
        let dir = self.existing_dir(session_id)?;
        let path = dir.join(LOG_FILE);
        let file = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path, e)),
        };
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(StoreError::Locked(session_id.into())),
            Err(TryLockError::Error(e)) => return Err(io_err(&path, e)),
        }
        // Read as `load` reads it, so whatever made it fail (a seq gap too) is found.
        let mut replay = Replay {
            want_context: true,
            ..Replay::default()
        };
        let scan = load::scan_lenient(&path, &file, |rec| replay.apply(rec))?;
        let Some(damage) = scan.corrupt else {
            return Ok(None);
        };
        let aside = free_corrupt_name(&dir)?;
        let tmp = dir.join(".log.salvage.tmp");
        let _ = fs::remove_file(&tmp);
        copy_prefix(&file, &tmp, damage.offset).map_err(|e| io_err(&tmp, e))?;
        fs::hard_link(&path, &aside).map_err(|e| io_err(&aside, e))?;
        sync_path(&dir)?;
        fs::rename(&tmp, &path).map_err(|e| io_err(&path, e))?;
        sync_path(&dir)?;
        let name = aside
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        tracing::error!(
            session = session_id,
            record = damage.record,
            reason = %damage.reason,
            kept = %aside.display(),
            "the session log is damaged; restoring the session up to the record before it"
        );
        Ok(Some(described(damage, &name)))
    }
}

fn described(damage: Corruption, file: &str) -> CorruptRecord {
    CorruptRecord {
        record: damage.record,
        reason: format!("{} (at byte {})", damage.reason, damage.offset),
        file: file.to_owned(),
    }
}

/// The damage recorded in the oldest damaged log a salvage put aside, if any.
fn salvaged_damage(dir: &Path) -> Result<Option<CorruptRecord>, StoreError> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map_err(|e| io_err(dir, e))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(CORRUPT_PREFIX))
        .collect();
    // `log.corrupt` sorts before `log.corrupt.1`: the first salvage comes first.
    names.sort();
    let Some(name) = names.into_iter().next() else {
        return Ok(None);
    };
    let path = dir.join(&name);
    let (_, scan) = load::replay_lenient(&path, Replay::default())?;
    Ok(Some(match scan.corrupt {
        Some(c) => described(c, &name),
        // Damage only a full parse of the events sees.
        None => CorruptRecord {
            record: 0,
            reason: "the log was salvaged after damage".into(),
            file: name,
        },
    }))
}

fn free_corrupt_name(dir: &Path) -> Result<PathBuf, StoreError> {
    for n in 0u32.. {
        let name = match n {
            0 => CORRUPT_PREFIX.to_owned(),
            n => format!("{CORRUPT_PREFIX}.{n}"),
        };
        let path = dir.join(name);
        match fs::symlink_metadata(&path) {
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(path),
            Err(e) => return Err(io_err(&path, e)),
            Ok(_) => {}
        }
    }
    Err(io_err(
        dir,
        std::io::Error::other("no free name for a damaged log"),
    ))
}

/// Writes the first `len` bytes of `from` to a new file `to`, synced.
fn copy_prefix(from: &File, to: &Path, len: u64) -> std::io::Result<()> {
    let mut out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(to)?;
    let mut reader = from;
    std::io::Seek::seek(&mut reader, std::io::SeekFrom::Start(0))?;
    let copied = std::io::copy(&mut reader.take(len), &mut out)?;
    if copied != len {
        return Err(std::io::Error::new(
            ErrorKind::UnexpectedEof,
            "the log shrank while it was salvaged",
        ));
    }
    out.flush()?;
    out.sync_all()
}
