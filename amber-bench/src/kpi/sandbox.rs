//! The OS sandbox's cost, two ways:
//!
//! - **spawn**: amberd's tool-exec helper run as the daemon runs it — `amberd __tool-exec
//!   [--sandbox SPEC] /bin/true`, in a new process group, a lifeline pipe as stdin — with no
//!   sandbox, with the default one (workspace-write, no network) and with the network
//!   allowed, round-robin over one temp workspace laid out like a repository (`.git/hooks`,
//!   `.git/config`) and a hidden runtime directory holding a socket, as amberd's own is.
//!   Wall time exec → exit (`wait4`) and the helper's CPU time; the added cost is the
//!   sandboxed figure minus the plain one, at the median and at p99.
//! - **through the daemon** (scenario role `sandbox`: sequential `bash true` calls): the same
//!   task in sessions with `sandbox {mode: "off"}` and with the default sandbox, alternately;
//!   per call the tool's `durationMs` (whole ms) and the client's `tool_call_started` →
//!   `tool_call_completed` receive times.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use amber_proto::{SandboxMode, SandboxRequest, SessionNewParams, ToolStatus};

use crate::error::BenchError;
use crate::report::Report;
use crate::scenario::Role;
use crate::stats::{Summary, ms};
use crate::suite::Suite;
use crate::task;

/// Spawns of each variant (after the warm-up).
const SPAWN_RUNS: usize = 300;
/// Unmeasured spawns of each variant first (page cache, the helper's binary mapped).
const WARMUP: usize = 20;
/// Tasks of each sandbox setting through the daemon.
const DAEMON_RUNS: usize = 10;

/// amberd's helper mode and its sandbox flag (`amberd/tools/src/lifeline.rs`).
const HELPER_ARG: &str = "__tool-exec";
const SANDBOX_ARG: &str = "--sandbox";
const CGROUP_ARG: &str = "--cgroup";
/// The helper's exit status when it could not set the sandbox up (nothing ran).
const SANDBOX_FAILED: i32 = 125;
/// The program every spawn runs.
const PROGRAM: &str = "/bin/true";

/// The added-cost goal, in ms (median).
pub(crate) const GOAL_ADDED_MS: f64 = 3.0;

/// One way of starting the helper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Plain,
    Sandboxed,
    Network,
    /// The default sandbox in a cgroup of its own, as amberd starts tools where it can.
    Cgroup,
}

const VARIANTS: [Variant; 4] = [
    Variant::Plain,
    Variant::Sandboxed,
    Variant::Network,
    Variant::Cgroup,
];

/// A cgroup base for the spawns (below this process's own cgroup), removed when dropped.
struct CgroupBase(PathBuf);

