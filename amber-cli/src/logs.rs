//! `daemon logs [-n N] [--follow]`: the tail of amberd's own log file
//! (`$XDG_STATE_HOME/amber/amberd.log`, size-rotated into `.1`, `.2`, …), or, when amberd
//! runs under systemd and logs to the journal, `journalctl --user -u amberd -n N [-f]` run
//! for the user (the hint is printed instead when journalctl cannot be run).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use amber_proto::paths::log_file_path;

use crate::output;
use crate::turn::exit;

/// How often `--follow` looks for new lines.
const FOLLOW_POLL: Duration = Duration::from_millis(250);
/// How far back a tail reads at a time.
const CHUNK: u64 = 64 * 1024;
const JOURNAL_HINT: &str = "journalctl --user -u amberd";

/// `daemon logs`.
pub(crate) fn logs(lines: usize, follow: bool) -> anyhow::Result<u8> {
    let env = |key: &str| std::env::var_os(key);
    let path = log_file_path(env);
    let journal = systemd_unit_active();
    let exists = path.as_deref().is_some_and(Path::is_file);
    if journal {
        // The journal holds the logs: show them with journalctl itself.
        match journal_command(lines, follow).status() {
            Ok(status) => {
                return Ok(if status.success() {
                    exit::OK
                } else {
                    exit::ERROR
                });
            }
            Err(e) => output::note(&format!("cannot run journalctl ({e})")),
        }
        let follow_flag = if follow { " -f" } else { "" };
        output::note(&format!(
            "amberd runs under systemd and logs to the journal: {JOURNAL_HINT}{follow_flag}"
        ));
        if !exists {
            return Ok(exit::OK);
        }
        output::note("the log file below is from runs outside systemd");
    }
    let Some(path) = path.clone().filter(|_| exists) else {
        let where_ = path.map_or_else(
            || "(no XDG_STATE_HOME or HOME)".to_owned(),
            |p| p.display().to_string(),
        );
        output::note(&format!(
            "no amberd log file at {where_}; under systemd, amberd logs to the journal: {JOURNAL_HINT}"
        ));
        return Ok(exit::ERROR);
    };
    let mut out = io::stdout().lock();
    for line in tail(&path, lines)? {
        out.write_all(line.as_bytes())?;
    }
    out.flush()?;
    drop(out);
    if follow {
        follow_file(&path)?;
    }
    Ok(exit::OK)
}

/// `journalctl --user -u amberd -n N [-f]`, with the terminal's stdio.
fn journal_command(lines: usize, follow: bool) -> Command {
    let mut cmd = Command::new("journalctl");
    cmd.args(["--user", "-u", "amberd", "-n", &lines.to_string()]);
    if follow {
        cmd.arg("-f");
    }
    cmd
}

/// The last `n` lines (each with its newline) across the live file and its rotations.
pub(crate) fn tail(path: &Path, n: usize) -> io::Result<Vec<String>> {
    let mut lines: Vec<String> = Vec::new();
    let mut rotation = 0;
    loop {
        let file = if rotation == 0 {
            path.to_owned()
        } else {
            let mut name = path.as_os_str().to_owned();
            name.push(format!(".{rotation}"));
            PathBuf::from(name)
        };
        let mut older = match tail_of_file(&file, n - lines.len().min(n)) {
            Ok(found) => found,
            Err(err) if err.kind() == io::ErrorKind::NotFound && rotation > 0 => break,
            Err(err) => return Err(err),
        };
        older.append(&mut lines);
        lines = older;
        if lines.len() >= n {
            break;
        }
        rotation += 1;
    }
    Ok(lines)
}

