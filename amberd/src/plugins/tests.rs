//! Lifecycle and ledger tests: enable / disable / conflict / failed / reload, with plugins
//! built for the purpose and with the bundled ones.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use amber_proto::{PluginState, ToolStatus};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::registry::Owner;
use super::runtime::{FailureReporter, Plugin, PluginContext};
use super::*;
use amber_tools::{Tool, ToolContext, ToolOutcome};

struct NamedTool(&'static str);

impl Tool for NamedTool {
    fn name(&self) -> &str {
        self.0
    }
    fn description(&self) -> &str {
        "test tool"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn read_only(&self) -> bool {
        true
    }
    fn call<'a>(&'a self, _args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move { ToolOutcome::ok(self.0) })
    }
}

struct NamedSegment(&'static str);

impl StatusSegment for NamedSegment {
    fn name(&self) -> &str {
        self.0
    }
    fn render(&self, _view: View<'_>) -> Option<String> {
        None
    }
}

/// A plugin whose initialize and install can be told to fail, counting calls.
#[derive(Default)]
struct TestPlugin {
    name: &'static str,
    tools: Vec<&'static str>,
    segments: Vec<&'static str>,
    init_fails: std::sync::Mutex<bool>,
    install_fails: bool,
    inits: AtomicUsize,
    shutdowns: AtomicUsize,
}

impl Plugin for TestPlugin {
    fn name(&self) -> &str {
        self.name
    }
    fn initialize(&self, _ctx: PluginContext) -> BoxFuture<'_, Result<(), String>> {
        self.inits.fetch_add(1, Ordering::SeqCst);
        let fails = *self.init_fails.lock().unwrap();
        Box::pin(async move {
            if fails {
                Err("not today".into())
            } else {
                Ok(())
            }
        })
    }
    fn install(&self, into: &mut Contributions) -> Result<(), String> {
        for t in &self.tools {
            into.tool(Arc::new(NamedTool(t)));
        }
        for s in &self.segments {
            into.status(Arc::new(NamedSegment(s)));
        }
        if self.install_fails {
            return Err("broken install".into());
        }
        Ok(())
    }
    fn shutdown(&self) -> BoxFuture<'_, ()> {
        self.shutdowns.fetch_add(1, Ordering::SeqCst);
        Box::pin(async {})
    }
}

/// `kind:name` of each capability, for compact assertions.
fn capability_names(caps: &[amber_proto::Capability]) -> Vec<String> {
    caps.iter()
        .map(|c| format!("{}:{}", c.kind, c.name))
        .collect()
}