impl CgroupBase {
    /// `None` where this process may not make cgroups (no cgroup2, not delegated).
    fn create() -> Option<CgroupBase> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let dir = amber_proto::paths::own_cgroup2_dir(&mountinfo, &own)?
            .join(format!("amber-bench-{}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        Some(CgroupBase(dir))
    }

    /// Kills and removes the cgroup the helper `pid` made, as amberd does at a call's end.
    fn clean(&self, pid: libc::pid_t) {
        let dir = self.0.join(pid.to_string());
        let _ = std::fs::write(dir.join("cgroup.kill"), "1");
        for _ in 0..100 {
            if std::fs::remove_dir(&dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for CgroupBase {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Where the sandboxed spawns work: the spec's paths, and the runtime directory's socket,
/// kept bound while they run.
struct Layout {
    workspace: PathBuf,
    tmp_dir: PathBuf,
    hidden: PathBuf,
    _socket: std::os::unix::net::UnixListener,
}

impl Layout {
    fn create(root: &Path) -> Result<Layout, BenchError> {
        let workspace = root.join("ws");
        let tmp_dir = root.join("tmp");
        let hidden = root.join("run");
        for dir in [
            workspace.join(".git/hooks"),
            workspace.join("src"),
            tmp_dir.clone(),
            hidden.clone(),
        ] {
            std::fs::create_dir_all(&dir)
                .map_err(BenchError::io(format!("create {}", dir.display())))?;
        }
        for (file, text) in [
            (workspace.join(".git/config"), "[core]\n\tbare = false\n"),
            (workspace.join(".git/HEAD"), "ref: refs/heads/main\n"),
            (workspace.join("src/lib.rs"), "pub fn f() {}\n"),
        ] {
            std::fs::write(&file, text)
                .map_err(BenchError::io(format!("write {}", file.display())))?;
        }
        let socket_path = hidden.join("amberd.sock");
        let socket = std::os::unix::net::UnixListener::bind(&socket_path)
            .map_err(BenchError::io(format!("bind {}", socket_path.display())))?;
        let canonical = |p: PathBuf| {
            std::fs::canonicalize(&p).map_err(BenchError::io(format!("resolve {}", p.display())))
        };
        Ok(Layout {
            workspace: canonical(workspace)?,
            tmp_dir: canonical(tmp_dir)?,
            hidden: canonical(hidden)?,
            _socket: socket,
        })
    }
}

/// The helper's `--sandbox` argument: `amber_exec::sandbox::SandboxSpec` as JSON.
fn spec_arg(network: bool, workspace: &Path, tmp_dir: &Path, hidden: &[&Path]) -> String {
    serde_json::json!({
        "mode": SandboxMode::WorkspaceWrite.as_str(),
        "network": network,
        "workspace": workspace,
        "tmpDir": tmp_dir,
        "writableRoots": [],
        "hidden": hidden,
    })
    .to_string()
}

/// One finished spawn.
struct Spawn {
    wall: Duration,
    cpu: Duration,
}

/// Runs the helper once and waits for it; kills its process group (the lifeline watcher)
/// afterwards, as the `bash` tool does. Blocking.
fn spawn_once(
    amberd: &Path,
    sandbox: Option<&str>,
    cgroup: Option<&CgroupBase>,
    cwd: &Path,
    lifeline: &OwnedFd,
) -> Result<Spawn, BenchError> {
    let mut cmd = Command::new(amberd);
    cmd.arg0("amberd").arg(HELPER_ARG);
    if let Some(base) = cgroup {
        cmd.arg(CGROUP_ARG).arg(&base.0);
    }
    if let Some(spec) = sandbox {
        cmd.arg(SANDBOX_ARG).arg(spec);
    }
    let stdin = lifeline
        .try_clone()
        .map_err(BenchError::io("duplicate the lifeline"))?;
    cmd.arg(PROGRAM)
        .current_dir(cwd)
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(BenchError::io(format!("exec {}", amberd.display())))?;
    let Ok(pid) = libc::pid_t::try_from(child.id()) else {
        return Err(BenchError::Failed("sandbox: no process id".into()));
    };
    let (code, usage) = crate::proc::wait_child(pid).map_err(|source| BenchError::Io {
        what: "wait for amberd's helper".into(),
        source,
    })?;
    let wall = started.elapsed();
    // SAFETY: killpg only sends a signal; `pid` leads the group spawned above
    // (process_group(0)), which the watcher still pins.
    unsafe {
        libc::killpg(pid, libc::SIGKILL);
    }
    if let Some(base) = cgroup {
        base.clean(pid);
    }
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = pipe.read_to_string(&mut stderr);
    }
    if code == SANDBOX_FAILED && sandbox.is_some() {
        return Err(BenchError::Skipped(format!(
            "the sandbox cannot be set up here: {}",
            stderr.trim()
        )));
    }
    if code != 0 {
        return Err(BenchError::Failed(format!(
            "`amberd {HELPER_ARG}{} {PROGRAM}` exited {code}: {}",
            if sandbox.is_some() {
                " --sandbox …"
            } else {
                ""
            },
            stderr.trim()
        )));
    }
    Ok(Spawn {
        wall,
        cpu: timeval(usage.ru_utime) + timeval(usage.ru_stime),
    })
}

fn timeval(t: libc::timeval) -> Duration {
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let micros = u64::try_from(t.tv_usec).unwrap_or(0);
    Duration::from_secs(secs) + Duration::from_micros(micros)
}

/// Wall and CPU times (ms) of each variant.
#[derive(Debug, Default)]
struct SpawnSamples {
    wall: [Vec<f64>; 4],
    cpu: [Vec<f64>; 4],
}

/// The spawn cost: the helper with and without the sandbox.
pub(crate) async fn spawn_cost(s: &mut Suite) -> Result<(), BenchError> {
    let runs = s.args.runs(SPAWN_RUNS);
    let warmup = WARMUP.min(runs);
    let amberd = s.spec.amberd.clone();
    let root = s.scratch.path().join("sandbox-spawn");
    let samples = tokio::task::spawn_blocking(move || {
        let layout = Layout::create(&root)?;
        let hidden = [layout.hidden.as_path()];
        let sandboxed = spec_arg(false, &layout.workspace, &layout.tmp_dir, &hidden);
        let network = spec_arg(true, &layout.workspace, &layout.tmp_dir, &hidden);
        // The read end goes to every helper (its watcher's stdin); the write end stays here,
        // open, until the last spawn is done.
        let (read, write) = std::io::pipe().map_err(BenchError::io("create the lifeline"))?;
        let lifeline: OwnedFd = read.into();
        let mut m = SpawnSamples::default();
        let cgroup = CgroupBase::create();
        for i in 0..warmup + runs {
            // Rotate the order, so no variant always runs right after another.
            for k in 0..VARIANTS.len() {
                let v = (i + k) % VARIANTS.len();
                let (spec, group) = match VARIANTS[v] {
                    Variant::Plain => (None, None),
                    Variant::Sandboxed => (Some(sandboxed.as_str()), None),
                    Variant::Network => (Some(network.as_str()), None),
                    Variant::Cgroup => match &cgroup {
                        Some(base) => (Some(sandboxed.as_str()), Some(base)),
                        None => continue,
                    },
                };
                let run = spawn_once(&amberd, spec, group, &layout.workspace, &lifeline)?;
                if i >= warmup {
                    m.wall[v].push(ms(run.wall));
                    m.cpu[v].push(ms(run.cpu));
                }
            }
        }
        drop(write);
        Ok::<_, BenchError>(m)
    })
    .await
    .map_err(|e| BenchError::Failed(format!("sandbox: {e}")))??;
    report_spawn(&mut s.report, &samples);
    Ok(())
}

fn report_spawn(r: &mut Report, m: &SpawnSamples) {
    let [Some(plain), Some(sandboxed), Some(network)] = [0, 1, 2].map(|v| Summary::of(&m.wall[v]))
    else {
        r.note("sandbox: no spawn measured");
        return;
    };
    r.section("OS sandbox: spawn cost (`amberd __tool-exec /bin/true`, exec → exit)");
    let what = "`amberd __tool-exec /bin/true`";
    r.put_summary(
        "sandbox_spawn_plain_ms",
        &format!("{what}, no sandbox"),
        &plain,
    );
    r.put_summary(
        "sandbox_spawn_ms",
        &format!("{what}, default sandbox (workspace-write, no network)"),
        &sandboxed,
    );
    r.put_summary(
        "sandbox_spawn_network_ms",
        &format!("{what}, sandbox with the network allowed"),
        &network,
    );
    r.put(
        "sandbox_added_ms_median",
        "added by the default sandbox (sandboxed − plain), median",
        sandboxed.median - plain.median,
    );
    r.put(
        "sandbox_added_ms_p99",
        "added by the default sandbox (sandboxed − plain), p99",
        sandboxed.p99 - plain.p99,
    );
    r.put(
        "sandbox_added_network_ms_median",
        "added by the sandbox with the network allowed, median",
        network.median - plain.median,
    );
    r.put(
        "sandbox_added_network_ms_p99",
        "added by the sandbox with the network allowed, p99",
        network.p99 - plain.p99,
    );
    match Summary::of(&m.wall[3]) {
        Some(grouped) => {
            r.put_summary(
                "sandbox_spawn_cgroup_ms",
                &format!("{what}, default sandbox in a cgroup of its own"),
                &grouped,
            );
            r.put(
                "sandbox_added_cgroup_ms_median",
                "added by the cgroup (in a cgroup − default sandbox), median",
                grouped.median - sandboxed.median,
            );
        }
        None => r.note("sandbox: no cgroup could be made here; the cgroup spawn was not measured"),
    }
    if let [Some(plain_cpu), Some(sandboxed_cpu), Some(network_cpu)] =
        [0, 1, 2].map(|v| Summary::of(&m.cpu[v]))
    {
        r.put_median(
            "sandbox_spawn_plain_cpu_ms",
            "helper's CPU time (user + system, wait4), no sandbox",
            &plain_cpu,
        );
        r.put_median(
            "sandbox_spawn_cpu_ms",
            "helper's CPU time, default sandbox",
            &sandboxed_cpu,
        );
        r.put_median(
            "sandbox_spawn_network_cpu_ms",
            "helper's CPU time, sandbox with the network allowed",
            &network_cpu,
        );
    }
    r.put(
        "sandbox_spawn_runs_count",
        "spawns of each variant (after a warm-up)",
        plain.n as f64,
    );
}

/// Per-call figures of one sandbox setting through the daemon.
#[derive(Debug, Default)]
struct CallSamples {
    /// `durationMs` of the calls that ended `ok`.
    duration: Vec<f64>,
    /// `tool_call_started` → `tool_call_completed` at the client, calls that ended `ok`.
    wall: Vec<f64>,
    failures: usize,
    first_failure: Option<String>,
}

impl CallSamples {
    fn add(&mut self, seen: &task::Observed) {
        for (status, d) in &seen.tools {
            if *status == ToolStatus::Ok {
                self.duration.push(*d as f64);
            } else {
                self.failures += 1;
            }
        }
        for (status, wall) in &seen.tool_walls {
            if *status == ToolStatus::Ok {
                self.wall.push(ms(*wall));
            }
        }
        if self.first_failure.is_none() {
            self.first_failure.clone_from(&seen.first_tool_failure);
        }
    }
}

/// `bash true` through the daemon, sessions with the sandbox off and on, alternately.
pub(crate) async fn through_daemon(s: &mut Suite) -> Result<(), BenchError> {
    let scenario = s
        .of_role(Role::Sandbox)
        .into_iter()
        .next()
        .ok_or_else(|| BenchError::Usage("no sandbox scenario".into()))?;
    let runs = s.args.runs(DAEMON_RUNS);
    let client = s.client()?.clone();
    // [off, default]
    let mut m = [CallSamples::default(), CallSamples::default()];
    let mut unexpected = Vec::new();
    let (mut tools_ok, mut tools_total) = (0, 0);
    for i in 0..runs {
        for k in 0..2 {
            let which = (i + k) % 2;
            let cwd = task::workspace(
                &scenario,
                s.scratch.path(),
                None,
                &format!("{}-{i}", ["off", "on"][which]),
            )?;
            let params = SessionNewParams {
                cwd,
                sandbox: (which == 0).then_some(SandboxRequest {
                    mode: Some(SandboxMode::Off),
                    ..SandboxRequest::default()
                }),
                ..SessionNewParams::default()
            };
            let (run, info) = task::run_with(&client, &[], &scenario, &params).await?;
            let mode = info.sandbox.map(|i| i.mode);
            let expected = if which == 0 {
                SandboxMode::Off
            } else {
                SandboxMode::WorkspaceWrite
            };
            if mode != Some(expected) {
                unexpected.push(format!("{mode:?} where {expected} was expected"));
            }
            let Some(seen) = run.observed.first() else {
                continue;
            };
            tools_total += seen.tools.len();
            tools_ok += seen.tools_ok();
            m[which].add(seen);
            if !seen.ok() {
                m[which].failures += 1;
                m[which].first_failure.get_or_insert(seen.outcome());
            }
        }
    }
    s.count_tools(tools_ok, tools_total);
    if let Some(u) = unexpected.first() {
        s.report.note(format!(
            "sandbox: {} session(s) got another sandbox than asked for: {u}",
            unexpected.len()
        ));
    }
    report_daemon(&mut s.report, &scenario.name, &m);
    Ok(())
}

fn report_daemon(r: &mut Report, name: &str, m: &[CallSamples; 2]) {
    let [off, on] = m;
    r.section(&format!(
        "OS sandbox through amberd ({name}: `bash true` calls, session sandbox off vs default)"
    ));
    let pairs = [
        (off, "sandbox_bash_off", "sandbox off"),
        (on, "sandbox_bash", "default sandbox"),
    ];
    for (samples, key, label) in pairs {
        if let Some(d) = Summary::of(&samples.duration) {
            r.put_summary(
                &format!("{key}_ms"),
                &format!("`bash true`, {label}: tool durationMs"),
                &d,
            );
        }
        if let Some(w) = Summary::of(&samples.wall) {
            r.put_summary(
                &format!("{key}_wall_ms"),
                &format!(
                    "`bash true`, {label}: tool_call_started → tool_call_completed at the client"
                ),
                &w,
            );
        }
    }
    if let (Some(a), Some(b)) = (Summary::of(&off.wall), Summary::of(&on.wall)) {
        r.put(
            "sandbox_bash_added_wall_ms_median",
            "added by the default sandbox per `bash` call (wall), median",
            b.median - a.median,
        );
        r.put(
            "sandbox_bash_added_wall_ms_p99",
            "added by the default sandbox per `bash` call (wall), p99",
            b.p99 - a.p99,
        );
    }
    r.put(
        "sandbox_bash_calls_count",
        "`bash` calls that ended ok (both settings)",
        (off.duration.len() + on.duration.len()) as f64,
    );
    r.put(
        "sandbox_bash_failures_count",
        "`bash` calls or tasks that did not end ok (both settings)",
        (off.failures + on.failures) as f64,
    );
    for (samples, label) in [(off, "off"), (on, "default sandbox")] {
        if let Some(f) = &samples.first_failure {
            r.note(format!("sandbox ({label}): first failure: {}", f.trim()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_argument_is_the_helpers_camel_case_json() {
        let arg = spec_arg(
            false,
            Path::new("/abs/ws"),
            Path::new("/abs/tmp"),
            &[Path::new("/run/amber")],
        );
        let v: serde_json::Value = serde_json::from_str(&arg).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "mode": "workspace-write",
                "network": false,
                "workspace": "/abs/ws",
                "tmpDir": "/abs/tmp",
                "writableRoots": [],
                "hidden": ["/run/amber"],
            })
        );
    }

    #[test]
    fn spawn_figures_and_the_added_cost() {
        let mut m = SpawnSamples::default();
        m.wall[0] = vec![2.0, 2.5, 3.0];
        m.wall[1] = vec![3.0, 3.5, 6.0];
        m.wall[2] = vec![2.5, 3.0, 4.0];
        m.wall[3] = vec![3.5, 4.0, 6.5];
        m.cpu = [vec![1.0], vec![1.5], vec![1.25], vec![1.6]];
        let mut r = Report::default();
        report_spawn(&mut r, &m);
        assert_eq!(r.get("sandbox_added_cgroup_ms_median"), Some(0.5));
        assert_eq!(r.get("sandbox_spawn_plain_ms_median"), Some(2.5));
        assert_eq!(r.get("sandbox_added_ms_median"), Some(1.0));
        assert_eq!(r.get("sandbox_added_ms_p99"), Some(3.0));
        assert_eq!(r.get("sandbox_added_network_ms_median"), Some(0.5));
        assert_eq!(r.get("sandbox_spawn_cpu_ms_median"), Some(1.5));
        assert_eq!(r.get("sandbox_spawn_runs_count"), Some(3.0));
        let text = r.human();
        assert!(text.contains("### OS sandbox: spawn cost"), "{text}");
        assert!(
            text.contains("| added by the default sandbox (sandboxed − plain), median | 1 ms | `sandbox_added_ms_median` |"),
            "{text}"
        );
        let mut empty = Report::default();
        report_spawn(&mut empty, &SpawnSamples::default());
        assert_eq!(empty.get("sandbox_added_ms_median"), None);
        assert!(empty.notes().iter().any(|n| n.contains("no spawn")));
    }

    #[test]
    fn daemon_figures_per_setting() {
        let off = CallSamples {
            duration: vec![3.0, 4.0, 3.0],
            wall: vec![3.5, 4.5, 3.6],
            ..CallSamples::default()
        };
        let on = CallSamples {
            duration: vec![5.0, 5.0],
            wall: vec![5.6, 5.5],
            failures: 1,
            first_failure: Some("denied\n".into()),
        };
        let mut r = Report::default();
        report_daemon(&mut r, "sandbox", &[off, on]);
        assert_eq!(r.get("sandbox_bash_off_ms_median"), Some(3.0));
        assert_eq!(r.get("sandbox_bash_ms_median"), Some(5.0));
        assert_eq!(r.get("sandbox_bash_wall_ms_p99"), Some(5.6));
        let added = r.get("sandbox_bash_added_wall_ms_median").unwrap();
        assert!((added - 1.95).abs() < 1e-9, "{added}");
        assert_eq!(r.get("sandbox_bash_calls_count"), Some(5.0));
        assert_eq!(r.get("sandbox_bash_failures_count"), Some(1.0));
        assert!(
            r.notes()
                .iter()
                .any(|n| n == "sandbox (default sandbox): first failure: denied"),
            "{:?}",
            r.notes()
        );
    }

    #[test]
    fn the_goal_is_judged_on_the_median_added_cost() {
        let mut r = Report::default();
        r.put("sandbox_added_ms_median", "added", 1.2);
        r.put("sandbox_bash_added_wall_ms_median", "added", 3.4);
        crate::kpi::sandbox_goals(&mut r);
        let text = r.human();
        assert!(
            text.contains("| sandbox_added_ms_median = 1.200 | met |"),
            "{text}"
        );
        assert!(
            text.contains("| sandbox_bash_added_wall_ms_median = 3.400 | NOT met |"),
            "{text}"
        );
    }
}
