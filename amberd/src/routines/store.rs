//! What the routines keep on disk, in the data directory: the routines added at runtime
//! (`routines.json`) and every routine's fire state (`routines-state.json`: when the
//! daemon first saw it, the newest fire time handled, its last run). Each file is written
//! whole (temp file, fsync, rename, fsync of the directory), so a crash leaves the old one
//! or the new one, never half of either.
//!
//! A run's record is `starting` (synced) before its session is made and `started` once it
//! was prompted: a crash in between is found at the next start, and the fire completed only
//! if no session carries its fire time (`scheduler.rs`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use amber_proto::RoutineDef;
use serde::{Deserialize, Serialize};

pub(crate) const ROUTINES_FILE: &str = "routines.json";
pub(crate) const STATE_FILE: &str = "routines-state.json";

/// Why a routines file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: not a routines file: {source}", path.display())]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
}

/// A routine added by `routine/add`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoredRoutine {
    pub name: String,
    #[serde(flatten)]
    pub routine: RoutineDef,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct RoutinesFile {
    #[serde(default)]
    routines: Vec<StoredRoutine>,
}

/// Every routine's fire state, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FireState {
    #[serde(default)]
    pub routines: BTreeMap<String, RoutineState>,
}

/// One routine's fire state. Times are seconds since the Unix epoch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RoutineState {
    /// When the daemon first saw the routine: only fire times after it count.
    pub since: i64,
    /// The newest fire time handled, whether the missed-run policy ran it or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_fire: Option<i64>,
    /// The last fire that made (or was making) a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<RunRecord>,
}

impl RoutineState {
    /// Fire times up to this one are handled.
    pub(crate) fn handled_until(&self) -> i64 {
        self.last_fire.unwrap_or(self.since)
    }
}

/// One fire's run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunRecord {
    pub fire_time: i64,
    pub state: RunState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RunState {
    /// Recorded before the session is made.
    Starting,
    /// Its session was prompted.
    Started,
    /// Its session could not be made or prompted (`error`).
    Failed,
}

/// The routines added at runtime; none when the file does not exist.
pub(crate) fn load_routines(dir: &Path) -> Result<Vec<StoredRoutine>, StoreError> {
    let file: RoutinesFile = read(&dir.join(ROUTINES_FILE))?.unwrap_or_default();
    Ok(file.routines)
}

pub(crate) fn save_routines(dir: &Path, routines: &[StoredRoutine]) -> Result<(), StoreError> {
    let file = RoutinesFile {
        routines: routines.to_vec(),
    };
    write(&dir.join(ROUTINES_FILE), &file)
}

/// The fire state; empty when the file does not exist.
pub(crate) fn load_state(dir: &Path) -> Result<FireState, StoreError> {
    Ok(read(&dir.join(STATE_FILE))?.unwrap_or_default())
}

pub(crate) fn save_state(dir: &Path, state: &FireState) -> Result<(), StoreError> {
    write(&dir.join(STATE_FILE), state)
}

/// Moves an unreadable file aside (`NAME.broken`), so the next write does not lose it.
pub(crate) fn set_aside(dir: &Path, name: &str) -> Option<PathBuf> {
    let from = dir.join(name);
    let to = dir.join(format!("{name}.broken"));
    std::fs::rename(&from, &to).ok().map(|()| to)
}

fn read<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, StoreError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(StoreError::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|source| StoreError::Json {
            path: path.to_owned(),
            source,
        })
}

fn write<T: Serialize>(path: &Path, value: &T) -> Result<(), StoreError> {
    let json = serde_json::to_vec_pretty(value).map_err(|source| StoreError::Json {
        path: path.to_owned(),
        source,
    })?;
    write_atomically(path, &json).map_err(|source| StoreError::Io {
        path: path.to_owned(),
        source,
    })
}

/// Temp file beside `path`, synced, renamed over it, then the directory synced so the
/// rename itself survives a crash.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routine(name: &str) -> StoredRoutine {
        StoredRoutine {
            name: name.to_owned(),
            routine: RoutineDef {
                cron: "0 7 * * 1-5".into(),
                cwd: "/w".into(),
                prompt: "triage".into(),
                session: None,
                worktree: true,
                environment: None,
                repo: None,
                git_ref: None,
                max_budget_usd: None,
                missed: amber_proto::MissedPolicy::All,
            },
        }
    }

    #[test]
    fn routines_and_state_survive_a_write_and_a_read() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load_routines(dir.path()).unwrap().is_empty());
        assert_eq!(load_state(dir.path()).unwrap(), FireState::default());

        let routines = vec![routine("a"), routine("b")];
        save_routines(dir.path(), &routines).unwrap();
        assert_eq!(load_routines(dir.path()).unwrap(), routines);

        let mut state = FireState::default();
        state.routines.insert(
            "a".into(),
            RoutineState {
                since: 10,
                last_fire: Some(60),
                last_run: Some(RunRecord {
                    fire_time: 60,
                    state: RunState::Starting,
                    session_id: None,
                    error: None,
                }),
            },
        );
        save_state(dir.path(), &state).unwrap();
        assert_eq!(load_state(dir.path()).unwrap(), state);
        // Nothing of the temp files is left behind.
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
        let text = std::fs::read_to_string(dir.path().join(STATE_FILE)).unwrap();
        assert!(text.contains("\"state\": \"starting\""), "{text}");
    }

    #[test]
    fn a_broken_file_is_an_error_and_can_be_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(ROUTINES_FILE), "{not json").unwrap();
        let err = load_routines(dir.path()).unwrap_err();
        assert!(err.to_string().contains("not a routines file"), "{err}");
        let aside = set_aside(dir.path(), ROUTINES_FILE).unwrap();
        assert!(aside.ends_with("routines.json.broken"));
        assert!(load_routines(dir.path()).unwrap().is_empty());
    }
}
