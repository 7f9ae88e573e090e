//! The per-session OS sandbox as a session feature: what the session asked for, what is in
//! force, and the [`ToolSandbox`] its `bash` calls, `process` starts and hooks read.
//!
//! **Rules:** the *requested* sandbox is `session/new {sandbox}` over `[sandbox]` field by
//! field, and only the explicit request is persisted (`meta.json`), so an unset field keeps
//! following the config across restarts; the *effective* one is `read-only` whenever the
//! session is in read mode (network as requested), else the requested one — `off` always
//! reported with `network: true`, since nothing is contained. The tools get exactly the
//! effective sandbox (`SessionInfo.sandbox` is its [`ToolSandbox::info`]), rebuilt at
//! creation, restore and every mode change. A sub-agent runs in its session's
//! `SessionTools`, so in its sandbox.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use amber_proto::{
    Mode, NetworkMode, SandboxInfo, SandboxMode, SandboxRequest, SessionInfo, SessionNewParams,
};
use amber_store::SessionMeta;
use futures::future::BoxFuture;

use crate::config::SandboxConfig;
use crate::session::feature::{
    Admission, Attach, Draft, Feature, ModeStep, NewSession, SessionFeature, TurnStart,
};
use crate::session::services::Services;
use crate::session::{SessionError, SessionShared};
use amber_exec::sandbox_env::SandboxEnv;
use amber_tools::sandbox::ToolSandbox;

/// `session/new {sandbox}` over `[sandbox]`: each unset field takes the config's.
pub(crate) fn requested(config: &SandboxConfig, request: Option<&SandboxRequest>) -> SandboxInfo {
    SandboxInfo::new(
        request.and_then(|r| r.mode).unwrap_or(config.mode),
        request.and_then(|r| r.network).unwrap_or(config.network),
    )
}

/// A request that asks for something, or `None`: an empty one is no request (the session
/// follows the config).
pub(crate) fn explicit(request: Option<SandboxRequest>) -> Option<SandboxRequest> {
    request.filter(|r| {
        r.mode.is_some()
            || r.network.is_some()
            || !r.allow_domains.is_empty()
            || !r.deny_domains.is_empty()
    })
}

/// The sandbox in force for a session in `mode` that requested `requested`.
pub(crate) fn effective(requested: SandboxInfo, mode: Mode) -> SandboxInfo {
    if mode == Mode::Read {
        return SandboxInfo::new(SandboxMode::ReadOnly, requested.network_mode);
    }
    match requested.mode {
        SandboxMode::Off => SandboxInfo::new(SandboxMode::Off, NetworkMode::On),
        _ => requested,
    }
}

/// Where a session's sandboxed commands run: what the spec needs besides the mode.
pub(crate) struct SpecParts<'a> {
    pub env: &'a SandboxEnv,
    /// The session's canonical workspace root.
    pub workspace: &'a Path,
    /// The session's own temp directory, or why it cannot be had.
    pub tmp_dir: Result<PathBuf, String>,
    /// `[sandbox] writable_roots`.
    pub writable_roots: &'a [PathBuf],
}

/// The one way a session's [`ToolSandbox`] is made. `unavailable`: why the kernel cannot
/// sandbox (the daemon's probe); then every mode but `off` is `Unavailable` — fail closed,
/// each command needs an approval to run unsandboxed. A temp directory that cannot be had
/// is unavailable the same way.
pub(crate) fn tool_sandbox(
    effective: SandboxInfo,
    parts: SpecParts<'_>,
    unavailable: Option<&str>,
) -> ToolSandbox {
    if effective.mode == SandboxMode::Off {
        return ToolSandbox::Off;
    }
    let tmp_dir = match (unavailable, parts.tmp_dir) {
        (Some(reason), _) => Err(reason.to_owned()),
        (None, tmp) => tmp.map_err(|e| format!("the session's temp directory: {e}")),
    };
    match tmp_dir {
        Ok(tmp_dir) => ToolSandbox::On(Arc::new(parts.env.spec(
            effective,
            parts.workspace,
            tmp_dir,
            parts.writable_roots,
        ))),
        Err(reason) => ToolSandbox::Unavailable {
            info: effective,
            reason,
        },
    }
}

/// A session's sandbox settings, fixed at creation; [`SessionSandbox::build`] makes its
/// tools' sandbox for a mode.
pub(crate) struct SessionSandbox {
    /// What `session/new` asked explicitly (persisted as such).
    request: Option<SandboxRequest>,
    /// The request over the config.
    requested: SandboxInfo,
    writable_roots: Vec<PathBuf>,
    env: Arc<SandboxEnv>,
}

impl SessionSandbox {
    pub(crate) fn new(
        request: Option<SandboxRequest>,
        config: &SandboxConfig,
        env: Arc<SandboxEnv>,
    ) -> Self {
        let request = explicit(request);
        Self {
            requested: requested(config, request.as_ref()),
            request,
            writable_roots: config.writable_roots.clone(),
            env,
        }
    }

    /// What to persist in the session's metadata.
    pub(crate) fn request(&self) -> Option<SandboxRequest> {
        self.request.clone()
    }