fn runtime() -> (Arc<PluginRuntime>, Arc<AtomicUsize>) {
    let changes = Arc::new(AtomicUsize::new(0));
    let counter = changes.clone();
    let rt = PluginRuntime::new(Registries::new(), move || {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    (rt, changes)
}

fn tool_names(rt: &PluginRuntime) -> Vec<String> {
    rt.registries()
        .tools()
        .names()
        .into_iter()
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn enable_disable_enable_follows_the_state_diagram() {
    let (rt, changes) = runtime();
    let plugin = Arc::new(TestPlugin {
        name: "p",
        tools: vec!["a", "b"],
        segments: vec!["seg"],
        ..Default::default()
    });
    rt.register(plugin.clone()).unwrap();
    assert_eq!(rt.info("p").unwrap().state, PluginState::Registered);
    assert!(tool_names(&rt).is_empty());

    let row = rt.enable("p").await.unwrap();
    assert_eq!(row.state, PluginState::Active);
    assert_eq!(
        capability_names(&row.capabilities),
        ["tool:a", "tool:b", "status:seg"]
    );
    assert_eq!(tool_names(&rt), ["a", "b"]);
    assert_eq!(rt.registries().status_segments().len(), 1);
    // Enabling an active plugin changes nothing.
    rt.enable("p").await.unwrap();
    assert_eq!(plugin.inits.load(Ordering::SeqCst), 1);

    let row = rt.disable("p").await.unwrap();
    assert_eq!(row.state, PluginState::Deactivated);
    assert!(row.capabilities.is_empty());
    assert!(tool_names(&rt).is_empty());
    assert!(rt.registries().status_segments().is_empty());
    assert_eq!(plugin.shutdowns.load(Ordering::SeqCst), 1);

    let row = rt.enable("p").await.unwrap();
    assert_eq!(row.state, PluginState::Active);
    assert_eq!(tool_names(&rt), ["a", "b"]);
    assert_eq!(changes.load(Ordering::SeqCst), 3, "enable, disable, enable");
}

#[tokio::test]
async fn a_name_conflict_fails_the_install_and_leaves_nothing_half_installed() {
    let (rt, _) = runtime();
    rt.register(Arc::new(TestPlugin {
        name: "first",
        tools: vec!["shared", "mine"],
        ..Default::default()
    }))
    .unwrap();
    let second = Arc::new(TestPlugin {
        name: "second",
        tools: vec!["other", "shared"],
        segments: vec!["s2"],
        ..Default::default()
    });
    rt.register(second.clone()).unwrap();
    rt.enable("first").await.unwrap();
    let row = rt.enable("second").await.unwrap();
    assert_eq!(row.state, PluginState::Failed);
    let error = row.error.unwrap();
    assert!(
        error.contains("`shared`") && error.contains("plugin `first`"),
        "{error}"
    );
    assert!(row.capabilities.is_empty());
    // Nothing of `second` is registered, not even its non-conflicting parts.
    assert_eq!(tool_names(&rt), ["shared", "mine"]);
    assert!(rt.registries().status_segments().is_empty());
    assert_eq!(
        second.shutdowns.load(Ordering::SeqCst),
        1,
        "initialized, so shut down"
    );

    // Once `first` is gone, reloading `second` (Failed → Registered → Active) works.
    rt.disable("first").await.unwrap();
    let row = rt.enable("second").await.unwrap();
    assert_eq!(row.state, PluginState::Active, "{:?}", row.error);
    assert_eq!(tool_names(&rt), ["other", "shared"]);
}

#[tokio::test]
async fn a_duplicate_name_within_one_plugin_is_a_conflict() {
    let (rt, _) = runtime();
    rt.register(Arc::new(TestPlugin {
        name: "twice",
        tools: vec!["x", "x"],
        ..Default::default()
    }))
    .unwrap();
    let row = rt.enable("twice").await.unwrap();
    assert_eq!(row.state, PluginState::Failed);
    assert!(tool_names(&rt).is_empty());
}

#[tokio::test]
async fn initialize_failure_and_install_failure_end_failed_and_reload_recovers() {
    let (rt, _) = runtime();
    let flaky = Arc::new(TestPlugin {
        name: "flaky",
        tools: vec!["f"],
        init_fails: std::sync::Mutex::new(true),
        ..Default::default()
    });
    rt.register(flaky.clone()).unwrap();
    let row = rt.enable("flaky").await.unwrap();
    assert_eq!(row.state, PluginState::Failed);
    assert!(row.error.unwrap().contains("not today"));
    assert!(tool_names(&rt).is_empty());

    *flaky.init_fails.lock().unwrap() = false;
    let row = rt.enable("flaky").await.unwrap();
    assert_eq!(row.state, PluginState::Active);
    assert_eq!(row.error, None);
    assert_eq!(tool_names(&rt), ["f"]);

    rt.register(Arc::new(TestPlugin {
        name: "broken",
        tools: vec!["g"],
        install_fails: true,
        ..Default::default()
    }))
    .unwrap();
    let row = rt.enable("broken").await.unwrap();
    assert_eq!(row.state, PluginState::Failed);
    assert!(row.error.unwrap().contains("broken install"));
    assert_eq!(tool_names(&rt), ["f"]);
}

#[tokio::test]
async fn a_reported_failure_unwinds_and_a_stale_report_is_ignored() {
    let (rt, _) = runtime();
    struct Reporting {
        reporter: std::sync::Mutex<Option<FailureReporter>>,
    }
    impl Plugin for Reporting {
        fn name(&self) -> &str {
            "rep"
        }
        fn initialize(&self, ctx: PluginContext) -> BoxFuture<'_, Result<(), String>> {
            *self.reporter.lock().unwrap() = Some(ctx.failures);
            Box::pin(async { Ok(()) })
        }
        fn install(&self, into: &mut Contributions) -> Result<(), String> {
            into.tool(Arc::new(NamedTool("r")));
            Ok(())
        }
        fn shutdown(&self) -> BoxFuture<'_, ()> {
            Box::pin(async {})
        }
    }
    let plugin = Arc::new(Reporting {
        reporter: std::sync::Mutex::new(None),
    });
    rt.register(plugin.clone()).unwrap();
    rt.enable("rep").await.unwrap();
    let first = plugin.reporter.lock().unwrap().clone().unwrap();
    first.failed("crashed");
    let row = rt.info("rep").unwrap();
    assert_eq!(row.state, PluginState::Failed);
    assert_eq!(row.error.as_deref(), Some("crashed"));
    assert!(tool_names(&rt).is_empty());

    rt.enable("rep").await.unwrap();
    assert_eq!(tool_names(&rt), ["r"]);
    // The old run's reporter no longer speaks for the plugin.
    first.failed("late news from the old process");
    assert_eq!(rt.info("rep").unwrap().state, PluginState::Active);
}

#[tokio::test]
async fn unknown_plugins_are_clear_errors() {
    let (rt, _) = runtime();
    rt.register(Arc::new(TestPlugin {
        name: "only",
        ..Default::default()
    }))
    .unwrap();
    let err = rt.enable("nope").await.unwrap_err().to_string();
    assert!(err.contains("`nope`") && err.contains("only"), "{err}");
    assert!(rt.disable("nope").await.is_err());
    assert!(
        rt.register(Arc::new(TestPlugin {
            name: "only",
            ..Default::default()
        }))
        .is_err()
    );
}

#[tokio::test]
async fn mcp_owners_replace_their_set_and_never_take_plugin_names() {
    let (rt, _) = runtime();
    rt.register(Arc::new(TestPlugin {
        name: "p",
        tools: vec!["taken"],
        ..Default::default()
    }))
    .unwrap();
    rt.enable("p").await.unwrap();
    let registries = rt.registries();
    let owner = Owner::Mcp("srv".into());
    let mut c = Contributions::default();
    c.tool(Arc::new(NamedTool("mcp__srv__a")))
        .tool(Arc::new(NamedTool("taken")));
    let caps = registries.replace(&owner, "mcp:srv", c);
    assert_eq!(capability_names(&caps), ["tool:mcp__srv__a"]);
    let sources: Vec<(String, String)> = registries
        .tool_entries()
        .into_iter()
        .map(|e| (e.tool.name().to_owned(), e.source))
        .collect();
    assert_eq!(
        sources,
        [
            ("taken".to_owned(), "plugin:p".to_owned()),
            ("mcp__srv__a".to_owned(), "mcp:srv".to_owned())
        ]
    );
    let mut c = Contributions::default();
    c.tool(Arc::new(NamedTool("mcp__srv__b")));
    registries.replace(&owner, "mcp:srv", c);
    assert_eq!(tool_names(&rt), ["taken", "mcp__srv__b"]);
    registries.unwind(&owner);
    assert_eq!(tool_names(&rt), ["taken"]);
}

#[tokio::test]
async fn bundled_plugins_install_without_conflicts_and_hello_unwinds_cleanly() {
    let (rt, _) = runtime();
    let data = tempfile::tempdir().unwrap();
    for plugin in bundled::all(data.path().to_owned(), None) {
        rt.register(plugin).unwrap();
    }
    for name in rt.names() {
        let row = rt.enable(&name).await.unwrap();
        assert_eq!(row.state, PluginState::Active, "{name}: {:?}", row.error);
    }
    let registries = rt.registries();
    let entries = registries.tool_entries();
    let source = |name: &str| {
        entries
            .iter()
            .find(|e| e.tool.name() == name)
            .map(|e| e.source.clone())
    };
    assert_eq!(source("bash").as_deref(), Some("builtin"));
    assert_eq!(source("hello").as_deref(), Some("plugin:hello"));
    let commands: Vec<String> = registries
        .commands()
        .iter()
        .map(|c| c.name().to_owned())
        .collect();
    for needed in [
        "help", "mode", "model", "compact", "clear", "new", "sessions", "mcp", "plugins", "detach",
        "hello",
    ] {
        assert!(commands.iter().any(|c| c == needed), "missing /{needed}");
    }
    let segments: Vec<String> = registries
        .status_segments()
        .iter()
        .map(|s| s.name().to_owned())
        .collect();
    for needed in ["model", "mode", "context", "tokens", "git", "processes"] {
        assert!(
            segments.iter().any(|s| s == needed),
            "missing segment {needed}"
        );
    }
    let panels: Vec<String> = registries
        .panels()
        .iter()
        .map(|p| p.name().to_owned())
        .collect();
    assert_eq!(panels, ["todos", "mcp", "processes"]);
    assert!(registries.provider("openrouter").is_some());

    let hello = registries.tools().get("hello").cloned().unwrap();
    let out = hello
        .call(json!({"name": "Ada"}), &ToolContext::new(data.path(), "c1"))
        .await;
    assert_eq!(out.status, ToolStatus::Ok);
    assert!(out.output.contains("Hello, Ada!"));

    let before = registries.tools().len();
    rt.disable(bundled::HELLO).await.unwrap();
    assert_eq!(registries.tools().len(), before - 1);
    assert!(registries.command("hello").is_none());
    assert!(registries.command("help").is_some());
}

#[test]
fn replace_is_atomic_and_a_conflicting_set_keeps_the_old_one() {
    let registries = Registries::new();
    let owner = Owner::Mcp("srv".into());
    let set = |names: &[&'static str]| {
        let mut c = Contributions::default();
        for name in names {
            c.tool(Arc::new(NamedTool(name)));
        }
        c
    };
    registries.replace(&owner, "mcp:srv", set(&["mcp__srv__a"]));
    // Readers never see the server without tools while its list is replaced.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (registries, stop) = (registries.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut reads = 0u64;
            while !stop.load(Ordering::SeqCst) {
                assert_eq!(registries.tool_entries().len(), 1, "a gap in replace");
                reads += 1;
            }
            reads
        })
    };
    for i in 0..2000 {
        let name = if i % 2 == 0 {
            "mcp__srv__b"
        } else {
            "mcp__srv__a"
        };
        registries.replace(&owner, "mcp:srv", set(&[name]));
    }
    stop.store(true, Ordering::SeqCst);
    assert!(reader.join().unwrap() > 0);

    // A set naming a tool twice is refused whole; the previous set stays.
    let caps = registries.replace(&owner, "mcp:srv", set(&["mcp__srv__c", "mcp__srv__c"]));
    assert_eq!(capability_names(&caps), ["tool:mcp__srv__a"]);
    let names: Vec<String> = registries
        .tool_entries()
        .iter()
        .map(|e| e.tool.name().to_owned())
        .collect();
    assert_eq!(names, ["mcp__srv__a"]);
    assert_eq!(
        capability_names(&registries.capabilities(&owner)),
        ["tool:mcp__srv__a"]
    );
}
