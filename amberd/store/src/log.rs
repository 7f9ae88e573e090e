//! `SessionLog`: the append handle of one session's log, owned by the session actor.
//!
//! **Invariants:** each record is assembled in memory and handed to the kernel with one
//! `write` on an `O_APPEND` file before the append returns, so a crash of the daemon loses
//! nothing that was appended (a power loss loses what was not yet `sync`ed). A failed
//! write (or a record whose requested sync failed) is cut back off the file, so a later
//! append never lands after half a record and an append that fails left nothing behind;
//! if even that fails the handle refuses further appends. The handle holds an exclusive
//! `flock` on the log: a second writer (another handle, another daemon) is refused.
//! Event seqs appended through one handle must rise by one.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use amber_proto::Message;
use serde_json::value::RawValue;

use super::CreationSync;
use super::load;
use super::record;
use super::{StoreError, io_err};

/// The scratch buffer is shrunk back to this after an unusually large record.
const SCRATCH: usize = 64 * 1024;

/// The open, locked, append-only log of one session.
#[derive(Debug)]
pub struct SessionLog {
    session_id: String,
    path: PathBuf,
    file: File,
    line: Vec<u8>,
    /// File length after the last good append.
    len: u64,
    /// File length at the last fdatasync.
    synced_len: u64,
    /// The seq the next event must carry, when known.
    next_seq: Option<u64>,
    /// A failed write could not be undone: the file's tail is unknown.
    broken: bool,
    /// A new session's fsyncs, owed before the first sync.
    creation: CreationSync,
}