    /// The sandbox in force in `mode`.
    pub(crate) fn effective(&self, mode: Mode) -> SandboxInfo {
        effective(self.requested, mode)
    }

    /// The tools' sandbox for session `id` in `mode` over `workspace`; its temp directory
    /// is created if needed (only when the sandbox is on).
    pub(crate) fn build(&self, id: &str, workspace: &Path, mode: Mode) -> ToolSandbox {
        let effective = self.effective(mode);
        let tmp_dir = if effective.mode == SandboxMode::Off || self.env.unavailable().is_some() {
            Err(String::new())
        } else {
            self.env.tmp.ensure(id).map_err(|e| e.to_string())
        };
        tool_sandbox(
            effective,
            SpecParts {
                env: &self.env,
                workspace,
                tmp_dir,
                writable_roots: &self.writable_roots,
            },
            self.env.unavailable(),
        )
    }
}

/// How long a turn waits for the start-up sandbox probe (it takes milliseconds; this bounds
/// a hung one).
const PROBE_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// The feature: the session's requested sandbox over `[sandbox]`, put in force with its mode.
pub(crate) struct SandboxFeature;

impl Feature for SandboxFeature {
    /// Only the explicit request is kept, so an unset field follows the config.
    fn prepare(&self, draft: &mut Draft<'_>) -> Result<(), SessionError> {
        draft.meta.sandbox = explicit(draft.params.sandbox.clone());
        Ok(())
    }

    /// The sandbox `SessionInfo` reports before the session runs (the metadata's copy).
    fn shape_info(&self, new: &NewSession<'_>, info: &mut SessionInfo) -> Result<(), SessionError> {
        info.sandbox = Some(sandbox_of(
            &new.services.live().config.sandbox,
            new.params.sandbox.clone(),
            info.mode,
        ));
        Ok(())
    }

    /// As it will be when loaded: its request over today's config (a file from before the
    /// sandbox has neither).
    fn describe_stored(&self, meta: &mut SessionMeta, services: &Services) {
        meta.info.sandbox = Some(sandbox_of(
            &services.live().config.sandbox,
            meta.sandbox.clone(),
            meta.info.mode,
        ));
    }

    fn attach(&self, session: &Attach<'_>) -> Option<Arc<dyn SessionFeature>> {
        let services = session.services;
        Some(Arc::new(SessionSandboxFeature {
            settings: SessionSandbox::new(
                session.meta.sandbox.clone(),
                &services.live().config.sandbox,
                services.sandbox.clone(),
            ),
            services: services.clone(),
        }))
    }
}

/// The effective sandbox (as `SessionInfo` reports it) of a session in `mode` that asked
/// for `request`, without building it.
fn sandbox_of(config: &SandboxConfig, request: Option<SandboxRequest>, mode: Mode) -> SandboxInfo {
    effective(requested(config, request.as_ref()), mode)
}

/// One session's sandbox settings.
pub(crate) struct SessionSandboxFeature {
    settings: SessionSandbox,
    services: Arc<Services>,
}

impl SessionFeature for SessionSandboxFeature {
    /// The tools get exactly the effective sandbox of the mode taking force, installed
    /// together with `SessionInfo.sandbox`.
    fn mode_in_force<'a>(&'a self, shared: &'a SessionShared, mode: Mode) -> Option<ModeStep<'a>> {
        let tool_sandbox = self.settings.build(&shared.id, &shared.workspace, mode);
        Some(Box::new(move |info: &mut SessionInfo| {
            info.sandbox = Some(tool_sandbox.info());
            shared.tools.set_sandbox(tool_sandbox);
        }))
    }

