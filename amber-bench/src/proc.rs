//! Timed child processes (`amber-cli run`, `rg`, a `--compare` command): wall time from exec
//! to exit, peak RSS and CPU time from `wait4`'s rusage — the child's own or that of any
//! descendant it waited for, whichever is larger. Blocking: run from a blocking thread.
//!
//! Why a trampoline: Linux counts in a child's `ru_maxrss` the RSS of the image it replaced
//! at `exec` — for a child spawned with vfork/posix_spawn, the *parent's* peak (fs/exec.c,
//! `setmax_mm_hiwater_rss`). The harness holds tens of MiB, which would swamp a 5 MiB
//! `amber-cli`. So the command is started by a fresh, small copy of this binary
//! ([`TRAMPOLINE`] mode) that spawns it, waits for it and writes its figures to a file.

use std::ffi::OsString;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::BenchError;

/// `amber-bench --exec-measured OUT PROGRAM ARGS…`: the trampoline mode (not in `--help`).
pub(crate) const TRAMPOLINE: &str = "--exec-measured";

/// One finished child.
#[derive(Debug)]
pub(crate) struct ChildRun {
    /// Spawn → exit, measured in the trampoline (its own start-up is not counted).
    pub wall: Duration,
    /// Peak resident set, KiB (`ru_maxrss`).
    pub max_rss_kib: u64,
    /// User + system CPU time of the child (and the descendants it waited for).
    pub cpu: Duration,
    /// Exit code, or 128 + the signal that ended it.
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

/// Runs `cmd` through the trampoline (stdin from /dev/null, stdout and stderr read to the end).
pub(crate) fn run_measured(cmd: &mut Command, what: &str) -> Result<ChildRun, BenchError> {
    let out = tempfile::NamedTempFile::new().map_err(BenchError::io("create a temp file"))?;
    let exe = std::env::current_exe().map_err(BenchError::io("find this executable"))?;
    let mut t = Command::new(exe);
    t.arg(TRAMPOLINE)
        .arg(out.path())
        .arg(cmd.get_program())
        .args(cmd.get_args());
    if let Some(dir) = cmd.get_current_dir() {
        t.current_dir(dir);
    }
    for (key, value) in cmd.get_envs() {
        match value {
            Some(value) => t.env(key, value),
            None => t.env_remove(key),
        };
    }
    t.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = t.spawn().map_err(BenchError::io(format!("exec {what}")))?;
    let stdout = child.stdout.take().map(|mut out| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = out.read_to_end(&mut buf);
            buf
        })
    });
    let stderr = child.stderr.take().map(|mut err| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = err.read_to_end(&mut buf);
            buf
        })
    });
    child
        .wait()
        .map_err(BenchError::io(format!("wait for {what}")))?;
    let stdout = stdout.and_then(|t| t.join().ok()).unwrap_or_default();
    let stderr = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
    let stderr = String::from_utf8_lossy(&stderr).into_owned();
    let figures = std::fs::read_to_string(out.path()).unwrap_or_default();
    let n: Vec<u64> = figures
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    let [wall_ns, rss, cpu_us, code] = n[..] else {
        return Err(BenchError::Failed(format!(
            "{what}: could not be started ({})",
            stderr.trim()
        )));
    };
    Ok(ChildRun {
        wall: Duration::from_nanos(wall_ns),
        max_rss_kib: rss,
        cpu: Duration::from_micros(cpu_us),
        code: i32::try_from(code).unwrap_or(i32::MAX),
        stdout,
        stderr,
    })
}

/// Reaps our child `pid` (retrying on EINTR): its exit code (128 + signal when a signal
/// ended it) and its resource usage.
pub(crate) fn wait_child(pid: libc::pid_t) -> std::io::Result<(i32, libc::rusage)> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data; zeroed is a valid value for wait4 to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: pid is our own unreaped child; status and usage point to live locals.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    Ok((code, usage))
}

