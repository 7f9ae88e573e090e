//! External plugins: child processes speaking JSON-RPC 2.0 over stdio, contributing tools
//! only (docs/plugins.md has the protocol). This file owns the [`Plugin`] side: one
//! process per enable, its handshake, its tools, and stopping it.
//!
//! - [`protocol`]: the messages, the `initialize` result and its validation.
//! - [`process`]: the child, its reader / writer / stderr tasks, pending requests.
//! - [`tool`]: the Tool adapter calling `tool/call`.
//!
//! **Invariants:** at most one process per plugin; a failed process is never reused
//! (`plugin/enable` starts a fresh one); every process is reaped.

mod process;
mod protocol;
mod stderr;
mod tool;

#[cfg(test)]
mod tests;

use amber_exec::sandbox_env::SandboxEnv;
use amber_proto::sync::Locked;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use amber_proto::PluginKind;
use futures::future::BoxFuture;

use self::process::{CallError, Connection};
use self::protocol::{InitializeResult, ToolDecl};
use self::tool::PluginTool;
use super::config::{ExternalPluginConfig, PluginsConfig};
use super::contrib::Contributions;
use super::runtime::{Plugin, PluginContext};

/// The plugin for one `[[plugins.external]]` entry.
/// `sandbox`: the daemon-wide part of the plugin's sandbox, if its table asks for one.
pub(crate) fn plugin(
    spec: &ExternalPluginConfig,
    config: &PluginsConfig,
    sandbox: Arc<SandboxEnv>,
) -> Arc<dyn Plugin> {
    Arc::new(ExternalPlugin::new(spec, config, sandbox))
}

/// An external plugin: a command to run and, while enabled, its running process.
pub(crate) struct ExternalPlugin {
    spec: ExternalPluginConfig,
    init_timeout: Duration,
    call_timeout: Duration,
    slot: Arc<Mutex<Slot>>,
    sandbox: Arc<SandboxEnv>,
}

#[derive(Default)]
struct Slot {
    current: Option<Running>,
    /// Numbers the processes, so a report can say which one failed.
    serial: u64,
    /// The serial of the last process whose failure was reported. The runtime answers a
    /// report with a `shutdown` it spawns; this tells that echo apart from a real one when
    /// it arrives after `plugin/enable` already started a newer process.
    failed: Option<u64>,
}

struct Running {
    serial: u64,
    conn: Arc<Connection>,
    tools: Vec<ToolDecl>,
}

impl ExternalPlugin {
    pub(crate) fn new(
        spec: &ExternalPluginConfig,
        config: &PluginsConfig,
        sandbox: Arc<SandboxEnv>,
    ) -> Self {
        Self {
            sandbox,
            spec: spec.clone(),
            init_timeout: config.init_timeout(),
            call_timeout: spec.call_timeout(config),
            slot: Arc::default(),
        }
    }

    /// The id of the running process, if one runs.
    #[cfg(test)]
    pub(crate) fn pid(&self) -> Option<u32> {
        let slot = lock(&self.slot);
        let running = slot.current.as_ref()?;
        if running.conn.dead().is_some() {
            return None;
        }
        running.conn.pid()
    }

    async fn start(&self, ctx: PluginContext) -> Result<(), String> {
        let name = self.spec.name.as_str();
        // A previous process (a failed run: normally dead already) goes first.
        let previous = lock(&self.slot).current.take();
        if let Some(previous) = previous {
            previous.conn.close().await;
        }
        let conn = Arc::new(Connection::spawn(name, &self.spec, &self.sandbox)?);
        let serial = {
            let mut slot = lock(&self.slot);
            slot.serial += 1;
            slot.serial
        };
        let params = protocol::initialize_params(ctx.daemon_name, ctx.daemon_version);
        let answer = conn
            .request(protocol::INITIALIZE, params, self.init_timeout)
            .await;
        let init = match answer {
            Ok(result) => match InitializeResult::from_value(result) {
                Ok(init) => init,
                Err(err) => {
                    conn.close().await;
                    return Err(err);
                }
            },
            Err(CallError::Rpc(err)) => {
                conn.close().await;
                return Err(format!("the plugin answered with an error: {err}"));
            }
            Err(CallError::TimedOut(after)) => {
                conn.kill().await;
                return Err(format!(
                    "no answer to initialize within {}",
                    humantime::format_duration(after)
                ));
            }
            Err(CallError::Dead(reason)) => {
                conn.kill().await;
                return Err(reason);
            }
        };
        let failures = ctx.failures.clone();
        let slot = Arc::downgrade(&self.slot);
        let armed = conn.arm(Box::new(move |reason| {
            if let Some(slot) = Weak::upgrade(&slot) {
                lock(&slot).failed = Some(serial);
            }
            failures.failed(reason);
        }));
        if let Err(reason) = armed {
            conn.kill().await;
            return Err(reason);
        }
        tracing::info!(
            plugin = name,
            pid = conn.pid(),
            reports_name = init.name.as_deref().unwrap_or(""),
            version = init.version.as_deref().unwrap_or(""),
            tools = init.tools.len(),
            "external plugin initialized"
        );
        lock(&self.slot).current = Some(Running {
            serial,
            conn,
            tools: init.tools,
        });
        Ok(())
    }

    async fn stop(&self) {
        let running = {
            let mut slot = lock(&self.slot);
            let failed = slot.failed.take();
            match (&slot.current, failed) {
                (Some(current), Some(failed)) if current.serial != failed => {
                    tracing::debug!(plugin = %self.spec.name, "shutdown for an earlier, failed process; the current one stays");
                    None
                }
                _ => slot.current.take(),
            }
        };
        if let Some(running) = running {
            running.conn.close().await;
        }
    }
}

impl Plugin for ExternalPlugin {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn kind(&self) -> PluginKind {
        PluginKind::External
    }

    fn initialize(&self, ctx: PluginContext) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(self.start(ctx))
    }

    fn install(&self, into: &mut Contributions) -> Result<(), String> {
        let slot = lock(&self.slot);
        let running = slot.current.as_ref().ok_or("the plugin is not running")?;
        for decl in &running.tools {
            into.tool(Arc::new(PluginTool::new(
                &self.spec.name,
                decl.clone(),
                running.conn.clone(),
                self.call_timeout,
            )));
        }
        Ok(())
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.stop())
    }
}

fn lock(slot: &Mutex<Slot>) -> MutexGuard<'_, Slot> {
    slot.locked()
}
