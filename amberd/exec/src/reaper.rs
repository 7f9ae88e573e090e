//! Tool process groups that outlive a crashed daemon are killed by the next one.
//!
//! Invariant: while a `bash` call's or a background process's group may still exist, a
//! record of it lies in the registry directory (`$XDG_RUNTIME_DIR/amber/children/`, else
//! `/tmp/amber-$UID/children/`): one small JSON file per group with its pgid, the leader's
//! start time (`/proc/<pid>/stat` field 22), the session, and the owning daemon's pid and
//! start time. The file goes away once the group has been killed or reaped normally
//! ([`Registration`] is dropped with the group's guard). A daemon that dies without
//! cleaning up (SIGKILL, crash) leaves its records behind; at start, before serving, the
//! next daemon SIGKILLs each recorded group that is provably the same one and deletes the
//! records ([`ChildRegistry::reap_orphans`]).
//!
//! "Provably the same": the records are of this boot, the owning daemon is gone, and
//! either the leader lives with the recorded start time (a reused pid has another start
//! time), or the leader is gone and every process left in the group is in the recorded
//! session and started after the leader (a pid, and so a group id, cannot be reused while
//! any process is still in that group). Records of a live daemon are left alone, so
//! daemons sharing the directory never kill each other's tools.
//!
//! Recording is best effort: no fsync, and an error is logged, never fails a tool call.
//! Without `/proc` nothing is recorded and nothing is reaped.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The registry the daemon installed at start; none in tests and in-process use.
static INSTALLED: OnceLock<ChildRegistry> = OnceLock::new();

/// `$XDG_RUNTIME_DIR/amber/children`, else `/tmp/amber-$UID/children`: per user, and gone
/// at reboot together with every process it could name.
pub fn registry_dir(env: impl Fn(&str) -> Option<OsString>, uid: u32) -> PathBuf {
    let base = env("XDG_RUNTIME_DIR")
        .filter(|v| !v.is_empty())
        .map(|dir| PathBuf::from(dir).join("amber"))
        .unwrap_or_else(|| PathBuf::from(format!("/tmp/amber-{uid}")));
    base.join("children")
}

/// Makes `registry` the one [`GroupGuard`](crate::group::GroupGuard)s record into (once;
/// later calls are ignored).
pub fn install(registry: ChildRegistry) {
    let _ = INSTALLED.set(registry);
}

/// Records a group just spawned by a tool, if a registry is installed.
pub fn register(pgid: libc::pid_t, session: &str) -> Option<Registration> {
    INSTALLED.get()?.record(pgid, session)
}

/// One group's record on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Record {
    pgid: libc::pid_t,
    /// The leader's start time in clock ticks since boot.
    start_time: u64,
    /// The leader's session id (`/proc` field 6), kept by every process of the group.
    sid: libc::pid_t,
    /// The amber session whose tool started it (for the log).
    session: String,
    owner_pid: libc::pid_t,
    owner_start_time: u64,
    boot_id: String,
}

/// A process's identity as `/proc/<pid>/stat` tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    state: char,
    pgrp: libc::pid_t,
    sid: libc::pid_t,
    start_time: u64,
}