impl SessionLog {
    /// Opens (creating if `create`) and locks the log at `path`. A log whose last line is
    /// not an intact record (a torn append nobody repaired) is cut back to its last good
    /// record first.
    pub(crate) fn open(
        session_id: &str,
        path: PathBuf,
        create: bool,
        next_seq: Option<u64>,
    ) -> Result<SessionLog, StoreError> {
        let mut options = OpenOptions::new();
        options.read(true).append(true).mode(0o600);
        if create {
            options.create_new(true);
        }
        let file = options.open(&path).map_err(|e| io_err(&path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(StoreError::Locked(session_id.into())),
            Err(TryLockError::Error(e)) => return Err(io_err(&path, e)),
        }
        let mut len = file.metadata().map_err(|e| io_err(&path, e))?.len();
        if len > 0 && !last_record_ok(&file, len).map_err(|e| io_err(&path, e))? {
            let mut reader = &file;
            reader
                .seek(SeekFrom::Start(0))
                .map_err(|e| io_err(&path, e))?;
            let scan = load::scan(&path, reader, |_| Ok(()))?;
            tracing::warn!(path = %path.display(), torn = ?scan.torn, "cutting a torn record off the log");
            file.set_len(scan.good_len).map_err(|e| io_err(&path, e))?;
            file.sync_data().map_err(|e| io_err(&path, e))?;
            len = scan.good_len;
        }
        Ok(SessionLog {
            session_id: session_id.to_owned(),
            path,
            file,
            line: Vec::with_capacity(4096),
            len,
            synced_len: len,
            next_seq,
            broken: false,
            creation: CreationSync::default(),
        })
    }

    /// This log owes `creation` before its first sync.
    pub(crate) fn owing(mut self, creation: CreationSync) -> Self {
        self.creation = creation;
        self
    }

    /// The fsyncs a new session's files still owe, for a background job to settle early.
    pub fn creation_sync(&self) -> CreationSync {
        self.creation.clone()
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Bytes in the log.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends a durable event, its JSON exactly as sent to clients.
    pub fn append_event(
        &mut self,
        seq: u64,
        json: &RawValue,
        sync: bool,
    ) -> Result<(), StoreError> {
        if let Some(expected) = self.next_seq
            && seq != expected
        {
            return Err(StoreError::OutOfOrder {
                session_id: self.session_id.clone(),
                expected,
                got: seq,
            });
        }
        self.line.clear();
        record::encode_event(&mut self.line, seq, json);
        self.write_line(sync)?;
        self.next_seq = Some(seq + 1);
        Ok(())
    }

    /// Appends a context push with the chain hash `Context::push` returned; `confirm`
    /// marks the agent's silent confirm question (recovery drops it when a crash left it
    /// unanswered).
    pub fn append_push(
        &mut self,
        message: &Message,
        hash: u64,
        confirm: bool,
        sync: bool,
    ) -> Result<(), StoreError> {
        self.line.clear();
        let tag = confirm.then_some(record::TAG_CONFIRM);
        record::encode_push(&mut self.line, message, hash, tag).map_err(StoreError::Encode)?;
        self.write_line(sync)
    }

    /// Appends a context pop.
    pub fn append_pop(&mut self, sync: bool) -> Result<(), StoreError> {
        self.line.clear();
        record::encode_pop(&mut self.line);
        self.write_line(sync)
    }

    /// Appends a context clear (the compaction rebuild).
    pub fn append_clear(&mut self, sync: bool) -> Result<(), StoreError> {
        self.line.clear();
        record::encode_clear(&mut self.line);
        self.write_line(sync)
    }

    /// fdatasync: everything appended so far survives a power loss. Free when nothing
    /// was appended since the last sync.
    pub fn sync(&mut self) -> Result<(), StoreError> {
        self.creation.settle()?;
        if self.synced_len != self.len {
            self.file.sync_data().map_err(|e| io_err(&self.path, e))?;
            self.synced_len = self.len;
        }
        Ok(())
    }

    fn write_line(&mut self, sync: bool) -> Result<(), StoreError> {
        if self.broken {
            return Err(StoreError::Broken(self.path.clone()));
        }
        let result = (&self.file).write_all(&self.line);
        let written = self.line.len() as u64;
        if self.line.capacity() > 4 * SCRATCH {
            self.line = Vec::with_capacity(SCRATCH);
        }
        if let Err(e) = result {
            // Part of the record may be in the file: cut it off so the next append starts
            // on a fresh line.
            if let Err(cut) = self.file.set_len(self.len) {
                tracing::error!(path = %self.path.display(), %cut, "cannot undo a failed append");
                self.broken = true;
            }
            return Err(io_err(&self.path, e));
        }
        self.len += written;
        if sync && let Err(err) = self.sync() {
            // Cut the unsynced record off again: an append that reports an error leaves
            // nothing behind, so a caller may reuse its seq or tell its client "not stored".
            self.len -= written;
            if let Err(cut) = self.file.set_len(self.len) {
                tracing::error!(path = %self.path.display(), %cut, "cannot undo an unsynced append");
                self.broken = true;
            }
            return Err(err);
        }
        Ok(())
    }
}

/// Whether the log's last line is a whole, intact record (read backwards from the end,
/// so opening a long log stays cheap).
fn last_record_ok(file: &File, len: u64) -> std::io::Result<bool> {
    let mut tail: Vec<u8> = Vec::new();
    let mut pos = len;
    let mut step = 4096u64;
    loop {
        let take = step.min(pos);
        pos -= take;
        let mut chunk = vec![0u8; take as usize];
        file.read_exact_at(&mut chunk, pos)?;
        chunk.extend_from_slice(&tail);
        tail = chunk;
        let Some((b'\n', body)) = tail.split_last() else {
            return Ok(false);
        };
        if let Some(start) = memchr::memrchr(b'\n', body) {
            return Ok(record::decode(&body[start + 1..]).is_ok());
        }
        if pos == 0 {
            return Ok(record::decode(body).is_ok());
        }
        step = step.saturating_mul(2);
    }
}

/// fsync by path: a directory (its entries are then durable) or a file (its data).
pub(crate) fn sync_path(path: &Path) -> Result<(), StoreError> {
    File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| io_err(path, e))
}
