//! Plugins against a stand-in [`Host`] and [`SessionView`]: what they need of the daemon is
//! all in those two traits, so they run here without a daemon or a session actor.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use amber_proto::{
    EventKind, McpServerInfo, McpStatus, Message, Mode, SessionCompactResult, SessionInfo,
    SessionNewParams, SessionState, Usage,
};
use futures::future::BoxFuture;

use super::bridge::McpBridge;
use super::*;
use crate::mcp::{LogSink, McpConfig, McpHost, McpSink};
use amber_tools::SessionTools;

/// Records what plugins ask of it; compaction fails with a fixed message.
struct FakeHost {
    plugins: Arc<PluginRuntime>,
    mcp: Arc<McpHost>,
    published: Mutex<Vec<EventKind>>,
}

impl FakeHost {
    /// A host whose runtime has the bundled plugins enabled.
    async fn with_bundled() -> Arc<FakeHost> {
        let plugins = PluginRuntime::new(Registries::new(), || {});
        for plugin in bundled::all(PathBuf::from("/nonexistent"), None) {
            plugins.register(plugin).unwrap();
        }
        for name in plugins.names() {
            plugins.enable(&name).await.unwrap();
        }
        Arc::new(FakeHost {
            plugins,
            mcp: McpHost::new(
                &McpConfig::default(),
                Arc::new(LogSink),
                amber_exec::sandbox_env::SandboxEnv::for_tests(),
                None,
            ),
            published: Mutex::new(Vec::new()),
        })
    }
}

impl Host for FakeHost {
    fn publish_all(&self, event: EventKind) {
        self.published.lock().unwrap().push(event);
    }

    fn plugins(&self) -> &PluginRuntime {
        &self.plugins
    }

    fn mcp(&self) -> &McpHost {
        &self.mcp
    }

    fn list_sessions(
        &self,
        _cursor: Option<&str>,
        _limit: Option<u32>,
    ) -> Result<(Vec<SessionInfo>, Option<String>), HostError> {
        Ok((Vec::new(), None))
    }

    fn create_session(&self, _params: SessionNewParams) -> Result<SessionInfo, HostError> {
        Err(HostError::Session("the daemon is shutting down".to_owned()))
    }

    fn prompt(&self, session_id: &str, _text: String) -> Result<String, HostError> {
        Ok(format!("turn_of_{session_id}"))
    }

    fn compact<'a>(
        &'a self,
        _session_id: &'a str,
    ) -> BoxFuture<'a, Result<SessionCompactResult, HostError>> {
        Box::pin(async { Err(HostError::Compaction("nothing to compact".to_owned())) })
    }

    fn clear<'a>(&'a self, _session_id: &'a str) -> BoxFuture<'a, Result<usize, HostError>> {
        Box::pin(async { Ok(3) })
    }

    fn provider_names(&self) -> Vec<String> {
        vec!["openai".to_owned(), "local".to_owned()]
    }

    fn set_model(
        &self,
        session: &dyn SessionView,
        model: Option<String>,
        provider: Option<String>,
    ) -> Result<SessionInfo, String> {
        match provider.as_deref() {
            Some("nowhere") => Err("no provider `nowhere`".to_owned()),
            _ => Ok(session.set_model(model, provider)),
        }
    }

    fn context_tokens(&self, session: &dyn SessionView) -> u64 {
        25 * session.messages().len() as u64
    }

    fn context_window(&self, _session: &dyn SessionView) -> u64 {
        200
    }
}

struct FakeSession {
    info: Mutex<SessionInfo>,
    workspace: PathBuf,
    tools: SessionTools,
}

impl FakeSession {
    fn new() -> FakeSession {
        FakeSession {
            info: Mutex::new(SessionInfo {
                parent: None,
                goal: None,
                routine: None,
                session_id: "s1".to_owned(),
                cwd: "/work".to_owned(),
                mode: Mode::Write,
                model: "m1".to_owned(),
                title: String::new(),
                name: None,
                state: SessionState::Idle,
                created_at: String::new(),
                updated_at: String::new(),
                usage: Usage::default(),
                provider: None,
                sandbox: None,
                agent: None,
                worktree: None,
                max_budget_usd: None,
                max_tokens_total: None,
                environment: None,
            }),
            workspace: PathBuf::from("/nonexistent/workspace"),
            tools: SessionTools::detached(),
        }
    }
}

impl SessionView for FakeSession {
    fn id(&self) -> &str {
        "s1"
    }
    fn info(&self) -> SessionInfo {
        self.info.lock().unwrap().clone()
    }
    fn mode(&self) -> Mode {
        self.info.lock().unwrap().mode
    }
    fn set_mode(&self, mode: Mode) -> SessionInfo {
        let mut info = self.info.lock().unwrap();
        info.mode = mode;
        info.clone()
    }
    fn set_model(&self, model: Option<String>, provider: Option<String>) -> SessionInfo {
        let mut info = self.info.lock().unwrap();
        if let Some(model) = model {
            info.model = model;
        }
        if let Some(provider) = provider {
            info.provider = Some(provider);
        }
        info.clone()
    }
    fn state(&self) -> SessionState {
        self.info.lock().unwrap().state
    }
    fn workspace(&self) -> &Path {
        &self.workspace
    }
    fn provider(&self) -> Option<String> {
        self.info.lock().unwrap().provider.clone()
    }
    fn messages(&self) -> Arc<Vec<Message>> {
        Arc::new(vec![Message::system("sys"), Message::user("hi")])
    }
    fn tools(&self) -> &SessionTools {
        &self.tools
    }
}