/// The last `n` lines of one file, reading backwards in chunks (a log may be 10 MiB).
fn tail_of_file(path: &Path, n: usize) -> io::Result<Vec<String>> {
    let mut file = File::open(path)?;
    if n == 0 {
        return Ok(Vec::new());
    }
    let len = file.metadata()?.len();
    let mut start = len;
    let mut buf: Vec<u8> = Vec::new();
    // One more newline than lines wanted, unless the file starts first.
    while start > 0 && bytecount(&buf, b'\n') <= n {
        let from = start.saturating_sub(CHUNK);
        let mut chunk = vec![0u8; usize::try_from(start - from).unwrap_or(0)];
        file.seek(SeekFrom::Start(from))?;
        file.read_exact(&mut chunk)?;
        chunk.extend_from_slice(&buf);
        buf = chunk;
        start = from;
    }
    let text = String::from_utf8_lossy(&buf);
    let mut lines: Vec<String> = text.split_inclusive('\n').map(str::to_owned).collect();
    if start > 0 && !lines.is_empty() {
        // The first piece began mid-line.
        lines.remove(0);
    }
    let skip = lines.len().saturating_sub(n);
    Ok(lines.split_off(skip))
}

fn bytecount(buf: &[u8], byte: u8) -> usize {
    buf.iter().filter(|&&b| b == byte).count()
}

/// Prints what is appended from now on; starts over when the file is rotated or truncated.
fn follow_file(path: &Path) -> io::Result<()> {
    let mut file = File::open(path)?;
    let mut pos = file.metadata()?.len();
    let mut ino = file.metadata()?.ino();
    let mut buf = Vec::new();
    loop {
        std::thread::sleep(FOLLOW_POLL);
        let meta = match std::fs::metadata(path) {
            Ok(meta) => meta,
            // Between the rename and the new file: look again soon.
            Err(_) => continue,
        };
        if meta.ino() != ino || meta.len() < pos {
            // Drain what the old file got after our last look, then switch.
            buf.clear();
            file.seek(SeekFrom::Start(pos))?;
            file.read_to_end(&mut buf)?;
            print_raw(&buf)?;
            file = File::open(path)?;
            ino = meta.ino();
            pos = 0;
        }
        if meta.len() > pos {
            buf.clear();
            file.seek(SeekFrom::Start(pos))?;
            file.read_to_end(&mut buf)?;
            pos += buf.len() as u64;
            print_raw(&buf)?;
        }
    }
}

fn print_raw(bytes: &[u8]) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(bytes)?;
    out.flush()
}

/// Whether the systemd user manager has amberd's socket or service active. No systemctl,
/// no user manager, or units not installed: false.
fn systemd_unit_active() -> bool {
    Command::new("systemctl")
        .args([
            "--user",
            "is-active",
            "--quiet",
            "amberd.socket",
            "amberd.service",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered(range: std::ops::Range<usize>) -> String {
        range.map(|i| format!("line {i}\n")).collect()
    }

    #[test]
    fn tails_one_file_across_chunks() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("amberd.log");
        // Longer than one chunk, so the backwards read stitches pieces.
        std::fs::write(&path, numbered(0..20_000)).unwrap();
        let got = tail(&path, 3).unwrap();
        assert_eq!(got, ["line 19997\n", "line 19998\n", "line 19999\n"]);
        let all = tail(&path, 50_000).unwrap();
        assert_eq!(all.len(), 20_000);
        assert_eq!(all[0], "line 0\n");
    }

    #[test]
    fn reaches_into_rotated_files() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("amberd.log");
        std::fs::write(tmp.path().join("amberd.log.2"), numbered(0..3)).unwrap();
        std::fs::write(tmp.path().join("amberd.log.1"), numbered(3..5)).unwrap();
        std::fs::write(&path, numbered(5..6)).unwrap();
        let got = tail(&path, 4).unwrap();
        assert_eq!(got, ["line 2\n", "line 3\n", "line 4\n", "line 5\n"]);
        assert_eq!(tail(&path, 100).unwrap().len(), 6);
        assert!(tail(&path, 0).unwrap().is_empty());
    }

    #[test]
    fn the_journal_is_read_with_the_same_flags() {
        let args = |cmd: &Command| -> Vec<String> {
            cmd.get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        let tail = journal_command(40, false);
        assert_eq!(tail.get_program(), "journalctl");
        assert_eq!(args(&tail), ["--user", "-u", "amberd", "-n", "40"]);
        let follow = journal_command(5, true);
        assert_eq!(args(&follow), ["--user", "-u", "amberd", "-n", "5", "-f"]);
    }

    #[test]
    fn a_missing_live_file_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(tail(&tmp.path().join("nope.log"), 5).is_err());
    }
}