fn stat_of(pid: &str) -> Option<Stat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) S ppid pgrp session … starttime …`: comm may hold anything, so
    // count from the last ')'; field N is at index N - 3.
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: fields.first()?.chars().next()?,
        pgrp: fields.get(2)?.parse().ok()?,
        sid: fields.get(3)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

fn boot_id() -> Option<String> {
    let id = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(id.trim().to_owned())
}

/// A group that was killed at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reaped {
    pub pgid: libc::pid_t,
    pub session: String,
}

/// The registry directory, and who this daemon is.
#[derive(Debug)]
pub struct ChildRegistry {
    dir: PathBuf,
    owner_pid: libc::pid_t,
    owner_start_time: u64,
    boot_id: String,
}

impl ChildRegistry {
    /// Creates `dir` (0700) and identifies this process; fails without `/proc`.
    pub fn open(dir: &Path) -> io::Result<Self> {
        let missing = || io::Error::new(io::ErrorKind::NotFound, "/proc is not readable");
        let me = stat_of("self").ok_or_else(missing)?;
        let boot_id = boot_id().ok_or_else(missing)?;
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let meta = fs::metadata(dir)?;
        // SAFETY: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        if meta.uid() != uid || meta.mode() & 0o022 != 0 {
            // Someone else could plant records naming our processes.
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{} is not ours alone", dir.display()),
            ));
        }
        Ok(Self {
            dir: dir.to_owned(),
            owner_pid: libc::pid_t::try_from(std::process::id()).unwrap_or(0),
            owner_start_time: me.start_time,
            boot_id,
        })
    }

    /// Writes the record of the group led by `pgid` (a child not yet reaped, so its
    /// `/proc` entry is there); `None`, logged, when that fails.
    pub(crate) fn record(&self, pgid: libc::pid_t, session: &str) -> Option<Registration> {
        let Some(leader) = stat_of(&pgid.to_string()) else {
            tracing::warn!(pgid, "reaper: no /proc entry for a new tool process group");
            return None;
        };
        let record = Record {
            pgid,
            start_time: leader.start_time,
            sid: leader.sid,
            session: session.to_owned(),
            owner_pid: self.owner_pid,
            owner_start_time: self.owner_start_time,
            boot_id: self.boot_id.clone(),
        };
        // The start time in the name: a reused pgid never collides with a record not yet removed.
        let path = self.dir.join(format!("{pgid}-{}.json", leader.start_time));
        let written = serde_json::to_vec(&record)
            .map_err(io::Error::other)
            .and_then(|bytes| fs::write(&path, bytes));
        match written {
            Ok(()) => Some(Registration { path }),
            Err(err) => {
                tracing::warn!(pgid, path = %path.display(), "reaper: cannot record a tool process group: {err}");
                None
            }
        }
    }

    /// SIGKILLs every recorded group that a dead daemon left running and deletes the
    /// records; records of a live daemon stay. Call before any tool can run.
    pub fn reap_orphans(&self) -> Vec<Reaped> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(err) => {
                tracing::warn!(dir = %self.dir.display(), "reaper: cannot list tool process records: {err}");
                return Vec::new();
            }
        };
        let mut reaped = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let record = fs::read(&path)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<Record>(&bytes).ok());
            if let Some(record) = &record {
                if self.owner_alive(record) {
                    continue;
                }
                if record.boot_id == self.boot_id && group_is_ours(record) {
                    // SAFETY: killpg only sends a signal; the pgid is positive (checked in
                    // group_is_ours) and the group was just shown to be the recorded one.
                    unsafe {
                        libc::killpg(record.pgid, libc::SIGKILL);
                    }
                    tracing::info!(
                        pgid = record.pgid,
                        session = %record.session,
                        "reaper: killed a tool process group left by a previous daemon"
                    );
                    reaped.push(Reaped {
                        pgid: record.pgid,
                        session: record.session.clone(),
                    });
                }
            }
            if let Err(err) = fs::remove_file(&path) {
                tracing::warn!(path = %path.display(), "reaper: cannot delete a record: {err}");
            }
        }
        if !reaped.is_empty() {
            tracing::info!(
                groups = reaped.len(),
                "reaper: orphaned tool processes killed"
            );
        }
        reaped
    }

    /// The daemon that wrote `record` still runs (it may be this one, or another
    /// daemon of the same user sharing the directory).
    fn owner_alive(&self, record: &Record) -> bool {
        record.boot_id == self.boot_id
            && stat_of(&record.owner_pid.to_string()).is_some_and(|owner| {
                owner.start_time == record.owner_start_time && !matches!(owner.state, 'Z' | 'X')
            })
    }
}

/// Whether the group `record.pgid` is still the one recorded (see the module header).
fn group_is_ours(record: &Record) -> bool {
    if record.pgid <= 1 {
        return false;
    }
    if let Some(leader) = stat_of(&record.pgid.to_string()) {
        return leader.start_time == record.start_time;
    }
    let Ok(entries) = fs::read_dir("/proc") else {
        return false;
    };
    let members: Vec<Stat> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| stat_of(&name))?
        })
        .filter(|stat| stat.pgrp == record.pgid)
        .collect();
    !members.is_empty()
        && members
            .iter()
            .all(|m| m.sid == record.sid && m.start_time >= record.start_time)
}

/// A group's record; dropping it deletes the file (the group is gone or killed by then).
#[derive(Debug)]
pub struct Registration {
    path: PathBuf,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Err(err) = fs::remove_file(&self.path)
            && err.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(path = %self.path.display(), "reaper: cannot delete a record: {err}");
        }
    }
}

#[cfg(test)]
#[path = "reaper_tests.rs"]
mod tests;
