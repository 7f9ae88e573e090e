//! Whether the OS sandbox works on this machine, found out once at start by trying it:
//! [`SandboxProbe::start`] runs `/bin/sh -c 'exit 0'` through the tool-exec helper in a real
//! sandbox (workspace-write, no network, over a scratch directory) in the background, never
//! delaying readiness; the verdict is cached — available, or unavailable with the helper's
//! reason (`Landlock is not available in this kernel`). Also here: what the kernel offers
//! (`crate::sandbox::kernel_support`), `daemon/status.sandbox`, and
//! `sandbox/selftest` ([`selftest`]).
//!
//! **Invariants:** the probe runs at most once per daemon and never blocks a caller that
//! does not ask to wait (`availability` is `None` while it runs); a caller that waits waits
//! at most as long as it says; the probe and the self-test run exactly the spec sessions
//! would (same hidden directories, same test switch), and touch nothing but their own
//! scratch directory.
//!
//! `AMBER_TEST_SANDBOX_NO_LANDLOCK` (non-empty in amberd's environment) is a test-only
//! switch: every spec built here says `simulate_landlock_abi: 0`, so the helper refuses as
//! on a kernel without Landlock; `AMBER_TEST_SANDBOX_LANDLOCK_ABI=N` simulates an older ABI
//! the same way (the report and the helper's rules both use it).

mod exec;
mod scratch;
pub(crate) mod selftest;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::sandbox::{
    KernelSupport, SandboxInfo, effective_abi, kernel_support, landlock_enforcement,
};
use amber_proto::{SandboxSelftestResult, SandboxStatus};
use tokio::sync::watch;

use exec::{Outcome, run_sandboxed};
use scratch::Scratch;

/// How long the probe command may take before it counts as a failure.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The probe's verdict: `Ok(())` when a command ran sandboxed, else why not.
pub type Availability = Result<(), String>;

/// What every spec built here shares with the sessions' specs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProbeSettings {
    /// Directories hidden inside the sandbox (amberd's socket directory).
    pub hidden: Vec<PathBuf>,
    /// The simulated Landlock ABI (`SandboxEnv`'s test switches).
    pub simulate_landlock_abi: Option<u32>,
    /// `SandboxEnv::in_place`.
    pub in_place: bool,
}

/// The daemon's sandbox probe and what it found.
pub struct SandboxProbe {
    /// The test switches, as `SandboxEnv` read them from the daemon's environment.
    simulate_landlock_abi: Option<u32>,
    /// Set by [`SandboxProbe::start`]; the specs of the probe and the self-test.
    settings: OnceLock<ProbeSettings>,
    kernel: KernelSupport,
    /// Unprivileged user namespaces, as far as the kernel's settings tell.
    userns: Option<bool>,
    /// `None` until the probe has finished.
    verdict: watch::Sender<Option<Availability>>,
    /// Whether the probe's command ran in namespaces of its own (else Landlock and seccomp
    /// alone held it: an unprivileged container); set once it ran.
    isolated: OnceLock<bool>,
}

impl std::fmt::Debug for SandboxProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxProbe")
            .field("kernel", &self.kernel)
            .field("verdict", &*self.verdict.borrow())
            .finish_non_exhaustive()
    }
}

impl SandboxProbe {
    /// Reads what the kernel offers (no fork, nothing changed); the probe itself waits for
    /// [`SandboxProbe::start`]. `simulate_landlock_abi`: the test switches (`SandboxEnv`'s).
    pub fn new(simulate_landlock_abi: Option<u32>) -> Arc<Self> {
        let mut kernel = kernel_support();
        if let Some(cap) = simulate_landlock_abi {
            // Report what the simulated kernel has.
            kernel.landlock_abi = kernel
                .landlock_abi
                .map(|abi| abi.min(cap))
                .filter(|a| *a > 0);
        }
        Arc::new(SandboxProbe {
            simulate_landlock_abi,
            settings: OnceLock::new(),
            kernel,
            userns: userns_allowed(&|path| std::fs::read_to_string(path).ok(), current_uid()),
            verdict: watch::channel(None).0,
            isolated: OnceLock::new(),
        })
    }

