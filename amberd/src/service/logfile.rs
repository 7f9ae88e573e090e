//! The daemon's own log file, used when no journal collects stderr: `amberd.log` under the
//! state dir, rotated by size (`amberd.log.1` … `amberd.log.N`, oldest dropped).
//!
//! Hand-written rather than `tracing-appender`: that crate rotates by time only, and a
//! daemon that idles for weeks and then logs a burst at `debug` needs a size bound. What is
//! needed here is small: one `Mutex<File>`, a byte count and a rename chain.

use amber_proto::sync::Locked;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Rotate once the file would grow past this.
pub const DEFAULT_MAX_BYTES: u64 = 10 * 1024 * 1024;
/// Rotated files kept besides the live one.
pub const DEFAULT_KEEP: usize = 3;

/// A size-rotated log file. `&RotatingFile` is `Write`, so `Arc<RotatingFile>` is a
/// tracing-subscriber `MakeWriter`; the fmt layer writes each event with one `write_all`,
/// so rotation happens between lines, never inside one.
#[derive(Debug)]
pub struct RotatingFile {
    path: PathBuf,
    max_bytes: u64,
    keep: usize,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// None after a failed rotation left no file open; the next write retries.
    file: Option<File>,
    size: u64,
}

impl RotatingFile {
    /// Opens (appends to) `path`, creating its directory (0700: logs may name workspaces
    /// and commands) and the file (0600).
    pub fn open(path: &Path, max_bytes: u64, keep: usize) -> io::Result<RotatingFile> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        let file = open_append(path)?;
        let size = file.metadata()?.len();
        Ok(RotatingFile {
            path: path.to_owned(),
            max_bytes: max_bytes.max(1),
            keep,
            state: Mutex::new(State {
                file: Some(file),
                size,
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `amberd.log.N`.
    pub fn rotated_path(path: &Path, n: usize) -> PathBuf {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    /// Shifts `.1..keep-1` up by one, the live file to `.1`, and starts an empty one.
    fn rotate(&self, state: &mut State) -> io::Result<()> {
        state.file = None;
        if self.keep == 0 {
            let _ = std::fs::remove_file(&self.path);
        } else {
            let _ = std::fs::remove_file(Self::rotated_path(&self.path, self.keep));
            for n in (1..self.keep).rev() {
                let from = Self::rotated_path(&self.path, n);
                if from.exists() {
                    std::fs::rename(&from, Self::rotated_path(&self.path, n + 1))?;
                }
            }
            std::fs::rename(&self.path, Self::rotated_path(&self.path, 1))?;
        }
        state.file = Some(open_append(&self.path)?);
        state.size = 0;
        Ok(())
    }
}

impl Write for &RotatingFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // A poisoned lock only means another thread panicked mid-write; the file is fine.
        let mut state = self.state.locked();
        let len = buf.len() as u64;
        // A line longer than the limit still goes into a file of its own.
        if state.file.is_none() || (state.size > 0 && state.size + len > self.max_bytes) {
            self.rotate(&mut state)?;
        }
        let Some(file) = state.file.as_mut() else {
            return Err(io::Error::other("log file not open"));
        };
        file.write_all(buf)?;
        state.size += len;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut state = self.state.locked();
        match state.file.as_mut() {
            Some(file) => file.flush(),
            None => Ok(()),
        }
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap_or_default()
    }

    #[test]
    fn appends_and_creates_private_files() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("state/amber/amberd.log");
        std::fs::create_dir_all(path.parent().unwrap().parent().unwrap()).unwrap();
        {
            let log = RotatingFile::open(&path, 1024, 3).unwrap();
            (&log).write_all(b"one\n").unwrap();
        }
        // Re-opening appends and counts what is already there.
        let log = RotatingFile::open(&path, 1024, 3).unwrap();
        (&log).write_all(b"two\n").unwrap();
        assert_eq!(read(&path), "one\ntwo\n");
        assert_eq!(log.state.lock().unwrap().size, 8);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
    }

    #[test]
    fn rotates_by_size_between_lines_and_keeps_n() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("amberd.log");
        let log = RotatingFile::open(&path, 10, 2).unwrap();
        for line in [
            "aaaa\n", "bbbb\n", "cccc\n", "dddd\n", "eeee\n", "ffff\n", "gggg\n",
        ] {
            (&log).write_all(line.as_bytes()).unwrap();
        }
        // 10 bytes hold two lines; the oldest rotated file beyond `keep` is gone.
        assert_eq!(read(&path), "gggg\n");
        assert_eq!(read(&RotatingFile::rotated_path(&path, 1)), "eeee\nffff\n");
        assert_eq!(read(&RotatingFile::rotated_path(&path, 2)), "cccc\ndddd\n");
        assert!(!RotatingFile::rotated_path(&path, 3).exists());
    }

    #[test]
    fn an_oversized_line_gets_a_file_of_its_own() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("amberd.log");
        let log = RotatingFile::open(&path, 4, 1).unwrap();
        (&log).write_all(b"0123456789\n").unwrap();
        (&log).write_all(b"x\n").unwrap();
        assert_eq!(read(&path), "x\n");
        assert_eq!(read(&RotatingFile::rotated_path(&path, 1)), "0123456789\n");
    }

    #[test]
    fn keep_zero_starts_over() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("amberd.log");
        let log = RotatingFile::open(&path, 8, 0).unwrap();
        (&log).write_all(b"abcdef\n").unwrap();
        // keep = 0: rotation just starts over.
        (&log).write_all(b"ghijkl\n").unwrap();
        assert_eq!(read(&path), "ghijkl\n");
        assert!(!RotatingFile::rotated_path(&path, 1).exists());
    }

    #[test]
    fn works_as_a_tracing_writer() {
        use tracing_subscriber::fmt::MakeWriter;
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("amberd.log");
        let log = std::sync::Arc::new(RotatingFile::open(&path, 1 << 20, 1).unwrap());
        let subscriber = tracing_subscriber::fmt()
            .with_writer(log.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, || tracing::info!("hello file"));
        let _ = log.make_writer();
        assert!(read(&path).contains("hello file"), "{}", read(&path));
    }
}
