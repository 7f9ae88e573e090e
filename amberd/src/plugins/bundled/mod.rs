//! Plugins compiled into the daemon. Each is a [`StaticPlugin`]: nothing to start or
//! stop, its contributions built fresh on every install.

mod commands;
mod core;
mod hello;
mod panels;
mod status;

use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::contrib::Contributions;
use super::runtime::{Plugin, PluginContext};

pub(crate) use hello::HELLO;

/// Names of the bundled plugins, in registration order.
pub(crate) const CORE_TOOLS: &str = "core-tools";
pub(crate) const PROVIDERS: &str = "providers";
pub(crate) const COMMANDS: &str = "commands";
pub(crate) const STATUS: &str = "status";
pub(crate) const PANELS: &str = "panels";
/// Every bundled plugin's name, in registration order (config validation checks against it).
pub(crate) const NAMES: [&str; 6] = [CORE_TOOLS, PROVIDERS, COMMANDS, STATUS, PANELS, HELLO];
/// Bundled plugins that start only when `[plugins] enabled` names them (or on
/// `plugin/enable`): the example stays out of the model's tools by default.
pub(crate) const OPT_IN: [&str; 1] = [HELLO];

/// Every bundled plugin. `data_dir` is where skills extracted by compaction live; `fetch`,
/// when `[tools] fetch` is on, how the `fetch` tool behaves.
pub(crate) fn all(
    data_dir: PathBuf,
    fetch: Option<amber_tools::fetch::FetchSettings>,
) -> Vec<Arc<dyn Plugin>> {
    vec![
        Arc::new(StaticPlugin::new(CORE_TOOLS, "builtin", move |c| {
            core::install(c, &data_dir, fetch)
        })),
        Arc::new(StaticPlugin::new(PROVIDERS, "builtin", |c| {
            for provider in amber_llm::bundled_providers() {
                c.provider(provider);
            }
        })),
        Arc::new(StaticPlugin::new(COMMANDS, "builtin", commands::install)),
        Arc::new(StaticPlugin::new(STATUS, "builtin", status::install)),
        Arc::new(StaticPlugin::new(PANELS, "builtin", panels::install)),
        Arc::new(StaticPlugin::new(HELLO, "plugin:hello", hello::install)),
    ]
}

type Installer = Box<dyn Fn(&mut Contributions) + Send + Sync>;

/// A compiled-in plugin: initialize always succeeds, shutdown has nothing to stop.
pub(crate) struct StaticPlugin {
    name: &'static str,
    tool_source: &'static str,
    install: Installer,
}

impl StaticPlugin {
    pub(crate) fn new(
        name: &'static str,
        tool_source: &'static str,
        install: impl Fn(&mut Contributions) + Send + Sync + 'static,
    ) -> Self {
        Self {
            name,
            tool_source,
            install: Box::new(install),
        }
    }
}

impl Plugin for StaticPlugin {
    fn name(&self) -> &str {
        self.name
    }

    fn tool_source(&self) -> String {
        self.tool_source.to_owned()
    }

    fn initialize(&self, _ctx: PluginContext) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }

    fn install(&self, into: &mut Contributions) -> Result<(), String> {
        (self.install)(into);
        Ok(())
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}