    /// A session made while the daemon's sandbox probe still ran got a sandbox before the
    /// kernel's verdict; once the probe says the kernel cannot sandbox, its commands must
    /// ask (unavailable) rather than fail in the helper. First of the features: a hook
    /// runs in this sandbox too.
    fn before_turn<'a>(&'a self, start: &'a TurnStart<'a>) -> BoxFuture<'a, Admission> {
        Box::pin(async move {
            let services = &self.services;
            services.start_sandbox_probe();
            let verdict = services.sandbox_probe.wait(PROBE_WAIT).await;
            let shared = start.turn.shared;
            if matches!(verdict, Some(Err(_)))
                && matches!(shared.tools.sandbox(), ToolSandbox::On(_))
            {
                shared.install_mode(None);
            }
            Admission::Proceed
        })
    }

    fn save(&self, meta: &mut SessionMeta) {
        meta.sandbox = self.settings.request();
    }

    fn fork(&self, params: &mut SessionNewParams) {
        params.sandbox = self.settings.request();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(mode: SandboxMode, network: bool) -> SandboxInfo {
        SandboxInfo::new(mode, NetworkMode::from_bool(network))
    }

    #[test]
    fn a_request_overrides_the_config_field_by_field() {
        let config = SandboxConfig::default();
        assert_eq!(
            requested(&config, None),
            info(SandboxMode::WorkspaceWrite, false)
        );
        let only_network = SandboxRequest {
            network: Some(NetworkMode::On),
            ..SandboxRequest::default()
        };
        assert_eq!(
            requested(&config, Some(&only_network)),
            info(SandboxMode::WorkspaceWrite, true)
        );
        let config = SandboxConfig {
            mode: SandboxMode::ReadOnly,
            network: NetworkMode::On,
            ..SandboxConfig::default()
        };
        let only_mode = SandboxRequest {
            mode: Some(SandboxMode::Off),
            ..SandboxRequest::default()
        };
        assert_eq!(
            requested(&config, Some(&only_mode)),
            info(SandboxMode::Off, true)
        );
        assert_eq!(requested(&config, None), info(SandboxMode::ReadOnly, true));
    }

    #[test]
    fn read_mode_is_always_read_only_and_off_always_has_the_network() {
        for requested in [
            info(SandboxMode::WorkspaceWrite, false),
            info(SandboxMode::Off, false),
            info(SandboxMode::ReadOnly, true),
        ] {
            let read = effective(requested, Mode::Read);
            assert_eq!(read, info(SandboxMode::ReadOnly, requested.network));
        }
        for mode in [Mode::Write, Mode::Yolo] {
            let ws = info(SandboxMode::WorkspaceWrite, false);
            assert_eq!(effective(ws, mode), ws);
            assert_eq!(
                effective(info(SandboxMode::Off, false), mode),
                info(SandboxMode::Off, true)
            );
        }
    }

    fn parts<'a>(env: &'a SandboxEnv, tmp: Result<PathBuf, String>) -> SpecParts<'a> {
        SpecParts {
            env,
            workspace: Path::new("/ws"),
            tmp_dir: tmp,
            writable_roots: &[],
        }
    }

    #[test]
    fn the_tool_sandbox_is_off_on_or_unavailable_and_reports_the_effective_one() {
        let env = SandboxEnv::from_env(&|_| None);
        let ws = info(SandboxMode::WorkspaceWrite, false);
        let on = tool_sandbox(ws, parts(&env, Ok("/t".into())), None);
        let ToolSandbox::On(spec) = &on else {
            panic!("{on:?}")
        };
        assert_eq!(
            (spec.workspace.as_path(), spec.tmp_dir.as_path()),
            (Path::new("/ws"), Path::new("/t"))
        );
        assert_eq!(on.info(), ws);

        let off = tool_sandbox(
            info(SandboxMode::Off, true),
            parts(&env, Err("x".into())),
            Some("no Landlock"),
        );
        assert!(matches!(off, ToolSandbox::Off));
        assert_eq!(off.info(), info(SandboxMode::Off, true));

        let ro = info(SandboxMode::ReadOnly, false);
        let unavailable = tool_sandbox(ro, parts(&env, Ok("/t".into())), Some("no Landlock"));
        assert!(
            matches!(&unavailable, ToolSandbox::Unavailable { info, reason } if *info == ro && reason == "no Landlock"),
            "{unavailable:?}"
        );
        let no_tmp = tool_sandbox(ro, parts(&env, Err("permission denied".into())), None);
        assert!(
            matches!(&no_tmp, ToolSandbox::Unavailable { reason, .. } if reason.contains("temp directory") && reason.contains("permission denied")),
            "{no_tmp:?}"
        );
    }

    #[test]
    fn a_session_sandbox_follows_its_mode_and_makes_its_temp_dir() {
        let parent = tempfile::tempdir().unwrap();
        let private = std::os::unix::fs::PermissionsExt::from_mode(0o700);
        std::fs::set_permissions(parent.path(), private).unwrap();
        let mut env = SandboxEnv::from_env(&|_| None);
        // SAFETY: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        env.tmp = amber_exec::tmp_dirs::TmpDirs::under(parent.path(), uid);
        let config = SandboxConfig {
            writable_roots: vec!["/cache".into()],
            ..SandboxConfig::default()
        };
        let sandbox = SessionSandbox::new(Some(SandboxRequest::default()), &config, Arc::new(env));
        assert_eq!(sandbox.request(), None, "an empty request is none");
        let ToolSandbox::On(spec) = sandbox.build("s1", Path::new("/ws"), Mode::Write) else {
            panic!("not on")
        };
        assert_eq!(spec.mode, SandboxMode::WorkspaceWrite);
        assert_eq!(spec.writable_roots, [PathBuf::from("/cache")]);
        assert!(spec.tmp_dir.is_dir() && spec.tmp_dir.ends_with("s1"));
        let read = sandbox.build("s1", Path::new("/ws"), Mode::Read);
        assert_eq!(read.info(), info(SandboxMode::ReadOnly, false));
        let off = SessionSandbox::new(
            Some(SandboxRequest {
                mode: Some(SandboxMode::Off),
                ..SandboxRequest::default()
            }),
            &config,
            sandbox.env.clone(),
        );
        assert!(matches!(
            off.build("s2", Path::new("/ws"), Mode::Yolo),
            ToolSandbox::Off
        ));
        let s2 = parent.path().join(format!("amber-tmp-{uid}")).join("s2");
        assert!(!s2.exists(), "no temp dir for an unsandboxed session");
    }
}