    /// Starts the probe in the background (once; later calls do nothing). `hidden`: the
    /// directories sandboxed commands must not see (amberd's socket directory), as in the
    /// sessions' specs; `in_place`: they may run without namespaces
    /// (`SandboxEnv::in_place`). Needs a tokio runtime.
    /// `publish`: where the sessions' sandboxes read the verdict (`SandboxEnv::unavailable`),
    /// set when the probe fails.
    pub fn start(
        self: &Arc<Self>,
        hidden: Vec<PathBuf>,
        in_place: bool,
        publish: Arc<OnceLock<String>>,
    ) {
        let settings = ProbeSettings {
            hidden,
            simulate_landlock_abi: self.simulate_landlock_abi,
            in_place,
        };
        // Outside a runtime (unit tests of the library) there is nothing to run it on.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.settings.set(settings).is_err() {
            return;
        }
        let probe = Arc::clone(self);
        runtime.spawn(async move {
            let verdict = probe.run_probe().await;
            match &verdict {
                Ok(()) if probe.isolated.get() == Some(&false) => tracing::info!(
                    "OS sandbox available: Landlock and seccomp only (no namespace can be made here)"
                ),
                Ok(()) => tracing::info!("OS sandbox available"),
                Err(reason) => tracing::warn!(
                    "OS sandbox unavailable: {reason}; sandboxed commands need an approval to run without it"
                ),
            }
            if let Err(reason) = &verdict {
                let _ = publish.set(reason.clone());
            }
            probe.verdict.send_replace(Some(verdict));
        });
    }

    async fn run_probe(&self) -> Availability {
        let scratch = Scratch::new("probe")
            .map_err(|e| format!("cannot create the probe's scratch directory: {e}"))?;
        let spec = scratch.spec(&self.settings());
        // Exits 3 when it shares this process's mount namespace (the sandbox held it with
        // Landlock and seccomp alone), 4 when it cannot tell (no `readlink` there).
        let own = std::fs::read_link("/proc/self/ns/mnt").unwrap_or_default();
        let outcome = run_sandboxed(
            &spec,
            "/bin/sh",
            &[
                "-c".as_ref(),
                r#"l=$(readlink /proc/self/ns/mnt) && [ -n "$l" ] || exit 4; [ "$l" != "$0" ] || exit 3"#.as_ref(),
                own.as_os_str(),
            ],
            &scratch.workspace,
            PROBE_TIMEOUT,
            "sandbox-probe",
        )
        .await;
        let (verdict, isolated) = probe_verdict(&outcome);
        if let Some(isolated) = isolated {
            let _ = self.isolated.set(isolated);
        }
        verdict
    }

    fn settings(&self) -> ProbeSettings {
        self.settings
            .get()
            .cloned()
            .unwrap_or_else(|| ProbeSettings {
                hidden: Vec::new(),
                simulate_landlock_abi: self.simulate_landlock_abi,
                in_place: false,
            })
    }

    /// The probe's verdict; `None` while it runs (or before it started). Never waits.
    pub fn availability(&self) -> Option<Availability> {
        self.verdict.borrow().clone()
    }

    /// Why the sandbox is unavailable (`ToolSandbox`'s `unavailable`), `None` when it is
    /// available or still being probed.
    pub fn unavailable_reason(&self) -> Option<String> {
        self.verdict.borrow().clone().and_then(Result::err)
    }

    /// The verdict, waiting for the probe at most `max`; `None` if it has not finished by
    /// then (or was never started).
    pub async fn wait(&self, max: Duration) -> Option<Availability> {
        // Never started (tests of the library): nothing to wait for.
        self.settings.get()?;
        let mut rx = self.verdict.subscribe();
        let waited = tokio::time::timeout(max, rx.wait_for(Option::is_some)).await;
        match waited {
            Ok(Ok(verdict)) => verdict.clone(),
            _ => self.availability(),
        }
    }

    /// What the kernel offers (Landlock ABI, seccomp).
    pub fn kernel(&self) -> KernelSupport {
        self.kernel
    }

    /// `daemon/status.sandbox`, with `default` the sandbox sessions get by default.
    pub fn status(&self, default: SandboxInfo) -> SandboxStatus {
        status(
            self.availability().as_ref(),
            self.kernel,
            self.isolated
                .get()
                .copied()
                .or(self.userns.filter(|allowed| !allowed)),
            default,
        )
    }

    /// `sandbox/selftest`: waits for the probe (at most `probe_wait`), then runs the checks.
    pub async fn selftest(&self, probe_wait: Duration) -> SandboxSelftestResult {
        self.wait(probe_wait).await;
        selftest::run(&self.settings()).await
    }
}

