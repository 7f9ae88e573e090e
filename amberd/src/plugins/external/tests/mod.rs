//! Tests of external plugins against real child processes: the example plugin from
//! `examples/plugins/wordcount`, and `mock.py` (written to a temp dir) which misbehaves on
//! request. Each test drives a real `PluginRuntime` over real `Registries`.

mod failures;
mod lifecycle;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use amber_proto::{PluginInfo, PluginState};
use serde_json::Value;
use tempfile::TempDir;

use super::ExternalPlugin;
use crate::plugins::config::ExternalPluginConfig;
use crate::plugins::{PluginRuntime, PluginsConfig, Registries};
use amber_tools::{Tool, ToolContext, ToolOutcome};

const MOCK: &str = include_str!("mock.py");

/// Long enough for a Python start on a loaded machine; the tests never wait it out.
const GENEROUS: Duration = Duration::from_secs(15);

/// A runtime with one external plugin registered (not yet enabled).
struct Harness {
    dir: TempDir,
    runtime: Arc<PluginRuntime>,
    registries: Arc<Registries>,
    plugin: Arc<ExternalPlugin>,
    name: String,
}

fn config(init: Duration, call: Duration) -> PluginsConfig {
    PluginsConfig {
        init_timeout_ms: init.as_millis() as u64,
        call_timeout_ms: call.as_millis() as u64,
        ..PluginsConfig::default()
    }
}

impl Harness {
    /// `command` gets the temp dir and returns the program and its arguments.
    fn new(
        name: &str,
        config: &PluginsConfig,
        command: impl FnOnce(&Path) -> (String, Vec<String>),
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (command, args) = command(dir.path());
        let mut env = BTreeMap::new();
        env.insert(
            "MOCK_EVENTS".to_owned(),
            dir.path().join("events").display().to_string(),
        );
        let spec = ExternalPluginConfig {
            name: name.to_owned(),
            command,
            args,
            env,
            cwd: Some(dir.path().to_owned()),
            timeout_ms: None,
            sandbox: None,
            network: None,
        };
        let registries = Registries::new();
        let runtime = PluginRuntime::new(registries.clone(), || {});
        let plugin = Arc::new(ExternalPlugin::new(
            &spec,
            config,
            amber_exec::sandbox_env::SandboxEnv::for_tests(),
        ));
        runtime.register(plugin.clone()).unwrap();
        Self {
            dir,
            runtime,
            registries,
            plugin,
            name: name.to_owned(),
        }
    }

    /// `mock.py`, written to the temp dir and run through its shebang, in `mode`.
    fn mock(mode: &str, config: &PluginsConfig) -> Self {
        Self::new("mock", config, |dir| {
            use std::os::unix::fs::PermissionsExt;
            let path = dir.join("mock.py");
            std::fs::write(&path, MOCK).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            (path.display().to_string(), vec![mode.to_owned()])
        })
    }

    /// The example plugin shipped in `examples/plugins/wordcount`.
    fn example(config: &PluginsConfig) -> Self {
        Self::new("wordcount", config, |_| {
            let script = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../examples/plugins/wordcount/wordcount.py");
            (script.display().to_string(), Vec::new())
        })
    }

    async fn enable(&self) -> PluginInfo {
        self.runtime.enable(&self.name).await.unwrap()
    }

    fn info(&self) -> PluginInfo {
        self.runtime.info(&self.name).unwrap()
    }

    /// Waits until the plugin is in `state` (failures are reported asynchronously).
    async fn wait_for(&self, state: PluginState) -> PluginInfo {
        let deadline = tokio::time::Instant::now() + GENEROUS;
        loop {
            let info = self.info();
            if info.state == state {
                return info;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "never reached {state:?}: {info:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn tool(&self, name: &str) -> Arc<dyn Tool> {
        self.registries
            .tools()
            .get(name)
            .unwrap_or_else(|| panic!("no tool `{name}`"))
            .clone()
    }

    fn tool_names(&self) -> Vec<String> {
        self.registries
            .tool_entries()
            .iter()
            .map(|e| e.tool.name().to_owned())
            .collect()
    }

    fn ctx(&self, call_id: &str) -> ToolContext {
        ToolContext::new(self.dir.path(), call_id)
    }

    async fn call(&self, tool: &str, args: Value) -> ToolOutcome {
        let tool = self.tool(tool);
        let ctx = self.ctx("call-1");
        tool.call(args, &ctx).await
    }

    fn events(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("events"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Pids of every mock process started so far (from its `start PID` events).
    fn started_pids(&self) -> Vec<u32> {
        self.events()
            .iter()
            .filter_map(|e| e.strip_prefix("start ")?.parse().ok())
            .collect()
    }

    /// Asserts the plugin was unwound: Failed with an error containing `expected`, no
    /// capabilities, none of its tools registered, and no process left.
    async fn assert_failed(&self, expected: &str) -> PluginInfo {
        let info = self.wait_for(PluginState::Failed).await;
        let error = info.error.clone().unwrap_or_default();
        assert!(
            error.contains(expected),
            "error {error:?} lacks {expected:?}"
        );
        assert!(info.capabilities.is_empty(), "{info:?}");
        assert!(self.tool_names().is_empty(), "{:?}", self.tool_names());
        for pid in self.started_pids() {
            wait_gone(pid).await;
        }
        info
    }
}

/// Whether `pid` is a live process. The sandbox's pid 1 does not reap orphans, so a
/// zombie (state `Z`) counts as gone: it runs nothing and holds nothing.
fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the parenthesised command name, which may contain spaces.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}

async fn wait_gone(pid: u32) {
    let deadline = tokio::time::Instant::now() + GENEROUS;
    while alive(pid) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "process {pid} still runs"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