async fn run(
    host: &FakeHost,
    session: Option<&dyn SessionView>,
    line: &str,
) -> Result<amber_proto::CommandRunResult, CommandError> {
    let (name, args) = line.split_once(' ').unwrap_or((line, ""));
    let command = host.plugins.registries().command(name).unwrap();
    let view = View { host, session };
    command.run(view, args).await
}

fn server(status: McpStatus) -> McpServerInfo {
    McpServerInfo {
        name: "docs".to_owned(),
        status,
        protocol_version: None,
        tools: 0,
        resources: 0,
        prompts: 0,
        error: None,
        signing_in: false,
    }
}

#[tokio::test]
async fn mcp_status_is_published_once_per_change_while_the_host_lives() {
    let host = FakeHost::with_bundled().await;
    let weak: Weak<dyn Host> = Arc::downgrade(&host) as Weak<dyn Host>;
    let bridge = McpBridge::new(weak, host.plugins.registries().clone());
    bridge.status(&server(McpStatus::Connecting));
    bridge.status(&server(McpStatus::Connecting));
    bridge.status(&server(McpStatus::Ready));
    let published = host.published.lock().unwrap().clone();
    let statuses: Vec<McpStatus> = published
        .iter()
        .map(|e| match e {
            EventKind::McpStatus(info) => info.status,
            other => panic!("unexpected event {other:?}"),
        })
        .collect();
    assert_eq!(statuses, vec![McpStatus::Connecting, McpStatus::Ready]);

    // Once the host is gone, a status change is only logged.
    drop(published);
    let registries = host.plugins.registries().clone();
    let bridge = McpBridge::new(Arc::downgrade(&host) as Weak<dyn Host>, registries);
    drop(host);
    bridge.status(&server(McpStatus::Failed));
}

#[tokio::test]
async fn commands_act_through_the_host_and_the_session_view() {
    let host = FakeHost::with_bundled().await;
    let session = FakeSession::new();
    let s: &dyn SessionView = &session;

    let mode = run(&host, Some(s), "mode read").await.unwrap();
    assert_eq!(mode.output, "mode: read");
    assert_eq!(session.mode(), Mode::Read);

    let model = run(&host, Some(s), "model").await.unwrap();
    assert_eq!(
        model.output,
        "model: m1\nprovider: default\nproviders: openai, local"
    );
    let switched = run(&host, Some(s), "model m2 @local").await.unwrap();
    assert_eq!(switched.output, "model: m2 (provider: local)");
    let unknown = run(&host, Some(s), "model @nowhere").await.unwrap_err();
    assert!(matches!(unknown, CommandError::Usage(m) if m == "no provider `nowhere`"));

    // Host errors reach the user with the same words as before the host existed.
    let compact = run(&host, Some(s), "compact").await.unwrap_err();
    assert!(
        matches!(&compact, CommandError::Failed(m) if m == "compaction failed: nothing to compact"),
        "{compact:?}"
    );
    let new = run(&host, Some(s), "new").await.unwrap_err();
    assert!(matches!(new, CommandError::Failed(m) if m == "the daemon is shutting down"));

    assert_eq!(
        run(&host, Some(s), "clear").await.unwrap().output,
        "cleared 3 messages"
    );
    assert_eq!(
        run(&host, None, "sessions").await.unwrap().output,
        "no sessions"
    );
    let needs = run(&host, None, "clear").await.unwrap_err();
    assert!(matches!(needs, CommandError::NeedsSession(_)));

    let help = run(&host, None, "help").await.unwrap().output;
    assert!(help.lines().any(|l| l.starts_with("/compact")), "{help}");
}

#[tokio::test]
async fn segments_and_panels_render_through_the_host() {
    let host = FakeHost::with_bundled().await;
    let session = FakeSession::new();
    let view = View {
        host: &*host,
        session: Some(&session),
    };
    let segments: Vec<(String, String)> = host
        .plugins
        .registries()
        .status_segments()
        .iter()
        .filter_map(|s| s.render(view).map(|text| (s.name().to_owned(), text)))
        .collect();
    let segment = |name: &str| {
        segments
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, text)| text.as_str())
    };
    // Two messages at 25 tokens each in a window of 200.
    assert_eq!(segment("context"), Some("ctx 25%"));
    assert_eq!(segment("model"), Some("m1"));
    assert_eq!(segment("mode"), Some("write"));
    // A detached session's tools run unsandboxed.
    assert_eq!(segment("sandbox"), Some("sandbox: off"));
    assert_eq!(segment("processes"), None);

    session.tools.set_todos(vec![amber_proto::Todo {
        id: "1".to_owned(),
        text: "write the host".to_owned(),
        status: amber_proto::TodoStatus::InProgress,
    }]);
    let todos = host
        .plugins
        .registries()
        .panels()
        .into_iter()
        .find(|p| p.name() == "todos")
        .unwrap();
    assert_eq!(todos.render(view), vec!["[~] write the host"]);
    let without_session = View {
        host: &*host,
        session: None,
    };
    assert!(todos.render(without_session).is_empty());
}