/// The probe's verdict from how its command ended, and whether it ran in namespaces of its
/// own (exit 0), in this process's (exit 3), or could not tell (exit 4).
fn probe_verdict(outcome: &Outcome) -> (Availability, Option<bool>) {
    match outcome {
        Outcome::Ran(ran) if ran.succeeded() => (Ok(()), Some(true)),
        Outcome::Ran(ran) if ran.code == Some(3) => (Ok(()), Some(false)),
        Outcome::Ran(ran) if ran.code == Some(4) => (Ok(()), None),
        other => (failure(other), None),
    }
}

fn failure(outcome: &Outcome) -> Availability {
    match outcome {
        Outcome::Ran(ran) if ran.succeeded() => Ok(()),
        Outcome::Ran(ran) => Err(format!(
            "a sandboxed `sh -c 'exit 0'` ended with {}: {}",
            ran.status_text(),
            ran.last_error_line()
        )),
        Outcome::SetupFailed(reason) => Err(reason.clone()),
        Outcome::NotStarted(reason) => Err(reason.clone()),
        Outcome::TimedOut(after) => Err(format!(
            "a sandboxed `sh -c 'exit 0'` did not finish within {} s",
            after.as_secs()
        )),
    }
}

/// `daemon/status.sandbox` from its parts; `namespaces`: whether the sandbox's commands get
/// namespaces of their own, as far as known.
pub(crate) fn status(
    verdict: Option<&Availability>,
    kernel: KernelSupport,
    namespaces: Option<bool>,
    default: SandboxInfo,
) -> SandboxStatus {
    let (landlock_enforcement, landlock_missing) =
        landlock_enforcement(kernel.landlock_abi.and_then(effective_abi));
    SandboxStatus {
        available: verdict.map(Result::is_ok),
        reason: verdict.and_then(|v| v.clone().err()),
        landlock_abi: kernel.landlock_abi,
        landlock_enforcement,
        landlock_missing,
        seccomp: kernel.seccomp,
        namespaces,
        default_mode: default.mode,
        network: default.network,
        network_mode: default.network_mode,
        allowlist_unavailable: (namespaces == Some(false)).then(|| {
            "no network namespace can be made here, so a sandbox whose network is an \
             allowlist runs its commands with the network off"
                .to_owned()
        }),
    }
}

/// `Some(false)` when the kernel's settings forbid this process unprivileged user
/// namespaces (`user.max_user_namespaces = 0`, or Debian's
/// `kernel.unprivileged_userns_clone = 0` for a non-root uid); `None` otherwise — only
/// trying tells for sure (LSMs may still refuse), which is the probe's job.
pub(crate) fn userns_allowed(read: &impl Fn(&str) -> Option<String>, uid: u32) -> Option<bool> {
    let zero = |path: &str| read(path).is_some_and(|v| v.trim() == "0");
    if zero("/proc/sys/user/max_user_namespaces") {
        return Some(false);
    }
    if uid != 0 && zero("/proc/sys/kernel/unprivileged_userns_clone") {
        return Some(false);
    }
    None
}