/// The trampoline: `args` = OUT PROGRAM ARGS…; runs PROGRAM with the inherited stdio, writes
/// `wall_ns max_rss_kib cpu_us code` to OUT, and returns the code to exit with.
pub(crate) fn trampoline(args: &[OsString]) -> i32 {
    let [out, program, rest @ ..] = args else {
        eprintln!("amber-bench: {TRAMPOLINE} OUT PROGRAM [ARGS…]");
        return 2;
    };
    let started = Instant::now();
    let child = match Command::new(program).args(rest).spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!(
                "amber-bench: cannot exec {}: {e}",
                program.to_string_lossy()
            );
            return 127;
        }
    };
    let Ok(pid) = libc::pid_t::try_from(child.id()) else {
        return 127;
    };
    let Ok((code, usage)) = wait_child(pid) else {
        return 127;
    };
    let wall = started.elapsed();
    let cpu = timeval(usage.ru_utime) + timeval(usage.ru_stime);
    let figures = format!(
        "{} {} {} {code}\n",
        wall.as_nanos(),
        usage.ru_maxrss.max(0),
        cpu.as_micros()
    );
    if let Err(e) = std::fs::write(out, figures) {
        eprintln!("amber-bench: cannot write {}: {e}", out.to_string_lossy());
        return 127;
    }
    code
}

fn timeval(t: libc::timeval) -> Duration {
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let micros = u64::try_from(t.tv_usec).unwrap_or(0);
    Duration::from_secs(secs) + Duration::from_micros(micros)
}

/// User + system CPU time a running process has used so far (/proc/PID/stat).
pub(crate) fn cpu_time(pid: u32) -> Result<Duration, BenchError> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).map_err(BenchError::io(format!("read {path}")))?;
    // Fields after the `(comm)`, which may itself hold spaces: state is field 3, utime 14.
    let rest = text.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    let (Some(user), Some(system)) = (ticks(11), ticks(12)) else {
        return Err(BenchError::Failed(format!("unreadable {path}")));
    };
    // SAFETY: sysconf has no preconditions.
    let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) })
        .unwrap_or(100)
        .max(1);
    Ok(Duration::from_millis((user + system) * 1000 / hz))
}

/// `'text'` for `sh -c`, with embedded single quotes escaped.
pub(crate) fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Whether `program` is on `$PATH`.
pub(crate) fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trampoline_reports_its_child() {
        let out = tempfile::NamedTempFile::new().unwrap();
        let args: Vec<OsString> = [
            out.path().as_os_str(),
            "sh".as_ref(),
            "-c".as_ref(),
            "exit 3".as_ref(),
        ]
        .iter()
        .map(|a| a.to_os_string())
        .collect();
        assert_eq!(trampoline(&args), 3);
        let figures = std::fs::read_to_string(out.path()).unwrap();
        let n: Vec<u64> = figures
            .split_whitespace()
            .map(|f| f.parse().unwrap())
            .collect();
        assert_eq!(n.len(), 4, "{figures}");
        assert!(n[0] > 0 && n[1] > 0, "{figures}");
        assert_eq!(n[3], 3);
        assert_eq!(trampoline(&[]), 2);
    }

    #[test]
    fn reads_own_cpu_time() {
        // Spin until the kernel has charged a clock tick (10 ms): under a loaded machine a
        // fixed wall-clock spin may get less CPU than that. Bounded, so a reader that always
        // says zero still fails.
        let busy = Instant::now();
        let mut x = 0u64;
        let mut charged = Duration::ZERO;
        while charged == Duration::ZERO && busy.elapsed() < Duration::from_secs(5) {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            charged = cpu_time(std::process::id()).unwrap();
        }
        assert!(x > 0);
        assert!(
            charged > Duration::ZERO,
            "no CPU time read after 5 s of spinning"
        );
    }

    #[test]
    fn quoting_is_shell_safe() {
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