fn current_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::SandboxMode;
    use exec::Ran;

    fn default() -> SandboxInfo {
        SandboxInfo::new(SandboxMode::WorkspaceWrite, amber_proto::NetworkMode::Off)
    }

    #[test]
    fn the_test_switch_hides_landlock_from_the_report() {
        let probe = SandboxProbe::new(Some(0));
        assert_eq!(probe.kernel().landlock_abi, None, "simulated: no Landlock");
        let real = kernel_support().landlock_abi;
        let older = SandboxProbe::new(Some(5));
        assert_eq!(older.kernel().landlock_abi, real.map(|abi| abi.min(5)));
    }

    #[test]
    fn only_a_clean_exit_makes_the_sandbox_available() {
        let ok = Outcome::Ran(Ran {
            code: Some(0),
            stdout: String::new(),
            stderr: String::new(),
        });
        assert_eq!(probe_verdict(&ok), (Ok(()), Some(true)));
        // Exit 3: it ran, in this process's mount namespace (Landlock and seccomp alone).
        let shared = Outcome::Ran(Ran {
            code: Some(3),
            stdout: String::new(),
            stderr: String::new(),
        });
        assert_eq!(probe_verdict(&shared), (Ok(()), Some(false)));
        let unknown = Outcome::Ran(Ran {
            code: Some(4),
            stdout: String::new(),
            stderr: String::new(),
        });
        assert_eq!(probe_verdict(&unknown), (Ok(()), None));
        let setup = Outcome::SetupFailed("Landlock is not available in this kernel".into());
        assert_eq!(
            probe_verdict(&setup),
            (Err("Landlock is not available in this kernel".into()), None)
        );
        let failed = Outcome::Ran(Ran {
            code: Some(126),
            stdout: String::new(),
            stderr: "amberd: cannot start the tool process watcher: x\n".into(),
        });
        assert!(probe_verdict(&failed).0.unwrap_err().contains("exit 126"));
        assert!(
            probe_verdict(&Outcome::TimedOut(PROBE_TIMEOUT))
                .0
                .unwrap_err()
                .contains("within 5 s")
        );
    }

    #[test]
    fn status_reports_probing_available_and_unavailable() {
        let kernel = KernelSupport {
            landlock_abi: Some(7),
            seccomp: true,
        };
        let probing = status(None, kernel, None, default());
        assert_eq!(probing.available, None);
        assert_eq!(probing.reason, None);
        assert_eq!(probing.landlock_abi, Some(7));
        assert_eq!(probing.default_mode, SandboxMode::WorkspaceWrite);

        let up = status(Some(&Ok(())), kernel, Some(true), default());
        assert_eq!((up.available, up.namespaces), (Some(true), Some(true)));
        let in_place = status(Some(&Ok(())), kernel, Some(false), default());
        assert_eq!(
            (in_place.available, in_place.namespaces),
            (Some(true), Some(false))
        );
        assert_eq!(
            up.landlock_enforcement,
            Some(amber_proto::LandlockEnforcement::Full)
        );
        assert!(up.landlock_missing.is_empty());
        let older = KernelSupport {
            landlock_abi: Some(5),
            seccomp: true,
        };
        let partial = status(Some(&Ok(())), older, None, default());
        assert_eq!(
            partial.landlock_enforcement,
            Some(amber_proto::LandlockEnforcement::Partial)
        );
        let missing: Vec<&str> = partial
            .landlock_missing
            .iter()
            .map(|g| g.feature.as_str())
            .collect();
        assert_eq!(missing, ["scope_abstract_unix_socket", "scope_signal"]);

        let down: Availability = Err("Landlock is not available in this kernel".into());
        let down = status(
            Some(&down),
            KernelSupport::default(),
            Some(false),
            default(),
        );
        assert_eq!(down.available, Some(false));
        assert_eq!(
            down.reason.as_deref(),
            Some("Landlock is not available in this kernel")
        );
        assert_eq!(down.namespaces, Some(false));
        assert_eq!(down.landlock_abi, None);
        assert_eq!(down.landlock_enforcement, None);
    }

    #[test]
    fn user_namespaces_are_known_missing_only_from_a_zero_setting() {
        let read = |pairs: &'static [(&'static str, &'static str)]| {
            move |path: &str| {
                pairs
                    .iter()
                    .find(|(p, _)| *p == path)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let none: &[(&str, &str)] = &[];
        assert_eq!(userns_allowed(&read(none), 1000), None);
        let max0: &[(&str, &str)] = &[("/proc/sys/user/max_user_namespaces", "0\n")];
        assert_eq!(userns_allowed(&read(max0), 0), Some(false));
        let debian: &[(&str, &str)] = &[("/proc/sys/kernel/unprivileged_userns_clone", "0\n")];
        assert_eq!(userns_allowed(&read(debian), 1000), Some(false));
        assert_eq!(
            userns_allowed(&read(debian), 0),
            None,
            "root is not unprivileged"
        );
    }

    #[tokio::test]
    async fn a_probe_never_started_answers_none_without_waiting_long() {
        let probe = SandboxProbe::new(None);
        assert_eq!(probe.availability(), None);
        let started = std::time::Instant::now();
        assert_eq!(probe.wait(Duration::from_millis(50)).await, None);
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn without_the_helper_the_probe_fails_closed() {
        // Unit tests have no lifeline installed: nothing can be sandboxed.
        let probe = SandboxProbe::new(None);
        probe.start(Vec::new(), false, Arc::new(OnceLock::new()));
        let verdict = probe.wait(Duration::from_secs(10)).await.unwrap();
        assert!(verdict.unwrap_err().contains("helper is not installed"));
        assert_eq!(probe.status(default()).available, Some(false));
        assert!(probe.unavailable_reason().is_some());
    }
}
